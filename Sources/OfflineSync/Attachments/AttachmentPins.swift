import Synchronization

/// The attachments the app holds open through ``SyncContext/withAttachmentFile(_:isolation:_:)``, by
/// hash, each with how many holds are open. In memory only: a hold lasts while its closure
/// runs, so a crash leaves none behind (``SyncContext/pinAttachment(_:_:)`` is the lasting pin).
///
/// The cache's removals check it and remove a file under its lock, so a file is either
/// removed before a hold starts (and the hold fetches it again) or not removed while it lasts.
final class AttachmentPins: Sendable {
    private let holds = Mutex<[String: Int]>([:])

    /// Starts a hold on the file with this hash.
    func hold(_ sha256: String) {
        holds.withLock { $0[sha256, default: 0] += 1 }
    }

    /// Ends one hold on the file with this hash.
    func release(_ sha256: String) {
        holds.withLock { holds in
            guard let count = holds[sha256] else { return }
            holds[sha256] = count > 1 ? count - 1 : nil
        }
    }

    /// Whether a hold on the file with this hash is open now (a hint: a removal decides
    /// under the lock, with ``removeUnlessHeld(_:beyond:_:)``).
    func isHeld(_ sha256: String) -> Bool {
        holds.withLock { $0[sha256] != nil }
    }

    /// Runs `remove` unless a hold on the file with this hash is open, under the lock, so
    /// no hold starts in between. Returns whether it ran; rethrows its failure.
    ///
    /// `own` is how many of the holds are the caller's own: a ``SyncContext/withAttachmentFile(_:isolation:_:)``
    /// that finds its file damaged before its closure has the URL may replace it; anyone
    /// else's hold keeps the file.
    func removeUnlessHeld(_ sha256: String, beyond own: Int = 0, _ remove: () throws -> Void) throws -> Bool {
        try holds.withLock { holds in
            guard (holds[sha256] ?? 0) <= own else { return false }
            try remove()
            return true
        }
    }
}
