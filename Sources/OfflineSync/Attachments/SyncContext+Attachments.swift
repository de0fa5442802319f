import Foundation
import Logging

extension SyncContext {
    // MARK: Attachments

    /// Stores `bytes` as an attachment on this device and returns its reference, to be
    /// written into a record (``Attachment/value``, or an `Attachment` property of a model).
    ///
    /// The bytes are durable when this returns. Writing the reference into a record queues
    /// the upload in the record's own transaction; the record's change is pushed only after
    /// the bytes are on the server. An attachment never written into a record is removed when
    /// a later context opens the store.
    ///
    /// Adding the bytes of an attachment this device's own queued writes reference as
    /// ``AttachmentState/remote`` (a reference written without its file here, one refused as
    /// ``SyncError/Code/attachmentMissing``, or a file that went) makes it wait to upload: the
    /// next push sends it before the queue. This is how a write refused as
    /// ``SyncError/Code/attachmentMissing`` recovers: add the bytes again, then resolve its
    /// ``OperationError`` with ``OperationErrorResolution/retry`` (Docs/Attachments.md). A
    /// file only pulled records name is not uploaded for being added: that would tell the
    /// server this device holds it. The bytes replace a stored copy of them that is damaged
    /// (a file waiting to upload is repaired this way), and correct a size a pulled reference
    /// gave the attachment's row.
    public func addAttachment(_ bytes: some Collection<UInt8> & Sendable, contentType: String,
                              fileName: String? = nil) async throws -> Attachment {
        let files = try attachmentFiles()
        try options.attachments.check(size: Int64(bytes.count))
        let attachment = try await stage(in: files, contentType: contentType, fileName: fileName) { append in
            try Array(bytes).withUnsafeBytes { try append($0) }
        }
        try await addedAgain(attachment)
        return attachment
    }

    /// Stores the file at `url` as an attachment, reading it in chunks (a file of any size
    /// is never held in memory). See ``addAttachment(_:contentType:fileName:)``.
    public func addAttachment(contentsOf url: URL, contentType: String, fileName: String? = nil) async throws -> Attachment {
        let files = try attachmentFiles()
        guard let handle = FileHandle(forReadingAtPath: url.path) else {
            throw SyncError(.notFound, "no readable file at \(url.path)")
        }
        defer { try? handle.close() }
        if let size = try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int64 {
            try options.attachments.check(size: size)
        }
        let attachment = try await stage(in: files, contentType: contentType, fileName: fileName) { append in
            while true {
                let chunk = try handle.read(upToCount: AttachmentTransfer.chunkSize) ?? Data()
                if chunk.isEmpty { return }
                try chunk.withUnsafeBytes { try append($0) }
            }
        }
        try await addedAgain(attachment)
        return attachment
    }

    /// After the bytes of `attachment` were added, when its row says `remote` (the server was
    /// taken to hold it, and may not: a push was refused as ``SyncError/Code/attachmentMissing``):
    /// the row takes the size the bytes were just hashed over, and — only when an operation
    /// this device queued references the file — waits to upload from now on, so the next push
    /// sends it before the queue. A record pulled from elsewhere that names the hash is not
    /// reason enough: the upload would tell the server this device holds the file. A server
    /// that holds the file already answers the upload complete at once. One read when there
    /// is nothing to change.
    private func addedAgain(_ attachment: Attachment) async throws {
        let hash = attachment.sha256, size = attachment.size
        let isRemote = try await store.read { txn in
            try AttachmentRow.find(txn, id: hash).map { $0.attachmentState == .remote } ?? false
        }
        guard isRemote else { return }
        try await observer.write { txn in
            guard var row = try AttachmentRow.find(txn, id: hash), row.attachmentState == .remote else { return }
            row.size = size
            if try Outbox.referencesAttachment(hash, txn) {
                row.state = AttachmentState.pendingUpload.rawValue
                row.uploaded = 0
            }
            try row.save(txn)
        }
    }

    /// Writes what `fill` appends to a new file, off the cooperative pool, hashing it as it
    /// goes, and gives the file its hash's name; a failure leaves no file.
    private func stage(in files: any AttachmentFileStore, contentType: String, fileName: String?,
                       _ fill: @escaping @Sendable (_ append: (UnsafeRawBufferPointer) throws -> Void) throws -> Void) async throws -> Attachment {
        try await FileWork.run {
            let staging = AttachmentStaging(try files.makeWriter())
            do {
                try fill { buffer in try staging.append(buffer) }
                return try self.commitStaged(try staging.finish(), hasher: staging.hasher, contentType: contentType, fileName: fileName)
            } catch {
                staging.cancel()
                throw error
            }
        }
    }

    private func commitStaged(_ writer: any AttachmentFileWriter, hasher: AttachmentHasher, contentType: String,
                              fileName: String?) throws -> Attachment {
        let attachment = try Attachment(sha256: hasher.finish(), size: hasher.count, contentType: contentType, fileName: fileName)
        try options.attachments.check(size: attachment.size)
        try writer.commit(as: attachment.sha256)
        return attachment
    }

    /// Where an attachment's bytes are for this device, or `nil` when no local record
    /// references it (an attachment added but not yet written into a record included).
    public func attachmentState(_ attachment: Attachment) async throws -> AttachmentState? {
        try await store.read { txn in try AttachmentRow.find(txn, id: attachment.sha256)?.attachmentState }
    }

    /// The attachment's bytes, checked against its hash before any is returned: from this
    /// device, or fetched from the remote on first access (concurrent callers share one
    /// download; an interrupted one resumes with a range) and kept.
    ///
    /// A file stored here whose bytes no longer match is reported with
    /// ``SyncError/Code/attachmentDamaged`` and removed, to be fetched again by the next call;
    /// one waiting to upload is kept (it exists nowhere else), and so is one the app holds
    /// (``withAttachmentFile(_:isolation:_:)``) until it lets go. A reference whose size is
    /// not that of a whole file here (its bytes hash to its name) throws
    /// ``SyncError/Code/invalidValue`` and removes nothing: the reference is wrong, not the
    /// file. A file not here that cannot be fetched now (offline, the remote silent) throws
    /// ``SyncError/Code/attachmentUnavailable``; one the remote has not for this identity,
    /// ``SyncError/Code/attachmentMissing``.
    public func attachmentData(_ attachment: Attachment) async throws -> Data {
        let files = try attachmentFiles()
        let fetched = try await ensureLocal(attachment, files: files, ownHolds: 0)
        let data = try await removingDamaged(attachment, in: files) {
            try Self.verifiedContents(of: attachment, in: files, check: !fetched)
        }
        // A download noted its use already.
        if !fetched { try await touch(attachment) }
        return data
    }

    /// The attachment as a file on this device (fetched first when it is not here), checked
    /// against its hash: a URL to hand to another API. Do not change the file. A store that
    /// seals its files (the encrypted file) has no plain file to give: use
    /// ``attachmentData(_:)``; this throws ``SyncError/Code/unsupported``.
    ///
    /// The file is the cache's, not the app's: it stays at the URL until the cache next
    /// removes it, which may be at once (the next download or upload keeps
    /// ``AttachmentOptions/cacheBudget`` and may evict it; the sweep of
    /// ``removeUnreferencedAttachments()`` removes it once no local record references it).
    /// To use the file for a while (play it, hand it to a viewer, copy it), read it inside
    /// ``withAttachmentFile(_:isolation:_:)``, which holds it for as long as its closure
    /// runs; to keep it across launches, ``pinAttachment(_:_:)`` it.
    public func attachmentFileURL(_ attachment: Attachment) async throws -> URL {
        try await fileURL(attachment, ownHolds: 0)
    }

    /// ``attachmentFileURL(_:)`` for a caller that holds the file `ownHolds` times itself
    /// (``withAttachmentFile(_:isolation:_:)``, before its closure has the URL): those holds
    /// do not keep a damaged file from being replaced, anyone else's do.
    private func fileURL(_ attachment: Attachment, ownHolds: Int) async throws -> URL {
        let files = try attachmentFiles()
        // A file just fetched was checked as it arrived, and its download noted the use.
        let fetched = try await ensureLocal(attachment, files: files, ownHolds: ownHolds)
        if !fetched {
            _ = try await removingDamaged(attachment, in: files, ownHolds: ownHolds) {
                try Self.verifiedContents(of: attachment, in: files, keep: false)
            }
        }
        guard let url = files.plainFileURL(for: attachment.sha256) else {
            throw SyncError(.unsupported, "this store seals its attachment files; read the bytes with attachmentData")
        }
        if !fetched { try await touch(attachment) }
        return url
    }

    /// Runs `body` with the attachment as a file on this device (see
    /// ``attachmentFileURL(_:)``), held for as long as `body` runs: neither the cache budget's
    /// eviction nor the sweep of unreferenced files removes it meanwhile (a removal under way
    /// when the hold starts finishes first, and the file is fetched again). The hold lasts
    /// only as long as the closure: do not keep the URL past it. Holds are this context's, in
    /// memory; several may hold one file at once.
    ///
    /// Throws what ``attachmentFileURL(_:)`` throws (``SyncError/Code/unsupported`` for a store
    /// that seals its files, ``SyncError/Code/attachmentUnavailable`` when the file is not here
    /// and cannot be fetched now, ``SyncError/Code/attachmentMissing``,
    /// ``SyncError/Code/attachmentDamaged``), and what `body` throws. `body` runs on the
    /// caller's actor (`isolation`). A damaged file another hold keeps is not replaced while
    /// that hold lasts: this call throws ``SyncError/Code/attachmentDamaged`` meanwhile.
    public func withAttachmentFile<T>(_ attachment: Attachment, isolation: isolated (any Actor)? = #isolation,
                                      _ body: (URL) async throws -> T) async throws -> T {
        attachmentPins.hold(attachment.sha256)
        defer { attachmentPins.release(attachment.sha256) }
        let url = try await fileURL(attachment, ownHolds: 1)
        return try await body(url)
    }

    /// Fetches the attachment unless a file of its size is here. Returns whether it fetched
    /// (the bytes were checked against the hash as they arrived).
    ///
    /// A file here of another size than the reference's is removed only once its bytes prove
    /// it damaged: the reference may be the wrong one (a pulled record's, which anyone may
    /// have written), and the file the only good copy. A file whose size is its row's, or
    /// whose bytes hash to its name, is kept and the reference refused
    /// (``SyncError/Code/invalidValue``; a hashed file corrects its row's size). A damaged
    /// one waiting to upload, or held by anyone but the caller's own `ownHolds`, is kept and
    /// reported as ``SyncError/Code/attachmentDamaged``. A read that fails (too many open
    /// files, an I/O error) throws and removes nothing.
    @discardableResult
    private func ensureLocal(_ attachment: Attachment, files: any AttachmentFileStore, ownHolds: Int) async throws -> Bool {
        let hash = attachment.sha256
        let size = try await removingDamaged(attachment, in: files, ownHolds: ownHolds) { try files.size(of: hash) }
        if size == attachment.size { return false }
        if let size {
            let rowSize = try await store.read { txn in try AttachmentRow.find(txn, id: hash)?.size }
            if rowSize == size { throw Self.wrongSize(attachment, size) }
            if try await FileWork.run({ try Self.hashesToName(hash, in: files) }) {
                _ = try await observer.write { txn in try AttachmentRow.correctSize(hash, to: size, txn: txn) }
                throw Self.wrongSize(attachment, size)
            }
            guard try await removeFileUnlessPending(hash, in: files, ownHolds: ownHolds) else {
                throw SyncError(.attachmentDamaged, "the stored copy of attachment \(hash.prefix(12))… does not match its hash; it is kept: it waits to upload, or the app holds it")
            }
        }
        try await download(attachment, files: files)
        // The budget is kept after every download, never at the cost of the file just fetched.
        // A failed eviction is logged and reported (evictAttachments); the download stands.
        _ = try? await evictAttachments(keeping: hash)
        return true
    }

    /// A reference whose size is not that of the whole file here.
    private static func wrongSize(_ attachment: Attachment, _ size: Int64) -> SyncError {
        SyncError(.invalidValue, "attachment \(attachment.sha256.prefix(12))… is \(size) bytes here, the reference says \(attachment.size); the file is kept")
    }

    /// Whether the stored file's bytes hash to its name: `false` when they do not, or when a
    /// read proves them damaged (``SyncError/Code/attachmentDamaged``); any other failure to
    /// read them (a file gone, too many open files, an I/O error) is thrown, and proves nothing.
    static func hashesToName(_ hash: String, in files: any AttachmentFileStore) throws -> Bool {
        var hasher = AttachmentHasher()
        do {
            let reader = try files.reader(for: hash)
            var offset: Int64 = 0
            while offset < reader.size {
                let chunk = try reader.read(at: offset, count: AttachmentTransfer.chunkSize)
                if chunk.isEmpty { break }
                hasher.update(chunk)
                offset += Int64(chunk.count)
            }
        } catch let error as SyncError where error.code == .attachmentDamaged {
            return false
        }
        return hasher.finish() == hash
    }

    /// Runs `body` off the cooperative pool; when it finds the attachment's file damaged
    /// (``SyncError/Code/attachmentDamaged``, never any other failure to read it), removes
    /// the file unless it waits to upload or a hold other than the caller's `ownHolds` keeps
    /// it, and throws the error either way.
    func removingDamaged<T: Sendable>(_ attachment: Attachment, in files: any AttachmentFileStore, ownHolds: Int = 0,
                                      _ body: @escaping @Sendable () throws -> T) async throws -> T {
        do {
            return try await FileWork.run(body)
        } catch let error as SyncError where error.code == .attachmentDamaged {
            if (try? await removeFileUnlessPending(attachment.sha256, in: files, ownHolds: ownHolds)) != true {
                options.logger.warning("kept the damaged file of attachment \(attachment.sha256.prefix(12))…: it waits to upload, the app holds it, or it could not be removed (\(error.message))")
            }
            throw error
        }
    }

    /// Removes the attachment's file unless its `__attachments` row waits to upload or the
    /// app holds it (``withAttachmentFile(_:isolation:_:)``, beyond the caller's own
    /// `ownHolds`), in one transaction with that check: a record written meanwhile, by this
    /// process or another, either finds the file gone or leaves it be. A `local` row turns
    /// `remote` in the same transaction: the file is not here any more, so nothing (a
    /// refused record's recovery, an upload) takes it to be. Returns whether the file went.
    func removeFileUnlessPending(_ hash: String, in files: any AttachmentFileStore, ownHolds: Int = 0) async throws -> Bool {
        try await observer.write { txn -> Bool in
            let row = try AttachmentRow.find(txn, id: hash)
            guard row?.attachmentState != .pendingUpload else { return false }
            guard try self.attachmentPins.removeUnlessHeld(hash, beyond: ownHolds, { try files.remove(hash) }) else { return false }
            if var row, row.attachmentState == .local {
                row.state = AttachmentState.remote.rawValue
                try row.save(txn)
            }
            return true
        }
    }

    /// Reads a stored file whole, checking size and hash: ``SyncError/Code/attachmentDamaged``
    /// when the bytes do not hash to the name (the size alone without `check`, for a file
    /// checked as it was just written); ``SyncError/Code/invalidValue`` when they do, and
    /// the reference names another size (the reference is wrong, not the file).
    static func verifiedContents(of attachment: Attachment, in files: any AttachmentFileStore, keep: Bool = true,
                                 check: Bool = true) throws -> Data {
        let reader = try files.reader(for: attachment.sha256)
        var data = Data(capacity: keep ? Int(reader.size) : 0)
        var hasher = AttachmentHasher()
        var offset: Int64 = 0
        while offset < reader.size {
            let chunk = try reader.read(at: offset, count: AttachmentTransfer.chunkSize)
            if chunk.isEmpty { break }
            if check { hasher.update(chunk) }
            if keep { data.append(contentsOf: chunk) }
            offset += Int64(chunk.count)
        }
        let damaged = SyncError(.attachmentDamaged, "the stored copy of attachment \(attachment.sha256.prefix(12))… does not match its hash")
        if check {
            guard hasher.finish() == attachment.sha256 else { throw damaged }
            guard offset == attachment.size else { throw wrongSize(attachment, offset) }
        } else {
            guard offset == attachment.size else { throw damaged }
        }
        return data
    }

    /// Notes a read by the app, for the cache budget's least-recently-used order. The read
    /// verified the file against `attachment` (its hash and size), so the row takes that
    /// size when it says another (one a pulled reference gave it first).
    private func touch(_ attachment: Attachment) async throws {
        _ = try await observer.write { txn in
            guard var row = try AttachmentRow.find(txn, id: attachment.sha256) else { return }
            row.lastUsed = Timestamp.now().millisecondsSince1970
            row.size = attachment.size
            try row.save(txn)
        }
    }

    /// The store's attachment files, or ``SyncError/Code/unsupported`` when it keeps none.
    func attachmentFiles() throws -> any AttachmentFileStore {
        guard let files = store.attachmentFiles else {
            throw SyncError(.unsupported, "this local store keeps no attachment files")
        }
        return files
    }

    /// Removes what a crash or an unused staging left, when a context opens: temporary
    /// files; stored files no `__attachments` row names that are older than
    /// ``AttachmentOptions/orphanGrace`` (a younger one may be another process's attachment
    /// on its way into a record), none of them while a captured write the adapter refused is
    /// queued without its item (its row may reference any of them); and files whose own bytes prove
    /// them damaged, unless they wait to upload. A failed read proves nothing: a file that could not be read (too many
    /// open files, an I/O error, a permission, its modification time) is kept, as is a
    /// damaged one waiting to upload and one whose removal failed. Each kept file is logged,
    /// and the sweep's failures are ``SyncStatus/lastError`` until a push, pull or sync
    /// succeeds. Throws only when the store's rows cannot be read.
    func removeOrphanedAttachments() async throws {
        guard let files = store.attachmentFiles else { return }
        var kept: [SyncError] = []
        do {
            try await FileWork.run { try files.removeLeftovers() }
        } catch {
            kept.append(Self.fileFailure(error))
        }
        let inventory: AttachmentInventory
        do {
            inventory = try await FileWork.run { try files.inventory() }
        } catch {
            reportKept(kept + [Self.fileFailure(error)])
            return
        }
        kept += inventory.unreadable
        let stored = inventory.files
        if !stored.isEmpty {
            let (known, unreadWrite) = try await store.read { txn in
                (Set(try txn.records(in: AttachmentRow.table, matching: Query(Field(SystemField.id).isIn(stored.map { .string($0.sha256) }))).map(\.id)),
                 try Outbox.hasUnreadWrite(txn))
            }
            let cutoff = Timestamp.now().millisecondsSince1970 - Int64(options.attachments.orphanGrace.components.seconds * 1000)
            let old = stored.filter { !known.contains($0.sha256) && $0.modified.millisecondsSince1970 < cutoff }
            if unreadWrite, !old.isEmpty {
                // A row the app wrote that the store's adapter refused is queued as a failed
                // operation without its item: the files it references are not known for sure,
                // and any of these may be one (staged for it, and nowhere else).
                options.logger.notice("the attachment sweep kept \(old.count) file(s) no record names: a write the store's adapter refused waits in operationErrors(), and may reference them")
            }
            for file in old where !unreadWrite {
                let hash = file.sha256
                do {
                    // Removed in a transaction that finds no row and no unread write: a record
                    // another process wrote since, referencing the file, keeps it.
                    _ = try await observer.write { txn -> Bool in
                        guard try AttachmentRow.find(txn, id: hash) == nil, try !Outbox.hasUnreadWrite(txn) else { return false }
                        try files.remove(hash)
                        return true
                    }
                } catch {
                    kept.append(Self.fileFailure(error))
                }
            }
        }
        for file in inventory.damaged {
            do {
                // The files waiting to upload are read in the removal's own transaction, so
                // one whose record was written meanwhile is spared too.
                let removed = try await observer.write { txn -> Bool in
                    let pending = Set(try AttachmentRow.all(txn, Query(AttachmentRow.inState(.pendingUpload))).map(\.id))
                    return try files.removeDamaged(file, sparing: pending)
                }
                if removed {
                    options.logger.notice("removed the damaged attachment file \(file.name): \(file.error.message)")
                } else {
                    kept.append(file.error)
                }
            } catch {
                kept.append(Self.fileFailure(error))
            }
        }
        reportKept(kept)
    }

    /// Reports what the sweep kept rather than acted on: a log line each, and one
    /// ``SyncStatus/lastError`` that counts them and names the first.
    private func reportKept(_ kept: [SyncError]) {
        guard let first = kept.first else { return }
        for error in kept {
            options.logger.warning("the attachment sweep kept a file it could not read or remove: \(error)")
        }
        let summary = SyncError(first.code, "the attachment sweep kept \(kept.count) file(s) it could not read, or that are damaged but wait to upload, or could not be removed; the first: \(first.message)")
        statusState.update { $0.lastError = SyncFailure(error: summary, willRetry: false) }
    }

    /// A failure of the sweep's file work as a ``SyncError`` (a store's own, or a
    /// ``SyncError/Code/storageFailure`` naming the error's type).
    private static func fileFailure(_ error: any Error) -> SyncError {
        error as? SyncError ?? SyncError(.storageFailure, "the attachment sweep failed: \(type(of: error))", underlying: error)
    }
}

/// Sizes of the pieces attachments are read, written and sent in.
package enum AttachmentTransfer {
    /// Bytes read or written at a time (1 MiB).
    package static let chunkSize = 1 << 20
}

/// Runs blocking file work on a dispatch thread, off Swift's cooperative pool.
enum FileWork {
    static func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global(qos: .utility).async {
                continuation.resume(with: Result { try body() })
            }
        }
    }
}
