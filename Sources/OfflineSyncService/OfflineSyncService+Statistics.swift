import OfflineSync

/// How many rows one app table of the service's store holds, every identity's together.
public struct TableRowCount: Sendable, Hashable {
    /// The table.
    public var table: String
    /// Rows that are not deleted.
    public var rows: Int
    /// Tombstones: deleted rows kept so that devices learn of the delete.
    public var deleted: Int
}

extension OfflineSyncService {
    /// Every app table the store holds (the service's own `__` tables left out), by name, with
    /// its rows and tombstones counted across every identity: an operator's view, never an
    /// answer to a client (each identity's counts go through ``count(claims:table:predicate:includeDeleted:)``).
    /// One read transaction; a count is a scan of the table where the store keeps no count.
    public func tableRowCounts() async throws -> [TableRowCount] {
        try await store.read { txn in
            try txn.tables().filter { !$0.name.hasPrefix(Names.reservedPrefix) }.map { schema in
                let live = try txn.count(in: schema.name, matching: Field(SystemField.deleted) == false)
                let all = try txn.count(in: schema.name, matching: .all)
                return TableRowCount(table: schema.name, rows: live, deleted: all - live)
            }
        }
    }
}
