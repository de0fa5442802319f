extension Outbox {
    /// The queued operations whose item references the attachment `hash` (any state, as
    /// their rows hold it: a caller that reads states writes the in-flight marker out first),
    /// in queue order; with `first`, at most the first one. Reads the queue a page at a time:
    /// for the rare paths that ask (an upload that cannot succeed, bytes added for a file the
    /// server is taken to hold), never for every write.
    static func operations(referencing hash: String, _ txn: any LocalReadTransaction,
                           first: Bool = false) throws -> [QueuedOperation] {
        var found: [QueuedOperation] = []
        var after: Int64?
        let pageSize = 500
        while true {
            let predicate: QueryPredicate = after.map { OperationRow.field(.sequence) > .int($0) } ?? .all
            let rows = try txn.records(in: OperationRow.table, matching: Query(
                predicate, order: [OperationRow.sorted(.sequence)], limit: pageSize))
            for row in rows {
                let operation = try QueuedOperation(row: row)
                guard operation.kind != .delete, let item = operation.item,
                      item.fields.values.contains(where: \.mayHoldAttachment),
                      Attachment.scan(item.fields).references.contains(where: { $0.sha256 == hash }) else { continue }
                found.append(operation)
                if first { return found }
            }
            guard rows.count == pageSize, let last = rows.last?[OperationRow.name(.sequence)].intValue else { return found }
            after = last
        }
    }

    /// Whether an operation this device queued references the attachment `hash`: a write of
    /// its own, waiting, sent or refused.
    static func referencesAttachment(_ hash: String, _ txn: any LocalReadTransaction) throws -> Bool {
        try !operations(referencing: hash, txn, first: true).isEmpty
    }

    /// Whether a failed operation writes an item (an insert or an update) but holds none: a
    /// change an adapter captured and refused (``CapturedChange``), queued without its item —
    /// a row it could not read, or one with a reference that could not be recorded. Which
    /// files the row references is not known for sure until the app writes it again, so the
    /// sweep when a context opens takes no file for an orphan meanwhile.
    static func hasUnreadWrite(_ txn: any LocalReadTransaction) throws -> Bool {
        try txn.records(in: OperationRow.table, matching: Query(OperationRow.failed)).contains { row in
            row[OperationRow.name(.item)].objectValue == nil
                && row[OperationRow.name(.kind)].stringValue != OperationKind.delete.rawValue
        }
    }
}
