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
///
/// A noted row the engine cannot read (a column holding what its field's type cannot read,
/// an attachment reference that is malformed or names a file of another size) stops nothing
/// else: its write is queued as a failed operation that names the row and the column
/// (`operationErrors()`, with the reason's code), its item waits, and every other row is
/// queued and pushed. The refusal is noted in `__osync_refused`; the app's next write of
/// the row takes it back and is queued in its place (an update of every field, since the
/// refused write's own changes were never read). The note stays until the refusal is over:
/// taken back, or its operation gone; an app's `resolve(.retry)` reads the row again and
/// sends it whole, or leaves the refusal as it is while the row cannot be read.
enum GRDBCapture {
    /// The bookkeeping the triggers write, created when the store opens.
    static let bookkeeping = [
        "CREATE TABLE IF NOT EXISTS \(GRDBName.catalog) (\"num\" INTEGER PRIMARY KEY, \"name\" TEXT NOT NULL UNIQUE, \"schema\" BLOB NOT NULL)",
        "CREATE TABLE IF NOT EXISTS \(GRDBName.captured) (\"tbl\" INTEGER NOT NULL, \"id\" TEXT NOT NULL, \"changed\" INTEGER NOT NULL, PRIMARY KEY (\"tbl\", \"id\")) WITHOUT ROWID",
        "CREATE TABLE IF NOT EXISTS \(GRDBName.applying) (\"x\" INTEGER)",
        "CREATE TABLE IF NOT EXISTS \(GRDBName.refused) (\"tbl\" INTEGER NOT NULL, \"id\" TEXT NOT NULL, \"operation\" TEXT NOT NULL, PRIMARY KEY (\"tbl\", \"id\")) WITHOUT ROWID",
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

    /// Installs the table's three triggers, those it lacks (an app migration that rebuilt the
    /// table dropped them with the old one).
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
            "CREATE TRIGGER IF NOT EXISTS \(names[0]) AFTER INSERT ON \(table.sqlName) \(silent) BEGIN "
                + "\(note)NEW.\"id\", -1) ON CONFLICT (\"tbl\", \"id\") DO UPDATE SET \"changed\" = -1; \(count) END",
            "CREATE TRIGGER IF NOT EXISTS \(names[1]) AFTER UPDATE ON \(table.sqlName) \(silent) BEGIN "
                + "\(note)OLD.\"id\", 0) ON CONFLICT (\"tbl\", \"id\") DO NOTHING; "
                + "\(note)NEW.\"id\", \(mask)) ON CONFLICT (\"tbl\", \"id\") DO UPDATE SET \"changed\" = \"changed\" | excluded.\"changed\"; "
                + "\(count) END",
            "CREATE TRIGGER IF NOT EXISTS \(names[2]) AFTER DELETE ON \(table.sqlName) \(silent) BEGIN "
                + "\(note)OLD.\"id\", 0) ON CONFLICT (\"tbl\", \"id\") DO NOTHING; \(count) END",
        ]
        for statement in statements { try sql.executeUncached(statement) }
    }

    /// Notes every row of an adopted table as captured: rows the app had before the table
    /// synced are queued as inserts.
    static func captureAll(_ table: GRDBTypedTable, _ sql: SQLiteEmbeddedTables) throws {
        try sql.execute("INSERT OR IGNORE INTO \(GRDBName.captured) (\"tbl\", \"id\", \"changed\") SELECT \(table.number), \"id\", -1 FROM \(table.sqlName) WHERE \"id\" IS NOT NULL")
    }

    /// How many notes one round of ``ingest(_:files:)`` reads, queues and clears: the
    /// memory an ingest holds stays bounded however many rows the app wrote.
    static let ingestPage = 1000

    /// Queues what the triggers noted and clears the notes, inside `txn` (before the capture
    /// is silenced for the transaction's own writes), a page at a time: each page is one
    /// statement per table that reads the notes with their rows and side rows, one that
    /// marks the new rows known, one that forgets the deleted ones, the queue entries, and
    /// one that clears the page's notes. A note of a table no longer in the catalog is dropped.
    static func ingest(_ txn: GRDBWriteTransaction, files: (any AttachmentFileStore)?) throws {
        let sql = txn.sql
        guard try sql.scalar("SELECT 1 FROM \(GRDBName.captured) LIMIT 1") != nil else { return }
        try sql.execute("DELETE FROM \(GRDBName.captured) WHERE \"tbl\" NOT IN (SELECT \"num\" FROM \(GRDBName.catalog))")
        for table in txn.typed.values.sorted(by: { $0.number < $1.number }) {
            while try ingestPage(of: table, txn, files: files) {}
        }
    }

    /// One captured row, as one page of ``ingest(_:files:)`` reads it.
    private struct Note {
        let id: String
        /// The fields the triggers saw change (bits of ``bit(_:)``); -1 for an insert.
        let changed: Int64
        /// Whether the engine knew the row (it has a side row), and at which version.
        let known: Bool
        let version: String?
        /// The failed operation of an earlier refusal of the row, which this note takes back.
        let refusedBefore: String?
        /// The row as it stands (`nil` when it is gone or cannot be read).
        var row: Record?
        /// Why the row cannot be read.
        var unreadable: SyncError?
    }

    /// One page of `table`'s notes; returns whether there may be more.
    private static func ingestPage(of table: GRDBTypedTable, _ txn: GRDBWriteTransaction,
                                   files: (any AttachmentFileStore)?) throws -> Bool {
        let sql = txn.sql
        // Per note: its id, the changed mask, whether the engine knew the row (a side row) and
        // at which version, an earlier refusal of the row, then the row as
        // ``GRDBTypedTable/selectFrom`` reads it (all NULL when the row is gone).
        var notes: [Note] = []
        try sql.rows("""
            SELECT c."id", c."changed", k."id" IS NOT NULL, k."version", r."operation", \(table.selectList) FROM \(GRDBName.captured) AS c \
            LEFT JOIN \(table.metaName) AS k ON k."id" = c."id" \
            LEFT JOIN \(GRDBName.refused) AS r ON r."tbl" = c."tbl" AND r."id" = c."id" \
            LEFT JOIN \(table.sqlName) AS t ON t."id" = c."id" LEFT JOIN \(table.metaName) AS m ON m."id" = t."id" \
            WHERE c."tbl" = ?1 LIMIT \(ingestPage)
            """, [.int(table.number)]) { row in
            guard case .text(let id) = row[0], case .int(let changed) = row[1], case .int(let known) = row[2] else {
                throw SyncError(.corrupted, "\(GRDBName.captured) holds a row of the wrong types")
            }
            var note = Note(id: id, changed: changed, known: known != 0, version: row[3].text, refusedBefore: row[4].text)
            if row[5] != .null {
                do {
                    note.row = try table.decode(Array(row[5...]))
                } catch let error as SyncError {
                    note.unreadable = error
                }
            }
            notes.append(note)
        }
        guard !notes.isEmpty else { return false }
        // Earlier refusals of these rows are taken back first: each note is queued afresh. A
        // refusal the app retried, whose retry is still queued, is not over: this write queues
        // behind or into the retry, and the refusal's note stays, so the retry is taken back
        // by a later write should it fail again.
        var over: [SQLiteValue] = []
        for note in notes {
            guard let operation = note.refusedBefore else { continue }
            if try CapturedChange.withdrawRefusal(operation, in: txn) { over.append(.text(note.id)) }
        }
        if !over.isEmpty {
            try sql.execute("DELETE FROM \(GRDBName.refused) WHERE \"tbl\" = ?1 AND \"id\" IN (\(placeholders(over.count, from: 2)))",
                            [.int(table.number)] + over)
        }
        var changes: [CapturedChange] = []
        var inserted: [SQLiteValue] = [], deleted: [SQLiteValue] = []
        for note in notes {
            if let reason = note.unreadable {
                changes.append(CapturedChange(table: table.schema.name, itemId: note.id, kind: note.known ? .update : .insert,
                                              item: nil, baseVersion: note.version, changedFields: [], refusal: reason))
                continue
            }
            // A row whose write was refused had changes nobody read: every field counts as changed.
            let mask = note.refusedBefore == nil ? note.changed : -1
            let item = note.row.map { Record(id: $0.id, fields: $0.fields) }
            switch (note.known, item) {
            case (false, nil):
                continue
            case (false, let item?):
                inserted.append(.text(note.id))
                changes.append(CapturedChange(table: table.schema.name, itemId: note.id, kind: .insert, item: item,
                                              baseVersion: nil, changedFields: Array(item.fields.keys)))
            case (true, nil):
                deleted.append(.text(note.id))
                changes.append(CapturedChange(table: table.schema.name, itemId: note.id, kind: .delete, item: nil,
                                              baseVersion: note.version, changedFields: []))
            case (true, let item?):
                let changed = table.schema.fields.enumerated().filter { mask & bit($0.offset) != 0 }.map(\.element.name)
                guard !changed.isEmpty else { continue }
                changes.append(CapturedChange(table: table.schema.name, itemId: note.id, kind: .update, item: item,
                                              baseVersion: note.version, changedFields: changed))
            }
        }
        // The new rows become known (a side row without a version); the deleted ones are forgotten.
        if !inserted.isEmpty {
            try sql.execute("INSERT INTO \(table.metaName) (\"id\") VALUES " + placeholders(inserted.count, rows: true), inserted)
        }
        if !deleted.isEmpty {
            try sql.execute("DELETE FROM \(table.metaName) WHERE \"id\" IN (\(placeholders(deleted.count)))", deleted)
        }
        let refused = try CapturedChange.queue(changes, in: txn, files: files)
        if !refused.isEmpty {
            try noteRefusals(refused, of: table, unknown: Set(notes.lazy.filter { !$0.known }.map { ExactString($0.id) }), sql)
        }
        let all = notes.map { SQLiteValue.text($0.id) }
        try sql.execute("DELETE FROM \(GRDBName.captured) WHERE \"tbl\" = ?1 AND \"id\" IN (\(placeholders(all.count, from: 2)))",
                        [.int(table.number)] + all)
        return notes.count == ingestPage
    }

    /// Notes the refusals ``CapturedChange/queue(_:in:files:)`` made on `table`, so the app's
    /// next write of each row takes its refusal back. A refused row the engine did not know
    /// (`unknown`) stays unknown: its side row goes, so the write that mends it is queued as
    /// the insert it is.
    static func noteRefusals(_ refused: [CapturedChange.Refused], of table: GRDBTypedTable, unknown: Set<ExactString>,
                             _ sql: SQLiteEmbeddedTables) throws {
        for refusal in refused {
            try sql.execute("INSERT OR REPLACE INTO \(GRDBName.refused) (\"tbl\", \"id\", \"operation\") VALUES (?1, ?2, ?3)",
                            [.int(table.number), .text(refusal.itemId), .text(refusal.operationId)])
            if unknown.contains(ExactString(refusal.itemId)) {
                try sql.execute("DELETE FROM \(table.metaName) WHERE \"id\" = ?1", [.text(refusal.itemId)])
            }
        }
    }

    /// `count` numbered placeholders from `from` (`?1, ?2, …`), each in parentheses when
    /// `rows` (a multi-row VALUES list).
    private static func placeholders(_ count: Int, from: Int = 1, rows: Bool = false) -> String {
        var text = ""
        text.reserveCapacity(count * 8)
        for number in from..<(from + count) {
            if number > from { text += ", " }
            text += rows ? "(?\(number))" : "?\(number)"
        }
        return text
    }
}

private extension SQLiteValue {
    /// The text, or `nil` for any other storage class (a NULL version: never synced).
    var text: String? {
        if case .text(let s) = self { return s }
        return nil
    }
}
