/// What an app's schema migration does to the writes still queued under the old schema, for
/// an adapter whose app tables the app migrates itself (the GRDB adapter's
/// `renameSyncedColumn` and `dropSyncedColumn`). Each runs inside the migration's
/// transaction, so the queue and the table change together or not at all.
package enum QueuedFieldChanges {
    /// How many operations one read of the queue takes.
    private static let page = 500

    /// Renames field `old` to `new` in every operation queued on `table` (failed ones
    /// included): in its item and its changed fields, so a write queued under the old schema
    /// is sent under the new name. The items of the table's recorded failures (the app's and
    /// the server's) are renamed too. Returns how many operations changed.
    ///
    /// Throws ``SyncError/Code/schemaMismatch`` when a queued item already holds a field named
    /// `new` beside `old` (one of the two values would be lost); the caller's transaction then
    /// changes nothing.
    package static func rename(_ old: String, to new: String, inTable table: String,
                               in txn: any LocalWriteTransaction) throws -> Int {
        var renamed = 0
        try forEachOperation(of: table, txn) { operation in
            var changed = operation
            if var item = operation.item, let value = item.fields[old] {
                if item.fields[new] != nil {
                    throw SyncError(.schemaMismatch, "table '\(table)': a write queued on item '\(operation.itemId)' holds both '\(old)' and '\(new)'; renaming '\(old)' would lose one of them")
                }
                item.fields[old] = nil
                item.fields[new] = value
                changed.item = item
            }
            if changed.changedFields.contains(old) {
                changed.changedFields = changed.changedFields.map { $0 == old ? new : $0 }.sorted(by: Value.utf8Less)
            }
            guard changed != operation else { return }
            try Outbox.save(changed, txn)
            renamed += 1
        }
        let ofTable = Query(OperationErrorRow.field(.table) == .string(table))
        for var row in try OperationErrorRow.all(txn, ofTable) {
            let before = try row.record()
            row.clientItem = row.clientItem.map { renamedKey(old, to: new, in: $0) }
            if let server = row.serverItem { row.serverItem?.fields = renamedKey(old, to: new, in: server.fields) }
            let after = try row.record()
            if after != before { try txn.upsert(after, in: OperationErrorRow.table) }
        }
        return renamed
    }

    /// How many operations queued on `table` (failed ones included) carry `field`: hold it in
    /// their item or name it among their changed fields.
    package static func count(carrying field: String, inTable table: String, in txn: any LocalReadTransaction) throws -> Int {
        var count = 0
        try forEachOperation(of: table, txn) { operation in
            if operation.item?.fields[field] != nil || operation.changedFields.contains(field) { count += 1 }
        }
        return count
    }

    /// `fields` with the key `old` (if present and `new` is not) under `new`.
    private static func renamedKey(_ old: String, to new: String, in fields: [String: Value]) -> [String: Value] {
        guard let value = fields[old], fields[new] == nil else { return fields }
        var result = fields
        result[old] = nil
        result[new] = value
        return result
    }

    /// Every operation queued on `table`, in queue order, a page at a time (the stored rows,
    /// not amended by the in-flight marker: they are what is rewritten).
    private static func forEachOperation(of table: String, _ txn: any LocalReadTransaction,
                                         _ body: (QueuedOperation) throws -> Void) throws {
        var after = Int64.min
        while true {
            let query = Query(OperationRow.field(.table) == .string(table) && OperationRow.field(.sequence) > .int(after),
                              order: [OperationRow.sorted(.sequence)], limit: page)
            let rows = try txn.records(in: OperationRow.table, matching: query)
            for row in rows {
                let operation = try QueuedOperation(row: row)
                try body(operation)
                after = operation.sequence
            }
            if rows.count < page { return }
        }
    }
}
