import Foundation

extension SyncContext {
    // MARK: Pull

    /// Brings the remote's changes to a table into the local store, page by page.
    ///
    /// If the table has queued operations they are pushed first (implicit push). Each page
    /// and its cursor are applied in one local transaction, so an interrupted pull resumes
    /// where it stopped. A record with a queued local operation is never overwritten.
    /// With a `queryId` the pull is incremental: it continues from the cursor stored under
    /// that id in `__config`. Without one it pulls everything.
    @discardableResult
    public func pull(_ table: String, query: Query = .all, queryId: String? = nil) async throws -> PullSummary {
        try Names.validateAppTable(table)
        return try await tracked { try await self.pullLocked(table, query: query, queryId: queryId) }
    }

    func pullLocked(_ table: String, query: Query, queryId: String?) async throws -> PullSummary {
        if try await pendingOperationCount(table: table) > 0 {
            _ = try await pushLocked()
        }
        return try await flagged(\.downloading) { try await self.pullPages(table, query: query, queryId: queryId) }
    }

    private func pullPages(_ table: String, query: Query, queryId: String?) async throws -> PullSummary {
        var cursor: String? = nil
        if let queryId { cursor = try await self.cursor(table: table, queryId: queryId) }
        var summary = PullSummary(table: table, isFullSync: cursor == nil)
        var done = 0
        let stream = remote.openPull(PullRequest(table: table, predicate: query.predicate, cursor: cursor,
                                                 limit: options.pullPageSize))
        func fetch() -> Task<PullPage?, any Error> { Task { try await stream.next() } }
        // The next page is read while this one is applied: at most two pages are held here
        // (a streaming remote also holds what its connection has buffered).
        var next = fetch()
        defer { next.cancel() }
        while true {
            let page: PullPage
            do {
                guard let read = try await next.valueCancellingWithCaller() else { break }
                page = read
                networkReachable(true)
            } catch {
                remoteFailed(error)
                throw error
            }
            let more = !page.endsPull
            if more { next = fetch() }
            if page.cursorReset { summary.isFullSync = true }
            let pulledAt = more ? nil : Timestamp.now()
            let (counts, removedIds) = try await observer.write { txn in
                try SyncContext.applyPage(page, table: table, queryId: queryId, pulledAt: pulledAt, txn: txn)
            }
            if let pulledAt { statusState.update { $0.lastSyncedAt[table] = pulledAt } }
            if !removedIds.isEmpty { broadcaster.publish(.removedFromView(table: table, ids: removedIds)) }
            summary.pages += 1
            summary.received += page.records.count
            summary.added += counts.added
            summary.updated += counts.updated
            summary.deleted += counts.deleted
            summary.skippedPending += counts.skippedPending
            summary.removedFromView += counts.removedFromView
            done += page.records.count + page.removed.count
            broadcaster.publish(.pullProgress(table: table, done: done, total: done + page.remaining))
            if !more { break }
        }
        broadcaster.publish(.modelSynced(ModelSyncedEvent(
            table: table, isFullSync: summary.isFullSync, isDeltaSync: !summary.isFullSync, added: summary.added,
            updated: summary.updated, deleted: summary.deleted, skippedPending: summary.skippedPending,
            removedFromView: summary.removedFromView)))
        return summary
    }

    /// Applies one page in one local transaction: its records, its removals (rows that left
    /// the view), its cursor and, on the last page, `pulledAt`: the time the table was pulled.
    /// Rows with a pending local operation are left alone. Returns the counts and the ids removed.
    static func applyPage(_ page: PullPage, table: String, queryId: String?, pulledAt: Timestamp?,
                          txn: any LocalWriteTransaction) throws -> (PullSummary, [String]) {
        var counts = PullSummary(table: table)
        let withOperations = try Outbox.itemsWithOperations(txn, table: table, among: page.records.map(\.id) + page.removed)
        var removedIds: [String] = []
        for id in page.removed where !withOperations.contains(id) {
            if try txn.delete(id: id, in: table) { removedIds.append(id) }
        }
        counts.removedFromView = removedIds.count
        for record in page.records {
            if withOperations.contains(record.id) { counts.skippedPending += 1; continue }
            let existing = try txn.record(in: table, id: record.id)
            if record.deleted {
                if existing != nil { try txn.delete(id: record.id, in: table); counts.deleted += 1 }
            } else {
                // `record` is stored as it came (not a tombstone here, its fields already
                // without nulls); rebuilding it would copy and rescan every field.
                if existing == record { continue } // already up to date: no write, not an update
                try txn.upsert(record, in: table)
                if existing != nil { counts.updated += 1 } else { counts.added += 1 }
            }
        }
        if let queryId {
            try ConfigRow.setValue(txn, table: table, key: ConfigRow.cursorKey(queryId),
                                     keyType: ConfigRow.KeyType.cursor.rawValue, value: page.nextCursor)
        }
        if let pulledAt {
            try ConfigRow.setValue(txn, table: table, key: ConfigRow.pulledAtKey, keyType: ConfigRow.KeyType.pulledAt.rawValue,
                                   value: String(pulledAt.millisecondsSince1970))
        }
        return (counts, removedIds)
    }
}
