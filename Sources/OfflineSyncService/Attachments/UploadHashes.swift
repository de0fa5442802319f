import OfflineSync
import Synchronization

/// The running hash of each upload this instance is receiving, so finishing an upload needs no
/// second read of its bytes from the store.
///
/// An entry is trusted only when it provably hashed exactly the stored bytes: it belongs to
/// one run of the upload (``AttachmentUploadRow/run``, new each time the upload is created, so
/// a cancelled and re-created upload never meets an old entry), and it advances only by a
/// piece committed at the offset it had reached. A piece stored elsewhere (another instance
/// over the same database, or a restart) leaves a gap, the entry is dropped, and the finish
/// reads the bytes back as before.
final class UploadHashes: Sendable {
    struct Entry: Sendable {
        var run: String
        var hasher: AttachmentHasher
    }

    private let entries = Mutex<[String: Entry]>([:])
    /// Uploads followed at once; past it a new upload is not followed (its finish reads its
    /// bytes back), which bounds the memory to about 200 bytes an entry.
    static let capacity = 4096

    /// Notes that `bytes` were committed at `offset` of the upload `key` in its run `run`.
    func committed(_ key: String, run: String?, offset: Int64, bytes: [UInt8]) {
        guard let run else { return }
        let taken = entries.withLock { entries -> Entry? in
            let entry = entries.removeValue(forKey: key)
            guard offset == 0 else { return entry }
            return entries.count < Self.capacity ? Entry(run: run, hasher: AttachmentHasher()) : nil
        }
        guard var entry = taken, entry.run == run, entry.hasher.count == offset else { return }
        // Hashing happens outside the lock. A piece committed meanwhile finds no entry, and
        // the one put back then stops short of the upload's offset: it is never used.
        entry.hasher.update(bytes)
        entries.withLock { entries in
            if entries[key] == nil, entries.count < Self.capacity { entries[key] = entry }
        }
    }

    /// The hash of the upload `key`'s first `received` bytes in run `run`, when this instance
    /// followed all of them; the entry is gone either way.
    func finish(_ key: String, run: String?, received: Int64) -> String? {
        guard let entry = entries.withLock({ $0.removeValue(forKey: key) }), let run, entry.run == run,
              entry.hasher.count == received else { return nil }
        return entry.hasher.finish()
    }

    /// Forgets the upload `key` (cancelled or removed).
    func forget(_ key: String) {
        entries.withLock { _ = $0.removeValue(forKey: key) }
    }
}
