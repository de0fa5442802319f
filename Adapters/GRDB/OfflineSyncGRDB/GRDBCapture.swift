import OfflineSync
import OfflineSyncSQLite
import OfflineSyncStoreKit

/// Capturing the app's own writes to its synced tables, whatever path they take (GRDB
/// records, raw SQL, a migration's fix-up, another process): three triggers per table note
/// each changed row's id in `__osync_captured` in the writing transaction, with which fields
/// an update changed, and count the write in `__osync_grdb_state` (what
/// ``GRDBStore/externalChangeToken()`` answers from). The triggers stay silent while the
/// adapter writes (a row in `__osync_applying`, inserted and deleted inside each of its write
/// transactions, invisible to any other connection), so pulled changes are never echoed.
///
/// Every write transaction of the store first queues what was captured (``ingest(_:files:)``):
/// a noted row the engine did not know becomes an insert, a known one an update or — gone
/// from the table — a delete, each folded into the queue by the same collapse rules as a
/// write through the engine.
enum GRDBCapture {
    /// The bookkeeping the triggers write, created when the store opens.
    static let bookkeeping = [
        "CREATE TABLE IF NOT EXISTS \(GRDBName.catalog) (\"num\" INTEGER PRIMARY KEY, \"name\" TEXT NOT NULL UNIQUE, \"schema\" BLOB NOT NULL)",
        "CREATE TABLE IF NOT EXISTS \(GRDBName.captured) (\"tbl\" INTEGER NOT NULL, \"id\" TEXT NOT NULL, \"changed\" INTEGER NOT NULL, PRIMARY KEY (\"tbl\", \"id\")) WITHOUT ROWID",
        "CREATE TABLE IF NOT EXISTS \(GRDBName.applying) (\"x\" INTEGER)",
        "CREATE TABLE IF NOT EXISTS \(GRDBName.state) (\"k\" INTEGER PRIMARY KEY CHECK (\"k\" = 1), \"captures\" INTEGER NOT NULL, \"commits\" INTEGER NOT NULL)",
        "INSERT OR IGNORE INTO \(GRDBName.state) VALUES (1, 0, 0)",
    ]

    /// The bit an update of the field at `position` sets in `changed`: one per field up to
    /// 62, then one shared by every later field (an update of one of them reports them all).
    static func bit(_ position: Int) -> Int64 { Int64(1) << Int64(min(position, 62)) }

    private static func triggerNames(_ number: Int64) -> [String] {
        ["i", "u", "d"].map { GRDBName.quote("\(GRDBName.prefix)cap_\(number)_\($0)") }
    }

    /// Drops the table's triggers (before a redefinition installs new ones).
    static func dropTriggers(_ number: Int64, _ sql: SQLiteEmbeddedTables) throws {
        for name in triggerNames(number) { try sql.executeUncached("DROP TRIGGER IF EXISTS \(name)") }
    }

    /// Installs the table's three triggers.
    static func installTriggers(_ table: GRDBTypedTable, _ sql: SQLiteEmbeddedTables) throws {
        let names = triggerNames(table.number)
        let silent = "WHEN NOT EXISTS (SELECT 1 FROM \(GRDBName.applying))"
        let count = "UPDATE \(GRDBName.state) SET \"captures\" = \"captures\" + 1;"
        let note = "INSERT INTO \(GRDBName.captured) (\"tbl\", \"id\", \"changed\") VALUES (\(table.number), "
        // A column compared byte for byte whatever collation the app gave it, so a change of
        // letter case counts.
        let mask = table.columns.isEmpty ? "0" : table.columns.enumerated().map { position, column in
            "(CASE WHEN OLD.\(column) IS NOT NEW.\(column) COLLATE BINARY THEN \(bit(position)) ELSE 0 END)"
        }.joined(separator: " | ")
        let statements = [
            "CREATE TRIGGER \(names[0]) AFTER INSERT ON \(table.sqlName) \(silent) BEGIN "
                + "\(note)NEW.\"id\", -1) ON CONFLICT (\"tbl\", \"id\") DO UPDATE SET \"changed\" = -1; \(count) END",
            "CREATE TRIGGER \(names[1]) AFTER UPDATE ON \(table.sqlName) \(silent) BEGIN "
                + "\(note)OLD.\"id\", 0) ON CONFLICT (\"tbl\", \"id\") DO NOTHING; "
                + "\(note)NEW.\"id\", \(mask)) ON CONFLICT (\"tbl\", \"id\") DO UPDATE SET \"changed\" = \"changed\" | excluded.\"changed\"; "
                + "\(count) END",
            "CREATE TRIGGER \(names[2]) AFTER DELETE ON \(table.sqlName) \(silent) BEGIN "
                + "\(note)OLD.\"id\", 0) ON CONFLICT (\"tbl\", \"id\") DO NOTHING; \(count) END",
        ]
        for statement in statements { try sql.executeUncached(statement) }
    }

    /// Notes every row of an adopted table as captured: rows the app had before the table
    /// synced are queued as inserts.
    static func captureAll(_ table: GRDBTypedTable, _ sql: SQLiteEmbeddedTables) throws {
        try sql.execute("INSERT OR IGNORE INTO \(GRDBName.captured) (\"tbl\", \"id\", \"changed\") SELECT \(table.number), \"id\", -1 FROM \(table.sqlName) WHERE \"id\" IS NOT NULL")
    }

    /// Queues what the triggers noted and clears the notes, inside `txn` (before the capture
    /// is silenced for the transaction's own writes). A note of a table no longer in the
    /// catalog is dropped.
    static func ingest(_ txn: GRDBWriteTransaction, files: (any AttachmentFileStore)?) throws {
        let sql = txn.sql
        guard try sql.scalar("SELECT 1 FROM \(GRDBName.captured) LIMIT 1") != nil else { return }
        var notes: [(table: Int64, id: String, changed: Int64)] = []
        try sql.rows("SELECT \"tbl\", \"id\", \"changed\" FROM \(GRDBName.captured)") { row in
            guard case .int(let table) = row[0], case .text(let id) = row[1], case .int(let changed) = row[2] else {
                throw SyncError(.corrupted, "\(GRDBName.captured) holds a row of the wrong types")
            }
            notes.append((table, id, changed))
        }
        let byNumber = Dictionary(txn.typed.values.map { ($0.number, $0) }, uniquingKeysWith: { first, _ in first })
        var changes: [CapturedChange] = []
        for note in notes {
            guard let table = byNumber[note.table] else { continue }
            let known = try sql.scalar("SELECT \"version\" FROM \(table.metaName) WHERE \"id\" = ?1", [.text(note.id)])
            let current = try txn.record(in: table.schema.name, id: note.id)
            let item = current.map { Record(id: $0.id, fields: $0.fields) }
            switch (known, item) {
            case (nil, nil):
                continue
            case (nil, let item?):
                try sql.execute(table.metaUpsertSQL, [.text(note.id), .null, .null, .int(0), .null, .null])
                changes.append(CapturedChange(table: table.schema.name, itemId: note.id, kind: .insert, item: item,
                                              baseVersion: nil, changedFields: Array(item.fields.keys)))
            case (let version?, nil):
                try sql.execute("DELETE FROM \(table.metaName) WHERE \"id\" = ?1", [.text(note.id)])
                changes.append(CapturedChange(table: table.schema.name, itemId: note.id, kind: .delete, item: nil,
                                              baseVersion: version.text, changedFields: []))
            case (let version?, let item?):
                let changed = table.schema.fields.enumerated().filter { note.changed & bit($0.offset) != 0 }.map(\.element.name)
                guard !changed.isEmpty else { continue }
                changes.append(CapturedChange(table: table.schema.name, itemId: note.id, kind: .update, item: item,
                                              baseVersion: version.text, changedFields: changed))
            }
        }
        try CapturedChange.queue(changes, in: txn, files: files)
        try sql.execute("DELETE FROM \(GRDBName.captured)")
    }
}

private extension SQLiteValue {
    /// The text, or `nil` for any other storage class (a NULL version: never synced).
    var text: String? {
        if case .text(let s) = self { return s }
        return nil
    }
}
