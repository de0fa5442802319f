import OfflineSync

/// Bytes one identity's uploads hold (`__srv_att_usage`), keyed by identity: the sum over its
/// uploads of the larger of what arrived and what was declared, and how many of them are
/// unfinished. Kept in the transactions that change an upload, so a quota check reads one row
/// however many files the identity has.
struct AttachmentUsageRow: StoredRow {
    static let table = "__srv_att_usage"
    enum CodingKeys: String, CodingKey { case id, bytes, open }

    var id: String
    var bytes: Int64
    /// How many of the identity's uploads are unfinished; absent on rows written before it was
    /// kept (it is counted from the uploads once, then kept).
    var open: Int64? = nil

    static let schema = TableSchema(table, fields: [column(.bytes, .int), column(.open, .int)], undeclaredFields: .reject)
}

extension AttachmentUploadRow {
    /// What the upload counts against its identity's quota.
    var charged: Int64 { max(received, length, 0) }
}

extension OfflineSyncService {
    /// `identity`'s usage row. A store written before usage rows existed has none: the bytes
    /// are summed from the uploads once (and saved), and kept from then on.
    private func attachmentUsageRow(_ identity: String, _ txn: any LocalWriteTransaction) throws -> AttachmentUsageRow {
        if let row = try AttachmentUsageRow.find(txn, id: identity) { return row }
        let used = try AttachmentUploadRow.all(txn, Query(AttachmentUploadRow.field(.identity) == .string(identity)))
            .reduce(Int64(0)) { $0 + $1.charged }
        let row = AttachmentUsageRow(id: identity, bytes: used)
        try row.save(txn)
        return row
    }

    /// The bytes `identity`'s uploads hold.
    func attachmentUsage(_ identity: String, _ txn: any LocalWriteTransaction) throws -> Int64 {
        try attachmentUsageRow(identity, txn).bytes
    }

    /// Adds `delta` (negative: frees) to `identity`'s usage, in the transaction that changes
    /// its upload.
    func chargeAttachment(_ identity: String, _ delta: Int64, _ txn: any LocalWriteTransaction) throws {
        guard delta != 0 else { return }
        var row = try attachmentUsageRow(identity, txn)
        row.bytes = max(0, row.bytes + delta)
        try row.save(txn)
    }

    /// How many unfinished uploads `identity` has, as the store holds them now: the kept count,
    /// or, on a row written before it was kept, a count of its uploads (not saved here).
    private func openUploads(_ identity: String, _ row: AttachmentUsageRow, _ txn: any LocalWriteTransaction) throws -> Int64 {
        if let open = row.open { return open }
        let counted = try AttachmentUploadRow.count(txn, AttachmentUploadRow.field(.identity) == .string(identity)
                                                        && AttachmentUploadRow.field(.complete) == false)
        return Int64(counted)
    }

    /// Throws ``SyncError/Code/limitExceeded`` when `identity` has
    /// ``AttachmentLimits/maximumOpenUploads`` unfinished uploads already: called in the
    /// transaction that would create one more, before it does.
    func checkOpenUploads(_ identity: String, _ txn: any LocalWriteTransaction) throws {
        let row = try attachmentUsageRow(identity, txn)
        let open = try openUploads(identity, row, txn)
        let limit = Int64(max(1, attachmentLimits.maximumOpenUploads))
        if open >= limit {
            throw SyncError(.limitExceeded, "this identity has \(open) unfinished uploads, the most it may have at once (\(limit)): "
                + "finish or cancel one first; one left untouched is collected after the grace period")
        }
    }

    /// Counts `delta` more (or, negative, fewer) unfinished uploads for `identity`, in the
    /// transaction that created, finished or removed one, after it did. On a row written
    /// before the count was kept, the count is taken from the uploads as they now stand (the
    /// change included) rather than moved by `delta`.
    func countOpenUploads(_ identity: String, _ delta: Int64, _ txn: any LocalWriteTransaction) throws {
        guard delta != 0 else { return }
        var row = try attachmentUsageRow(identity, txn)
        if let open = row.open {
            row.open = max(0, open + delta)
        } else {
            row.open = try openUploads(identity, row, txn)
        }
        try row.save(txn)
    }

    /// Throws ``SyncError/Code/limitExceeded`` when `adding` more bytes would take `identity`
    /// past ``AttachmentLimits/quotaPerIdentity``.
    func checkQuota(_ identity: String, adding: Int64, _ txn: any LocalWriteTransaction) throws {
        let used = try attachmentUsage(identity, txn)
        let quota = attachmentLimits.quotaPerIdentity
        if used + max(0, adding) > quota {
            throw SyncError(.limitExceeded, "this upload would take the identity past its attachment quota of \(quota) bytes (\(used) in use)")
        }
    }

    /// Stores a whole attachment that fits in one piece (``attachmentPiece``) in one
    /// transaction: what ``beginAttachmentUpload(claims:hash:length:)``,
    /// ``appendAttachment(claims:hash:offset:bytes:)`` and ``finishAttachmentUpload(claims:hash:)``
    /// do together, for a small file sent in one request. Returns the upload's state: complete,
    /// or where an earlier upload of the caller's stands (a caller whose offset is not 0 is
    /// told so, and nothing is stored).
    ///
    /// Throws what those three throw: ``SyncError/Code/attachmentDamaged`` when the bytes do not
    /// hash to `hash` (nothing is kept), ``SyncError/Code/limitExceeded`` past a limit, and
    /// ``SyncError/Code/invalidValue`` when an upload of it was created with another length.
    public func storeAttachment(claims: Claims, hash: String, bytes: [UInt8]) async throws -> AttachmentUploadState {
        guard Attachment.isHash(hash) else { throw SyncError(.invalidValue, "an attachment is named by 64 lowercase hexadecimal digits") }
        guard bytes.count <= Self.attachmentPiece else {
            throw SyncError(.invalidValue, "a whole attachment in one piece has at most \(Self.attachmentPiece) bytes")
        }
        try checkAttachmentSize(Int64(bytes.count))
        guard AttachmentHasher.hash(bytes) == hash else {
            throw SyncError(.attachmentDamaged, "the uploaded bytes do not hash to \(hash); nothing was kept")
        }
        let identity = claims.identity.text, key = AttachmentUploadRow.key(identity: identity, hash: hash)
        let size = Int64(bytes.count)
        return try await store.write { txn in
            let existing = try AttachmentUploadRow.find(txn, id: key)
            if let existing, existing.complete || existing.received > 0 {
                return AttachmentUploadState(offset: existing.received, complete: existing.complete)
            }
            let held = try AttachmentFileRow.find(txn, id: hash) != nil
            if existing == nil, held, try self.mayRead(attachment: hash, claims: claims, txn) {
                return AttachmentUploadState(offset: size, complete: true)
            }
            if let existing, existing.length >= 0, existing.length != size {
                throw SyncError(.invalidValue, "the upload was created with a length of \(existing.length) bytes; these are \(size): nothing was kept")
            }
            try self.checkQuota(identity, adding: size - (existing?.charged ?? 0), txn)
            // A new run, its pieces under a name of their own (an earlier run's may still be
            // being removed).
            let row = AttachmentUploadRow.newRun(key: key, identity: identity, hash: hash, received: size, length: size,
                                                 complete: true, touchedAt: Timestamp.now())
            if !held {
                try AttachmentChunkRow(id: AttachmentChunkRow.key(upload: row.chunkOwner, offset: 0), upload: row.chunkOwner, offset: 0,
                                       bytes: bytes).save(txn)
                try AttachmentFileRow(id: hash, size: size, holder: row.chunkOwner, completedAt: Timestamp.now()).save(txn)
            }
            try row.save(txn)
            try self.chargeAttachment(identity, size - (existing?.charged ?? 0), txn)
            // An unfinished upload of it with nothing received is finished by this one.
            if existing != nil { try self.countOpenUploads(identity, -1, txn) }
            return AttachmentUploadState(offset: size, complete: true)
        }
    }
}
