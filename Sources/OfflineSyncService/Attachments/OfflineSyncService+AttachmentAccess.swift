import OfflineSync

// Who may read an attachment, and the references rows make to attachments: every pushed
// write keeps `__srv_att_refs` in step with the row, in the push's transaction.

extension OfflineSyncService {
    /// The references a write adds, changes and drops, worked out before the row is written.
    struct AttachmentReferenceChange {
        /// The references to write, by hash, with the media type the row now declares for
        /// each: every new one, and every kept one whose declared type changed.
        var written: [(hash: String, contentType: String)] = []
        /// The hashes the row no longer references.
        var dropped: [String] = []
        var isEmpty: Bool { written.isEmpty && dropped.isEmpty }
    }

    /// The references of `fields` (the written row, `nil` for a delete) against those of
    /// `current`. A new reference must name a file the server holds whole that the caller
    /// uploaded or may read through another row: otherwise the write is refused (409, code
    /// ``SyncError/Code/attachmentMissing``), so
    /// no row points at bytes the server lacks and nobody takes a file by naming its hash.
    /// A malformed reference is a 400. Refusals are thrown as ``PushRefusal``.
    func attachmentChange(from current: Record?, to fields: [String: Value]?, claims: Claims,
                          _ txn: any LocalReadTransaction) throws -> AttachmentReferenceChange {
        let new: [Attachment]
        do {
            new = try fields.map { try Attachment.references(in: $0) } ?? []
        } catch let error as SyncError {
            throw PushRefusal(reason: error.message, status: 400)
        }
        let old = (current?.deleted ?? true) ? [] : ((try? Attachment.references(in: current!)) ?? [])
        guard !new.isEmpty || !old.isEmpty else { return AttachmentReferenceChange() }
        let oldHashes = Set(old.map(\.sha256)), newHashes = Set(new.map(\.sha256))
        for attachment in new where !oldHashes.contains(attachment.sha256) {
            guard let file = try AttachmentFileRow.find(txn, id: attachment.sha256), file.size == attachment.size,
                  try mayRead(attachment: attachment.sha256, claims: claims, txn) else {
                throw PushRefusal(
                    reason: "attachment \(attachment.sha256) is not on the server for this identity; upload it before the record",
                    status: 409, code: .attachmentMissing)
            }
        }
        // A kept reference is written again only when the type the row declares for it changed.
        let declared: [String: String] = new.isEmpty ? [:] : (fields.map { Self.declaredTypes(in: $0) } ?? [:])
        let kept = newHashes.intersection(oldHashes)
        let before: [String: String] = kept.isEmpty ? [:] : (current.map { Self.declaredTypes(in: $0.fields) } ?? [:])
        let written = newHashes.sorted().compactMap { hash -> (hash: String, contentType: String)? in
            let type = declared[hash] ?? ""
            guard !kept.contains(hash) || before[hash] != type else { return nil }
            return (hash: hash, contentType: type)
        }
        return AttachmentReferenceChange(written: written, dropped: oldHashes.subtracting(newHashes).sorted())
    }

    /// Records a written row's reference change (nothing for a row with no references).
    func record(_ change: AttachmentReferenceChange, table: String, row: String, _ txn: any LocalWriteTransaction) throws {
        guard !change.isEmpty else { return }
        for hash in change.dropped {
            _ = try txn.delete(id: AttachmentReferenceRow.key(hash: hash, table: table, row: row), in: AttachmentReferenceRow.table)
        }
        for reference in change.written {
            try AttachmentReferenceRow(hash: reference.hash, table: table, row: row, contentType: reference.contentType).save(txn)
        }
    }

    /// The media type each attachment of `fields` is declared with, by hash. A row that names
    /// one hash twice with different types declares the least of them by bytes, so the choice
    /// never hangs on the order a dictionary hands out its values. A malformed reference is
    /// skipped (a write that holds one is refused before this is asked).
    static func declaredTypes(in fields: [String: Value]) -> [String: String] {
        var types: [String: String] = [:]
        func visit(_ value: Value) {
            switch value {
            case .object(let object):
                guard object[Attachment.marker] == nil else {
                    guard let attachment = try? Attachment(value: value) else { return }
                    let declared = attachment.contentType
                    if let other = types[attachment.sha256], !declared.utf8.lexicographicallyPrecedes(other.utf8) { return }
                    types[attachment.sha256] = declared
                    return
                }
                for item in object.values { visit(item) }
            case .array(let items):
                for item in items { visit(item) }
            default:
                return
            }
        }
        for value in fields.values { visit(value) }
        return types
    }

    /// Whether the caller may read the attachment: it uploaded it whole, or the rules let it
    /// read a live row that references it. Nothing else counts, knowing the hash least of all.
    func mayRead(attachment hash: String, claims: Claims, _ txn: any LocalReadTransaction) throws -> Bool {
        try uploadedWhole(hash, claims: claims, txn) || firstReadableReference(to: hash, claims: claims, txn) != nil
    }

    /// Whether the caller finished an upload of the attachment (its grant to read it).
    func uploadedWhole(_ hash: String, claims: Claims, _ txn: any LocalReadTransaction) throws -> Bool {
        try AttachmentUploadRow.find(txn, id: AttachmentUploadRow.key(identity: claims.identity.text, hash: hash))?.complete == true
    }

    /// The first reference to the attachment, in key order, from a live row the rules let the
    /// caller read, with that row; `nil` when the caller may read no row that references it.
    func firstReadableReference(to hash: String, claims: Claims,
                                _ txn: any LocalReadTransaction) throws -> (reference: AttachmentReferenceRow, row: Record)? {
        let identity = claims.identity.text
        var after: String?
        while true {
            var predicate = AttachmentReferenceRow.field(.hash) == .string(hash)
            if let after { predicate = predicate && Field(SystemField.id) > .string(after) }
            let page = try AttachmentReferenceRow.all(txn, Query(predicate, order: [SortKey(SystemField.id)], limit: 200))
            for reference in page {
                guard let row = try txn.record(in: reference.table, id: reference.row), !row.deleted else { continue }
                if isShared(reference.table) {
                    if try evaluator.canRead(row, in: reference.table, claims: claims, txn) { return (reference, row) }
                } else if row[Meta.owner].stringValue.map({ ExactString.sameBytes($0, identity) }) == true {
                    return (reference, row)
                }
            }
            guard page.count == 200, let last = page.last else { return nil }
            after = last.id
        }
    }

    /// The media type `reference` declares, read from `row` (the row it comes from) when the
    /// reference was recorded before types were kept; `nil` when the declaration is no media
    /// type (``AttachmentMediaType``).
    func declaredMediaType(of reference: AttachmentReferenceRow, in row: Record) -> AttachmentMediaType? {
        guard let declared = reference.contentType ?? Self.declaredTypes(in: row.fields)[reference.hash] else { return nil }
        return AttachmentMediaType(declared: declared)
    }
}

/// A push operation refused before anything was written: the rejection's reason, status and
/// code (``PushResult/rejectionCode``), which travel apart.
struct PushRefusal: Error {
    var reason: String
    var status: Int
    var code: SyncError.Code? = nil

    /// The refusal as ``OfflineSyncService/apply(_:index:key:row:layout:in:)`` answers it.
    var answer: (outcome: PushOutcome, code: SyncError.Code?, remembered: Bool) {
        (.rejected(reason: reason, status: status), code, false)
    }
}
