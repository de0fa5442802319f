import Foundation
import Logging
import Synchronization

extension SyncContext {
    /// Uploads every attachment waiting to (oldest use first), before a push sends the
    /// changes that reference them. An upload cut off goes on from the remote's offset at the
    /// next push. Returns how many went up. The uploads are a transfer ``close()`` ends; the
    /// caller's cancellation reaches them too.
    ///
    /// A file whose upload cannot succeed from this device as things stand — gone from it,
    /// its bytes proven damaged, or refused by the remote for good (over a limit or quota,
    /// bytes that do not hash to the name) — does not stop the push: the pending operations
    /// that reference it fail with the upload's code (``operationErrors()``), and every other
    /// operation goes on. A file that is gone turns `remote`, so adding its bytes again
    /// (``addAttachment(_:contentType:fileName:)``) makes it wait to upload anew. A file the
    /// system could not read now (too many open files, an I/O error, a permission) fails the
    /// push with ``SyncError/Code/busy``, which the background sync retries with backoff.
    func uploadPendingAttachments() async throws -> Int {
        guard let remote = remote as? any AttachmentRemote, let files = store.attachmentFiles else { return 0 }
        return try await attachmentTransfers.upload { () async throws -> Int in
            var uploaded = 0
            // The files this push could not upload: their operations failed, and the next
            // push tries them again.
            var refused: [String] = []
            while true {
                let skipped = refused
                let rows = try await self.store.read { txn -> [AttachmentRow] in
                    var waiting = AttachmentRow.inState(.pendingUpload)
                    if !skipped.isEmpty { waiting = waiting && .not(.isIn(SystemField.id, skipped.map(Value.string))) }
                    return try AttachmentRow.all(txn, Query(waiting, order: [AttachmentRow.sorted(.lastUsed), SortKey(SystemField.id)], limit: 16))
                }
                if rows.isEmpty { return uploaded }
                let outcome = try await self.uploadConcurrently(rows, to: remote, files: files)
                uploaded += outcome.uploaded
                refused += outcome.refused
            }
        }
    }

    /// How one file's upload ended, when it did not throw.
    enum UploadOutcome: Sendable {
        /// The remote holds the file whole.
        case uploaded(AttachmentRow)
        /// The upload cannot succeed as things stand: the operations referencing the file
        /// fail with `error`'s code. `gone` when the file is not on this device any more.
        case refused(AttachmentRow, error: SyncError, gone: Bool)
    }

    /// Uploads `rows`, ``AttachmentOptions/concurrentTransfers`` at a time (small files are
    /// one request each: several at once keep the connection busy), then marks those that
    /// went up in one local transaction, and fails the operations of those that cannot go up
    /// in another. The first failure that may pass (the network, a file that could not be
    /// read now) cancels the others and is thrown; each upload resumes from the server's
    /// offset later (one that went up but was not marked finds the server complete at once).
    /// Returns how many went up and the hashes of those refused.
    private func uploadConcurrently(_ rows: [AttachmentRow], to remote: any AttachmentRemote,
                                    files: any AttachmentFileStore) async throws -> (uploaded: Int, refused: [String]) {
        let width = max(1, options.attachments.concurrentTransfers)
        var done: [AttachmentRow] = []
        var refusals: [(row: AttachmentRow, error: SyncError, gone: Bool)] = []
        do {
            try await withThrowingTaskGroup(of: UploadOutcome.self) { group in
                var next = rows.makeIterator()
                for _ in 0..<width {
                    guard let row = next.next() else { break }
                    group.addTask { try await self.upload(row, to: remote, files: files) }
                }
                while let finished = try await group.next() {
                    switch finished {
                    case .uploaded(let row): done.append(row)
                    case .refused(let row, let error, let gone): refusals.append((row, error, gone))
                    }
                    guard let row = next.next() else { continue }
                    group.addTask { try await self.upload(row, to: remote, files: files) }
                }
            }
        } catch {
            try? await markUploaded(done)
            try? await failOperations(refusals, files: files)
            throw error
        }
        try await markUploaded(done)
        try await failOperations(refusals, files: files)
        return (done.count, refusals.map { $0.row.id })
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

    /// Fails the pending operations that reference a file whose upload cannot succeed, each
    /// with the upload's code and message, in one transaction: they wait in
    /// ``operationErrors()`` (the app adds the bytes again and retries, or discards them), and
    /// the push goes on without them. An operation sent before (attempted) is left for the
    /// remote to answer. A file that is still gone turns `remote`: its bytes must come from
    /// the app, and adding them makes it wait to upload again.
    private func failOperations(_ refusals: [(row: AttachmentRow, error: SyncError, gone: Bool)],
                                files: any AttachmentFileStore) async throws {
        guard !refusals.isEmpty else { return }
        for refusal in refusals {
            options.logger.warning("attachment \(refusal.row.id.prefix(12))… could not be uploaded; the operations that reference it fail: \(refusal.error)")
        }
        let refused = refusals.map { (id: $0.row.id, error: $0.error, gone: $0.gone) }
        let events = try await observer.write { txn -> [SyncEvent] in
            // A marker a failed push left is written out first: the states read below are the rows'.
            try Outbox.writeInFlight(txn)
            let now = Timestamp.now()
            var events: [SyncEvent] = []
            for refusal in refused {
                for operation in try Outbox.operations(referencing: refusal.id, txn) where operation.state == .pending {
                    events.append(try SyncContext.fail(operation, status: nil, message: refusal.error.message, code: refusal.error.code,
                                                       server: nil, now: now, txn: txn))
                }
                guard refusal.gone, var row = try AttachmentRow.find(txn, id: refusal.id), row.attachmentState == .pendingUpload else { continue }
                // Bytes added again since are kept waiting.
                let stillGone: Bool
                do { stillGone = try files.size(of: refusal.id) == nil } catch { stillGone = false }
                guard stillGone else { continue }
                row.state = AttachmentState.remote.rawValue
                row.uploaded = 0
                try row.save(txn)
            }
            return events
        }
        for event in events { broadcaster.publish(event) }
    }

    /// The remote codes that refuse an upload for good: another try sends the same bytes
    /// and meets the same answer.
    private static let refusesForGood: Set<SyncError.Code> = [.limitExceeded, .attachmentDamaged, .invalidValue]

    /// Sends the file from the remote's offset until the remote has it whole.
    private func upload(_ row: AttachmentRow, to remote: any AttachmentRemote, files: any AttachmentFileStore) async throws -> UploadOutcome {
        let hash = row.id
        let attachment = try Attachment(sha256: hash, size: row.size, contentType: row.contentType)
        let gone = UploadOutcome.refused(row, error: SyncError(.attachmentMissing, "attachment \(hash.prefix(12))… waits to upload but its file is gone from this device; add its bytes again"), gone: true)
        let found: Int64?
        do {
            found = try await FileWork.run { try files.size(of: hash) }
        } catch let error as SyncError {
            return try Self.ownReadFailed(error, row, gone: gone)
        }
        guard let stored = found else { return gone }
        guard stored == row.size else {
            return .refused(row, error: SyncError(.attachmentDamaged, "attachment \(hash.prefix(12))… waits to upload but its file is \(stored) bytes, not \(row.size); add its bytes again"), gone: false)
        }
        let reader = SharedReader(files: files, hash: hash)
        do {
            try await send(attachment, to: remote) { at, size in try await FileWork.run { try reader.read(at: at, count: size) } }
        } catch {
            // This device's own read failed, whatever the remote made of its body stopping.
            if let failure = reader.failure { return try Self.ownReadFailed(failure, row, gone: gone) }
            if let error = error as? SyncError, Self.refusesForGood.contains(error.code) {
                return .refused(row, error: error, gone: false)
            }
            throw error
        }
        return .uploaded(row)
    }

    /// What a failed read of a file waiting to upload means for its upload: gone (`gone`),
    /// proven damaged (the operations fail), or a read the system refused now — thrown as
    /// ``SyncError/Code/busy``, which is retried, never ``SyncError/Code/storageFailure``,
    /// which would stop the background sync for a file that may read fine a moment later.
    private static func ownReadFailed(_ error: SyncError, _ row: AttachmentRow, gone: UploadOutcome) throws -> UploadOutcome {
        switch error.code {
        case .notFound, .attachmentMissing:
            return gone
        case .attachmentDamaged:
            return .refused(row, error: SyncError(.attachmentDamaged, "attachment \(row.id.prefix(12))… waits to upload but its file is damaged (\(error.message)); add its bytes again"), gone: false)
        case .storageFailure:
            throw SyncError(.busy, "attachment \(row.id.prefix(12))… waits to upload but its file could not be read now (\(error.message)); the push is tried again", underlying: error)
        default:
            throw error
        }
    }

    /// Answers that moved an upload nowhere (a conflict that found no progress, a success
    /// whose offset did not advance, an offset outside the file) before it is given up as
    /// ``SyncError/Code/transient`` until the next push.
    static let uploadStallLimit = 3

    /// Sends `attachment` from the remote's offset until the remote has it whole, reading its
    /// bytes with `read` (offset, count). Every offset the remote gives must lie within the
    /// file, and every answer that is not a conflict must move it on: a remote that answers
    /// otherwise, or with conflicts that find no progress, is asked where it stands at most
    /// ``uploadStallLimit`` times, then the upload ends as ``SyncError/Code/transient``
    /// (retried with backoff by the background sync), never looping.
    private func send(_ attachment: Attachment, to remote: any AttachmentRemote,
                      read: @escaping @Sendable (Int64, Int) async throws -> [UInt8]) async throws {
        let hash = attachment.sha256, size = attachment.size
        // A file of up to a MiB goes in one request without asking first: a round trip costs
        // more than its bytes. A remote that holds part of it answers with a conflict, and
        // the upload asks it where it stands then.
        var state = size <= Int64(AttachmentTransfer.chunkSize) ? AttachmentUploadState(offset: 0, complete: false)
            : try await remote.attachmentUploadState(hash) ?? AttachmentUploadState(offset: 0, complete: false)
        var stalls = 0
        defer { transferEnded(hash) }
        while !state.complete {
            let offset = state.offset
            // Why the last step moved nothing, when it did not.
            var stalled: String?
            if offset < 0 || offset > size {
                stalled = "the remote's offset \(offset) lies outside the file's \(size) bytes"
            } else {
                let count = max(0, min(remote.attachmentRequestLimit, size - offset))
                do {
                    let answer = try await remote.appendAttachment(attachment, offset: offset, length: count, complete: offset + count == size) { at, size in
                        let piece = try await read(at, size)
                        // What is handed to the remote; the answer says what it took.
                        self.transferProgressed(hash, .upload, done: at + Int64(piece.count), total: attachment.size)
                        return piece
                    }
                    remoteAnswered()
                    if answer.complete || (answer.offset > offset && answer.offset <= size) {
                        state = answer
                    } else {
                        stalled = "an append from \(offset) was answered with offset \(answer.offset)"
                    }
                } catch let error as SyncError where error.code == .conflict {
                    // The remote is elsewhere (a request whose answer was lost, or another
                    // upload of the same file, from another process, still going into it).
                    remoteAnswered()
                    stalled = "conflict: \(error.message)"
                }
            }
            if let stalled {
                // Ask the remote where it stands; only an answer that finds no progress
                // counts against the limit.
                let asked = try await remote.attachmentUploadState(hash) ?? AttachmentUploadState(offset: 0, complete: false)
                remoteAnswered()
                if !asked.complete, !(asked.offset > offset && asked.offset <= size) {
                    stalls += 1
                    guard stalls < Self.uploadStallLimit else {
                        throw SyncError(.transient, "the upload of attachment \(hash.prefix(12))… made no progress after \(stalls) answers (the last: \(stalled)); it goes on at the next push")
                    }
                }
                state = asked
            }
            transferProgressed(hash, .upload, done: min(max(state.offset, 0), size), total: size)
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

    /// Notes that these files are here: `local`, just used. Each was checked against its
    /// hash at the reference's size, so the row takes that size (one a pulled reference gave
    /// it first may differ).
    func markDownloaded(_ attachments: [Attachment]) async throws {
        guard !attachments.isEmpty else { return }
        _ = try await observer.write { txn in
            let now = Timestamp.now()
            for attachment in attachments {
                var row = try AttachmentRow.find(txn, id: attachment.sha256) ?? AttachmentRow(attachment, state: .local, now: now)
                // A file that waits to upload stays so (it was here all along).
                if row.attachmentState == .pendingUpload { continue }
                row.state = AttachmentState.local.rawValue
                row.size = attachment.size
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
/// remote reads its body on. Opened at the first read, closed when released. Keeps the
/// first failure of its own reads (``failure``), so the upload can tell this device's read
/// from the remote's answer whatever error the remote made of the body stopping; a file that
/// ends before the piece asked for is `attachmentMissing` (it shrank under the upload).
final class SharedReader: @unchecked Sendable {
    // @unchecked Sendable: the reader is only made and used under the mutex.
    private let files: any AttachmentFileStore
    private let hash: String
    private let state = Mutex<(reader: (any AttachmentFileReader)?, failure: SyncError?)>((nil, nil))

    init(files: any AttachmentFileStore, hash: String) {
        self.files = files
        self.hash = hash
    }

    /// The first read that failed, if any.
    var failure: SyncError? { state.withLock { $0.failure } }

    func read(at offset: Int64, count: Int) throws -> [UInt8] {
        try state.withLock { state in
            do {
                if state.reader == nil { state.reader = try files.reader(for: hash) }
                let bytes = try state.reader!.read(at: offset, count: count)
                if bytes.isEmpty && count > 0 {
                    throw SyncError(.attachmentMissing, "attachment \(hash.prefix(12))… ended at \(offset) bytes, before its size")
                }
                return bytes
            } catch {
                let failure = error as? SyncError
                    ?? SyncError(.storageFailure, "attachment \(hash.prefix(12))… could not be read: \(type(of: error))", underlying: error)
                if state.failure == nil { state.failure = failure }
                throw failure
            }
        }
    }
}
