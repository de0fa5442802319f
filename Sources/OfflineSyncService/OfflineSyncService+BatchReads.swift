import OfflineSync

extension OfflineSyncService {
    /// What a pushed batch finds in the store before any of it is applied — the outcome stored
    /// under each operation's id and the row each operation names — read in one
    /// ``LocalReadTransaction/read(_:)`` call instead of two lookups per operation. A store
    /// that batches reads answers them together (PostgreSQL: one round trip for the batch,
    /// where each lookup was one).
    ///
    /// Operations that share an id or a row share a slot, so the batch's own writes, noted as
    /// they are made, are what a later operation on the same id or row sees — as a lookup in
    /// the transaction would. Slots are found once, here; applying the batch hashes nothing.
    /// A slot no later operation uses is emptied as soon as its operation is done with it: a
    /// batch that held every row it wrote until its end ran 12% slower on SQLite (each
    /// operation's allocations landing in fresh, cache-cold memory instead of the last one's).
    struct BatchReads {
        private struct RowKey: Hashable {
            let table: ExactString
            let id: ExactString
        }

        /// Per operation, the slot of its outcome and of its row (`nil`: not read here).
        private let outcomeSlots: [Int]
        /// The slot of each outcome key the batch names.
        private let keySlots: [ExactString: Int]
        private let rowSlots: [Int?]
        private var outcomes: [OutcomeRow?]
        private var rows: [Record?]
        /// Per slot, the last operation that uses it.
        private var outcomeLastUse: [Int] = []
        private var rowLastUse: [Int] = []

        /// Reads the outcomes stored under `keys` (one per operation) and the rows `wanted`
        /// names (one per operation, `nil` for an operation answered without its row), each
        /// distinct one once.
        init(outcomes keys: [String], rows wanted: [(table: String, id: String)?], _ txn: any LocalReadTransaction) throws {
            var reads: [LocalRead] = []
            reads.reserveCapacity(keys.count + wanted.count)
            var keySlots: [ExactString: Int] = [:]
            keySlots.reserveCapacity(keys.count)
            outcomeSlots = keys.map { key in
                if let slot = keySlots[ExactString(key)] { return slot }
                keySlots[ExactString(key)] = reads.count
                reads.append(.record(table: OutcomeRow.table, id: key))
                return reads.count - 1
            }
            self.keySlots = keySlots
            let outcomeCount = reads.count
            var rowKeySlots: [RowKey: Int] = [:]
            rowKeySlots.reserveCapacity(wanted.count)
            rowSlots = wanted.map { wanted in
                guard let (table, id) = wanted else { return nil }
                let key = RowKey(table: ExactString(table), id: ExactString(id))
                if let slot = rowKeySlots[key] { return slot }
                rowKeySlots[key] = reads.count - outcomeCount
                reads.append(.record(table: table, id: id))
                return reads.count - outcomeCount - 1
            }
            let answers = try txn.read(reads)
            outcomes = try answers[..<outcomeCount].map { try $0.first.map(OutcomeRow.init(row:)) }
            rows = answers[outcomeCount...].map(\.first)
            outcomeLastUse = Array(repeating: 0, count: outcomes.count)
            rowLastUse = Array(repeating: 0, count: rows.count)
            for (index, slot) in outcomeSlots.enumerated() { outcomeLastUse[slot] = index }
            for (index, slot) in rowSlots.enumerated() { if let slot { rowLastUse[slot] = index } }
        }

        /// The outcome stored under operation `index`'s key, before or by this batch.
        func outcome(of index: Int) -> OutcomeRow? {
            outcomes[outcomeSlots[index]]
        }

        /// Notes the outcome operation `index` stored.
        mutating func stored(_ outcome: OutcomeRow, by index: Int) {
            outcomes[outcomeSlots[index]] = outcome
        }

        /// Notes an outcome stored under `key` by another operation's write (a row's earlier
        /// writer's, kept when the row was taken over): an operation of this batch with that
        /// key finds it.
        mutating func stored(_ outcome: OutcomeRow, underKey key: String) {
            if let slot = keySlots[ExactString(key)] { outcomes[slot] = outcome }
        }

        /// Operation `index`'s row — `id` of `table` — as the batch left it so far.
        func row(of index: Int, in table: String, id: String, _ txn: any LocalReadTransaction) throws -> Record? {
            guard let slot = rowSlots[index] else { return try txn.record(in: table, id: id) }
            return rows[slot]
        }

        /// Whether operation `index`'s row was read here (``row(of:in:id:_:)`` reads the store
        /// otherwise).
        func holdsRow(of index: Int) -> Bool { rowSlots[index] != nil }

        /// Notes the row operation `index` wrote; `row` is made only when a later operation
        /// of the batch reads it.
        mutating func wrote(_ row: @autoclosure () -> Record, by index: Int) {
            if let slot = rowSlots[index] { rows[slot] = rowLastUse[slot] > index ? row() : nil }
        }

        /// Operation `index` is done: the slots no later operation uses are emptied.
        mutating func finished(_ index: Int) {
            let outcome = outcomeSlots[index]
            if outcomeLastUse[outcome] <= index { outcomes[outcome] = nil }
            if let row = rowSlots[index], rowLastUse[row] <= index { rows[row] = nil }
        }
    }
}
