import OfflineSync
import Testing

@Suite("Backoff: the one retry schedule")
struct BackoffTests {
    @Test("without jitter, waits double from the initial step up to the maximum; reset starts over")
    func doublingAndCap() {
        var backoff = Backoff(initial: .milliseconds(250), maximum: .seconds(2), jitter: .none)
        let waits = (0..<6).map { _ in backoff.nextDelay() }
        #expect(waits == [.milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2), .seconds(2), .seconds(2)])
        backoff.reset()
        #expect(backoff.nextDelay() == .milliseconds(250))
    }

    @Test("with full jitter, every wait lies between zero and the current step, and the step still doubles")
    func fullJitterBounds() {
        var backoff = Backoff(initial: .milliseconds(10), maximum: .milliseconds(80))
        var steps: [Duration] = []
        for _ in 0..<200 {
            let step = backoff.step
            let wait = backoff.nextDelay()
            #expect(wait >= .zero && wait <= step)
            steps.append(step)
        }
        #expect(Array(steps.prefix(5)) == [.milliseconds(10), .milliseconds(20), .milliseconds(40), .milliseconds(80), .milliseconds(80)])
    }

    @Test("a maximum below the initial step, or negative durations, never give a negative or shrinking wait")
    func oddBounds() {
        var low = Backoff(initial: .seconds(3), maximum: .seconds(1), jitter: .none)
        #expect(low.maximum == .seconds(3))
        #expect(low.nextDelay() == .seconds(3))
        #expect(low.nextDelay() == .seconds(3))
        var negative = Backoff(initial: .seconds(-1), maximum: .seconds(-5), jitter: .none)
        #expect(negative.nextDelay() == .zero)
        var jittered = Backoff(initial: .zero, maximum: .zero)
        #expect(jittered.nextDelay() >= .zero)
    }
}
