import Foundation
import Synchronization

extension SyncContext {
    /// Uploads every attachment waiting to (oldest use first), before a push sends the
    /// changes that reference them. An upload cut off goes on from the remote's offset at the
    /// next push. Returns how many went up. The uploads are a transfer ``close()`` ends; the
    /// caller's cancellation reaches them too.
    func uploadPendingAttachments() async throws -> Int {
        guard let remote = remote as? any AttachmentRemote, let files = store.attachmentFiles else { return 0 }
        return try await attachmentTransfers.upload { () async throws -> Int in
            var uploaded = 0
            while true {
                let rows = try await self.store.read { txn in
                    try AttachmentRow.all(txn, Query(AttachmentRow.inState(.pendingUpload), order: [AttachmentRow.sorted(.lastUsed), SortKey(SystemField.id)], limit: 16))
                }
                if rows.isEmpty { return uploaded }
                try await self.uploadConcurrently(rows, to: remote, files: files)
                uploaded += rows.count
            }
        }
    }

    /// Uploads `rows`, ``AttachmentOptions/concurrentTransfers`` at a time (small files are
    /// one request each: several at once keep the connection busy), then marks those that
    /// went up in one local transaction. The first failure cancels the others and is thrown;
    /// each upload resumes from the server's offset later (one that went up but was not
    /// marked finds the server complete at once).
    private func uploadConcurrently(_ rows: [AttachmentRow], to remote: any AttachmentRemote, files: any AttachmentFileStore) async throws {
        let width = max(1, options.attachments.concurrentTransfers)
        var done: [AttachmentRow] = []
        do {
            try await withThrowingTaskGroup(of: AttachmentRow.self) { group in
                var next = rows.makeIterator()
                for _ in 0..<width {
                    guard let row = next.next() else { break }
                    group.addTask { try await self.upload(row, to: remote, files: files) }
                }
                while let finished = try await group.next() {
                    done.append(finished)
                    guard let row = next.next() else { continue }
                    group.addTask { try await self.upload(row, to: remote, files: files) }
                }
            }
        } catch {
            try? await markUploaded(done)
            throw error
        }
        try await markUploaded(done)
    }

    /// Notes that these files are on the server: `local` from now on, evictable.
    private func markUploaded(_ rows: [AttachmentRow]) async throws {
        guard !rows.isEmpty else { return }
        let finished = rows
        _ = try await observer.write { txn in
            for row in finished {
                guard var stored = try AttachmentRow.find(txn, id: row.id) else { continue }
                stored.state = AttachmentState.local.rawValue
                stored.uploaded = row.size
                try stored.save(txn)
            }
        }
    }

    /// Sends the file from the remote's offset until the remote has it whole; returns `row`.
    private func upload(_ row: AttachmentRow, to remote: any AttachmentRemote, files: any AttachmentFileStore) async throws -> AttachmentRow {
        let attachment = try Attachment(sha256: row.id, size: row.size, contentType: row.contentType)
        guard try await FileWork.run({ try files.size(of: row.id) }) == row.size else {
            throw SyncError(.attachmentMissing, "attachment \(row.id.prefix(12))… waits to upload but its file is gone from this device")
        }
        let reader = SharedReader(files: files, hash: row.id)
        try await send(attachment, to: remote) { at, size in try await FileWork.run { try reader.read(at: at, count: size) } }
        return row
    }

    /// Sends `attachment` from the remote's offset until the remote has it whole, reading its
    /// bytes with `read` (offset, count).
    private func send(_ attachment: Attachment, to remote: any AttachmentRemote,
              read: @escaping @Sendable (Int64, Int) async throws -> [UInt8]) async throws {
        let hash = attachment.sha256, size = attachment.size
        // A file of up to a MiB goes in one request without asking first: a round trip costs
        // more than its bytes. A remote that holds part of it answers with a conflict, and
        // the upload asks it where it stands then.
        var state = size <= Int64(AttachmentTransfer.chunkSize) ? AttachmentUploadState(offset: 0, complete: false)
            : try await remote.attachmentUploadState(hash) ?? AttachmentUploadState(offset: 0, complete: false)
        var conflicts = 0
        defer { transferEnded(hash) }
        while !state.complete {
            let offset = state.offset
            let count = min(remote.attachmentRequestLimit, size - offset)
            do {
                state = try await remote.appendAttachment(attachment, offset: offset, length: count, complete: offset + count == size) { at, size in
                    let piece = try await read(at, size)
                    // What is handed to the remote; the answer says what it took.
                    self.transferProgressed(hash, .upload, done: at + Int64(piece.count), total: attachment.size)
                    return piece
                }
            } catch let error as SyncError where error.code == .conflict && conflicts < 3 {
                // The remote is elsewhere (a request whose answer was lost, or another upload
                // of the same file, from another process, still going into it): ask it where.
                // Only a conflict that finds no progress counts against the limit.
                state = try await remote.attachmentUploadState(hash) ?? AttachmentUploadState(offset: 0, complete: false)
                if state.offset <= offset { conflicts += 1 }
            }
            remoteAnswered()
            transferProgressed(hash, .upload, done: state.offset, total: size)
        }
    }

    /// Fetches the attachment from the remote into the store's files, resuming with a range
    /// after an interruption and checking the hash before the file takes its name. Concurrent
    /// callers for one hash share one download; a cancelled caller returns at once with
    /// `CancellationError`, and a download no caller waits for any more is cancelled (its
    /// bytes kept for the next). Without `noting`, the caller marks its `__attachments` row
    /// (``markDownloaded(_:)``; a prefetch marks many in one transaction).
    func download(_ attachment: Attachment, files: any AttachmentFileStore, noting: Bool = true) async throws {
        guard let remote = remote as? any AttachmentRemote else {
            throw SyncError(.attachmentUnavailable, "attachment \(attachment.sha256.prefix(12))… is not on this device, and the remote serves no attachments")
        }
        try await attachmentTransfers.download(attachment.sha256) {
            if try await FileWork.run({ try files.size(of: attachment.sha256) }) == attachment.size { return }
            try await self.fetch(attachment, from: remote, into: files)
        }
        if noting { try await markDownloaded([attachment]) }
    }

    /// Publishes a transfer's progress: the event, and the status's entry.
    func transferProgressed(_ hash: String, _ direction: AttachmentTransferDirection, done: Int64, total: Int64) {
        broadcaster.publish(.attachmentProgress(sha256: hash, direction: direction, done: done, total: total))
        statusState.update { $0.attachmentTransfers[hash] = AttachmentTransferProgress(direction: direction, done: done, total: total) }
    }

    /// Takes a transfer that ended, done or not, out of the status.
    func transferEnded(_ hash: String) {
        statusState.update { $0.attachmentTransfers[hash] = nil }
    }

    /// Notes that these files are here: `local`, just used.
    func markDownloaded(_ attachments: [Attachment]) async throws {
        guard !attachments.isEmpty else { return }
        _ = try await observer.write { txn in
            let now = Timestamp.now()
            for attachment in attachments {
                var row = try AttachmentRow.find(txn, id: attachment.sha256) ?? AttachmentRow(attachment, state: .local, now: now)
                // A file that waits to upload stays so (it was here all along).
                if row.attachmentState == .pendingUpload { continue }
                row.state = AttachmentState.local.rawValue
                row.lastUsed = now.millisecondsSince1970
                try row.save(txn)
            }
        }
    }

    /// Fetches the file, going on from what an earlier download kept; a kept prefix that
    /// turns out wrong (the hash fails) is dropped and the file fetched once more from zero.
    private func fetch(_ attachment: Attachment, from remote: any AttachmentRemote, into files: any AttachmentFileStore) async throws {
        do {
            try await fetchOnce(attachment, from: remote, into: files)
        } catch is DownloadSink.KeptBytesFailed {
            try await fetchOnce(attachment, from: remote, into: files)
        }
    }

    private func fetchOnce(_ attachment: Attachment, from remote: any AttachmentRemote, into files: any AttachmentFileStore) async throws {
        let sink = try await FileWork.run { try DownloadSink(files: files, sha256: attachment.sha256, expected: attachment.size) }
        defer { transferEnded(attachment.sha256) }
        // Kept unless the bytes are known to be wrong or unwanted, so a download cut off, or
        // a task cancelled, goes on from here next time.
        var keep = true
        do {
            let resumedFrom = sink.received
            if resumedFrom > 0 { transferProgressed(attachment.sha256, .download, done: resumedFrom, total: attachment.size) }
            var failures = 0
            while true {
                do {
                    let found = try await remote.readAttachment(attachment, from: sink.received) { piece in
                        let step = Int64(AttachmentTransfer.chunkSize)
                        let (before, after, full) = try sink.append(piece, limit: attachment.size)
                        // Hashed and handed to the writing queue off the cooperative pool: the
                        // hand-off waits while the disk is behind, and must not hold one of the
                        // pool's few threads meanwhile.
                        if let full { try await FileWork.run { try sink.stage(full) } }
                        // Progress a MiB at a time: a body arrives in pieces of a few KiB.
                        if before / step != after / step || after == attachment.size {
                            self.transferProgressed(attachment.sha256, .download, done: after, total: attachment.size)
                        }
                    }
                    guard found else {
                        keep = false
                        throw SyncError(.attachmentMissing, "the remote has no attachment \(attachment.sha256.prefix(12))… this identity may read")
                    }
                    remoteAnswered()
                    break
                } catch let error as SyncError where error.code == .transient || error.code == .cancelled && !Task.isCancelled {
                    remoteFailed(error)
                    failures += 1
                    guard failures < 3 else {
                        throw SyncError(.attachmentUnavailable, "attachment \(attachment.sha256.prefix(12))… is not on this device and cannot be fetched now: \(error.message)")
                    }
                } catch let error as SyncError where error.code == .attachmentDamaged {
                    keep = false
                    throw error
                }
            }
            guard sink.received == attachment.size, try await FileWork.run({ try sink.hash() }) == attachment.sha256 else {
                keep = false
                if resumedFrom > 0 { throw DownloadSink.KeptBytesFailed() }
                throw SyncError(.attachmentDamaged, "the bytes received for attachment \(attachment.sha256.prefix(12))… do not match its hash; they were not kept")
            }
            try await FileWork.run { try sink.commit(as: attachment.sha256) }
        } catch {
            // Ending waits for the writes handed over: off the cooperative pool, as every wait
            // for the disk (a cancelled download ends here too).
            let keeping = keep
            _ = try? await FileWork.run { sink.end(keeping: keeping) }
            throw error
        }
    }
}

/// A download being written: the file (hashed and written on a queue of its own, as
/// ``AttachmentStaging`` does), and how many bytes arrived. Used by one download at a time;
/// locked because the remote hands pieces over from its task. ``append(_:limit:)`` only
/// gathers bytes; ``init(files:sha256:expected:)``, ``stage(_:)``, ``hash()`` and ``commit(as:)`` may
/// wait for the disk, so their callers run them off the cooperative pool.
final class DownloadSink: Sendable {
    /// A download that went on from kept bytes failed its hash: those bytes were dropped,
    /// and the file is worth one more fetch from zero.
    struct KeptBytesFailed: Error {}

    private struct State: Sendable {
        var staging: AttachmentStaging?
        var received: Int64 = 0
        /// Bytes received but not yet handed to the staging, which takes them a MiB at a
        /// time (a hand-off to its writing thread per network read cost more than the bytes).
        var pending: [UInt8] = []

        /// Gives the pending bytes up to the staging, without a copy.
        mutating func flush() throws {
            guard !pending.isEmpty else { return }
            let full = pending
            pending = []
            try staging?.append(owned: full)
        }
    }
    private let state: Mutex<State>

    /// Opens the hash's download file and hashes again what it already holds (a kept
    /// download's bytes, a MiB at a time), to go on from their end. Kept bytes that cannot be
    /// read back, or more of them than the file has, are removed and the download starts
    /// over in a new file.
    init(files: any AttachmentFileStore, sha256: String, expected size: Int64) throws {
        var writer = try files.downloadWriter(for: sha256)
        var staging = AttachmentStaging(writer)
        var received: Int64 = 0
        if writer.size > 0 {
            do {
                guard writer.size <= size else { throw SyncError(.attachmentDamaged, "a kept download is longer than its file") }
                while received < writer.size {
                    let bytes = try writer.readBack(at: received, count: Int(min(writer.size - received, Int64(AttachmentTransfer.chunkSize))))
                    guard !bytes.isEmpty else { throw SyncError(.attachmentDamaged, "a kept download ended early") }
                    staging.hashHeld(bytes)
                    received += Int64(bytes.count)
                }
            } catch {
                staging.cancel()
                writer = try files.downloadWriter(for: sha256)
                staging = AttachmentStaging(writer)
                received = 0
                guard writer.size == 0 else {
                    staging.cancel()
                    throw SyncError(.storageFailure, "a kept download of attachment \(sha256.prefix(12))… could not be removed")
                }
            }
        }
        state = Mutex(State(staging: staging, received: received))
    }

    var received: Int64 { state.withLock { $0.received } }

    /// Takes `piece`; returns how many bytes had arrived before it and how many have now, and
    /// — once a MiB has gathered — those bytes, for the caller to ``stage(_:)`` before the
    /// next piece.
    func append(_ piece: [UInt8], limit: Int64) throws -> (before: Int64, after: Int64, full: [UInt8]?) {
        try state.withLock { state in
            guard state.received + Int64(piece.count) <= limit else {
                throw SyncError(.attachmentDamaged, "the remote sent more bytes than the attachment has")
            }
            let before = state.received
            if state.pending.isEmpty { state.pending.reserveCapacity(AttachmentTransfer.chunkSize) }
            state.pending.append(contentsOf: piece)
            state.received += Int64(piece.count)
            guard state.pending.count >= AttachmentTransfer.chunkSize else { return (before, state.received, nil) }
            let full = state.pending
            state.pending = []
            return (before, state.received, full)
        }
    }

    /// Hashes `bytes` and hands them to the writing queue (without a copy), waiting while the
    /// queue is full.
    func stage(_ bytes: [UInt8]) throws {
        try state.withLock { state in try state.staging?.append(owned: bytes) }
    }

    /// The hash of every byte received (handing the last ones to the staging first).
    func hash() throws -> String {
        try state.withLock { state in
            try state.flush()
            return state.staging?.hasher.finish() ?? ""
        }
    }

    /// Waits for the writes, then gives the file its name (``AttachmentFileWriter/commitCached(as:)``).
    func commit(as sha256: String) throws {
        try state.withLock { state in
            try state.flush()
            guard let staging = state.staging else { return }
            state.staging = nil
            do {
                try staging.finish().commitCached(as: sha256)
            } catch {
                staging.cancel()
                throw error
            }
        }
    }

    /// Ends a download that was not committed: its file is kept for the next one to go on
    /// from, or removed.
    func end(keeping: Bool) {
        state.withLock { state in
            if keeping {
                // Bytes that arrived but wait for their hand-off are kept too.
                try? state.flush()
                state.staging?.keep()
            } else {
                state.staging?.cancel()
            }
            state.staging = nil
        }
    }
}

/// A stored file read by one upload's requests, one piece at a time, from whichever task the
/// remote reads its body on. Opened at the first read, closed when released.
final class SharedReader: @unchecked Sendable {
    // @unchecked Sendable: the reader is only made and used under the mutex.
    private let files: any AttachmentFileStore
    private let hash: String
    private let reader = Mutex<(any AttachmentFileReader)?>(nil)

    init(files: any AttachmentFileStore, hash: String) {
        self.files = files
        self.hash = hash
    }

    func read(at offset: Int64, count: Int) throws -> [UInt8] {
        try reader.withLock { reader in
            if reader == nil { reader = try files.reader(for: hash) }
            return try reader!.read(at: offset, count: count)
        }
    }
}
