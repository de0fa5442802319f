/// Exponential backoff: the waits between retries of something that keeps failing.
///
/// Each ``nextDelay()`` returns a wait based on the current step and then doubles the step,
/// up to ``maximum``; ``reset()`` goes back to ``initial`` after a success. With full jitter
/// (the default), a wait is drawn uniformly from zero to the step, so clients that failed
/// together do not retry together (the AWS architecture blog's "full jitter"); without jitter
/// it is the step itself. Every retry loop of OfflineSync uses this one value: the HTTP
/// client's request retries, the change channel's reconnection, the probing network monitor
/// and a started ``SyncContext``'s failed sync runs.
public struct Backoff: Sendable, Hashable {
    /// How a wait is drawn from the current step.
    public enum Jitter: Sendable, Hashable {
        /// The wait is the step.
        case none
        /// The wait is uniform in `0...step`.
        case full
    }

    /// The first step, and the step after ``reset()``.
    public var initial: Duration
    /// The largest step.
    public var maximum: Duration
    /// How a wait is drawn from the step.
    public var jitter: Jitter
    /// The step the next wait is drawn from.
    public private(set) var step: Duration

    /// Creates a backoff that starts at `initial` and doubles up to `maximum` (at least
    /// `initial`; a negative duration counts as zero).
    public init(initial: Duration, maximum: Duration, jitter: Jitter = .full) {
        let initial = max(initial, .zero)
        self.initial = initial
        self.maximum = max(maximum, initial)
        self.jitter = jitter
        self.step = initial
    }

    /// The wait before the next retry; doubles the step for the one after (up to ``maximum``).
    public mutating func nextDelay() -> Duration {
        let wait: Duration
        switch jitter {
        case .none: wait = step
        case .full: wait = .nanoseconds(Int64.random(in: 0...max(1, step.nanoseconds)))
        }
        step = min(step * 2, maximum)
        return wait
    }

    /// Starts over at ``initial``, after a success.
    public mutating func reset() {
        step = initial
    }
}

extension Duration {
    /// The duration in whole nanoseconds, saturating at `Int64.max`.
    package var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return seconds < 0 ? .min : .max }
        let (total, overflow2) = scaled.addingReportingOverflow(attoseconds / 1_000_000_000)
        if overflow2 { return seconds < 0 ? .min : .max }
        return total
    }
}
