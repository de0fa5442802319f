// Whether this toolchain's thread sanitizer sees Synchronization.Mutex on Linux.
//
// Four threads append to one array, every access inside the same Mutex's withLock. There is
// no race. Linux's Mutex takes a contended lock in the kernel (FUTEX_LOCK_PI) and releases it
// there (FUTEX_UNLOCK_PI), with no user-space atomic on that path, so TSan sees no
// happens-before edge between the holders and reports their accesses as races. Scripts/sanitizers.py
// builds this with -sanitize=thread on every run: while it reports a race, the thread-sanitizer
// build keeps replacing every Mutex of ours with one it sees (ThreadSanitizerMutex); once it
// reports none, the replacement can go.
import Foundation
import Synchronization

final class Shared: Sendable {
    let values = Mutex<[Int]>([])
}

let shared = Shared()
let threads = (0..<4).map { _ in
    Thread {
        for value in 0..<200_000 {
            shared.values.withLock { values in
                values.append(value)
                if values.count > 64 { values.removeFirst(32) }
            }
        }
    }
}
threads.forEach { $0.start() }
while threads.contains(where: { !$0.isFinished }) { usleep(1000) }
print("held at the end: \(shared.values.withLock { $0.count })")
