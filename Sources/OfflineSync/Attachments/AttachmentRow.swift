/// Where an attachment's bytes are, from this device's point of view.
public enum AttachmentState: String, Sendable, Hashable, Codable {
    /// The bytes are only on this device: they go up before any change referencing them is
    /// pushed, and are never evicted.
    case pendingUpload
    /// The bytes are on this device and on the server: they may be evicted by the cache
    /// budget (unless pinned) and fetched again.
    case local
    /// The bytes are on the server only: fetched on first access.
    case remote
}

/// A row of `__attachments`: one per attachment a local record references (or that this
/// device downloaded), keyed by hash.
struct AttachmentRow: StoredRow {
    static let table = "__attachments"
    enum CodingKeys: String, CodingKey { case id, size, contentType, state, pinned, lastUsed, uploaded }

    /// The hash.
    var id: String
    var size: Int64
    var contentType: String
    /// An ``AttachmentState`` raw value.
    var state: String
    /// Never evicted while set.
    var pinned: Bool
    /// Milliseconds since 1970 of the last read by the app (the cache budget evicts the
    /// least recently used first).
    var lastUsed: Int64
    /// Bytes the server has confirmed for a pending upload (progress; resumption asks the
    /// server again).
    var uploaded: Int64

    static let schema = TableSchema(table, fields: [
        column(.size, .int),
        column(.contentType, .string),
        column(.state, .string, indexed: true),
        column(.pinned, .bool),
        column(.lastUsed, .int, indexed: true),
        column(.uploaded, .int),
    ], undeclaredFields: .reject)

    init(_ attachment: Attachment, state: AttachmentState, now: Timestamp) {
        id = attachment.sha256
        size = attachment.size
        contentType = attachment.contentType
        self.state = state.rawValue
        pinned = false
        lastUsed = now.millisecondsSince1970
        uploaded = 0
    }

    var attachmentState: AttachmentState { AttachmentState(rawValue: state) ?? .remote }

    /// Rows in one state.
    static func inState(_ state: AttachmentState) -> QueryPredicate { field(.state) == .string(state.rawValue) }
}

extension AttachmentRow {
    /// Records the attachments a written record references, in the write's transaction: a
    /// hash the store holds a file of and no row yet is a new attachment, waiting to upload;
    /// one it holds nothing of is the server's (copied from a pulled record, or named by
    /// hand: the server decides at push whether this identity may use it).
    ///
    /// Throws ``SyncError/Code/invalidValue`` when a reference's size differs from the file's
    /// or from the row's: one hash has one size.
    static func note(_ attachments: [Attachment], txn: any LocalWriteTransaction,
                     files: (any AttachmentFileStore)?, now: Timestamp) throws {
        for attachment in attachments {
            if let row = try find(txn, id: attachment.sha256) {
                guard row.size == attachment.size else { throw sizeMismatch(attachment, row.size) }
                continue
            }
            if let files, let size = try files.size(of: attachment.sha256) {
                guard size == attachment.size else { throw sizeMismatch(attachment, size) }
                try AttachmentRow(attachment, state: .pendingUpload, now: now).save(txn)
            } else {
                try AttachmentRow(attachment, state: .remote, now: now).save(txn)
            }
        }
    }

    /// After the remote refused a record as ``SyncError/Code/attachmentMissing``: each of
    /// `attachments` this device holds as `local` — here, and taken to be on the server,
    /// which says otherwise (its copy was collected, or is not this identity's) — waits to
    /// upload again, so retrying the record uploads the file first. A `remote` one has no
    /// file here: the app adds its bytes again (``SyncContext/addAttachment(_:contentType:fileName:)``).
    static func uploadAgain(_ attachments: [Attachment], txn: any LocalWriteTransaction) throws {
        for attachment in attachments {
            guard var row = try find(txn, id: attachment.sha256), row.attachmentState == .local, row.size == attachment.size else {
                continue
            }
            row.state = AttachmentState.pendingUpload.rawValue
            row.uploaded = 0
            try row.save(txn)
        }
    }

    private static func sizeMismatch(_ attachment: Attachment, _ size: Int64) -> SyncError {
        SyncError(.invalidValue, "attachment \(attachment.sha256.prefix(12))… is \(size) bytes, the reference says \(attachment.size)")
    }

    /// Records the attachments pulled records reference that this device has no row of: on
    /// the server, not downloaded. A malformed reference from the remote is left as a plain
    /// field (the pull does not fail on it), and the record's well-formed ones are noted all
    /// the same. Returns every attachment the records reference.
    @discardableResult
    static func noteRemote(in records: [Record], txn: any LocalWriteTransaction) throws -> [Attachment] {
        var found: [String: Attachment] = [:]
        for record in records where record.fields.values.contains(where: \.mayHoldAttachment) {
            for attachment in Attachment.scan(record.fields).references { found[attachment.sha256] = attachment }
        }
        guard !found.isEmpty else { return [] }
        let hashes = Array(found.keys)
        let known = Set(try txn.records(in: table, matching: Query(Field(SystemField.id).isIn(hashes.map(Value.string)))).map(\.id))
        let now = Timestamp.now()
        for hash in hashes where !known.contains(hash) {
            try AttachmentRow(found[hash]!, state: .remote, now: now).save(txn)
        }
        return Array(found.values)
    }
}
