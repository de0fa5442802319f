import Foundation
import OfflineSync

// Attachment bytes in the service's own store: each identity's upload is a row and its
// bytes are chunk rows, written one transaction per piece, so an upload cut off anywhere
// resumes from the last committed piece and several instances over one PostgreSQL database
// share every byte (a backup of the store holds them all). A finished upload whose hash
// checks becomes the file (its chunks are the file's bytes) or, when the server already held
// it, the caller's grant, its duplicate bytes dropped.

extension OfflineSyncService {
    /// Where the caller's upload of `hash` stands, or `nil` (404) when the caller has none and
    /// may not read a whole file of that hash: "exists, not yours" and "does not exist" are
    /// one answer.
    public func attachmentUploadState(claims: Claims, hash: String) async throws -> AttachmentUploadState? {
        guard Attachment.isHash(hash) else { return nil }
        return try await store.read { txn in try self.uploadState(claims: claims, hash: hash, txn) }
    }

    /// ``attachmentUploadState(claims:hash:)`` with the upload's length when it is known: the
    /// length the creation declared, or the file's size once complete (what an offset
    /// retrieval echoes as `Upload-Length`).
    public func attachmentUploadProgress(claims: Claims, hash: String) async throws -> (state: AttachmentUploadState, length: Int64?)? {
        guard Attachment.isHash(hash) else { return nil }
        return try await store.read { txn in try self.uploadProgress(claims: claims, hash: hash, txn) }
    }

    private func uploadState(claims: Claims, hash: String, _ txn: any LocalReadTransaction) throws -> AttachmentUploadState? {
        try uploadProgress(claims: claims, hash: hash, txn)?.state
    }

    private func uploadProgress(claims: Claims, hash: String, _ txn: any LocalReadTransaction) throws -> (state: AttachmentUploadState, length: Int64?)? {
        if let upload = try AttachmentUploadRow.find(txn, id: AttachmentUploadRow.key(identity: claims.identity.text, hash: hash)) {
            return (AttachmentUploadState(offset: upload.received, complete: upload.complete), upload.length >= 0 ? upload.length : nil)
        }
        if let file = try AttachmentFileRow.find(txn, id: hash), try mayRead(attachment: hash, claims: claims, txn) {
            return (AttachmentUploadState(offset: file.size, complete: true), file.size)
        }
        return nil
    }

    /// Starts (or finds) the caller's upload of `hash`, of `length` bytes when known. A file
    /// the caller may already read is complete at once: its bytes are not sent again.
    ///
    /// Throws ``SyncError/Code/invalidValue`` for a malformed hash and
    /// ``SyncError/Code/limitExceeded`` for a length over ``AttachmentLimits/maximumSize``,
    /// past the caller's ``AttachmentLimits/quotaPerIdentity``, or when the caller has
    /// ``AttachmentLimits/maximumOpenUploads`` unfinished uploads already, before any byte is
    /// stored.
    public func beginAttachmentUpload(claims: Claims, hash: String, length: Int64?) async throws -> AttachmentUploadState {
        guard Attachment.isHash(hash) else { throw SyncError(.invalidValue, "an attachment is named by 64 lowercase hexadecimal digits") }
        if let length { try checkAttachmentSize(length) }
        return try await store.write { txn in
            if let state = try self.uploadState(claims: claims, hash: hash, txn) { return state }
            let identity = claims.identity.text
            try self.checkOpenUploads(identity, txn)
            try self.checkQuota(identity, adding: length ?? 0, txn)
            // A new run: its pieces are named after it, so an earlier run's, which may still be
            // being removed (``removeUpload(_:if:)``), never mix with its own.
            let row = AttachmentUploadRow.newRun(key: AttachmentUploadRow.key(identity: identity, hash: hash), identity: identity,
                                                 hash: hash, received: 0, length: length ?? -1, complete: false, touchedAt: Timestamp.now())
            try row.save(txn)
            try self.chargeAttachment(identity, row.charged, txn)
            try self.countOpenUploads(identity, 1, txn)
            return AttachmentUploadState(offset: 0, complete: false)
        }
    }

    func checkAttachmentSize(_ size: Int64) throws {
        guard size >= 0 else { throw SyncError(.invalidValue, "an attachment's length cannot be negative") }
        guard size <= attachmentLimits.maximumSize else {
            throw SyncError(.limitExceeded, "an attachment may have at most \(attachmentLimits.maximumSize) bytes; this one has \(size)")
        }
    }

    /// Appends `bytes` at `offset` to the caller's upload of `hash`, in one transaction, and
    /// returns the new offset. Throws ``SyncError/Code/conflict`` when `offset` is not the
    /// upload's (the answer to a client that lost track: ask the state again),
    /// ``SyncError/Code/notFound`` when the caller has no upload of it, and
    /// ``SyncError/Code/limitExceeded`` past the declared length, the size limit or the
    /// identity's quota; a refused append stores nothing.
    ///
    /// The quota is checked here, in the transaction that grows the upload, against the usage
    /// the append leaves: an upload created without a length reserves nothing, so each of its
    /// appends is charged as it arrives (one with a declared length was charged all of it when
    /// created, and its appends add nothing). Transactions of one store are serializable, so
    /// concurrent appends and uploads of one identity cannot together pass the quota.
    public func appendAttachment(claims: Claims, hash: String, offset: Int64, bytes: [UInt8]) async throws -> Int64 {
        let key = AttachmentUploadRow.key(identity: claims.identity.text, hash: hash)
        let maximum = attachmentLimits.maximumSize
        let (end, run) = try await store.write { txn -> (Int64, String?) in
            guard var upload = try AttachmentUploadRow.find(txn, id: key) else {
                throw SyncError(.notFound, "no upload of this attachment")
            }
            guard !upload.complete, offset == upload.received else {
                throw SyncError(.conflict, "the upload is at offset \(upload.received)\(upload.complete ? " and complete" : "")")
            }
            let end = upload.received + Int64(bytes.count)
            guard end <= maximum, upload.length < 0 || end <= upload.length else {
                throw SyncError(.limitExceeded, "the upload's bytes go past \(upload.length < 0 ? "the size limit of \(maximum)" : "its declared length of \(upload.length)")")
            }
            guard !bytes.isEmpty else { return (upload.received, nil) }
            let grows = max(end, upload.length, 0) - upload.charged
            if grows > 0 { try self.checkQuota(upload.identity, adding: grows, txn) }
            let owner = upload.chunkOwner
            try AttachmentChunkRow(id: AttachmentChunkRow.key(upload: owner, offset: offset), upload: owner, offset: offset, bytes: bytes).save(txn)
            let charged = upload.charged
            upload.received = end
            upload.touchedAt = Timestamp.now()
            try upload.save(txn)
            try self.chargeAttachment(upload.identity, upload.charged - charged, txn)
            return (end, upload.run)
        }
        uploadHashes.committed(key, run: run, offset: offset, bytes: bytes)
        return end
    }

    /// Finishes the caller's upload of `hash`: checks that its bytes make the declared length
    /// and hash to `hash`, then keeps them as the file, or drops them when the file is already
    /// held. Bytes short of the declared length throw ``SyncError/Code/invalidValue`` and keep
    /// the upload as it is (the client resumes it); bytes that do not hash to `hash` remove the
    /// upload and throw ``SyncError/Code/attachmentDamaged``. An append or a new run that
    /// lands between the hash and the completing write throws ``SyncError/Code/conflict`` and
    /// completes nothing: the file is exactly the bytes that were hashed.
    public func finishAttachmentUpload(claims: Claims, hash: String) async throws -> AttachmentUploadState {
        let key = AttachmentUploadRow.key(identity: claims.identity.text, hash: hash)
        guard let upload = try await store.read({ txn in try AttachmentUploadRow.find(txn, id: key) }) else {
            throw SyncError(.notFound, "no upload of this attachment")
        }
        if upload.complete { return AttachmentUploadState(offset: upload.received, complete: true) }
        if upload.length >= 0, upload.received < upload.length {
            throw SyncError(.invalidValue, "the upload holds \(upload.received) of its declared \(upload.length) bytes; it is kept, to resume from offset \(upload.received)")
        }
        // The hash of exactly the `received` bytes read above: the running hash only when it
        // stands at that offset in this run, else the pieces read back up to it (an append
        // committed since is not hashed; the completing write below then refuses).
        let received = upload.received
        let computed: String?
        if let followed = uploadHashes.finish(key, run: upload.run, received: received) {
            computed = followed
        } else {
            var hasher = AttachmentHasher()
            try await readChunks(of: upload.chunkOwner, from: 0, until: received) { hasher.update($0); return true }
            computed = hasher.count == received ? hasher.finish() : nil
        }
        guard computed == hash else {
            let run = upload.run
            try await removeUpload(key, if: { $0.run == run })
            throw SyncError(.attachmentDamaged, "the uploaded bytes do not hash to \(hash); the upload is removed")
        }
        let completed = try await store.write { txn -> (owner: String, duplicate: Bool)? in
            guard var row = try AttachmentUploadRow.find(txn, id: key) else { throw SyncError(.notFound, "no upload of this attachment") }
            // Another finish of the same bytes got here first: done.
            if row.complete, row.run == upload.run, row.received == received { return nil }
            // The bytes are no longer the ones hashed: an append (or a new run) came between.
            guard !row.complete, row.run == upload.run, row.received == received else {
                throw SyncError(.conflict, "the upload changed while it was being finished; it is at offset \(row.received)\(row.complete ? " and complete" : "")")
            }
            row.complete = true
            row.length = received
            row.touchedAt = Timestamp.now()
            try row.save(txn)
            try self.countOpenUploads(row.identity, -1, txn)
            if try AttachmentFileRow.find(txn, id: hash) != nil { return (row.chunkOwner, true) }
            try AttachmentFileRow(id: hash, size: received, holder: row.chunkOwner, completedAt: Timestamp.now()).save(txn)
            return (row.chunkOwner, false)
        }
        if let completed, completed.duplicate { try await removeChunks(of: completed.owner) }
        return AttachmentUploadState(offset: received, complete: true)
    }

    /// Drops the caller's unfinished upload of `hash` and its bytes; `false` when it has none.
    /// A finished one is kept (it is the caller's grant).
    public func cancelAttachmentUpload(claims: Claims, hash: String) async throws -> Bool {
        try await removeUpload(AttachmentUploadRow.key(identity: claims.identity.text, hash: hash))
    }

    /// The attachment when the caller may read it, to read with
    /// ``readAttachment(_:from:_:)``; `nil` when absent or unreadable (one answer). One look-up
    /// serves a download's headers and its bytes.
    ///
    /// Its media type is the one declared by the first reference, in key order, from a row
    /// the caller may read: rows may declare different types for the same bytes, and a type
    /// declared by a row the caller may not read is never told. An uploader that may read no
    /// such row gets none.
    public func readableAttachment(claims: Claims, hash: String) async throws -> ReadableAttachment? {
        guard Attachment.isHash(hash) else { return nil }
        return try await store.read { txn in
            guard let file = try AttachmentFileRow.find(txn, id: hash) else { return nil }
            let reference = try self.firstReadableReference(to: hash, claims: claims, txn)
            guard try reference != nil || self.uploadedWhole(hash, claims: claims, txn) else { return nil }
            return ReadableAttachment(size: file.size, holder: file.holder,
                                      contentType: reference.flatMap { self.declaredMediaType(of: $0.reference, in: $0.row) })
        }
    }

    /// Reads the attachment from `offset` on, piece by piece, handing each piece to `body`
    /// until it returns `false` or the file ends. Returns `false` (and reads nothing) when
    /// the caller may not read it or it does not exist.
    public func readAttachment(claims: Claims, hash: String, from offset: Int64,
                               _ body: ([UInt8]) async throws -> Bool) async throws -> Bool {
        guard let file = try await readableAttachment(claims: claims, hash: hash) else { return false }
        try await readAttachment(file, from: offset, body)
        return true
    }

    /// Reads a file ``readableAttachment(claims:hash:)`` found, as
    /// ``readAttachment(claims:hash:from:_:)`` does.
    public func readAttachment(_ file: ReadableAttachment, from offset: Int64, _ body: ([UInt8]) async throws -> Bool) async throws {
        guard offset < file.size else { return }
        try await readChunks(of: file.holder, from: offset, until: file.size, body)
    }

    /// Hands the upload's bytes from `offset` to `body`, a piece per read transaction, and
    /// stops at `end` when given: no byte at or past it is handed over, and no piece past it
    /// is looked up. One piece is held at a time: each is let go before the next is read.
    func readChunks(of upload: String, from offset: Int64, until end: Int64? = nil, _ body: ([UInt8]) async throws -> Bool) async throws {
        var position = offset
        // Pieces are contiguous and keyed by their offset, so each next one is looked up by
        // its key (no ordered query, which SQLite answered by sorting whole rows, bytes and
        // all). The first is the piece starting at `offset`, or else the last one before it.
        var first = true
        while end.map({ position < $0 }) ?? true {
            let at = position, isFirst = first
            let chunk = try await store.read { txn -> AttachmentChunkRow? in
                if let exact = try AttachmentChunkRow.find(txn, id: AttachmentChunkRow.key(upload: upload, offset: at)) { return exact }
                guard isFirst else { return nil }
                return try AttachmentChunkRow.first(txn, Query(AttachmentChunkRow.field(.upload) == .string(upload) && AttachmentChunkRow.field(.offset) <= .int(at),
                                                               order: [AttachmentChunkRow.sorted(.offset, ascending: false)], limit: 1))
            }
            guard let chunk else { return }
            first = false
            let skip = Int(position - chunk.offset)
            // Nothing at or past `end` is handed over. (An upload's pieces end where its offsets
            // stand, so a finish's `end`, an offset it read, or a file's size cuts none.)
            let stop = end.map { Int(min(Int64(chunk.bytes.count), max(0, $0 - chunk.offset))) } ?? chunk.bytes.count
            if skip < stop {
                guard try await body(skip == 0 && stop == chunk.bytes.count ? chunk.bytes : Array(chunk.bytes[skip..<stop])) else { return }
            }
            position = chunk.offset + Int64(chunk.bytes.count)
        }
    }

    /// Removes the unfinished upload `key` when `condition` holds for it as stored now, and
    /// returns whether it did. Its row goes first, with its charge, in one transaction: from
    /// then on no append finds it, so no piece can be stored that no row owns. Then its
    /// pieces go, by the name of that run's pieces, which a new run of the same upload
    /// (created meanwhile) does not share. A finished upload is never removed here: its
    /// pieces may be the file's.
    @discardableResult
    private func removeUpload(_ key: String, if condition: @escaping @Sendable (AttachmentUploadRow) -> Bool = { _ in true }) async throws -> Bool {
        let removed = try await store.write { txn -> AttachmentUploadRow? in
            guard let upload = try AttachmentUploadRow.find(txn, id: key), !upload.complete, condition(upload) else { return nil }
            _ = try txn.delete(id: key, in: AttachmentUploadRow.table)
            try self.chargeAttachment(upload.identity, -upload.charged, txn)
            try self.countOpenUploads(upload.identity, -1, txn)
            return upload
        }
        guard let removed else { return false }
        uploadHashes.forget(key)
        try await removeChunks(of: removed.chunkOwner)
        return true
    }

    /// Deletes an upload's chunks, a few at a time (each may be a megabyte).
    func removeChunks(of upload: String) async throws {
        while true {
            let removed = try await store.write { txn -> Int in
                let ids = try txn.records(in: AttachmentChunkRow.table, matching: Query(AttachmentChunkRow.field(.upload) == .string(upload), limit: 64)).map(\.id)
                return ids.isEmpty ? 0 : try txn.delete(ids: ids, in: AttachmentChunkRow.table)
            }
            if removed == 0 { return }
        }
    }

    /// Collects attachments no row references whose upload finished before `now` minus
    /// ``AttachmentLimits/grace``, and unfinished uploads untouched for as long. An upload that
    /// is still receiving bytes is never collected. Returns how many files and uploads went.
    @discardableResult
    public func pruneAttachments(now: Timestamp = .now()) async throws -> Int {
        let cutoff = Timestamp(millisecondsSince1970: now.millisecondsSince1970 - attachmentLimits.grace.milliseconds)
        var removed = 0
        let stale = try await store.read { txn in
            try AttachmentUploadRow.all(txn, Query(AttachmentUploadRow.field(.complete) == false && AttachmentUploadRow.field(.touchedAt) < .date(cutoff)))
        }
        for upload in stale {
            // Checked again in the removing transaction: the upload may have been resumed, or
            // finished, or cancelled and created anew, since.
            let run = upload.run
            if try await removeUpload(upload.id, if: { $0.run == run && $0.touchedAt < cutoff }) { removed += 1 }
        }
        let files = try await store.read { txn in
            try AttachmentFileRow.all(txn, Query(AttachmentFileRow.field(.completedAt) < .date(cutoff))).filter { file in
                try txn.first(in: AttachmentReferenceRow.table, matching: Query(AttachmentReferenceRow.field(.hash) == .string(file.id), limit: 1)) == nil
            }
        }
        for file in files {
            // Checked again in the deleting transaction: a push may have referenced it since.
            let gone = try await store.write { txn -> Bool in
                guard try txn.first(in: AttachmentReferenceRow.table, matching: Query(AttachmentReferenceRow.field(.hash) == .string(file.id), limit: 1)) == nil
                else { return false }
                _ = try txn.delete(id: file.id, in: AttachmentFileRow.table)
                // The finished uploads of it are its grants; another identity's unfinished
                // upload of the same hash is its own (with pieces of its own), and stays.
                let grants = try AttachmentUploadRow.all(txn, Query(AttachmentUploadRow.field(.hash) == .string(file.id)
                                                                    && AttachmentUploadRow.field(.complete) == true))
                _ = try txn.delete(ids: grants.map(\.id), in: AttachmentUploadRow.table)
                for grant in grants { try self.chargeAttachment(grant.identity, -grant.charged, txn) }
                return true
            }
            guard gone else { continue }
            try await removeChunks(of: file.holder)
            removed += 1
        }
        return removed
    }
}

extension Duration {
    /// Whole milliseconds.
    var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}
