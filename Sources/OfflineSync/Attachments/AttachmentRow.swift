/// Where an attachment's bytes are, from this device's point of view.
///
/// New cases arrive in minor releases (Docs/Versioning.md): switch over it with an
/// `@unknown default:` case.
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
    /// A row that takes the file for the server's (`remote`: a pulled record named it first)
    /// while a file of the reference's size is here waits to upload from now on: the write is
    /// this device's own, and where its reference and the file agree on a size, that size
    /// wins over the one the first reference gave. A file that cannot be read now changes
    /// nothing.
    ///
    /// Every reference that can be recorded is, then the first that cannot is thrown:
    /// ``SyncError/Code/invalidValue`` when a reference's size differs from the file's or
    /// from the row's (one hash has one size). A local write rolls back whole on it; a
    /// captured change that is refused (``CapturedChange``) keeps the rows of its other
    /// references, so their files are not taken for orphans.
    static func note(_ attachments: [Attachment], txn: any LocalWriteTransaction,
                     files: (any AttachmentFileStore)?, now: Timestamp) throws {
        var refused: SyncError?
        for attachment in attachments {
            do {
                try noteOne(attachment, txn: txn, files: files, now: now)
            } catch let error as SyncError where error.code == .invalidValue {
                refused = refused ?? error
            }
        }
        if let refused { throw refused }
    }

    private static func noteOne(_ attachment: Attachment, txn: any LocalWriteTransaction,
                                files: (any AttachmentFileStore)?, now: Timestamp) throws {
        if var row = try find(txn, id: attachment.sha256) {
            // Only a `remote` row asks for the file: the others are here already.
            if row.attachmentState == .remote, let files, let stored = try? files.size(of: attachment.sha256),
               stored == attachment.size {
                row.size = stored
                row.state = AttachmentState.pendingUpload.rawValue
                row.uploaded = 0
                try row.save(txn)
                return
            }
            guard row.size == attachment.size else { throw sizeMismatch(attachment, row.size) }
            return
        }
        if let files, let size = try files.size(of: attachment.sha256) {
            guard size == attachment.size else { throw sizeMismatch(attachment, size) }
            try AttachmentRow(attachment, state: .pendingUpload, now: now).save(txn)
        } else {
            try AttachmentRow(attachment, state: .remote, now: now).save(txn)
        }
    }

    /// After the remote refused a record as ``SyncError/Code/attachmentMissing``: each of
    /// `attachments` this device holds as `local` — here, and taken to be on the server,
    /// which says otherwise (its copy was collected, or is not this identity's) — waits to
    /// upload again, so retrying the record uploads the file first. Only a file still here
    /// whole (its stored size the row's, read in this transaction) does: one that is gone, or
    /// whose header proves it damaged, turns `remote`, and the app adds its bytes again
    /// (``SyncContext/addAttachment(_:contentType:fileName:)``), as for a `remote` one. A file
    /// that cannot be read now stays `local`: the next refusal looks again.
    static func uploadAgain(_ attachments: [Attachment], txn: any LocalWriteTransaction,
                            files: (any AttachmentFileStore)?) throws {
        for attachment in attachments {
            guard var row = try find(txn, id: attachment.sha256), row.attachmentState == .local, row.size == attachment.size else {
                continue
            }
            let stored: Int64?
            do {
                stored = try files?.size(of: row.id)
            } catch let error as SyncError where error.code == .attachmentDamaged {
                stored = nil
            } catch {
                continue
            }
            if stored == row.size {
                row.state = AttachmentState.pendingUpload.rawValue
                row.uploaded = 0
            } else {
                row.state = AttachmentState.remote.rawValue
            }
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
    ///
    /// A pulled reference is anyone's word, and the first one fixes the row's size; what a
    /// verified copy of the file proves corrects it (the app's own bytes, added again or
    /// referenced by its own write beside a file of that size, a download, a read that
    /// hashed the file), so a record that names a wrong size first cannot keep this device's
    /// correct references refused. The file's stored size alone is not taken: a file cut
    /// short would lend the row its size.
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

    /// Sets the row's size to `size`, which a verified copy of the file proved (its bytes
    /// hash to the name), when it says another: a row whose size came from a wrong reference.
    static func correctSize(_ hash: String, to size: Int64, txn: any LocalWriteTransaction) throws {
        guard var row = try find(txn, id: hash), row.size != size else { return }
        row.size = size
        try row.save(txn)
    }
}
