import Foundation

// When a remote resets a table's cursor (a role change switched how the caller reads the
// table, the table's epoch changed), it sends the caller's whole view again, but it cannot
// name the rows the caller lost along the way: they were never sent as removed. So the rows
// of a resent view are marked as they arrive, and when the pull reaches the end, every local
// row left unmarked, and without a queued operation, is deleted: the table then equals what
// the identity may read now. The app never sees the table empty in between (rows leave only
// at the end, a page of rows per transaction), and queued local writes stay.

extension SyncContext {
    /// The system table of a sweep's marks: one row per (table, item id) the resent view
    /// holds, gone when the sweep ends. Defined when a first reset arrives.
    static let sweepMarks = "__sweep_marks"

    static let sweepMarksSchema = TableSchema(sweepMarks, fields: [FieldDefinition("table", .string, indexed: true)],
                                              undeclaredFields: .reject)

    /// The `__config` key saying a sweep of the pull under `queryId` is marking.
    static func sweepKey(_ queryId: String) -> String { "sweep:" + queryId }

    /// A mark's id: unambiguous for any table name and item id.
    static func markId(table: String, item: String) -> String { CompositeKey.slashed(table, last: item) }

    /// Rows looked at per transaction of a sweep.
    static let sweepPage = 500

    /// Whether a sweep of `table` under `queryId` was marking when its last pull stopped.
    func isSweeping(_ table: String, queryId: String) async throws -> Bool {
        try await store.read { txn in try ConfigRow.value(txn, table: table, key: Self.sweepKey(queryId)) != nil }
    }

    /// Deletes each row of `table` the resent view did not mark and no queued operation
    /// holds, a page of rows per transaction (announced as ``SyncEvent/removedFromView(table:ids:)``),
    /// then drops the marks and the sweep's note. Returns how many rows it deleted.
    func sweepUnmarked(_ table: String, queryId: String) async throws -> Int {
        var after: String?
        var swept = 0
        while true {
            let from = after
            let (removed, last) = try await observer.write { txn -> ([String], String?) in
                let range: QueryPredicate = from.map { Field(SystemField.id) > .string($0) } ?? .all
                let rows = try txn.records(in: table, matching: Query(range, order: [SortKey(SystemField.id)], limit: Self.sweepPage))
                guard let last = rows.last?.id else { return ([], nil) }
                let ids = rows.map(\.id)
                let marks = try txn.read(ids.map { .record(table: Self.sweepMarks, id: Self.markId(table: table, item: $0)) })
                var unmarked = zip(ids, marks).filter { $0.1.isEmpty }.map(\.0)
                if !unmarked.isEmpty, try Outbox.hasOperations(txn, table: table) {
                    let queued = try Outbox.itemsWithOperations(txn, table: table, among: unmarked)
                    unmarked = unmarked.filter { !queued.contains(ExactString($0)) }
                }
                if !unmarked.isEmpty { _ = try txn.delete(ids: unmarked, in: table) }
                return (unmarked, last)
            }
            if !removed.isEmpty {
                swept += removed.count
                broadcaster.publish(.removedFromView(table: table, ids: removed))
            }
            guard let last else { break }
            after = last
        }
        try await forgetSweep(table, queryId: queryId)
        return swept
    }

    /// Drops `table`'s marks, a page per transaction, then the note that a sweep under
    /// `queryId` is marking (last, so a sweep cut short here runs again).
    func forgetSweep(_ table: String, queryId: String) async throws {
        while true {
            let more = try await observer.write { txn -> Bool in
                let marks = try txn.records(in: Self.sweepMarks, matching: Query(Field("table") == .string(table), limit: 1000))
                if !marks.isEmpty { _ = try txn.delete(ids: marks.map(\.id), in: Self.sweepMarks) }
                return marks.count == 1000
            }
            if !more { break }
        }
        try await observer.write { txn in
            try ConfigRow.setValue(txn, table: table, key: Self.sweepKey(queryId), keyType: ConfigRow.KeyType.sweep.rawValue, value: nil)
        }
    }
}
