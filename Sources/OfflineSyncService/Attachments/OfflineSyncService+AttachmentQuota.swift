import OfflineSync

/// Bytes one identity's uploads hold (`__srv_att_usage`), keyed by identity: the sum over its
/// uploads of the larger of what arrived and what was declared. Kept in the transactions that
/// change an upload, so a quota check reads one row however many files the identity has.
struct AttachmentUsageRow: StoredRow {
    static let table = "__srv_att_usage"
    enum CodingKeys: String, CodingKey { case id, bytes }

    var id: String
    var bytes: Int64

    static let schema = TableSchema(table, fields: [column(.bytes, .int)], undeclaredFields: .reject)
}

extension AttachmentUploadRow {
    /// What the upload counts against its identity's quota.
    var charged: Int64 { max(received, length, 0) }
}

extension OfflineSyncService {
    /// The bytes `identity`'s uploads hold. A store written before usage rows existed has
    /// none: the sum is taken from the uploads once, and kept from then on.
    func attachmentUsage(_ identity: String, _ txn: any LocalWriteTransaction) throws -> Int64 {
        if let row = try AttachmentUsageRow.find(txn, id: identity) { return row.bytes }
        let used = try AttachmentUploadRow.all(txn, Query(AttachmentUploadRow.field(.identity) == .string(identity)))
            .reduce(Int64(0)) { $0 + $1.charged }
        try AttachmentUsageRow(id: identity, bytes: used).save(txn)
        return used
    }

    /// Adds `delta` (negative: frees) to `identity`'s usage, in the transaction that changes
    /// its upload.
    func chargeAttachment(_ identity: String, _ delta: Int64, _ txn: any LocalWriteTransaction) throws {
        guard delta != 0 else { return }
        let used = try attachmentUsage(identity, txn)
        try AttachmentUsageRow(id: identity, bytes: max(0, used + delta)).save(txn)
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
    /// hash to `hash` (nothing is kept), ``SyncError/Code/limitExceeded`` past a limit.
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
                throw SyncError(.limitExceeded, "the upload's bytes do not make its declared length of \(existing.length)")
            }
            try self.checkQuota(identity, adding: size - (existing?.charged ?? 0), txn)
            if !held {
                try AttachmentChunkRow(id: AttachmentChunkRow.key(upload: key, offset: 0), upload: key, offset: 0, bytes: bytes).save(txn)
                try AttachmentFileRow(id: hash, size: size, holder: key, completedAt: Timestamp.now()).save(txn)
            }
            try AttachmentUploadRow(id: key, identity: identity, hash: hash, received: size, length: size, complete: true,
                                    touchedAt: Timestamp.now()).save(txn)
            try self.chargeAttachment(identity, size - (existing?.charged ?? 0), txn)
            return AttachmentUploadState(offset: size, complete: true)
        }
    }
}
