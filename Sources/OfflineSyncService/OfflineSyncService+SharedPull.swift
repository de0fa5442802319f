import OfflineSync
import OfflineSyncStoreKit

// Pulls of shared tables. A caller that an `everyone` read grant admits reads the table in
// change-sequence order, as owner-only tables are read; any other caller reads its own log
// merged with the logs of its large groups (``ViewReader``). Either way every row served is
// checked by the full rules with the caller's claims first.

extension OfflineSyncService {
    func pullShared(claims: Claims, _ request: PullRequest) async throws -> PullPage {
        let predicate = try Self.mapPredicate(request.predicate)
        let limit = min(max(request.limit, 1), Self.maxPageSize)
        let table = request.table
        let mode: PullMode = readsDirectly(table, claims: claims) ? .table : .view
        return try await pagedBelowHorizon(table: table) { txn, horizon in
            let epoch = try SequenceRow.of(txn, table: table).epoch
            var cursor = ViewCursor(main: 0), reset = false
            if let text = request.cursor {
                let given = try PullCursor(parsing: text)
                guard given.mode != nil else { throw SyncError(.invalidCursor, "the cursor is not one this service issued") }
                if given.epoch == epoch, given.mode == mode { cursor = given.position } else { reset = true }
            }
            switch mode {
            case .table:
                let page = try self.tablePage(table, after: cursor.main, below: horizon, limit: limit, predicate: predicate,
                                              claims: claims, txn)
                return (PullPage(records: page.records,
                                 nextCursor: PullCursor(epoch: epoch, mode: mode, position: ViewCursor(main: page.last)).text,
                                 remaining: page.remaining + page.held, cursorReset: reset, removed: page.removed),
                        page.last == cursor.main ? page.held : 0)
            case .view:
                let from = cursor.main
                var reader = ViewReader(service: self, table: table, claims: claims, predicate: predicate, below: horizon, txn: txn)
                let remaining = try reader.read(from: &cursor, limit: limit)
                let held = try reader.held(after: cursor)
                return (PullPage(records: reader.takeRecords(), nextCursor: PullCursor(epoch: epoch, mode: mode, position: cursor).text,
                                 remaining: remaining + held, cursorReset: reset, removed: reader.removed),
                        cursor.main == from && cursor.sweep == nil ? held : 0)
            }
        }
    }

    /// A page of the table's changes in sequence order (an `everyone` grant admits the caller),
    /// merged with the caller's own view entries: those exist only where the table's order
    /// cannot tell it (a compensating write after a refused change re-sends an unchanged row).
    private func tablePage(_ table: String, after: Int64, below horizon: Int64?, limit: Int, predicate: QueryPredicate, claims: Claims,
                           _ txn: any LocalReadTransaction) throws -> (records: [Record], removed: [String], last: Int64, remaining: Int, held: Int) {
        let wanted: QueryPredicate = predicate == .all ? .all : (predicate || Field(SystemField.deleted) == true)
        // On a commit-ordered store only changes below the horizon are final (see
        // ``CommitOrderedStore``); those above it are held back.
        let rowsFinal: QueryPredicate = horizon.map { Field(Meta.sequence) < .int($0) } ?? .all
        let entriesFinal: QueryPredicate = horizon.map { ViewRow.field(.sequence) < .int($0) } ?? .all
        let rows = try txn.records(in: table, matching: Query(Field(Meta.sequence) > .int(after) && rowsFinal && wanted,
                                                              order: [SortKey(Meta.sequence)], limit: limit))
        let entries = try ViewRow.all(txn, Query(ViewRow.entries(after: after, identity: claims.identity.text, table: table) && entriesFinal,
                                                 order: [ViewRow.sorted(.sequence)], limit: limit))
        // Both streams share the table's sequence: merge them and keep the first `limit`.
        var merged: [(sequence: Int64, item: String, row: Record?)] =
            rows.map { ($0[Meta.sequence].intValue ?? 0, $0.id, $0) } + entries.map { ($0.sequence, $0.item, nil) }
        merged.sort { $0.sequence < $1.sequence }
        if merged.count > limit { merged.removeLast(merged.count - limit) }
        let last = merged.last?.sequence ?? after
        // By item id, compared by bytes: ids that differ only in normalisation are two rows.
        var latest: [ExactString: Int] = [:]
        for (index, change) in merged.enumerated() { latest[ExactString(change.item)] = index }
        var records: [Record] = [], removed: [String] = []
        for (index, change) in merged.enumerated() where latest[ExactString(change.item)] == index {
            guard let row = try change.row ?? txn.record(in: table, id: change.item),
                  try evaluator.canRead(row, in: table, claims: claims, txn) else {
                removed.append(change.item)
                continue
            }
            if change.row != nil || row.deleted || predicate == .all || QueryEvaluator.matches(row, predicate) {
                records.append(Self.publicRecord(row))
            }
        }
        var remaining = 0
        if rows.count == limit || entries.count == limit || merged.count < rows.count + entries.count {
            remaining = try txn.count(in: table, matching: Field(Meta.sequence) > .int(last) && rowsFinal && wanted)
                + ViewRow.count(txn, ViewRow.entries(after: last, identity: claims.identity.text, table: table) && entriesFinal)
        }
        var held = 0
        if let horizon {
            held = try txn.count(in: table, matching: Field(Meta.sequence) >= .int(horizon) && Field(Meta.sequence) > .int(last) && wanted)
                + ViewRow.count(txn, ViewRow.entries(after: max(last, horizon - 1), identity: claims.identity.text, table: table))
        }
        return (records, removed, last, remaining, held)
    }
}
