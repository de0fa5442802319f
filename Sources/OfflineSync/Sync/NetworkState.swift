import Synchronization

/// Remembers the last known reachability, so that only changes are reported.
final class NetworkState: Sendable {
    private let active = Mutex<Bool?>(nil)

    /// Forgets the last state, so the next one is reported whatever it is.
    func reset() {
        active.withLock { $0 = nil }
    }

    /// Records the new state; returns whether it changed.
    func set(_ value: Bool) -> Bool {
        active.withLock { active in
            if active == value { return false }
            active = value
            return true
        }
    }
}
