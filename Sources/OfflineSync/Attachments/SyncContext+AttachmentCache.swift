import Foundation
import Logging

extension SyncContext {
    // MARK: The attachment cache

    /// Keeps the attachment from eviction (`true`) or lets the cache budget evict it again
    /// (`false`). Pinning a file that is not here does not fetch it. Throws
    /// ``SyncError/Code/notFound`` when no local record references the attachment.
    public func pinAttachment(_ attachment: Attachment, _ pinned: Bool = true) async throws {
        _ = try await observer.write { txn in
            guard var row = try AttachmentRow.find(txn, id: attachment.sha256) else {
                throw SyncError(.notFound, "no local record references attachment \(attachment.sha256.prefix(12))…")
            }
            row.pinned = pinned
            try row.save(txn)
        }
    }

    /// Removes downloaded files, least recently used first, until the attachment files on
    /// this device take at most `budget` bytes (``AttachmentOptions/cacheBudget`` when
    /// `nil`; nothing when both are `nil`). Never a file waiting to upload, never a pinned one,
    /// never `keeping`. An evicted file stays referenced: it is fetched again on its next use.
    /// Returns how many files went.
    @discardableResult
    public func evictAttachments(toBudget budget: Int64? = nil, keeping: String? = nil) async throws -> Int {
        guard let budget = budget ?? options.attachments.cacheBudget, let files = store.attachmentFiles else { return 0 }
        let rows = try await store.read { txn in
            try AttachmentRow.all(txn, Query(AttachmentRow.field(.state) != .string(AttachmentState.remote.rawValue),
                                             order: [AttachmentRow.sorted(.lastUsed), SortKey(SystemField.id)]))
        }
        var total = rows.reduce(Int64(0)) { $0 + $1.size }
        var evicted = 0
        for row in rows where total > budget && row.attachmentState == .local && !row.pinned && row.id != keeping {
            let taken = try await observer.write { txn -> Bool in
                guard var current = try AttachmentRow.find(txn, id: row.id), current.attachmentState == .local, !current.pinned else { return false }
                current.state = AttachmentState.remote.rawValue
                try current.save(txn)
                return true
            }
            guard taken else { continue }
            try await FileWork.run { try files.remove(row.id) }
            total -= row.size
            evicted += 1
        }
        return evicted
    }

    /// Removes the files of attachments no local record references any more (the record
    /// was deleted, changed, or left this identity's view), unless waiting to upload or
    /// pinned, with their `__attachments` rows. Reads every app table (a page at a time), so
    /// it runs only when the store holds attachments: after a pull that deleted or removed
    /// rows, and when called. A malformed reference a pulled record holds is skipped (and
    /// logged); the record's other references still count. Returns how many went.
    @discardableResult
    public func removeUnreferencedAttachments() async throws -> Int {
        let known = try await store.read { txn in
            try AttachmentRow.all(txn, Query(AttachmentRow.field(.state) != .string(AttachmentState.pendingUpload.rawValue)
                                             && AttachmentRow.field(.pinned) == false))
        }
        guard !known.isEmpty else { return 0 }
        var unreferenced = Set(known.map(\.id))
        var malformed = 0
        let tables = try await store.read { txn in try txn.tables().map(\.name).filter { !$0.hasPrefix(Names.reservedPrefix) } }
        for table in tables where !unreferenced.isEmpty {
            var after: String?
            while true {
                let predicate: QueryPredicate = after.map { Field(SystemField.id) > .string($0) } ?? .all
                let page = try await store.read { txn in try txn.records(in: table, matching: Query(predicate, order: [SortKey(SystemField.id)], limit: 500)) }
                for record in page where record.fields.values.contains(where: \.mayHoldAttachment) {
                    // Every well-formed reference counts, whatever its neighbours hold.
                    let (references, bad) = Attachment.scan(record.fields)
                    for attachment in references { unreferenced.remove(attachment.sha256) }
                    malformed += bad.count
                }
                guard page.count == 500, let last = page.last else { break }
                after = last.id
            }
        }
        if malformed > 0 {
            options.logger.notice("the attachment cache sweep skipped \(malformed) malformed attachment reference(s) in local records; their records' other references were kept")
        }
        guard !unreferenced.isEmpty else { return 0 }
        let files = store.attachmentFiles
        var removed = 0
        for hash in unreferenced.sorted() {
            // Checked again as it goes, and the file removed in the same transaction: a record
            // written meanwhile (by another process too) either sees the row or finds the file
            // gone, so its reference never turns a removed file into one waiting to upload.
            let gone = try await observer.write { txn -> Bool in
                guard let row = try AttachmentRow.find(txn, id: hash), row.attachmentState != .pendingUpload, !row.pinned else { return false }
                guard try txn.delete(id: hash, in: AttachmentRow.table) else { return false }
                try files?.remove(hash)
                return true
            }
            if gone { removed += 1 }
        }
        return removed
    }
}
