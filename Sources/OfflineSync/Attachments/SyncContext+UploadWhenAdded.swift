import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// A file added from disk starts going up while its local copy is written: the upload is
// named by the file's hash, so the file is hashed first (a read, from the page cache for a
// file just made), then copied and sent at once. A push waits for it, then sends whatever the
// server still lacks; nothing depends on this head start finishing.

extension SyncContext {
    /// Hashes the file at `url` and begins uploading it from there; returns the hash, or `nil`
    /// when no head start applies (switched off, no attachment remote, a small file, or a file
    /// that cannot be read now: the copy reports that).
    func beginUploadWhenAdded(_ url: URL, size: Int64?, contentType: String, fileName: String?) async -> String? {
        guard options.attachments.uploadWhenAdded, let remote = remote as? any AttachmentRemote,
              let size, size > Int64(AttachmentTransfer.chunkSize),
              let hash = try? await FileWork.run({ try AttachmentHasher.hash(contentsOf: url) }),
              let attachment = try? Attachment(sha256: hash, size: size, contentType: contentType, fileName: fileName)
        else { return nil }
        let source = SourceFileReader(url)
        uploadsWhenAdded.start(hash) {
            defer { source.close() }
            try await self.send(attachment, to: remote) { at, count in try await FileWork.run { try source.read(at: at, count: count) } }
        }
        return hash
    }
}

/// The uploads begun when their files were added, by hash. Each removes itself when it ends;
/// a push waits for one that is still going before it sends what is left of that file.
final class UploadsWhenAdded: Sendable {
    private let running = Mutex<[String: Task<Void, Never>]>([:])

    /// Starts `body` for `hash` unless one runs already. Its failure is dropped: the push
    /// sends the file anyway.
    func start(_ hash: String, _ body: @escaping @Sendable () async throws -> Void) {
        running.withLock { running in
            guard running[hash] == nil else { return }
            running[hash] = Task {
                try? await body()
                _ = self.running.withLock { $0.removeValue(forKey: hash) }
            }
        }
    }

    /// Waits for the upload of `hash` to end, if one runs (done or failed: the caller then
    /// asks the server where it stands).
    func join(_ hash: String) async {
        guard let task = running.withLock({ $0[hash] }) else { return }
        await task.value
    }

    /// Stops the upload of `hash`, if one runs, and waits until it has stopped.
    func stop(_ hash: String) async {
        guard let task = running.withLock({ $0.removeValue(forKey: hash) }) else { return }
        task.cancel()
        await task.value
    }

    /// Stops every one (the context is closing).
    func cancelAll() async {
        let tasks = running.withLock { running in
            defer { running.removeAll() }
            return Array(running.values)
        }
        for task in tasks {
            task.cancel()
            await task.value
        }
    }
}

/// The app's file an upload reads while the local copy is written: positioned reads straight
/// into the piece handed over, from whichever task the remote asks on.
final class SourceFileReader: Sendable {
    private let descriptor: Mutex<Int32>

    init(_ url: URL) {
        descriptor = Mutex(open(url.path, O_RDONLY | O_CLOEXEC))
    }

    func read(at offset: Int64, count: Int) throws -> [UInt8] {
        try descriptor.withLock { descriptor in
            guard descriptor >= 0 else { throw SyncError(.notFound, "the added file can no longer be read") }
            var failed = false
            let piece = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
                while initialized < count {
                    let got = pread(descriptor, buffer.baseAddress! + initialized, count - initialized, off_t(offset) + off_t(initialized))
                    if got < 0, errno == EINTR { continue }
                    if got <= 0 { failed = true; break }
                    initialized += got
                }
            }
            guard !failed else { throw SyncError(.attachmentDamaged, "the added file is shorter than when it was hashed, or unreadable") }
            return piece
        }
    }

    func close() {
        descriptor.withLock { descriptor in
            if descriptor >= 0 {
                #if canImport(Glibc)
                _ = Glibc.close(descriptor)
                #else
                _ = Darwin.close(descriptor)
                #endif
            }
            descriptor = -1
        }
    }
}
