import Synchronization

/// A value shared between a test and the closures it hands out (a store's transaction body,
/// a server's handler, a log handler), guarded by a `Mutex`.
package final class Box<T: Sendable>: Sendable {
    private let stored: Mutex<T>

    package init(_ value: T) { stored = Mutex(value) }

    /// The current value; setting replaces it.
    package var value: T {
        get { stored.withLock { $0 } }
        set { stored.withLock { $0 = newValue } }
    }

    /// Runs `body` on the value while holding the lock (for read-modify-write).
    package func withLock<R: Sendable>(_ body: (inout T) -> R) -> R {
        stored.withLock { body(&$0) }
    }
}

/// Carries a value that is *not* `Sendable` out of a closure, for the tests that prove such a
/// value (a transaction lent to a closure) is refused once the closure has returned.
package final class UncheckedBox<T>: @unchecked Sendable {
    // @unchecked Sendable: the tests write `value` inside the closure and read it after the
    // `await` of the call that ran the closure, which orders the two accesses.
    package var value: T
    package init(_ value: T) { self.value = value }
}

/// A signal that tasks wait for until it is opened once (a stalled handler that a test
/// releases when it ends); waiting after it opened returns at once.
package final class Gate: Sendable {
    private let state = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    package init() {}

    /// Returns once the gate is open.
    package func wait() async {
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            let opened = state.withLock { state -> Bool in
                if state.open { return true }
                state.waiters.append(waiter)
                return false
            }
            if opened { waiter.resume() }
        }
    }

    /// Opens the gate: every waiter goes on, and later waits return at once.
    package func open() {
        let waiters = state.withLock { state in
            state.open = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }
}
