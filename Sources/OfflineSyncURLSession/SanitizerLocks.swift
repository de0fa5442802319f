#if OFFLINE_SYNC_TSAN_LOCKS
import OfflineSync

/// Under the thread sanitizer this module's locks are ones it can see (``ThreadSanitizerMutex``).
typealias Mutex = ThreadSanitizerMutex
#endif
