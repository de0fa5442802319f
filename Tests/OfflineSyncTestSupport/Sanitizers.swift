import Foundation

/// How many times longer a test may run under a sanitizer than without one: 10 when
/// `OFFLINE_SYNC_SANITIZER` is set (Scripts/sanitizers.py sets it; TSan and ASan slow every
/// memory access several times over), 1 otherwise. Suites with a time limit multiply it by this.
package let sanitizerSlowdown = ProcessInfo.processInfo.environment["OFFLINE_SYNC_SANITIZER"] == nil ? 1 : 10
