import OfflineSync
import OfflineSyncStoreKit

// A pull of a shared table in view mode: the caller's own log merged, in shared-sequence
// order, with the logs of the large groups it belongs to; an event in its own log (a
// membership that began, ended or changed role) sweeps that group's log there, page by page.

extension OfflineSyncService {
    /// Where a view pull stands: every entry up to `main` is served; during a sweep, the
    /// event at `sweep.event` is being served, through the group-log entries up to
    /// `sweep.after`.
    struct ViewCursor {
        struct Sweep {
            var event: Int64
            var group: GroupKey
            var after: Int64
        }
        var main: Int64
        var sweep: Sweep?

        /// The cursor's text after the epoch and mode: `<main>`, or
        /// `<event>:<after>:<group in hex>` during a sweep.
        var text: String {
            guard let sweep else { return String(main) }
            return "\(sweep.event):\(sweep.after):" + OfflineSyncService.hex(sweep.group.text)
        }
    }

    /// Reads one page of a shared table for one caller and gathers what it serves: the rows
    /// the caller may read, in their current state, and the ids of rows it may have seen and
    /// may no longer read. Every decision is taken on the row as stored now, so entries of one
    /// item in several logs agree, and serving an entry twice is harmless.
    struct ViewReader {
        let service: OfflineSyncService
        let table: String
        let claims: Claims
        let predicate: QueryPredicate
        /// On a ``CommitOrderedStore``, the read's horizon: log entries at or above it are held
        /// back (a writer that began earlier may still commit below them); `nil` elsewhere.
        /// A sweep is not bounded by it: it reads the group's rows as the snapshot holds them,
        /// and a write into the group numbered above the sweep's event that the event's change
        /// did not see committed before that change (it held the group's row), so the snapshot
        /// holds it; the others reach the caller through the logs.
        let below: Int64?
        let txn: any LocalReadTransaction

        /// The rows served, in the order first met, as readers see them; the reader keeps none
        /// of them. They are kept as stored until here and made public in place: making each
        /// public as it was served copied its fields first, since the page's read still held
        /// the row (a tenth of the server's time in `perf` of move-in-big).
        mutating func takeRecords() -> [Record] {
            var rows: [Record] = []
            swap(&rows, &servedRecords)
            return OfflineSyncService.publicRecords(consume rows)
        }
        /// The ids served as removed (none of them also served as a row).
        var removed: [String] { removedIds.filter { !$0.isEmpty } }

        private var servedRecords: [Record] = []
        private var removedIds: [String] = []
        /// By item id, compared by bytes: two ids that differ only in Unicode normalisation
        /// are two rows.
        private var served: [ExactString: Int] = [:]
        private var removedIndex: [ExactString: Int] = [:]
        private var reaches: [GroupKey: Spans?] = [:]
        private var roles: [GroupKey: Set<String>?] = [:]
        private let memo = ReadMemo()

        init(service: OfflineSyncService, table: String, claims: Claims, predicate: QueryPredicate, below: Int64? = nil,
             txn: any LocalReadTransaction) {
            self.service = service
            self.table = table
            self.claims = claims
            self.predicate = predicate
            self.below = below
            self.txn = txn
        }

        /// Own-log entries below the horizon (all of them without one).
        private var ownFinal: QueryPredicate { below.map { ViewRow.field(.sequence) < .int($0) } ?? .all }
        /// Group-log entries below the horizon (all of them without one).
        private var groupFinal: QueryPredicate { below.map { GroupLogRow.field(.sequence) < .int($0) } ?? .all }

        /// How many log entries after `cursor` the horizon holds back (0 without one): the
        /// caller's own and those of the large groups its pulls read.
        mutating func held(after cursor: ViewCursor) throws -> Int {
            guard let below else { return 0 }
            let from = max(cursor.main, below - 1)
            var count = try ViewRow.count(txn, ViewRow.after(from, identity: claims.identity.text, table: table))
            for (group, since) in try largeGroups(readAfter: cursor.main) {
                for inGroup in [true, false] {
                    count += try GroupLogRow.count(txn, GroupLogRow.after(max(from, since), group: group, inGroup: inGroup, table: table))
                }
            }
            return count
        }

        /// One entry of the merged logs: from the caller's own log, or from a large group's.
        private enum Entry {
            case own(ViewRow)
            case group(GroupLogRow)

            var sequence: Int64 {
                switch self {
                case .own(let row): return row.sequence
                case .group(let row): return row.sequence
                }
            }

            /// A membership event: serving it sweeps its group's log.
            var startsSweep: Bool {
                if case .own(let row) = self { return row.group != nil }
                return false
            }
        }

        /// Serves the entries after `cursor` until the page holds `limit` rows and removals,
        /// and moves the cursor past what it served; returns how many entries remain after it
        /// (0 when the logs are read to their end). Entries of an item the page already
        /// decided cost nothing (one snapshot serves them all alike), so a move-in's sweep and
        /// the same rows' own entries fill one page once. A page stops only at a sequence
        /// boundary, and is empty only when nothing remains.
        mutating func read(from cursor: inout ViewCursor, limit: Int) throws -> Int {
            self.limit = limit
            if let sweep = cursor.sweep {
                if let last = try self.sweep(sweep.group, after: sweep.after, through: try sweepBound(sweep.group, event: sweep.event)) {
                    cursor.sweep?.after = last
                    return try remaining(after: cursor, sweptFrom: sweep.after)
                }
                // Everything else at the event's sequence was served before the sweep began.
                cursor = ViewCursor(main: sweep.event)
            }
            let groups = try largeGroups(readAfter: cursor.main)
            while true {
                let fetch = limit + 1
                var entries = try ViewRow.all(txn, Query(ViewRow.after(cursor.main, identity: claims.identity.text, table: table) && ownFinal,
                                                         order: [ViewRow.sorted(.sequence)], limit: fetch)).map(Entry.own)
                // Entries up to `bound` are complete in every log read: a log that filled its
                // fetch may hold more after its last one.
                var bound = entries.count == fetch ? entries.last!.sequence : Int64.max
                for (group, since) in groups {
                    let from = max(cursor.main, since)
                    // Items still in the group and items that left it are stored apart.
                    for inGroup in [true, false] {
                        let logged = try GroupLogRow.entries(txn, Query(GroupLogRow.after(from, group: group, inGroup: inGroup, table: table)
                                                                            && groupFinal,
                                                                        order: [GroupLogRow.sorted(.sequence)], limit: fetch))
                        if logged.count == fetch { bound = min(bound, logged.last!.sequence) }
                        entries += logged.map(Entry.group)
                    }
                }
                if entries.isEmpty { return 0 }
                // A membership event comes last at its sequence: its sweep may end the page, and
                // once the sweep is done the cursor moves past the whole sequence, so whatever
                // else shares it must be served first. Only one event fits a sequence: the
                // sweep's cursor names it by sequence alone (each membership change draws a
                // sequence of its own, so two never share one).
                entries.sort { ($0.sequence, $0.startsSweep ? 1 : 0) < ($1.sequence, $1.startsSweep ? 1 : 0) }
                var index = 0
                while index < entries.count, entries[index].sequence <= bound {
                    let sequence = entries[index].sequence
                    var end = index
                    while end < entries.count, entries[end].sequence == sequence { end += 1 }
                    guard entries[index..<end].count(where: \.startsSweep) <= 1 else {
                        throw SyncError(.corrupted, "the change log of table '\(table)' holds two membership events at sequence \(sequence)")
                    }
                    // One sequence number is one change: served whole or not at all.
                    if isFull, try entries[index..<end].contains(where: { try adds($0) }) { return try remaining(after: cursor) }
                    for entry in entries[index..<end] {
                        switch entry {
                        case .own(let row):
                            if let group = row.group {
                                if let last = try self.sweep(group, after: .min, through: try sweepBound(group, event: sequence)) {
                                    cursor = ViewCursor(main: sequence - 1, sweep: ViewCursor.Sweep(event: sequence, group: group, after: last))
                                    return try remaining(after: cursor)
                                }
                            } else {
                                try decide(row.item, stored: try txn.record(in: table, id: row.item)) { _ in true }
                            }
                        case .group(let row):
                            try decide(row.item, stored: try txn.record(in: table, id: row.item)) { try $0.knows(row) }
                        }
                    }
                    cursor.main = sequence
                    index = end
                }
                if bound == .max { return 0 }
            }
        }

        /// The most rows and removals one page holds.
        private var limit = 1
        private var isFull: Bool { served.count + removedIndex.count >= limit }

        /// Whether serving `entry` could add a row or a removal the page does not hold yet.
        private func adds(_ entry: Entry) throws -> Bool {
            switch entry {
            case .own(let row): return row.group != nil || !isDecided(row.item)
            case .group(let row): return !isDecided(row.item)
            }
        }

        /// Serves the group's log of this table after `after` (a move-in, a move-out, a role
        /// change): each row the caller may read now, and the id of each it may have seen
        /// there and may not read now. Returns `nil` when the log is read to its end, else the
        /// sequence of the last entry served (the page is full).
        ///
        /// The group's log in change order is read from two places: the rows still in the group
        /// from the table itself (by the grant's key and the change sequence: their entries'
        /// sequences are their own), each row read once; and the entries of items that left,
        /// from the log, with their rows read a page at a time.
        private mutating func sweep(_ group: GroupKey, after: Int64, through: Int64?) throws -> Int64? {
            let fields = keyFields(of: group)
            let rowsBound: QueryPredicate = through.map { Field(Meta.sequence) <= .int($0) } ?? .all
            let leftBound: QueryPredicate = through.map { GroupLogRow.field(.sequence) <= .int($0) } ?? .all
            var position = after
            while true {
                let fetch = limit + 1
                // Entries up to `bound` are complete in every source read.
                var bound = Int64.max
                var candidates: [Candidate] = []
                for (field, value) in fields {
                    let rows = try txn.records(in: table, matching: Query(
                        Field(field) == value && Field(Meta.sequence) > .int(position) && rowsBound, order: [SortKey(Meta.sequence)], limit: fetch))
                    if rows.count == fetch { bound = min(bound, rows.last?[Meta.sequence].intValue ?? .min) }
                    candidates += rows.map { ($0[Meta.sequence].intValue ?? .min, $0[Meta.item].stringValue ?? $0.id, $0, nil) }
                }
                let left = try GroupLogRow.entries(txn, Query(GroupLogRow.after(position, group: group, inGroup: false, table: table) && leftBound,
                                                              order: [GroupLogRow.sorted(.sequence)], limit: fetch))
                if left.count == fetch { bound = min(bound, left.last!.sequence) }
                // The rows of the items that left, in one read, not one lookup per entry.
                var stored: [ExactString: Record] = [:]
                try Self.byIDs(left.map { .string($0.item) }) { query in
                    for row in try txn.records(in: table, matching: query) { stored[ExactString(row.id)] = row }
                }
                candidates += left.map { ($0.sequence, $0.item, stored[ExactString($0.item)], $0) }
                candidates.sort { $0.sequence < $1.sequence }
                // The log entries of the rows that cannot be served (every row of a move-out),
                // read for the rest of the page at the first such row: one lookup per row was
                // a third of move-out-big's server time. A move-in reads none.
                var logged: [ExactString: GroupLogRow]?
                for (index, candidate) in candidates.enumerated() where candidate.sequence <= bound {
                    if isFull, !isDecided(candidate.item) { return position }
                    if let entry = candidate.entry {
                        try decide(candidate.item, stored: candidate.row) { try $0.knows(entry) }
                    } else {
                        try decide(candidate.item, stored: candidate.row) { reader in
                            if logged == nil { logged = try reader.logEntries(of: candidates[index...], in: group) }
                            return try logged?[ExactString(candidate.item)].map { try reader.knows($0) } ?? false
                        }
                    }
                    position = candidate.sequence
                }
                if bound == .max { return nil }
                position = bound
            }
        }

        /// Where a sweep of `group` for the membership event at `event` may stop: the event,
        /// when the caller's pulls read the group's log after it (a large group, its
        /// membership open since at most the event): every change to the group after the event
        /// is in that log (a write logs to its groups' logs whatever their mode), so the
        /// sweep's rows after it would be served twice. `nil` (the whole group) otherwise: a
        /// small group's write that did not see the event reached only the members it saw.
        private mutating func sweepBound(_ group: GroupKey, event: Int64) throws -> Int64? {
            try largeGroups(readAfter: event - 1).contains { $0.0 == group && $0.1 <= event } ? event : nil
        }

        /// The fields (and values) by which the table's rows belong to the group with key
        /// `group`: a sweep reads, and counts, the group's rows by them.
        private func keyFields(of group: GroupKey) -> [(field: String, value: Value)] {
            Group(key: group).map { service.groupFields(of: $0, in: table) } ?? []
        }

        /// A sweep's read: a table row still in the group (`entry` nil), or an entry of an item
        /// that left it with its row as stored (`row` nil: none).
        private typealias Candidate = (sequence: Int64, item: String, row: Record?, entry: GroupLogRow?)

        /// The log entries under `group`'s key of the table rows among `candidates`, by item.
        private func logEntries(of candidates: ArraySlice<Candidate>, in group: GroupKey) throws -> [ExactString: GroupLogRow] {
            var entries: [ExactString: GroupLogRow] = [:]
            let ids = candidates.filter { $0.entry == nil }.map { Value.string(GroupLogRow.id(group: group, table: table, item: $0.item)) }
            try Self.byIDs(ids) { query in
                for entry in try GroupLogRow.entries(txn, query) { entries[ExactString(entry.item)] = entry }
            }
            return entries
        }

        /// Calls `read` with queries for `ids`, 500 to a query, so no `IN` list outgrows a
        /// store's parameter limits.
        private static func byIDs(_ ids: [Value], _ read: (Query) throws -> Void) rethrows {
            for start in stride(from: 0, to: ids.count, by: 500) {
                try read(Query(.isIn(SystemField.id, Array(ids[start..<min(start + 500, ids.count)]))))
            }
        }

        /// Serves `item` as it is now: the row when the caller may read it (and it matches the
        /// pull's filter, or is a deletion), else its id as removed when the caller may have
        /// seen it (`known`, asked only then). `stored` is the row as read (`nil`: there is none).
        private mutating func decide(_ item: String, stored: Record?, known: (inout ViewReader) throws -> Bool) throws {
            let key = ExactString(item)
            if let row = stored, try service.evaluator.canRead(row, in: table, claims: claims, txn, memo: memo) {
                if let index = removedIndex.removeValue(forKey: key) { removedIds[index] = "" }
                guard row.deleted || predicate == .all || QueryEvaluator.matches(row, predicate) else { return }
                if let index = served[key] { servedRecords[index] = row } else {
                    served[key] = servedRecords.count
                    servedRecords.append(row)
                }
            } else if removedIndex[key] == nil, served[key] == nil, try known(&self) {
                removedIndex[key] = removedIds.count
                removedIds.append(item)
            }
        }

        /// Whether `item` is already served, as a row or as removed.
        private func isDecided(_ item: String) -> Bool {
            let key = ExactString(item)
            return served[key] != nil || removedIndex[key] != nil
        }

        /// Whether the caller may have seen the item of a group-log entry: it was in the group
        /// while the caller belonged to it with a role this table's grants read through.
        private mutating func knows(_ entry: GroupLogRow) throws -> Bool {
            let key = entry.key
            if reaches[key] == nil {
                let row = try ReachRow.find(txn, id: ReachRow.id(identity: claims.identity.text, group: key))
                reaches[key] = try row.map { try Spans($0.spans) }
            }
            guard let reach = reaches[key] ?? nil else { return false }
            if roles[key] == nil {
                guard let group = Group(key: key) else { return false }
                roles[key] = .some(service.readRoles(of: table, through: group))
            }
            return try Spans(entry.spans).overlaps(reach, roles: roles[key] ?? nil)
        }

        /// The caller's marked groups whose log this table's pull reads from `cursor` (large
        /// now, or large after it), each with where the caller's current membership began (its
        /// move-in sweep serves the log before). Read once per page: the page's cursor only
        /// moves forward, and a group read needlessly costs an empty range.
        private mutating func largeGroups(readAfter cursor: Int64) throws -> [(GroupKey, Int64)] {
            if let groups = readGroups { return groups }
            let marked = try ReachRow.all(txn, Query(ReachRow.field(.identity) == .string(claims.identity.text)
                && ReachRow.field(.marked) == true))
            let names = Set(service.rules.rules(for: table)?.read.compactMap { grant -> String? in
                if case let .member(name, _, _) = grant.kind { return name }
                return nil
            } ?? [])
            var groups: [(GroupKey, Int64)] = []
            for row in marked {
                guard case let .member(name, _)? = Group(key: row.group), names.contains(name),
                      try GroupRow.find(txn, key: row.group)?.isRead(after: cursor) ?? false else { continue }
                groups.append((row.group, try Spans(row.spans).openSince ?? .min))
            }
            readGroups = groups
            return groups
        }

        private var readGroups: [(GroupKey, Int64)]?

        /// How many entries lie after `cursor` (an upper bound: an item logged in several
        /// logs counts once in each), at least 1: the page was not the last.
        private mutating func remaining(after cursor: ViewCursor) throws -> Int {
            max(try counted(after: cursor), 1)
        }

        /// ``remaining(after:)`` at the end of a sweep page that began at `from`. While nothing
        /// was committed to a shared table (the shared change sequence is where it was), the
        /// count at the previous page's end, less the entries this page swept, is the count
        /// the scan would make, so a sweep counts its group once, not once per page — a count
        /// per page made a move-in's cost grow with the square of the group's rows (a fifth
        /// of the server's time in `perf` of move-in-big, 100,000 rows).
        private mutating func remaining(after cursor: ViewCursor, sweptFrom from: Int64) throws -> Int {
            guard let sweep = cursor.sweep else { return try remaining(after: cursor) }
            // Beside concurrent writers the shared counter does not move: the horizon keys the
            // count instead. Changes above it may make the count a little off, which the
            // answer allows (a sweep's page says at least 1 remains, and the sweep goes on
            // until its rows are read, whatever the count).
            let shared = try below ?? SequenceRow.find(txn, id: SequenceRow.shared)?.sequence ?? 0
            let key = RemainingCounts.Key(table: table, identity: claims.identity, predicate: predicate)
            // Where the count was taken: the sweep's event and group (the main position stays
            // put during a sweep) stand in for the epoch an owner-only pull keys it by.
            let place = "sweep \(sweep.event) " + OfflineSyncService.hex(sweep.group.text)
            let count: Int
            if let known = service.remainingCounts.remaining(key, epoch: place, after: from, tableSequence: shared) {
                count = known - (try swept(sweep.group, after: from, through: sweep.after))
            } else {
                count = try counted(after: cursor)
            }
            service.remainingCounts.store(key, epoch: place, after: sweep.after, tableSequence: shared, remaining: count)
            return max(count, 1)
        }

        /// The entries of a sweep of `group` in (`from`, `to`]: what ``counted(after:)``
        /// counted for the sweep and no longer counts once it moved from `from` to `to`.
        private func swept(_ group: GroupKey, after from: Int64, through to: Int64) throws -> Int {
            var count = 0
            for pair in keyFields(of: group) {
                count += try txn.count(in: table, matching: Field(pair.field) == pair.value
                    && Field(Meta.sequence) > .int(from) && Field(Meta.sequence) <= .int(to))
            }
            return count + (try GroupLogRow.count(txn, GroupLogRow.after(from, group: group, inGroup: false, table: table)
                && GroupLogRow.field(.sequence) <= .int(to)))
        }

        /// How many entries lie after `cursor` (below the horizon, but a sweep's all), by
        /// counting them.
        private mutating func counted(after cursor: ViewCursor) throws -> Int {
            var count = try ViewRow.count(txn, ViewRow.after(cursor.main, identity: claims.identity.text, table: table) && ownFinal)
            for (group, since) in try largeGroups(readAfter: cursor.main) {
                for inGroup in [true, false] {
                    count += try GroupLogRow.count(txn, GroupLogRow.after(max(cursor.main, since), group: group, inGroup: inGroup,
                                                                          table: table) && groupFinal)
                }
            }
            if let sweep = cursor.sweep {
                let fields = keyFields(of: sweep.group)
                for pair in fields {
                    count += try txn.count(in: table, matching: Field(pair.field) == pair.value && Field(Meta.sequence) > .int(sweep.after))
                }
                count += try GroupLogRow.count(txn, GroupLogRow.after(sweep.after, group: sweep.group, inGroup: false, table: table))
            }
            return count
        }
    }

    /// The roles a member of `group` needs for `table`'s read grants through it to admit rows
    /// (`nil`: any role, or no membership grant).
    func readRoles(of table: String, through group: Group) -> Set<String>? {
        guard case let .member(name, _) = group else { return nil }
        var roles = Set<String>()
        for grant in rules.rules(for: table)?.read ?? [] {
            guard case let .member(used, _, required) = grant.kind, used == name else { continue }
            guard let required else { return nil }
            roles.formUnion(required)
        }
        return roles
    }
}
