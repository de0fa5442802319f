#if OFFLINE_SYNC_TSAN_LOCKS
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A lock the thread sanitizer can see: a pthread mutex, whose lock and unlock it intercepts.
///
/// Only the thread-sanitizer build has it (`-DOFFLINE_SYNC_TSAN_LOCKS`, set by
/// Scripts/sanitizers.py), where every module's `Mutex` names it (each module's
/// `SanitizerLocks.swift`). On Linux a contended `Synchronization.Mutex` is taken and released
/// in the kernel (FUTEX_LOCK_PI / FUTEX_UNLOCK_PI) with no user-space atomic on that path, so
/// the sanitizer sees no happens-before edge between two holders and reports their accesses as
/// a race (Tests/Sanitizers/mutex-blind-spot.swift shows it). With this lock in its place, the
/// sanitizer checks every Mutex-held state for real, and no report needs suppressing for it.
/// Every other build uses the standard library's `Mutex`.
package final class ThreadSanitizerMutex<Value>: @unchecked Sendable {
    private let lock: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value

    package init(_ value: consuming sending Value) {
        lock = .allocate(capacity: 1)
        lock.initialize(to: pthread_mutex_t())
        pthread_mutex_init(lock, nil)
        self.value = value
    }

    deinit {
        pthread_mutex_destroy(lock)
        lock.deallocate()
    }

    /// `Synchronization.Mutex.withLock`'s contract: `body` runs with the value while no other
    /// thread holds the lock.
    package func withLock<Result, E: Error>(_ body: (inout sending Value) throws(E) -> sending Result) throws(E) -> sending Result {
        pthread_mutex_lock(lock)
        defer { pthread_mutex_unlock(lock) }
        return try body(&value)
    }
}
#endif
