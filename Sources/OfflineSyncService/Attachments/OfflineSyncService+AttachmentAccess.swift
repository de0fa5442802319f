import OfflineSync

// Who may read an attachment, and the references rows make to attachments: every pushed
// write keeps `__srv_att_refs` in step with the row, in the push's transaction.

extension OfflineSyncService {
    /// The references a write adds and drops, worked out before the row is written.
    struct AttachmentReferenceChange {
        var added: [String] = []
        var dropped: [String] = []
        var isEmpty: Bool { added.isEmpty && dropped.isEmpty }
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
        return AttachmentReferenceChange(added: newHashes.subtracting(oldHashes).sorted(),
                                         dropped: oldHashes.subtracting(newHashes).sorted())
    }

    /// Records a written row's reference change (nothing for a row with no references).
    func record(_ change: AttachmentReferenceChange, table: String, row: String, _ txn: any LocalWriteTransaction) throws {
        guard !change.isEmpty else { return }
        for hash in change.dropped {
            _ = try txn.delete(id: AttachmentReferenceRow(hash: hash, table: table, row: row).id, in: AttachmentReferenceRow.table)
        }
        for hash in change.added { try AttachmentReferenceRow(hash: hash, table: table, row: row).save(txn) }
    }

    /// Whether the caller may read the attachment: it uploaded it whole, or the rules let it
    /// read a live row that references it. Nothing else counts, knowing the hash least of all.
    func mayRead(attachment hash: String, claims: Claims, _ txn: any LocalReadTransaction) throws -> Bool {
        let identity = claims.identity.text
        if let upload = try AttachmentUploadRow.find(txn, id: AttachmentUploadRow.key(identity: identity, hash: hash)), upload.complete {
            return true
        }
        var after: String?
        while true {
            var predicate = AttachmentReferenceRow.field(.hash) == .string(hash)
            if let after { predicate = predicate && Field(SystemField.id) > .string(after) }
            let page = try AttachmentReferenceRow.all(txn, Query(predicate, order: [SortKey(SystemField.id)], limit: 200))
            for reference in page {
                guard let row = try txn.record(in: reference.table, id: reference.row), !row.deleted else { continue }
                if isShared(reference.table) {
                    if try evaluator.canRead(row, in: reference.table, claims: claims, txn) { return true }
                } else if row[Meta.owner].stringValue.map({ ExactString.sameBytes($0, identity) }) == true {
                    return true
                }
            }
            guard page.count == 200, let last = page.last else { return false }
            after = last.id
        }
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
