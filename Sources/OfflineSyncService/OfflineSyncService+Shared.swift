import Foundation
import OfflineSync

// Shared tables: one row per item id, every write checked against the rules, and the view
// log (`__srv_view`) kept up to date in the write's own transaction.

extension OfflineSyncService {
    /// Applies one operation to a shared table for `claims`. A change the rules refuse — or
    /// that touches a row the caller may not read — is a 403 with no server copy; a conflict
    /// carries the server's copy only when the caller may read it.
    func applyShared(_ operation: PushOperation, claims: Claims, schema: TableSchema, now: Timestamp,
                     txn: any LocalWriteTransaction, clocks: inout TableClocks) throws -> PushOutcome {
        do { try Names.validateId(operation.itemId) } catch let error as SyncError {
            return .rejected(reason: error.message, status: 400)
        }
        let table = operation.table, item = operation.itemId
        let forbidden = PushOutcome.rejected(
            reason: "forbidden: the sync rules do not let this identity \(operation.kind.rawValue) item '\(item)' in table '\(table)'",
            status: 403)
        let current = try txn.record(in: table, id: item)
        let readable = try current.map { try evaluator.canRead($0, in: table, claims: claims, txn) } ?? false
        var fields: [String: Value]
        var owner = claims.identity
        switch operation.kind {
        case .insert:
            if let current, !current.deleted { return readable ? .conflict(serverRecord: Self.publicRecord(current)) : forbidden }
            guard let item = operation.item else { return .rejected(reason: "an insert needs an item", status: 400) }
            fields = item.fields
        case .update, .delete:
            guard let current else { return .rejected(reason: "item '\(item)' does not exist", status: 404) }
            guard readable else { return forbidden }
            owner = current[Meta.owner].stringValue ?? claims.identity
            if current.deleted {
                return operation.kind == .delete ? .applied(Self.publicRecord(current)) : .conflict(serverRecord: Self.publicRecord(current))
            }
            if let base = operation.baseVersion, base != current.version { return .conflict(serverRecord: Self.publicRecord(current)) }
            if operation.kind == .update {
                guard let item = operation.item else { return .rejected(reason: "an update needs an item", status: 400) }
                fields = item.fields
            } else {
                fields = Self.publicRecord(current).fields
            }
        }
        if let reserved = fields.keys.first(where: { $0.hasPrefix(Names.reservedPrefix) }) {
            return .rejected(reason: "field name '\(reserved)' uses the reserved prefix '\(Names.reservedPrefix)'", status: 400)
        }
        let sequence = try Self.nextSequence(of: table, txn, &clocks)
        fields[Meta.owner] = .string(owner)
        fields[Meta.item] = .string(item)
        fields[Meta.sequence] = .int(sequence.value)
        let row = Record(id: item, fields: fields, version: Self.version(epoch: sequence.epoch, sequence: sequence.value),
                         updatedAt: try Self.nextStamp(of: table, now: now, txn, &clocks),
                         deleted: operation.kind == .delete)
        do { try schema.validate(row) } catch let error as SyncError {
            return .rejected(reason: error.message, status: 400)
        }
        let live = current.flatMap { $0.deleted ? nil : $0 }
        guard try evaluator.canWrite(operation.kind, in: table, current: operation.kind == .insert ? nil : live,
                                     proposed: operation.kind == .delete ? nil : row, claims: claims, txn) else {
            // The compensating write: the caller may read the row it may not change, so its
            // next pull brings the server's copy back, whatever its cursor.
            if let live, readable { try record(live, of: table, for: claims.identity, txn, &clocks) }
            return forbidden
        }
        try txn.upsert(row, in: table)
        try refreshViews(table: table, item: item, before: current, after: row, txn, &clocks)
        if try !evaluator.canRead(row, in: table, claims: claims, txn) {
            // A write the caller may make but not read back (a list's owner adding a member
            // whose rows only members read): its copy leaves the caller's device next pull.
            try record(row, of: table, for: claims.identity, evenIfUnseen: true, txn, &clocks)
        }
        return .applied(Self.publicRecord(row))
    }

    // MARK: The view log

    /// Brings the view log up to date after a row of `table` changed from `before` to `after`:
    /// the entries of every identity that could read it before or may read it now, then —
    /// when the row is a membership, or a row other grants point at with `owner_of` — the
    /// entries of the rows whose readers it decides (move-in and move-out).
    func refreshViews(table: String, item: String, before: Record?, after: Record, _ txn: any LocalWriteTransaction,
                      _ clocks: inout TableClocks) throws {
        var candidates = Set<String>()
        for row in [before, after].compactMap({ $0 }) { candidates.formUnion(try readers(of: row, in: table, txn)) }
        for identity in candidates.sorted() {
            try record(after, of: table, for: identity, txn, &clocks)
        }
        for (name, membership) in rules.memberships.sorted(by: { $0.key < $1.key }) where membership.table == table {
            var affected: [(member: String, group: Value)] = []
            for row in [before, after].compactMap({ $0 }) where !row.deleted {
                if let member = row[membership.member].stringValue, let group = RuleEvaluator.value(of: membership.group, in: row),
                   !affected.contains(where: { $0.member == member && $0.group == group }) {
                    affected.append((member, group))
                }
            }
            for (member, group) in affected { try refreshGroup(group, of: name, for: member, txn, &clocks) }
        }
        if let owner = after[Meta.owner].stringValue, before == nil || before?.deleted != after.deleted {
            for (dependent, key) in ownerOfDependents(of: table) {
                for row in try rows(of: dependent, whereKey: key, is: .string(item), txn) {
                    try record(row, of: dependent, for: owner, txn, &clocks)
                }
            }
        }
    }

    /// Re-records `member`'s view of every row that a `member` grant through the membership
    /// `name` ties to `group`.
    private func refreshGroup(_ group: Value, of name: String, for member: String, _ txn: any LocalWriteTransaction,
                              _ clocks: inout TableClocks) throws {
        for (dependent, grants) in rules.tables.sorted(by: { $0.key < $1.key }) {
            var keys: [String] = []
            for case let .member(used, key, _) in grants.read.map(\.kind) where used == name && !keys.contains(key) { keys.append(key) }
            guard !keys.isEmpty else { continue }
            for key in keys {
                for row in try rows(of: dependent, whereKey: key, is: group, txn) {
                    try record(row, of: dependent, for: member, txn, &clocks)
                }
            }
        }
    }

    /// Writes `identity`'s entry for `row`: visible when some read grant admits it, claim
    /// conditions aside (the pull applies them with the caller's token). An identity that
    /// never had the row in view gets no entry for losing it, unless `evenIfUnseen` (it wrote
    /// the row, so its device holds a copy).
    private func record(_ row: Record, of table: String, for identity: String, evenIfUnseen: Bool = false,
                        _ txn: any LocalWriteTransaction, _ clocks: inout TableClocks) throws {
        let item = row[Meta.item].stringValue ?? row.id
        let visible = try evaluator.canRead(row, in: table, claims: Claims(identity: identity), ignoringConditions: true, txn)
        let id = ViewRow.id(identity: identity, table: table, item: item)
        if !visible, !evenIfUnseen, try ViewRow.find(txn, id: id) == nil { return }
        let sequence = try Self.nextSequence(of: table, txn, &clocks)
        try ViewRow(id: id, identity: identity, table: table, item: item, sequence: sequence.value, visible: visible).save(txn)
    }

    /// The identities a read grant of `table` may admit to `row`, claim conditions aside.
    /// `everyone` grants add none: callers they admit pull such tables directly.
    private func readers(of row: Record, in table: String, _ txn: any LocalReadTransaction) throws -> Set<String> {
        guard let tableRules = rules.rules(for: table) else { return [] }
        var identities = Set<String>()
        for grant in tableRules.read {
            switch grant.kind {
            case .owner:
                if let owner = row[Meta.owner].stringValue { identities.insert(owner) }
            case .everyone:
                break
            case .identityField(let field):
                if let identity = row[field].stringValue { identities.insert(identity) }
            case let .member(name, key, _):
                guard let membership = rules.memberships[name], let group = RuleEvaluator.value(of: key, in: row) else { continue }
                let members = try txn.records(in: membership.table, matching: Query(
                    Field(membership.group) == group && Field(SystemField.deleted) == false))
                identities.formUnion(members.compactMap { $0[membership.member].stringValue })
            case let .ownerOf(target, key):
                guard let item = RuleEvaluator.value(of: key, in: row) else { continue }
                let owners = try txn.records(in: target, matching: Query(Field(Meta.item) == item && Field(SystemField.deleted) == false))
                identities.formUnion(owners.compactMap { $0[Meta.owner].stringValue })
            }
        }
        return identities
    }

    /// The rows of the shared `table` whose grant key `key` holds `value` (for `id`, the row
    /// with that id).
    private func rows(of table: String, whereKey key: String, is value: Value, _ txn: any LocalReadTransaction) throws -> [Record] {
        if key == SystemField.id {
            guard let id = value.stringValue else { return [] }
            return try txn.record(in: table, id: id).map { [$0] } ?? []
        }
        return try txn.records(in: table, matching: Query(Field(key) == value))
    }

    /// The tables with an `owner_of` read grant pointing at `table`, and the grants' keys.
    private func ownerOfDependents(of table: String) -> [(table: String, key: String)] {
        rules.tables.sorted(by: { $0.key < $1.key }).flatMap { name, grants in
            grants.read.compactMap { grant -> (String, String)? in
                if case let .ownerOf(target, key) = grant.kind, target == table { return (name, key) }
                return nil
            }
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
