import Foundation
import OfflineSync

// Opening a store written before group logs: the shared change sequence starts above every
// shared table's own, so stored cursors keep their meaning, and the group log and reach rows
// are filled in from the stored rows, page by page, before the first request is served.

extension OfflineSyncService {
    /// How many rows one backfill transaction reads.
    static let backfillPage = 500

    /// Creates the shared change sequence on the first open by this version, after filling in
    /// the group log and reach rows of what earlier versions stored (existing own-log entries
    /// stay as they are: they are still each identity's view). Several instances opening one
    /// store at once do the same work; rows already there are kept, never overwritten.
    func openSharedSequence() async throws {
        if try await store.read({ try SequenceRow.find($0, id: SequenceRow.shared) }) != nil { return }
        let (start, used) = try await store.read { txn -> (Int64, [String]) in
            var highest: Int64 = 0, used: [String] = []
            for table in self.sharedTables.sorted() {
                guard let row = try SequenceRow.find(txn, id: table) else { continue }
                highest = max(highest, row.sequence)
                used.append(table)
            }
            return (highest, used)
        }
        for table in used {
            try await defineStorage(table)
            try await backfill(table)
        }
        try await store.write { txn in
            if try SequenceRow.find(txn, id: SequenceRow.shared) == nil {
                try SequenceRow(id: SequenceRow.shared, epoch: UUID().uuidString.lowercased(), sequence: start).save(txn)
            }
        }
    }

    /// The ``SequenceRow`` whose presence says the group log keeps the entries of items that
    /// left a group under their closed form (``GroupLogRow/inGroup``).
    static let closedEntriesMarker = "__glog_closed"

    /// On the first open by this version, moves the entries of items that left their group
    /// under the closed key: the first version of group logs kept every entry under the
    /// group's key. Page by page, one transaction each; several instances doing it at once
    /// write the same rows.
    func separateClosedEntries() async throws {
        if try await store.read({ try SequenceRow.find($0, id: Self.closedEntriesMarker) }) != nil { return }
        var after: String?
        while true {
            let start = after
            let last = try await store.write { txn -> String? in
                let page = try GroupLogRow.entries(txn, Query(start.map { Field(SystemField.id) > .string($0) } ?? .all,
                                                              order: [SortKey(SystemField.id)], limit: Self.backfillPage))
                for entry in page where entry.inGroup {
                    let spans = try Spans(entry.spans)
                    guard !spans.isOpen else { continue }
                    try entry.with(spans: spans).save(txn)
                }
                return page.count < Self.backfillPage ? nil : page.last?.id
            }
            guard let last else { break }
            after = last
        }
        try await store.write { txn in
            if try SequenceRow.find(txn, id: Self.closedEntriesMarker) == nil {
                try SequenceRow(id: Self.closedEntriesMarker, epoch: "", sequence: 0).save(txn)
            }
        }
    }

    /// The ``SequenceRow`` whose presence says every group with live memberships has its
    /// ``GroupRow``.
    static let groupsCountedMarker = "__groups_counted"

    /// On the first open by this version, gives each group that has live memberships and no
    /// group row its row, counted now: memberships written before group rows existed left
    /// their groups without one, and a group without a row counts as small, so every write to
    /// its rows fanned out to each member until its membership next changed. A group past
    /// the fan-out limit starts converting, and its conversion runs before the service
    /// serves. Page by page of each membership table, one transaction each; a start cut short
    /// does it again, keeping the rows already there.
    func countStoredGroups() async throws {
        if try await store.read({ try SequenceRow.find($0, id: Self.groupsCountedMarker) }) != nil { return }
        let stored = Set(try await store.read { txn in try txn.tables().map(\.name) })
        var converting = Set<GroupKey>()
        for (name, membership) in rules.memberships.sorted(by: { $0.key < $1.key }) where stored.contains(membership.table) {
            var after: String?
            while true {
                let start = after, limit = Int64(fanoutLimit)
                let (last, started) = try await store.write { txn -> (String?, Set<GroupKey>) in
                    let rows = try txn.records(in: membership.table, matching: Query(
                        start.map { Field(SystemField.id) > .string($0) } ?? .all, order: [SortKey(SystemField.id)], limit: Self.backfillPage))
                    var started = Set<GroupKey>()
                    for row in rows where !row.deleted {
                        guard let value = RuleEvaluator.value(of: membership.group, in: row) else { continue }
                        let key = Group.member(name, value).key
                        if try GroupRow.find(txn, key: key) != nil { continue }
                        let members = Int64(try txn.count(in: membership.table, matching: Field(membership.group) == value
                                                          && Field(SystemField.deleted) == false))
                        let mode: GroupMode = members > limit ? .converting : .small
                        try GroupRow(key: key, members: members, mode: mode).save(txn)
                        if mode == .converting { started.insert(key) }
                    }
                    return (rows.count < Self.backfillPage ? nil : rows.last?.id, started)
                }
                converting.formUnion(started)
                guard let last else { break }
                after = last
            }
        }
        // A group that cannot be converted stops the open: the store holds a row it cannot
        // read, and serving would leave that group fanning out to every member unseen.
        if let failure = await convertGroups(converting).failed.first {
            throw SyncError((failure.error as? SyncError)?.code ?? .storageFailure,
                            "a large group could not be converted at open: \((failure.error as? SyncError)?.message ?? "\(type(of: failure.error))")",
                            underlying: failure.error)
        }
        try await store.write { txn in
            if try SequenceRow.find(txn, id: Self.groupsCountedMarker) == nil {
                try SequenceRow(id: Self.groupsCountedMarker, epoch: "", sequence: 0).save(txn)
            }
        }
    }

    /// Writes the group-log entries of every stored row of `table` and, for memberships and
    /// `owner_of` targets, the reach of their live rows, open since the beginning.
    private func backfill(_ table: String) async throws {
        var after = Int64.min
        while true {
            let start = after
            let last = try await store.write { txn -> Int64? in
                let rows = try txn.records(in: table, matching: Query(Field(Meta.sequence) > .int(start),
                                                                      order: [SortKey(Meta.sequence)], limit: Self.backfillPage))
                for row in rows { try self.backfill(row, of: table, txn) }
                return rows.count < Self.backfillPage ? nil : rows.last?[Meta.sequence].intValue
            }
            guard let last else { return }
            after = last
        }
    }

    private func backfill(_ row: Record, of table: String, _ txn: any LocalWriteTransaction) throws {
        let item = row[Meta.item].stringValue ?? row.id
        var since = Spans()
        since.open(at: 0)
        for group in audience(of: row, in: table).groups {
            let id = GroupLogRow.id(group: group.key, table: table, item: item)
            if try GroupLogRow.find(txn, id: id) != nil { continue }
            try GroupLogRow(id: id, key: group.key, table: table, item: item,
                            sequence: row[Meta.sequence].intValue ?? 0, spans: since).save(txn)
        }
        guard !row.deleted else { return }
        var reached: [(identity: String, group: Group, role: String?)] = []
        for (name, membership) in rules.memberships where membership.table == table {
            if let member = row[membership.member].stringValue, let value = RuleEvaluator.value(of: membership.group, in: row) {
                reached.append((member, .member(name, value), membership.role.flatMap { row[$0].stringValue }))
            }
        }
        if !ownerOfDependents(of: table).isEmpty, let owner = row[Meta.owner].stringValue {
            reached.append((owner, .ownerOf(table, item), nil))
        }
        for (identity, group, role) in reached {
            let id = ReachRow.id(identity: identity, group: group.key)
            if try ReachRow.find(txn, id: id) != nil { continue }
            var spans = Spans()
            spans.open(at: 0, role: role)
            try ReachRow(id: id, identity: identity, group: group.key, spans: spans.data, marked: false).save(txn)
        }
    }
}
