import Foundation

extension SyncContext {
    // MARK: Push

    /// Sends every pushable operation, in queue order across tables, in batches, until the
    /// queue holds only failed operations (and those waiting behind them).
    ///
    /// If the remote cannot be reached, throws and leaves every operation in the queue, in
    /// order, unchanged except that the ones chosen for sending are marked attempted (the
    /// remote may have applied them; they are resent with the same ids and never rewritten).
    ///
    /// Attachment files waiting to upload go first. One whose upload cannot succeed (its file
    /// gone or damaged, or refused by the remote for good, as over a quota) fails the pending
    /// operations that reference it, with the upload's code, and the others are still pushed;
    /// one the system could not read now throws ``SyncError/Code/busy``, retried by the
    /// background sync (Docs/Attachments.md).
    @discardableResult
    public func push() async throws -> PushSummary {
        try await tracked { try await self.pushLocked() }
    }

    func pushLocked() async throws -> PushSummary {
        try await flagged(\.uploading) {
            let started = ContinuousClock.now
            do {
                // Attachments go up first: the server refuses a change that references bytes it lacks.
                if try await self.uploadPendingAttachments() > 0 { _ = try? await self.evictAttachments() }
                let summary = try await self.pushBatches()
                self.metrics.pushed(summary, duration: ContinuousClock.now - started)
                return summary
            } catch {
                self.metrics.failed("push", error)
                // The batches chosen and not settled stay queued as attempted (the remote may
                // have applied them): their rows say so from now on. If this write fails too,
                // the marker stays, every reader still sees them attempted, and the next push
                // or the next context opened on the store writes them.
                _ = try? await self.observer.write { txn in try Outbox.writeInFlight(txn) }
                throw error
            }
        }
    }

    /// The operations waiting to be pushed, and the queue's last sequence number, as a push
    /// begins; the count is also the queue depth it reports (``SyncMetrics``).
    private func queueAtStart() async throws -> (count: Int, lastSequence: Int64) {
        let (count, last) = try await store.read { txn in (try Outbox.sendableCount(txn), try Outbox.lastSequence(txn)) }
        metrics.queued(count)
        return (count, last)
    }

    private func pushBatches() async throws -> PushSummary {
        var summary = PushSummary()
        var done = 0
        let batchSize = options.pushBatchSize
        let remote = self.remote
        let files = store.attachmentFiles
        func send(_ batch: [QueuedOperation]) -> (batch: [QueuedOperation], answer: Task<[PushResult], any Error>) {
            let operations = batch.map(\.pushOperation)
            return (batch, Task { try await remote.push(operations) })
        }
        // Two batches overlap: while the remote applies one, the next is chosen and marked
        // attempted (it never holds an operation on an item of the batch in flight, so it never
        // depends on its outcome); once the answer comes, the next is sent, and the answered
        // batch is settled in the same local transaction that chooses the one after. Batches
        // are still sent, and applied, one after the other in queue order.
        var inFlight: (batch: [QueuedOperation], answer: Task<[PushResult], any Error>)?
        var prepared: [QueuedOperation]?
        defer { inFlight?.answer.cancel() }
        // The progress total: counted once here, then kept up by arithmetic (what each batch
        // settled, what was queued meanwhile, found on the sequence index) and counted again
        // after the last batch — counting the whole queue per batch made a long push quadratic.
        var (remaining, lastSequence) = try await queueAtStart()
        defer { metrics.queued(remaining) }
        while true {
            if inFlight == nil {
                let batch = try await markAttempted { txn in
                    // A marker left by a push that could not write it after failing.
                    try Outbox.writeInFlight(txn)
                    return try Outbox.nextBatch(txn, limit: batchSize)
                }
                if batch.isEmpty { break }
                inFlight = send(batch)
            }
            guard let (batch, answer) = inFlight else { break }
            if prepared == nil {
                prepared = try await markAttempted { txn in try Outbox.nextBatch(txn, limit: batchSize, excluding: batch) }
            }
            let results: [PushResult]
            do {
                results = try await answer.valueCancellingWithCaller()
                remoteAnswered()
            } catch {
                inFlight = nil
                remoteFailed(error)
                throw error
            }
            let next = prepared ?? []
            prepared = nil
            inFlight = next.isEmpty ? nil : send(next)
            summary.batches += 1
            summary.sent += batch.count

            let (outcomes, rejectionCodes) = Self.answers(results)
            let (decisions, refusals) = await decide(batch, outcomes: outcomes)
            let answered = outcomes, codes = rejectionCodes, decided = decisions, refused = refusals
            let seen = lastSequence
            let (settled, following, queued, isEmpty) = try await observer.write { txn in
                var marker = try InFlight.read(txn)
                let settled = try SyncContext.settle(batch, outcomes: answered, rejectionCodes: codes, decisions: decided,
                                                     refusals: refused, files: files, inFlight: &marker, txn: txn)
                let following = next.isEmpty ? nil : try Outbox.markAttempted(
                    try Outbox.nextBatch(txn, limit: batchSize, excluding: next), into: &marker, txn)
                try marker.write(txn)
                let queued: (count: Int, last: Int64, exact: Bool)
                if next.isEmpty {
                    queued = (try Outbox.sendableCount(txn), seen, true)
                } else {
                    let new = try Outbox.sendableQueued(after: seen, txn)
                    queued = (new.count, new.last, false)
                }
                return (settled, following, queued, try Outbox.isEmpty(txn))
            }
            prepared = following
            lastSequence = queued.last
            remaining = isEmpty ? 0 : queued.exact ? queued.count : max(0, remaining - settled.settled + queued.count)
            summary.applied += settled.applied
            summary.failed += settled.failed
            summary.conflictsResolved += settled.resolved
            for event in settled.events { broadcaster.publish(event) }
            done += settled.settled
            broadcaster.publish(.pushProgress(done: done, total: done + remaining))
            broadcaster.publish(.outboxStatus(isEmpty: isEmpty))
            let missing = batch.count - batch.filter { outcomes[$0.sendId] != nil }.count
            if missing > 0 {
                throw SyncError(.transient, "the remote answered \(batch.count - missing) of \(batch.count) operations; the rest stay queued")
            }
        }
        return summary
    }

    /// A batch's outcomes and the codes of its rejections, by operation id (the first result
    /// of an id counts).
    private static func answers(_ results: [PushResult]) -> (outcomes: [String: PushOutcome], rejectionCodes: [String: SyncError.Code]) {
        var outcomes: [String: PushOutcome] = [:]
        var rejectionCodes: [String: SyncError.Code] = [:]
        for result in results where outcomes[result.operationId] == nil {
            outcomes[result.operationId] = result.outcome
            if case .rejected = result.outcome, let code = result.rejectionCode { rejectionCodes[result.operationId] = code }
        }
        return (outcomes, rejectionCodes)
    }

    /// Asks the resolver about every conflict and every refusal (403) of an answered batch.
    private func decide(_ batch: [QueuedOperation], outcomes: [String: PushOutcome]) async
        -> (decisions: [String: ConflictResolution], refusals: [String: RefusalResolution]) {
        var decisions: [String: ConflictResolution] = [:]
        var refusals: [String: RefusalResolution] = [:]
        for operation in batch {
            if case .rejected(let reason, 403)? = outcomes[operation.sendId] {
                refusals[operation.id] = await options.conflictResolver.resolveRefusal(SyncRefusal(
                    table: operation.table, itemId: operation.itemId, kind: operation.kind,
                    clientRecord: operation.item, reason: reason))
                continue
            }
            guard case .conflict(let server)? = outcomes[operation.sendId] else { continue }
            if operation.attempts > options.maxConflictRetries {
                decisions[operation.id] = .leaveForApp
                continue
            }
            let conflict = SyncConflict(
                table: operation.table, itemId: operation.itemId, kind: operation.kind,
                clientRecord: operation.item, serverRecord: server, baseVersion: operation.baseVersion,
                clientChangedAt: operation.changedAt, changedFields: operation.changedFields,
                attempts: operation.attempts)
            decisions[operation.id] = await options.conflictResolver.resolve(conflict)
        }
        return (decisions, refusals)
    }

    /// Chooses a batch with `select` and marks its operations attempted, in one transaction.
    private func markAttempted(_ select: @escaping @Sendable (any LocalWriteTransaction) throws -> [QueuedOperation]) async throws -> [QueuedOperation] {
        try await observer.write { txn in try Outbox.markAttempted(try select(txn), txn) }
    }
}
