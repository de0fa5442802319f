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
    /// never one the app holds (``withAttachmentFile(_:isolation:_:)``), never `keeping`. An
    /// evicted file stays referenced: it is fetched again on its next use. Returns how many
    /// files went.
    ///
    /// A file that cannot be removed (its row or its file) is skipped and the others still
    /// go. Every failure is logged (``SyncOptions/logger``) and reported as
    /// ``SyncStatus/lastError`` (until a push, pull or sync succeeds), then thrown: the store's
    /// error when its rows cannot be read, else one that counts the files kept and names the
    /// first failure. The evictions that run after each download and upload report the same
    /// way; their failure does not fail the download or the push.
    @discardableResult
    public func evictAttachments(toBudget budget: Int64? = nil, keeping: String? = nil) async throws -> Int {
        guard let budget = budget ?? options.attachments.cacheBudget, let files = store.attachmentFiles else { return 0 }
        let rows: [AttachmentRow]
        do {
            rows = try await store.read { txn in
                try AttachmentRow.all(txn, Query(AttachmentRow.field(.state) != .string(AttachmentState.remote.rawValue),
                                                 order: [AttachmentRow.sorted(.lastUsed), SortKey(SystemField.id)]))
            }
        } catch {
            reportEvictionFailures([Self.evictionFailure(error)])
            throw error
        }
        var total = rows.reduce(Int64(0)) { $0 + $1.size }
        var evicted = 0
        var failures: [SyncError] = []
        for row in rows where total > budget && row.attachmentState == .local && !row.pinned && row.id != keeping {
            // Held by the app: skipped here, and checked again under the holds' lock below.
            if attachmentPins.isHeld(row.id) { continue }
            do {
                // The file goes in the transaction that marks its row, and under the holds' lock:
                // a hold that starts first keeps it; one that starts after finds it gone and
                // fetches it again. A failed removal leaves the row as it was.
                let taken = try await observer.write { txn -> Bool in
                    guard var current = try AttachmentRow.find(txn, id: row.id), current.attachmentState == .local, !current.pinned,
                          try self.attachmentPins.removeUnlessHeld(row.id, { try files.remove(row.id) }) else { return false }
                    current.state = AttachmentState.remote.rawValue
                    try current.save(txn)
                    return true
                }
                guard taken else { continue }
            } catch {
                failures.append(Self.evictionFailure(error))
                continue
            }
            total -= row.size
            evicted += 1
        }
        if let first = failures.first {
            reportEvictionFailures(failures)
            throw SyncError(first.code, "the attachment cache kept \(failures.count) file(s) it could not evict; the first: \(first.message)",
                            underlying: first)
        }
        return evicted
    }

    /// Logs each failure of an eviction and sets one ``SyncStatus/lastError`` that counts
    /// them and names the first (as the sweep at open does). A cancelled eviction reports nothing.
    private func reportEvictionFailures(_ failures: [SyncError]) {
        let failures = failures.filter { $0.code != .cancelled }
        guard let first = failures.first else { return }
        for failure in failures {
            options.logger.warning("the attachment cache could not evict a file over its budget: \(failure)")
        }
        let summary = SyncError(first.code, "the attachment cache could not evict \(failures.count) file(s) over its budget; the first: \(first.message)")
        statusState.update { $0.lastError = SyncFailure(error: summary, willRetry: false) }
    }

    /// A failure of an eviction as a ``SyncError`` (a store's own, ``SyncError/Code/cancelled``
    /// for a cancellation, or a ``SyncError/Code/storageFailure`` naming the error's type).
    private static func evictionFailure(_ error: any Error) -> SyncError {
        if let error = error as? SyncError { return error }
        if error is CancellationError { return SyncError(.cancelled, "the eviction was cancelled") }
        return SyncError(.storageFailure, "the attachment cache's eviction failed: \(type(of: error))", underlying: error)
    }

    /// Removes the files of attachments no local record references any more (the record
    /// was deleted, changed, or left this identity's view), unless waiting to upload, pinned
    /// or held by the app (``withAttachmentFile(_:isolation:_:)``), with their `__attachments`
    /// rows. Reads every app table (a page at a time), so
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
            // A file the app holds (withAttachmentFile) stays, with its row, for a later sweep.
            let gone = try await observer.write { txn -> Bool in
                guard let row = try AttachmentRow.find(txn, id: hash), row.attachmentState != .pendingUpload, !row.pinned else { return false }
                guard try self.attachmentPins.removeUnlessHeld(hash, { try files?.remove(hash) }) else { return false }
                return try txn.delete(id: hash, in: AttachmentRow.table)
            }
            if gone { removed += 1 }
        }
        return removed
    }
}
