import OfflineSync

extension MemoryTables {
    /// A transaction over the engine; only used while `lock` is held. A writable one changes
    /// the tables in place and remembers each touched record's original for commit and undo.
    final class Transaction: LocalWriteTransaction {
        unowned let engine: MemoryTables
        let writable: Bool
        var isOpen = true
        /// Per touched table (a handful at most, searched by identity): per touched id, the
        /// record before this transaction and the record now (`nil`: absent).
        var touched: [(key: ExactString, table: Table, changes: [RowID: (original: Record?, current: Record?)])] = []
        /// The table looked up last: consecutive calls on one table skip the dictionary. Tables
        /// cannot be defined while a transaction holds the lock, so it stays valid.
        private var last: (key: ExactString, table: Table)?

        init(engine: MemoryTables, writable: Bool) {
            self.engine = engine
            self.writable = writable
        }

        private func table(_ name: String) throws -> (key: ExactString, table: Table) {
            guard isOpen else { throw SyncError(.storeClosed, "the transaction has ended") }
            let key = ExactString(name)
            if let last, last.key == key { return last }
            guard let table = engine.tables[key] else {
                throw SyncError(.tableNotDefined, "table '\(name)' is not defined")
            }
            last = (key, table)
            return (key, table)
        }

        func schema(of table: String) throws -> TableSchema { try self.table(table).table.schema }

        func tables() throws -> [TableSchema] {
            guard isOpen else { throw SyncError(.storeClosed, "the transaction has ended") }
            return engine.tables.values.map(\.schema).sorted { Value.utf8Less($0.name, $1.name) }
        }

        func record(in table: String, id: String) throws -> Record? {
            try self.table(table).table.rows[RowID(id)]
        }

        func records(in table: String, matching query: Query) throws -> [Record] {
            let stored = try self.table(table).table
            try query.validate(against: stored.schema)
            return stored.select(query)
        }

        func count(in table: String, matching predicate: QueryPredicate) throws -> Int {
            let stored = try self.table(table).table
            try Query(predicate).validate(against: stored.schema)
            return stored.count(predicate)
        }

        func upsert(_ record: Record, in table: String) throws {
            _ = try write(record, in: table, replacing: true)
        }

        func insert(_ record: Record, in table: String) throws -> LocalInsertOutcome {
            try write(record, in: table, replacing: false) ? .inserted : .idExists
        }

        /// Writes the record, or — unless `replacing` — nothing when a record has its id;
        /// returns whether it wrote.
        private func write(_ record: Record, in table: String, replacing: Bool) throws -> Bool {
            let (key, stored) = try self.table(table)
            guard writable else { throw SyncError(.unsupported, "a read transaction cannot write") }
            try stored.schema.validate(record)
            let id = RowID(record.id)
            if !replacing, stored.rows[id] != nil { return false }
            remember(stored.set(id, record), record, id, stored, key)
            return true
        }

        func delete(id: String, in table: String) throws -> Bool {
            let (key, stored) = try self.table(table)
            guard writable else { throw SyncError(.unsupported, "a read transaction cannot write") }
            let id = RowID(id)
            guard stored.rows[id] != nil else { return false }
            remember(stored.set(id, nil), nil, id, stored, key)
            return true
        }

        private func remember(_ previous: Record?, _ current: Record?, _ id: RowID, _ table: Table,
                              _ key: ExactString) {
            let slot: Int
            if let found = touched.firstIndex(where: { $0.table === table }) {
                slot = found
            } else {
                var changes: [RowID: (original: Record?, current: Record?)] = [:]
                // Transactions tend to look alike: start at the size the last one reached.
                changes.reserveCapacity(min(table.touchedHint, 1 << 12))
                touched.append((key, table, changes))
                slot = touched.count - 1
            }
            // One lookup: the original is stored only if the id is new to this transaction.
            touched[slot].changes[id, default: (previous, nil)].current = current
        }

        /// The net changes: each touched record as it is now, or its deletion.
        func changeSet() -> ChangeSet {
            var changeSet = ChangeSet()
            for (key, table, changes) in touched.sorted(by: { $0.key.utf8Less(than: $1.key) }) {
                table.touchedHint = changes.count
                var entry = ChangeSet.TableChanges(table: key.value)
                entry.upserts.reserveCapacity(changes.count)
                for (id, change) in changes {
                    if let current = change.current {
                        entry.upserts.append(current)
                    } else if change.original != nil {
                        entry.deletes.append(id.value)
                    }
                }
                if !entry.upserts.isEmpty || !entry.deletes.isEmpty { changeSet.tables.append(entry) }
            }
            return changeSet
        }

        /// Puts every touched record back as it was.
        func rollback() {
            for (_, table, changes) in touched {
                for (id, change) in changes { _ = table.set(id, change.original) }
            }
            touched.removeAll()
        }
    }
}
