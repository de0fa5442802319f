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
        if try await queuedOperationCount(table: table) > 0 {
            _ = try await pushLocked()
        }
        let started = ContinuousClock.now
        do {
            let summary = try await flagged(\.downloading) { try await self.pullPages(table, query: query, queryId: queryId) }
            metrics.pulled(summary, duration: ContinuousClock.now - started)
            statusState.update { $0.tableErrors[table] = nil }
            return summary
        } catch let error as SyncError where SyncFailure.kind(of: error) == .rejected && !Task.isCancelled {
            // A refusal of this table's pull: reported on the table, which a started context
            // pulls again with backoff while every other table goes on.
            metrics.failed("pull", error)
            statusState.update { $0.tableErrors[table] = SyncFailure(error: error, willRetry: $0.backgroundSync == .running) }
            throw error
        } catch {
            metrics.failed("pull", error)
            throw error
        }
    }

    private func pullPages(_ table: String, query: Query, queryId: String?) async throws -> PullSummary {
        var cursor: String? = nil
        if let queryId { cursor = try await self.cursor(table: table, queryId: queryId) }
        var summary = PullSummary(table: table, isFullSync: cursor == nil)
        var done = 0
        let prefetch = options.attachments.prefetch[table]
        var pulledAttachments: [String: Attachment] = [:]
        // A sweep a pull cut short (the app stopped mid-resend) goes on marking.
        var marking = false
        if let queryId, query.predicate == .all { marking = try await isSweeping(table, queryId: queryId) }
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
                remoteAnswered()
            } catch {
                remoteFailed(error)
                throw error
            }
            let more = !page.endsPull
            if more { next = fetch() }
            if page.cursorReset { summary.isFullSync = true }
            // Only a pull of the whole table is swept: a filtered one's resend holds only the
            // rows its predicate matches on the server, which says nothing of the others.
            if page.cursorReset, queryId != nil, query.predicate == .all, !marking {
                try await store.defineTable(Self.sweepMarksSchema)
                marking = true
            }
            let pulledAt = more ? nil : Timestamp.now()
            let marks = marking
            let (counts, removedIds, referenced) = try await observer.write { txn in
                try SyncContext.applyPage(page, table: table, queryId: queryId, pulledAt: pulledAt, marking: marks, txn: txn)
            }
            if let pulledAt { statusState.update { $0.lastSyncedAt[table] = pulledAt } }
            if case .all = prefetch {
                for attachment in referenced { pulledAttachments[attachment.sha256] = attachment }
                // A long pull fetches as it goes, which bounds what it holds.
                if pulledAttachments.count >= 256 {
                    await prefetchAttachments(table, .all, pulled: Array(pulledAttachments.values))
                    pulledAttachments = [:]
                }
            }
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
        if marking, let queryId {
            let swept = try await sweepUnmarked(table, queryId: queryId)
            summary.removedFromView += swept
        }
        // Rows that went may have been the last to reference a file: it goes with them.
        if summary.deleted + summary.removedFromView > 0 { _ = try? await removeUnreferencedAttachments() }
        if let prefetch { await prefetchAttachments(table, prefetch, pulled: Array(pulledAttachments.values)) }
        broadcaster.publish(.modelSynced(ModelSyncedEvent(
            table: table, isFullSync: summary.isFullSync, isDeltaSync: !summary.isFullSync, added: summary.added,
            updated: summary.updated, deleted: summary.deleted, skippedPending: summary.skippedPending,
            removedFromView: summary.removedFromView)))
        return summary
    }

    /// Applies one page in one local transaction: its records, its removals (rows that left
    /// the view), its cursor and, on the last page, `pulledAt`: the time the table was pulled.
    /// Rows with a pending local operation are left alone. Returns the counts and the ids removed.
    ///
    /// The page's rows are looked up together and written together (``LocalReadTransaction/read(_:)``,
    /// the multi-row ``LocalWriteTransaction/upsert(_:in:)-([Record],_)``): one look-up and one
    /// upsert statement per row cost a first pull a third of its client time (`perf`, pull-1m).
    /// The result is what applying the rows one by one in page order gives, an id met twice
    /// included.
    ///
    /// With `marking` (the remote is sending the view again after a cursor reset), the page's
    /// rows are also marked in ``sweepMarks``, and a reset page notes the sweep in `__config`
    /// in the same transaction, so a pull cut short resumes marking.
    static func applyPage(_ page: PullPage, table: String, queryId: String?, pulledAt: Timestamp?, marking: Bool = false,
                          txn: any LocalWriteTransaction) throws -> (PullSummary, [String], [Attachment]) {
        var counts = PullSummary(table: table)
        if marking, let queryId {
            if page.cursorReset {
                try ConfigRow.setValue(txn, table: table, key: sweepKey(queryId), keyType: ConfigRow.KeyType.sweep.rawValue, value: "1")
            }
            let marks = page.records.lazy.filter { !$0.deleted }.map { Record(id: markId(table: table, item: $0.id), fields: ["table": .string(table)]) }
            if !marks.isEmpty { try txn.upsert(Array(marks), in: sweepMarks) }
        }
        // Most pages meet no queued operation of their table (a first pull, a device not being
        // edited): one probe of the queue's index says so, instead of a query naming every id.
        let withOperations = try Outbox.hasOperations(txn, table: table)
            ? try Outbox.itemsWithOperations(txn, table: table, among: page.records.map(\.id) + page.removed) : []
        var removedIds: [String] = []
        for id in page.removed where !withOperations.contains(ExactString(id)) {
            if try txn.delete(id: id, in: table) { removedIds.append(id) }
        }
        counts.removedFromView = removedIds.count
        let incoming = withOperations.isEmpty ? page.records : page.records.filter { !withOperations.contains(ExactString($0.id)) }
        counts.skippedPending = page.records.count - incoming.count
        let stored = try txn.read(incoming.map { .record(table: table, id: $0.id) })
        // What this page has made of each id so far (`nil`: deleted), for an id met again:
        // `PullPage` asks a remote to name an id once per page, and a third party's may not.
        var written: [ExactString: Record?] = [:]
        written.reserveCapacity(incoming.count)
        var upserts: [Record] = [], deletes: [String] = [], repeated = false
        for (record, found) in zip(incoming, stored) {
            let existing: Record?
            let key = ExactString(record.id)
            if let earlier = written[key] {
                existing = earlier
                repeated = true
            } else {
                existing = found.first
            }
            if record.deleted {
                guard existing != nil else { continue }
                deletes.append(record.id)
                written[key] = .some(nil)
                counts.deleted += 1
            } else {
                // `record` is stored as it came (not a tombstone here, its fields already
                // without nulls); rebuilding it would copy and rescan every field.
                if existing == record { continue } // already up to date: no write, not an update
                upserts.append(record)
                written[key] = .some(record)
                if existing != nil { counts.updated += 1 } else { counts.added += 1 }
            }
        }
        if repeated {
            // An id met twice ends as its last row left it: deleted, or the last of its
            // upserts (a later record of an id replaces an earlier one in the same upsert).
            deletes = deletes.filter { written[ExactString($0)] == .some(nil) }
            upserts = upserts.filter { written[ExactString($0.id)] != .some(nil) }
        }
        if !deletes.isEmpty { _ = try txn.delete(ids: deletes, in: table) }
        var referenced: [Attachment] = []
        if !upserts.isEmpty {
            try txn.upsert(upserts, in: table)
            referenced = try AttachmentRow.noteRemote(in: upserts, txn: txn)
        }
        if let queryId {
            try ConfigRow.setValue(txn, table: table, key: ConfigRow.cursorKey(queryId),
                                   keyType: ConfigRow.KeyType.cursor.rawValue, value: page.nextCursor)
        }
        if let pulledAt {
            try ConfigRow.setValue(txn, table: table, key: ConfigRow.pulledAtKey, keyType: ConfigRow.KeyType.pulledAt.rawValue,
                                   value: String(pulledAt.millisecondsSince1970))
        }
        return (counts, removedIds, referenced)
    }
}
