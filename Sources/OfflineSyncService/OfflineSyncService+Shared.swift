import Foundation
import OfflineSync

// Shared tables: one row per item id, every write checked against the rules, and the logs
// (each identity's own, each group's) kept up to date in the write's own transaction.

extension OfflineSyncService {
    // MARK: The logs

    /// Logs a change of a row of `table` from `before` to `after`, made at `sequence`: one
    /// group-log entry per group the row is in before or after; an entry in the own log of each
    /// identity a grant names directly (owner, identity field, `owner_of`) and of each member
    /// of a group that fans out; then, when the row is a membership or an `owner_of` target,
    /// the membership change itself (``changeMembership(of:from:to:_:)``).
    func logChange(of table: String, from before: Record?, to after: Record, at sequence: Int64,
                   _ push: inout PushTransaction) throws {
        let txn = push.txn
        let item = after[Meta.item].stringValue ?? after.id
        let holdsMemberships = ruleIndex.memberships[table] != nil
        if holdsMemberships {
            // A membership changes: what the push remembered about memberships may not hold.
            push.effects.memo.forget()
            push.effects.members.removeAll()
            push.effects.groupRows.removeAll()
        }
        let old = before.map { audience(of: $0, in: table) } ?? Audience()
        let new = audience(of: after, in: table)
        var told = Set(old.identities).union(new.identities)
        for group in old.groups + new.groups.filter({ !old.groups.contains($0) }) {
            let key = push.effects.key(of: group)
            let id = GroupLogRow.id(group: key, table: table, item: item)
            let stored = try push.effects.groupLogs[ExactString(id)] ?? GroupLogRow.find(txn, id: id)
            var spans = try stored.map { try Spans($0.spans) } ?? Spans()
            if stored == nil, old.groups.contains(group) { spans.open(at: 0) }
            switch (old.groups.contains(group), new.groups.contains(group)) {
            case (false, true): spans.open(at: sequence)
            case (true, false): spans.close(at: sequence)
            default: if !spans.isOpen { spans.open(at: sequence) }
            }
            let entry = GroupLogRow(id: id, key: key, table: table, item: item, sequence: sequence, spans: spans)
            // Held with the push's rows: the push reads entries only through its memo.
            try entry.hold(in: &push.pending, txn)
            push.effects.groupLogs[ExactString(id)] = entry
            // Whom to tell is decided from the group's row (its mode) or the `owner_of`
            // target (its owner, whether it is live), held by a push beside other writers
            // (``PushTransaction/decidingRecord(in:id:)``): a membership change that this
            // push does not see commits after it, so that change's sweep finds this row.
            switch group {
            case let .ownerOf(target, owned):
                if let row = try push.decidingRecord(in: target, id: owned), !row.deleted, let owner = Self.identity(in: row[Meta.owner]) {
                    told.insert(owner)
                }
            case let .member(name, value):
                guard let membership = rules.memberships[name] else { continue }
                let row = try push.groupRow(key)
                let mode = row?.mode ?? .small
                // A converting group's members up to its progress are marked: their pulls read
                // the group's log, so only the others are told.
                if mode != .large {
                    told.formUnion(try members(of: key, value: value, through: membership, after: row?.progress, &push))
                }
                if mode != .small { push.effects.groups[table, default: []].insert(key) }
                if mode == .converting { push.effects.converting.insert(key) }
            }
        }
        for identity in told.sorted() {
            try tell(identity, about: after, of: table, at: sequence, before: before, &push)
        }
        try changeMembership(of: table, from: before, to: after, &push)
        if holdsMemberships { push.effects.groupRows.removeAll() }
    }

    /// Writes `identity`'s own-log entry for `row` at `sequence`: visible when some read grant
    /// admits it, claim conditions aside (the pull applies them with the caller's token). An
    /// identity that could read neither this row nor its `before` state, and has no entry for
    /// it, gets none — unless `evenIfUnseen` (it wrote the row, so its device holds a copy).
    func tell(_ identity: Identity, about row: Record, of table: String, at sequence: Int64, before: Record? = nil,
              evenIfUnseen: Bool = false, _ push: inout PushTransaction) throws {
        let txn = push.txn, memo = push.effects.memo
        let item = row[Meta.item].stringValue ?? row.id
        let visible = try evaluator.canRead(row, in: table, claims: Claims(identity: identity), ignoringConditions: true, txn,
                                            memo: memo)
        let id = ViewRow.id(identity: identity.text, table: table, item: item)
        if !visible, !evenIfUnseen {
            let sawBefore = try before.map {
                try evaluator.canRead($0, in: table, claims: Claims(identity: identity), ignoringConditions: true, txn,
                                      memo: memo)
            } ?? false
            if !sawBefore, try ViewRow.find(txn, id: id) == nil { return }
        }
        try ViewRow(id: id, identity: identity.text, table: table, item: item, sequence: sequence, visible: visible).save(txn)
        push.effects.identities[table, default: []].insert(identity)
    }

    /// The live members of `group`, the group `value` of `membership` (only asked of small
    /// and converting groups), those after `after` in member order when given; read once per
    /// push while its memberships stay as they are.
    private func members(of group: GroupKey, value: Value, through membership: Membership, after: String? = nil,
                         _ push: inout PushTransaction) throws -> Set<Identity> {
        let all: Set<Identity>
        if let known = push.effects.members[group] {
            all = known
        } else {
            let rows = try push.txn.records(in: membership.table, matching: Query(
                Field(membership.group) == value && Field(SystemField.deleted) == false))
            all = Set(rows.compactMap { Self.identity(in: $0[membership.member]) })
            push.effects.members[group] = all
        }
        guard let after else { return all }
        return all.filter { Value.utf8Less(after, $0.text) }
    }

    /// Whom a row's read grants name, claim conditions aside: identities directly, and groups,
    /// each once, in grant order. `everyone` grants name none: callers they admit pull such
    /// tables directly. Arrays, not sets: a row names a handful, and a push asks for every row.
    struct Audience {
        var identities: [Identity] = []
        var groups: [Group] = []
    }

    func audience(of row: Record, in table: String) -> Audience {
        var audience = Audience()
        for kind in readKinds(of: table) {
            let identity: Identity?
            switch kind {
            case .owner: identity = Self.identity(in: row[Meta.owner])
            case .identityField(let field): identity = Self.identity(in: row[field])
            case .everyone, .member, .ownerOf: identity = nil
            }
            if let identity, !audience.identities.contains(identity) { audience.identities.append(identity) }
        }
        for group in groups(in: table, { RuleEvaluator.value(of: $0, in: row) }) where !audience.groups.contains(group) {
            audience.groups.append(group)
        }
        return audience
    }

    /// The groups a row of `table` is in by the rules' read grants, in grant order (a group
    /// twice when two grants name it), `value` giving the row's value of a grant's key
    /// (`nil` when it is null) as ``RuleEvaluator/value(of:in:)`` does.
    func groups(in table: String, _ value: (String) -> Value?) -> [Group] {
        var groups: [Group] = []
        for kind in readKinds(of: table) {
            switch kind {
            case let .member(name, key, _):
                if let value = value(key) { groups.append(.member(name, value)) }
            case let .ownerOf(target, key):
                if let item = value(key)?.stringValue { groups.append(.ownerOf(target, item)) }
            case .owner, .identityField, .everyone:
                break
            }
        }
        return groups
    }

    /// Whom `table`'s read grants admit, in grant order, conditions aside.
    private func readKinds(of table: String) -> [Grant.Kind] {
        ruleIndex.readKinds[table] ?? rules.rules(for: table)?.read.map(\.kind) ?? []
    }

    // MARK: Memberships

    /// When `table` holds memberships or is an `owner_of` target, applies what the change of
    /// one of its rows does to who belongs to which group. For each (identity, group) whose
    /// membership or role changed: its reach spans, its marker, and one event per table that
    /// group grants reading of — O(1) writes whatever the group's size; the rows that move
    /// in or out are found by the member's next pull. Group sizes are counted here, and a
    /// group crossing the fan-out limit changes mode.
    private func changeMembership(of table: String, from before: Record?, to after: Record, _ push: inout PushTransaction) throws {
        let txn = push.txn
        for (name, membership) in ruleIndex.memberships[table] ?? [] {
            func pair(_ row: Record?) -> (member: Identity, group: Value, role: String?)? {
                guard let row, !row.deleted, let member = Self.identity(in: row[membership.member]),
                      let group = RuleEvaluator.value(of: membership.group, in: row) else { return nil }
                return (member, group, membership.role.flatMap { row[$0].stringValue })
            }
            let old = pair(before), new = pair(after)
            if old?.member == new?.member, old?.group == new?.group, old?.role.map(ExactString.init) == new?.role.map(ExactString.init) { continue }
            var seen: [(Identity, Value)] = []
            for (member, value, _) in [old, new].compactMap({ $0 }) where !seen.contains(where: { $0 == (member, value) }) {
                seen.append((member, value))
                let group = Group.member(name, value)
                let delta = (new.map { $0.member == member && $0.group == value } == true ? 1 : 0)
                    - (old.map { $0.member == member && $0.group == value } == true ? 1 : 0)
                var groupRow = try self.groupRow(group, value: value, delta: Int64(delta), through: membership, txn)
                if groupRow.isNew, push.isConcurrent { try readRange(of: group, in: memberDependents(of: name), txn) }
                let current = try txn.first(in: membership.table, matching: Query(
                    Field(membership.member) == .string(member.text) && Field(membership.group) == value
                        && Field(SystemField.deleted) == false))
                let role = current.flatMap { row in membership.role.flatMap { row[$0].stringValue } }
                try setReach(member, in: group, present: current != nil, role: role, marked: groupRow.mode != .small,
                             dependents: memberDependents(of: name), &push)
                if groupRow.mode == .small, groupRow.members > Int64(fanoutLimit) {
                    groupRow.mode = .converting
                    groupRow.progress = nil
                    try groupRow.save(txn)
                    // The first step now: a group that crosses a limit below the step's size is
                    // large before this transaction's next write to it.
                    if try convertStep(group.key, txn, marking: &push.effects.regrouped) { push.effects.converting.insert(group.key) }
                    continue
                } else if push.isConcurrent, groupRow.mode == .shrinking {
                    // Grew again before it turned small: ``shrinkGroups(_:)`` turns it large.
                    push.effects.shrinking.insert(group.key)
                } else if groupRow.mode != .small, groupRow.members <= Int64(fanoutLimit / 2) {
                    if push.isConcurrent {
                        // Beside other writers a write that saw the group large and logged only
                        // to its log may hold numbers above this change's: the group turns
                        // small in writes that run alone, after this push (``shrinkGroups(_:)``).
                        push.effects.shrinking.insert(group.key)
                    } else {
                        groupRow.mode = .small
                        groupRow.largeUntil = try push.lastSequence(of: SequenceRow.shared)
                        groupRow.progress = nil
                    }
                }
                try groupRow.save(txn)
            }
        }
        let dependents = ownerOfDependents(of: table)
        guard !dependents.isEmpty, let owner = Self.identity(in: after[Meta.owner]) else { return }
        let wasLive = before.map { !$0.deleted } ?? false
        if before == nil, push.isConcurrent {
            try readRange(of: .ownerOf(table, after[Meta.item].stringValue ?? after.id), in: dependents.map(\.table), txn)
        }
        if wasLive != !after.deleted {
            let group = Group.ownerOf(table, after[Meta.item].stringValue ?? after.id)
            try setReach(owner, in: group, present: !after.deleted, role: nil, marked: false,
                         dependents: dependents.map(\.table), &push)
        }
    }

    /// Brings `identity`'s reach of `group` to `present` with `role`; when that changes, one
    /// event per table in `dependents` at a new sequence number.
    private func setReach(_ identity: Identity, in group: Group, present: Bool, role: String?, marked: Bool,
                          dependents: [String], _ push: inout PushTransaction) throws {
        let txn = push.txn
        let id = ReachRow.id(identity: identity.text, group: group.key)
        let stored = try ReachRow.find(txn, id: id)
        var spans = try stored.map { try Spans($0.spans) } ?? Spans()
        guard spans.isOpen != present || (present && spans.openRole != role) || (stored?.marked ?? false) != (present && marked) else {
            return
        }
        let sequence = try push.nextSequence(of: SequenceRow.shared).value
        if spans.isOpen != present || spans.openRole != role {
            if present { spans.open(at: sequence, role: role) } else { spans.close(at: sequence) }
            for table in Set(dependents).sorted() {
                try ViewRow.event(identity: identity, table: table, group: group.key, sequence: sequence, visible: present).save(txn)
                push.effects.identities[table, default: []].insert(identity)
            }
        }
        if stored?.marked ?? false || (present && marked) { push.effects.regrouped[identity, default: []].insert(group.key) }
        try ReachRow(id: id, identity: identity.text, group: group.key, spans: spans.data, marked: present && marked).save(txn)
    }

    /// Reads every row of `tables` in `group`, so that beside other writers (serializable, as
    /// a ``CommitOrderedStore``'s concurrent writes are) a write of a row into the group that
    /// this transaction does not see conflicts with it. For a group that has no row to hold
    /// yet (``PushTransaction/groupRow(_:)``: its first membership) or a new `owner_of` target:
    /// a write into it read the group's row, or the target, missing; this change creates it;
    /// each would be ordered before the other, so the store runs one of them again, and the
    /// write is then either seen by this change's sweep or decided with the change. The group
    /// is new, so the read is short.
    private func readRange(of group: Group, in tables: [String], _ txn: any LocalReadTransaction) throws {
        for table in Set(tables).sorted() {
            for (field, value) in groupFields(of: group, in: table) {
                _ = try txn.count(in: table, matching: Field(field) == value)
            }
        }
    }

    /// The row of the group `value` of `membership` with `delta` live memberships more; a
    /// group without one is counted now (after the change) and starts small.
    private func groupRow(_ group: Group, value: Value, delta: Int64, through membership: Membership,
                          _ txn: any LocalReadTransaction) throws -> GroupRow {
        if var row = try GroupRow.find(txn, key: group.key) {
            row.members += delta
            return row
        }
        let count = try txn.count(in: membership.table, matching: Field(membership.group) == value && Field(SystemField.deleted) == false)
        var row = GroupRow(key: group.key, members: Int64(count), mode: .small)
        row.isNew = true
        return row
    }

    /// How many markers one conversion step writes, in one transaction of its own.
    static let conversionStep = 1000

    /// What ``convertGroups(_:)`` did: the members it marked, with their groups (their
    /// notification connections now listen to them), and the groups whose conversion failed.
    struct Conversion {
        var marked: [Identity: Set<GroupKey>] = [:]
        var failed: [(group: GroupKey, error: any Error)] = []
    }

    /// Finishes converting `keys` to large groups, one bounded step per write transaction, so
    /// other writers run between steps. Called after a push commits; a conversion cut short
    /// (the process stopped) goes on after the next push that touches the group. A group
    /// whose step fails (its transaction rolled back, changing nothing) stays converting and
    /// is reported in ``Conversion/failed``; the other groups are converted all the same.
    func convertGroups(_ keys: Set<GroupKey>) async -> Conversion {
        var conversion = Conversion()
        for key in keys.sorted(by: { Value.utf8Less($0.text, $1.text) }) {
            do {
                while true {
                    let (converting, step) = try await store.write { txn in
                        var step: [Identity: Set<GroupKey>] = [:]
                        return (try self.convertStep(key, txn, marking: &step), step)
                    }
                    conversion.marked.merge(step) { $0.union($1) }
                    if !converting { break }
                }
            } catch {
                conversion.failed.append((key, error))
            }
        }
        return conversion
    }

    /// Turns each of `keys` small that still has few enough members for it, in two writes of
    /// its own that run alone (``CommitOrderedStore/orderedWrite(_:)``). The first marks it
    /// ``GroupMode/shrinking``: writes from then on fan out and log, and hold its row. A write
    /// that began before that write and waited for it may still have the group large in its
    /// snapshot and log only to the group's log, but it runs before the second write begins,
    /// which turns the group small with `largeUntil` at its own first number, above every
    /// such write's: members' pulls from a cursor below it still read the log. A group that
    /// grew again in between turns large again instead (``GroupMode/converting``, then its
    /// conversion). Returns the groups a write failed for: they stay large or shrinking, both
    /// correct, and the next change of their members tries again.
    func shrinkGroups(_ keys: Set<GroupKey>) async -> [(group: GroupKey, error: any Error)] {
        guard let ordered = store as? any CommitOrderedStore else { return [] }
        var failed: [(group: GroupKey, error: any Error)] = []
        var regrow = Set<GroupKey>()
        let half = Int64(fanoutLimit / 2)
        for key in keys.sorted(by: { Value.utf8Less($0.text, $1.text) }) {
            do {
                try await ordered.orderedWrite { txn, _ in
                    guard var row = try GroupRow.find(txn, key: key), row.mode == .large || row.mode == .converting,
                          row.members <= half else { return }
                    row.mode = .shrinking
                    row.progress = nil
                    try row.save(txn)
                }
                let grew = try await ordered.orderedWrite { txn, order -> Bool in
                    guard var row = try GroupRow.find(txn, key: key), row.mode == .shrinking else { return false }
                    if row.members > half {
                        row.mode = .converting
                    } else {
                        row.mode = .small
                        row.largeUntil = order.first
                    }
                    row.progress = nil
                    try row.save(txn)
                    return row.mode == .converting
                }
                if grew { regrow.insert(key) }
            } catch {
                failed.append((key, error))
            }
        }
        if !regrow.isEmpty { failed += await convertGroups(regrow).failed }
        return failed
    }

    /// One bounded step of a converting group: marks the next members (in member order); when
    /// every member is marked, the group is large and writes stop fanning out. Returns whether
    /// the group is still converting; adds the members it marked to `marked`, with the group.
    func convertStep(_ key: GroupKey, _ txn: any LocalWriteTransaction, marking marked: inout [Identity: Set<GroupKey>]) throws -> Bool {
        guard var row = try GroupRow.find(txn, key: key), row.mode == .converting,
              case let .member(name, value)? = Group(key: key), let membership = rules.memberships[name] else { return false }
        var predicate = Field(membership.group) == value && Field(SystemField.deleted) == false
        if let progress = row.progress { predicate = predicate && Field(membership.member) > .string(progress) }
        let batch = try txn.records(in: membership.table, matching: Query(
            predicate, order: [SortKey(membership.member)], limit: Self.conversionStep))
        for entry in batch {
            // The batch is in the store's member order, so progress moves past every row; a
            // member that is no valid identity is no one's token and is only passed over.
            guard let text = entry[membership.member].stringValue else { continue }
            row.progress = text
            guard let member = Self.identity(in: .string(text)) else { continue }
            let id = ReachRow.id(identity: member.text, group: key)
            var reach = try ReachRow.find(txn, id: id) ?? {
                var spans = Spans()
                spans.open(at: 0)
                return ReachRow(id: id, identity: member.text, group: key, spans: spans.data, marked: true)
            }()
            if !reach.marked { marked[member, default: []].insert(key) }
            reach.marked = true
            try reach.save(txn)
        }
        if batch.count < Self.conversionStep {
            row.mode = .large
            row.progress = nil
        }
        try row.save(txn)
        return row.mode == .converting
    }

    /// The fields of `table` that `member` and `owner_of` read grants key rows by (not the
    /// item id): a row whose field holds a group's value is in that group.
    func groupKeyFields(of table: String) -> [String] {
        var names: [String] = []
        for grant in rules.rules(for: table)?.read ?? [] {
            switch grant.kind {
            case let .member(_, key, _), let .ownerOf(_, key):
                if key != SystemField.id, !names.contains(key) { names.append(key) }
            case .owner, .everyone, .identityField: break
            }
        }
        return names
    }

    /// Which stored rows of `table` are in `group` now: each (field, value) a read grant puts
    /// rows in the group by (`id` as the stored id). A row's group-log entry for the group is
    /// open exactly when one of these holds, and its sequence is then the row's own.
    func groupFields(of group: Group, in table: String) -> [(field: String, value: Value)] {
        var pairs: [(field: String, value: Value)] = []
        for grant in rules.rules(for: table)?.read ?? [] {
            let key: String, value: Value
            switch (grant.kind, group) {
            case let (.member(name, grantKey, _), .member(groupName, groupValue)) where name == groupName:
                key = grantKey; value = groupValue
            case let (.ownerOf(target, grantKey), .ownerOf(groupTable, item)) where target == groupTable:
                key = grantKey; value = .string(item)
            default:
                continue
            }
            let field = key == SystemField.id ? SystemField.id : key
            if !pairs.contains(where: { $0.field == field }) { pairs.append((field, value)) }
        }
        return pairs
    }

    /// The tables with a `member` read grant through the membership `name`, in name order.
    func memberDependents(of name: String) -> [String] { ruleIndex.memberDependents[name] ?? [] }

    /// The tables with an `owner_of` read grant pointing at `table`, and the grants' keys, in
    /// table order.
    func ownerOfDependents(of table: String) -> [(table: String, key: String)] { ruleIndex.ownerOfDependents[table] ?? [] }

    /// What a push asks of the rules for every row it writes, worked out once from them.
    struct RuleIndex: Sendable {
        /// Each table's memberships (the table holds their rows), by name, in name order.
        let memberships: [String: [(name: String, membership: Membership)]]
        /// For each table, the tables with an `owner_of` read grant pointing at it and the
        /// grants' keys, in table order.
        let ownerOfDependents: [String: [(table: String, key: String)]]
        /// For each membership, the tables with a `member` read grant through it, in name order.
        let memberDependents: [String: [String]]
        /// The tables whose rows the rules read to decide who reads or writes another row
        /// (membership tables and the targets of `owner_of` grants, read or write), in name
        /// order. A push writes their rows at once, and held rows out before it decides
        /// anything from the store (``OfflineSyncService/mustWriteOut(before:in:)``).
        let readByRules: [String]
        /// Each table's read grants' kinds, in grant order (the grants' conditions and
        /// operations left out): a push works out the audience of every row it writes.
        let readKinds: [String: [Grant.Kind]]

        init(_ rules: SyncRules) {
            var memberships: [String: [(name: String, membership: Membership)]] = [:]
            for (name, membership) in rules.memberships.sorted(by: { $0.key < $1.key }) {
                memberships[membership.table, default: []].append((name, membership))
            }
            var owners: [String: [(table: String, key: String)]] = [:]
            var members: [String: [String]] = [:]
            // Write grants read `owner_of` targets too (``RuleEvaluator/canWrite``).
            let writeTargets = rules.tables.values.flatMap(\.write).compactMap { grant -> String? in
                if case let .ownerOf(target, _) = grant.kind { return target } else { return nil }
            }
            for (table, grants) in rules.tables.sorted(by: { $0.key < $1.key }) {
                for grant in grants.read {
                    switch grant.kind {
                    case let .ownerOf(target, key): owners[target, default: []].append((table, key))
                    case let .member(name, _, _): if members[name]?.last != table { members[name, default: []].append(table) }
                    default: break
                    }
                }
            }
            self.memberships = memberships
            ownerOfDependents = owners
            memberDependents = members
            readByRules = Set(memberships.keys).union(owners.keys).union(writeTargets).sorted()
            readKinds = rules.tables.mapValues { $0.read.map(\.kind) }
        }
    }

    /// The fields of `table` the rules look rows up by, to index: membership fields when it
    /// holds memberships, and the keys of its grants.
    func lookupFields(of table: String) -> [String] {
        var names: [String] = []
        for membership in rules.memberships.values where membership.table == table {
            names += [membership.member, membership.group]
        }
        for grant in (rules.tables[table]?.read ?? []) + (rules.tables[table]?.write ?? []) {
            switch grant.kind {
            case let .member(_, key, _), let .ownerOf(_, key): names.append(key)
            case .identityField(let field): names.append(field)
            case .owner, .everyone: break
            }
        }
        var seen = Set<String>()
        return names.filter { $0 != SystemField.id && seen.insert($0).inserted }.sorted()
    }
}

/// What a push's writes to shared tables did, for its report: per table, the identities
/// whose own log changed and the large groups whose log changed; the identities whose
/// large groups changed; and the converting groups it touched, each of which takes one conversion step before the push commits.
struct SharedEffects {
    var identities: [String: Set<Identity>] = [:]
    var groups: [String: Set<GroupKey>] = [:]
    var converting = Set<GroupKey>()
    /// Large or converting groups whose members fell to half the fan-out limit, to turn small
    /// after a push beside other writers commits (``OfflineSyncService/shrinkGroups(_:)``).
    var shrinking = Set<GroupKey>()
    /// Identities whose reading of a large group's log began, ended or changed role, with
    /// those groups (``PushReport/regrouped``).
    var regrouped: [Identity: Set<GroupKey>] = [:]
    /// The push's answers about memberships, and the members of the small groups it wrote
    /// to, by group key: a batch of a thousand rows into one list reads the list's members
    /// once. Both are dropped whenever the push writes to a membership table.
    let memo = ReadMemo()
    var members: [GroupKey: Set<Identity>] = [:]
    /// The group rows the push's logging read (held, beside other writers), by key; dropped
    /// with ``members``.
    var groupRows: [GroupKey: OfflineSyncService.GroupRow?] = [:]
    /// Group-log entries by id as the push read or wrote them (`nil`: none is stored), read
    /// for the whole batch at once (``OfflineSyncService/readGroupLogs(of:rows:_:)``): one
    /// look-up per row was a round trip per row on PostgreSQL.
    var groupLogs: [ExactString: OfflineSyncService.GroupLogRow?] = [:]
    /// Each group's key as the push worked it out (a batch into one list names it per row).
    private var groupKeys: [OfflineSyncService.Group: GroupKey] = [:]

    /// `group`'s key (``OfflineSyncService/Group/key``), worked out once per push.
    mutating func key(of group: OfflineSyncService.Group) -> GroupKey {
        if let known = groupKeys[group] { return known }
        let key = group.key
        groupKeys[group] = key
        return key
    }
}

extension OfflineSyncService {
    /// Reads the group-log entries that the batch's operations on shared tables will update,
    /// in one batch of reads by id, into ``SharedEffects/groupLogs``: the entries of each row's
    /// groups as stored (`wanted`: the rows the operations name, as the batch read them) and
    /// as the operation proposes it. An entry it did not foresee is looked up when logged.
    func readGroupLogs(of operations: [PushOperation], rows wanted: [(table: String, id: String)?], _ push: inout PushTransaction) throws {
        var ids: [String] = []
        push.effects.groupLogs.reserveCapacity(push.effects.groupLogs.count + operations.count)
        for (index, operation) in operations.enumerated() where isShared(operation.table) {
            guard let (table, id) = wanted[index] else { continue }
            var groups: [Group] = []
            // A row not stored has no entry (entries are written with their rows, and rows are
            // never removed, deleted ones kept as tombstones): its entries are known absent,
            // not read — a batch of inserts reads none.
            let current = try push.rows.row(of: index, in: table, id: id, push.txn)
            if let current {
                groups = self.groups(in: table) { RuleEvaluator.value(of: $0, in: current) }
            }
            if operation.kind != .delete, let fields = operation.item?.fields {
                // As ``RuleEvaluator/value(of:in:)`` reads the row the operation proposes.
                groups += self.groups(in: table) { key in
                    let value = key == SystemField.id ? .string(operation.itemId) : fields[key] ?? .null
                    return value.isNull ? nil : value
                }
            }
            for group in groups {
                let entry = ExactString(GroupLogRow.id(group: push.effects.key(of: group), table: table, item: operation.itemId))
                guard push.effects.groupLogs[entry] == nil else { continue }
                push.effects.groupLogs[entry] = .some(nil)
                if current != nil { ids.append(entry.value) }
            }
        }
        // Reads by id, in one batch (one round trip on PostgreSQL): an `IN` list of them let
        // PostgreSQL cache a plan that scanned the whole log once the log had grown.
        for found in try push.txn.read(ids.map { .record(table: GroupLogRow.table, id: $0) }) {
            for row in found { push.effects.groupLogs[ExactString(row.id)] = try GroupLogRow(row: row) }
        }
    }
}

extension PushTransaction {
    /// The row of the group with `key` as the push's logging decides from it, read once per
    /// push while its memberships stay as they are, and held (``decidingRecord(in:id:exclusive:)``)
    /// unless the group is large: a write to a large group logs once, to the group's log,
    /// whoever its members are, and a large group turns into anything else only in a write
    /// that runs alone. So the many writers of one big list do not all hold its row.
    mutating func groupRow(_ key: GroupKey) throws -> OfflineSyncService.GroupRow? {
        if let known = effects.groupRows[key] { return known }
        let table = OfflineSyncService.GroupRow.table
        var row = try txn.record(in: table, id: key.text).map(OfflineSyncService.GroupRow.init(row:))
        if isConcurrent, row?.mode != .large {
            row = try decidingRecord(in: table, id: key.text).map(OfflineSyncService.GroupRow.init(row:))
        }
        effects.groupRows[key] = row
        return row
    }
}
