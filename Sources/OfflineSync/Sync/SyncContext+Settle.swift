import Foundation

extension SyncContext {
    // MARK: Settle

    struct Settled: Sendable {
        var events: [SyncEvent] = []
        var applied = 0
        var failed = 0
        var resolved = 0
        var settled = 0
    }

    /// Applies a batch's outcomes in one local transaction. `inFlight` is the push's marker as
    /// read in this transaction; the batch's ids leave it, and the caller writes it.
    /// `rejectionCodes` holds the codes the remote gave rejections (``PushResult/rejectionCode``),
    /// by send id; a rejection's operation error keeps its code. `files` are the store's
    /// attachment files: a rejection for a missing file uploads again only a file still here.
    static func settle(_ batch: [QueuedOperation], outcomes: [String: PushOutcome], rejectionCodes: [String: SyncError.Code] = [:],
                       decisions: [String: ConflictResolution], refusals: [String: RefusalResolution] = [:],
                       files: (any AttachmentFileStore)? = nil,
                       inFlight: inout InFlight, txn: any LocalWriteTransaction) throws -> Settled {
        var result = Settled()
        let now = Timestamp.now()
        // Settling an operation changes only its own item's queue, so which items have other
        // operations is read once for the batch; an applied operation on any other item just
        // makes the local copy the remote's.
        let queuedBesides = try Outbox.itemsQueuedBesides(batch, txn)
        // The local copies that become the remote's, held and written in multi-row chunks,
        // and their operations, taken off the queue together at the end: each is an item no
        // other operation (in the batch or queued) names, so nothing else the settle does
        // reads or writes its row or its queue.
        var remoteCopies = PendingWrites()
        var removals: [String] = []
        for operation in batch {
            guard let outcome = outcomes[operation.sendId] else { continue }
            result.settled += 1
            switch outcome {
            case .applied(let server):
                if queuedBesides.contains(Outbox.itemKey(operation)) {
                    try Outbox.remove(operation, txn)
                    try adoptServerVersion(server, for: operation, inFlight: inFlight, txn: txn)
                } else if server.deleted {
                    try Outbox.remove(operation, txn)
                    try becomeRemote(server, for: operation, txn: txn)
                } else {
                    removals.append(operation.id)
                    try remoteCopies.add(remoteCopy(server, of: operation), in: operation.table, txn)
                }
                result.applied += 1
                result.events.append(.outboxMutationProcessed(table: operation.table, record: server, kind: operation.kind))
            case .conflict(let server):
                let decision = decisions[operation.id] ?? .leaveForApp
                switch decision {
                case .leaveForApp:
                    result.events.append(try fail(operation, status: 409, message: "conflict: the remote holds another version",
                                                  server: server, now: now, txn: txn))
                    result.failed += 1
                    continue
                case .takeServer:
                    try Outbox.remove(operation, txn)
                    // A newer local edit keeps its old base: it meets the server's record as a
                    // conflict of its own instead of silently overwriting the change that won.
                    if try Outbox.latest(txn, table: operation.table, itemId: operation.itemId) == nil {
                        try adoptServerVersion(server, for: operation, inFlight: inFlight, txn: txn)
                    }
                case .discardClient:
                    try Outbox.remove(operation, txn)
                    if try Outbox.latest(txn, table: operation.table, itemId: operation.itemId) == nil {
                        try txn.delete(id: operation.itemId, in: operation.table)
                    }
                case .keepClient:
                    try resend(operation, item: operation.item, server: server, txn: txn)
                case .merged(let merged):
                    try resend(operation, item: Record(id: operation.itemId, fields: merged.fields), server: server, txn: txn)
                }
                result.resolved += 1
                result.events.append(.conflictResolved(table: operation.table, itemId: operation.itemId,
                                                       resolution: decision))
            case .rejected(let reason, let status):
                let compensate = status == 403 && refusals[operation.id] == .compensate
                let code = rejectionCodes[operation.sendId]
                result.events.append(try fail(operation, status: status, message: reason, code: code,
                                              server: nil, now: now, compensated: compensate, txn: txn))
                // A file the remote lacks that is still here goes up again before a retry; one
                // that is not turns `remote`, for the app to add its bytes again.
                if code == .attachmentMissing, let item = operation.item {
                    try AttachmentRow.uploadAgain(Attachment.scan(item.fields).references, txn: txn, files: files)
                }
                result.failed += 1
                // The compensating write: with no later operation on the item, the local copy
                // goes, and the next pull brings the server's state back (the remote records a
                // fresh view entry for the caller when it may read the row). A later operation
                // is sent in its turn and settled the same way.
                if compensate, try Outbox.latest(txn, table: operation.table, itemId: operation.itemId) == nil {
                    try txn.delete(id: operation.itemId, in: operation.table)
                }
            }
        }
        try remoteCopies.flush(txn)
        try Outbox.remove(ids: removals, txn)
        try Outbox.endInFlight(batch, answered: { outcomes[$0.sendId] != nil }, inFlight: &inFlight, txn)
        return result
    }

    /// After the remote settled an item: the next queued operation on it (if any) is rebased
    /// on the remote's version and the local copy keeps its pending fields; otherwise the
    /// local copy becomes the remote's record (or goes, for a tombstone).
    ///
    /// `inFlight` is the push's marker as the caller read it in this transaction: whether the
    /// next operation was already chosen for a push (then it is attempted, and not rebased).
    static func adoptServerVersion(_ server: Record, for operation: QueuedOperation, inFlight: InFlight,
                                   txn: any LocalWriteTransaction) throws {
        if var next = try Outbox.all(txn, table: operation.table, itemId: operation.itemId, inFlight: inFlight).first {
            if next.kind != .insert && next.state == .pending {
                next.baseVersion = server.deleted ? nil : server.version
                if server.deleted && next.kind == .update { next.kind = .insert }
                try Outbox.save(next, txn)
            }
            if var local = try txn.record(in: operation.table, id: operation.itemId), !server.deleted {
                local.version = server.version
                local.updatedAt = server.updatedAt
                try txn.upsert(local, in: operation.table)
            }
        } else {
            try becomeRemote(server, for: operation, txn: txn)
        }
    }

    /// With no operation left on the item: the local copy becomes the remote's record, or
    /// goes for a tombstone.
    static func becomeRemote(_ server: Record, for operation: QueuedOperation, txn: any LocalWriteTransaction) throws {
        if server.deleted {
            try txn.delete(id: operation.itemId, in: operation.table)
        } else {
            try txn.upsert(remoteCopy(server, of: operation), in: operation.table)
        }
    }

    /// The local copy of `operation`'s item that the remote's record `server` (not a
    /// tombstone) replaces it with.
    static func remoteCopy(_ server: Record, of operation: QueuedOperation) -> Record {
        Record(id: operation.itemId, fields: server.fields, version: server.version, updatedAt: server.updatedAt)
    }

    /// Requeues an operation with a fresh send id on the remote's current version.
    static func resend(_ operation: QueuedOperation, item: Record?, server: Record, txn: any LocalWriteTransaction) throws {
        var again = operation
        again.sendId = UUID.randomString()
        again.state = .pending
        again.item = item.map { Record(id: operation.itemId, fields: $0.fields) } ?? operation.item
        if server.deleted {
            if operation.kind == .delete {
                // Already gone remotely: nothing left to send.
                try Outbox.remove(operation, txn)
                return
            }
            again.kind = .insert
            again.baseVersion = nil
        } else {
            if again.kind == .insert { again.kind = .update }
            again.baseVersion = server.version
        }
        try Outbox.save(again, txn)
        let isLatest = try Outbox.latest(txn, table: operation.table, itemId: operation.itemId)?.id == operation.id
        if var local = try txn.record(in: operation.table, id: operation.itemId) {
            local.version = server.deleted ? nil : server.version
            local.updatedAt = server.updatedAt
            if isLatest, let fields = again.item?.fields, again.kind != .delete { local.fields = fields }
            try txn.upsert(local, in: operation.table)
        }
    }

    /// Marks an operation failed and records why.
    static func fail(_ operation: QueuedOperation, status: Int?, message: String, code: SyncError.Code? = nil, server: Record?,
                     now: Timestamp, compensated: Bool = false, txn: any LocalWriteTransaction) throws -> SyncEvent {
        let error = try Outbox.fail(operation, status: status, message: message, code: code, server: server, now: now,
                                    compensated: compensated, txn)
        return .outboxMutationFailed(table: operation.table, record: operation.item, kind: operation.kind, error: error)
    }

    /// Settles an entry of ``operationErrors()``. Retrying an app write the store could not
    /// read (queued without its item) reads the row again and sends it whole; while the row
    /// still cannot be read, the retry leaves the entry as it is.
    public func resolve(_ error: OperationError, with resolution: OperationErrorResolution) async throws {
        let files = store.attachmentFiles
        try await gate.run {
            let isEmpty = try await self.observer.write { txn -> Bool in
                if error.compensated {
                    // Nothing is queued any more: the entry is only a record, and it is dismissed.
                    guard case .discard = resolution else {
                        throw SyncError(.notFound, "operation '\(error.operationId)' was compensated and is no longer queued; dismiss it with .discard and write again")
                    }
                    try Outbox.removeErrors(of: error.operationId, txn)
                    return try Outbox.isEmpty(txn)
                }
                guard let operation = try Outbox.operation(txn, id: error.operationId) else {
                    throw SyncError(.notFound, "operation '\(error.operationId)' is no longer queued")
                }
                // An app write the store could not read was queued without its item (a refused
                // capture): a retry reads the row again, whole, and sends that. A row still
                // unreadable (a query leaves it out), gone, or whose references still cannot be
                // noted stays failed, with its error.
                var reread: Record?
                if case .retry = resolution, operation.item == nil, operation.kind != .delete {
                    let rows = try txn.records(in: operation.table, matching: Query(Field(SystemField.id) == .string(operation.itemId)))
                    guard let row = rows.first(where: { ExactString.sameBytes($0.id, operation.itemId) }) else { return try Outbox.isEmpty(txn) }
                    do {
                        try AttachmentRow.note(try Attachment.references(in: row), txn: txn, files: files, now: Timestamp.now())
                    } catch let refusal as SyncError where refusal.code == .invalidValue {
                        return try Outbox.isEmpty(txn)
                    }
                    reread = Record(id: operation.itemId, fields: row.fields)
                }
                try Outbox.removeErrors(of: operation.id, txn)
                switch resolution {
                case .retry, .retryWith:
                    var item = operation.item
                    if case .retryWith(let record) = resolution { item = record }
                    if let server = error.serverRecord {
                        try SyncContext.resend(operation, item: item, server: server, txn: txn)
                    } else {
                        var again = operation
                        again.state = .pending
                        again.sendId = UUID.randomString()
                        again.item = (reread ?? item).map { Record(id: operation.itemId, fields: $0.fields) }
                        if operation.item == nil, operation.kind != .delete, let sent = again.item {
                            // A refused capture's own changes were never read: every field counts.
                            again.changedFields = sent.fields.keys.sorted(by: Value.utf8Less)
                        }
                        try Outbox.save(again, txn)
                    }
                case .takeServer, .discard:
                    try Outbox.remove(operation, txn)
                    let hasLater = try Outbox.latest(txn, table: operation.table, itemId: operation.itemId) != nil
                    if case .takeServer = resolution, let server = error.serverRecord {
                        if !hasLater {
                            try SyncContext.adoptServerVersion(server, for: operation, inFlight: try InFlight.read(txn), txn: txn)
                        }
                    } else if !hasLater {
                        try txn.delete(id: operation.itemId, in: operation.table)
                    }
                }
                return try Outbox.isEmpty(txn)
            }
            self.broadcaster.publish(.outboxStatus(isEmpty: isEmpty))
        }
    }
}
