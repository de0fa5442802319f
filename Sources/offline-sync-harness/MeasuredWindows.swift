import Dispatch
#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// The windows a bench worker timed (``LocalWrites/measure(_:)``, ``LocalWrites/measureSync(_:)``)
/// and the CPU time its process spent inside them: user and system time of every thread
/// (the store's worker threads, the HTTP client's), not of a server child process.
///
/// Wall time on this 2-core VM moves 15–40% between hours with the I/O and the neighbours.
/// CPU time leaves the I/O waits out: in a quiet hour it moves a few percent, so the CPU
/// ratio shows a change to our own code that the wall ratio hides (in a busy hour it moved up
/// to 20% too). It is reported beside the wall figures, never instead of them: the goals are
/// wall time, and I/O waits are part of the cost.
final class MeasuredWindows: Sendable {
    static let shared = MeasuredWindows()
    private let totals = Mutex<(wall: Double, cpu: Double)>((0, 0))

    /// Ends a window opened at `started` (uptime nanoseconds) with the process at `cpu`
    /// seconds of CPU; returns its wall seconds.
    func close(started: UInt64, cpu: Double) -> Double {
        let wall = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        let spent = Self.processCPUSeconds() - cpu
        totals.withLock { $0.wall += wall; $0.cpu += spent }
        return wall
    }

    /// Forgets the windows timed so far: for a workload that times its own set-up with
    /// ``LocalWrites/measure(_:)`` before the windows it reports.
    func reset() {
        totals.withLock { $0 = (0, 0) }
    }

    /// The CPU seconds of the windows, when they add up to `seconds` (what the workload
    /// reported, within 1%): a workload that timed other windows, or reported a part of its
    /// own, gets no CPU figure rather than a wrong one.
    func cpuSeconds(matching seconds: Double) -> Double? {
        let (wall, cpu) = totals.withLock { $0 }
        guard wall > 0, abs(wall - seconds) <= seconds * 0.01 + 0.000_5 else { return nil }
        return cpu
    }

    /// This process's user and system CPU time so far, every thread, in seconds.
    static func processCPUSeconds() -> Double {
        var usage = rusage()
        #if os(Linux)
        let who = __rusage_who_t(RUSAGE_SELF.rawValue)
        #else
        let who = RUSAGE_SELF
        #endif
        guard getrusage(who, &usage) == 0 else { return 0 }
        func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }
}
