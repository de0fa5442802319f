import COfflineSyncLMDB
import OfflineSync

extension LMDBWriteTransaction {
    /// Creates a table, or migrates it to a changed schema, inside this transaction.
    ///
    /// Records are stored whole, so a migration only checks that every stored value of a
    /// declared field fits its (new) type — else ``SyncError/Code/schemaMismatch`` and the
    /// caller aborts, changing nothing — and rebuilds the indexes when they changed.
    func define(_ schema: TableSchema) throws {
        let key = LMDBLayout.tableKey(schema.name)
        if let stored = try get(meta, key) {
            let old = try environment.entry(named: schema.name, bytes: stored.buffer)
            let unchanged = LMDBTable(number: old.number, generation: old.generation, schema: schema)
            if unchanged.bytes == old.bytes { return }
            let dbi = try recordsDatabase(old)
            try scan(dbi) { _, value in
                let record = try LMDBReadTransaction.decode(value)
                for field in schema.fields where !field.type.accepts(record[field.name]) {
                    throw SyncError(.schemaMismatch, "table '\(schema.name)': a record holds a \(record[field.name].kind.rawValue) in field '\(field.name)', which the new schema declares \(field.type.rawValue); nothing was changed")
                }
                return true
            }
            let sameIndexes = old.indexes.map { $0.map { Array($0.utf8) } } == LMDBTable.indexes(of: schema).map { $0.map { Array($0.utf8) } }
            let new = LMDBTable(number: old.number, generation: sameIndexes ? old.generation : old.generation + 1, schema: schema)
            if !sameIndexes {
                for position in old.indexes.indices { try empty(old.indexDatabase(position)) }
                try createIndexes(new, filling: dbi)
            }
            try put(LMDBLayout.metaDatabase, key, new.bytes)
            entries[ExactString(schema.name)] = new
        } else {
            let number = try get(meta, LMDBLayout.nextTableKey).flatMap { BigEndian.uint64($0.buffer) } ?? 1
            try put(LMDBLayout.metaDatabase, LMDBLayout.nextTableKey, BigEndian.bytes(number + 1))
            let entry = LMDBTable(number: number, generation: 0, schema: schema)
            _ = try create(entry.database, flags: 0)
            try createIndexes(entry, filling: nil)
            try put(LMDBLayout.metaDatabase, key, entry.bytes)
            entries[ExactString(schema.name)] = entry
        }
    }

    /// Creates the index databases of `entry` and fills them from the records in `records`.
    private func createIndexes(_ entry: LMDBTable, filling records: MDB_dbi?) throws {
        let indexes = entry.indexes
        for position in indexes.indices {
            _ = try create(entry.indexDatabase(position), flags: UInt32(MDB_DUPSORT))
        }
        guard let records, !indexes.isEmpty else { return }
        var rows: [(key: [UInt8], record: Record)] = []
        try scan(records) { key, value in
            rows.append((key.bytes, try LMDBReadTransaction.decode(value)))
            return true
        }
        for (position, fields) in indexes.enumerated() {
            for row in rows { try put(entry.indexDatabase(position), LMDBIndexKey.key(row.record, fields), row.key) }
        }
    }
}
