import OfflineSync

/// Why the sync rules let an identity read one row and make each change to it, or why not:
/// the answer to "why can't Bob see this row?". Every grant of the table is checked in the
/// order the rules list it and says whether it admits, and if not, what it lacked: a claim the
/// token does not carry, a membership that does not exist, a field that holds someone else.
///
/// It is an operator's tool (the admin route and `offline-sync explain`): its reasons name the
/// values the rules compare (an owner, a group key), which the identity itself may not read.
public struct RuleExplanation: Sendable, Hashable, Codable {
    /// One grant, checked.
    public struct GrantCheck: Sendable, Hashable, Codable {
        /// The grant as the rules document writes it, with its claim conditions.
        public var grant: String
        /// Whether it admits the identity.
        public var admits: Bool
        /// What it found: why it admits, or the first thing it lacked.
        public var reason: String
    }

    /// One operation: whether it is allowed, and each grant that could have allowed it.
    public struct Decision: Sendable, Hashable, Codable {
        /// `read`, `insert`, `update` or `delete`.
        public var operation: String
        /// The rules' decision: what a pull, a query or a push does.
        public var allowed: Bool
        /// The grants of the table for this operation, in the rules' order.
        public var grants: [GrantCheck]
    }

    /// The identity asked about.
    public var identity: String
    public var table: String
    /// The row's id, as the app names it.
    public var id: String
    /// How the server keeps the table: `shared` (one row per id, under the rules),
    /// `owner-only` (each identity's rows apart: only their owner reads and writes them) or
    /// `not served` (the rules deny every table they do not name).
    public var storage: String
    /// Whether the server holds the row (for an owner-only table: the identity's row).
    public var exists: Bool
    /// Whether the row is a deletion (a tombstone), judged as stored.
    public var deleted: Bool
    /// Read, then insert, update and delete. Updates and deletes are judged on the row as
    /// stored (an update that leaves the fields the grants read as they are: one that moves
    /// the row is judged on both sides, as a push is); an insert on the row as this identity
    /// would store it, whether or not a live row already holds the id (a push would then
    /// answer with a conflict).
    public var decisions: [Decision]

    /// The decision for `operation` (`read`, `insert`, `update`, `delete`).
    public func decision(_ operation: String) -> Decision? {
        decisions.first { $0.operation == operation }
    }
}

extension RuleEvaluator {
    /// The grants of `table` that could allow `operation` (`nil`: read), each checked
    /// against `row` for `claims`: the same tests ``canRead(_:in:claims:ignoringConditions:_:memo:)``
    /// and ``canWrite(_:in:current:proposed:claims:_:memo:)`` make, with what each found.
    func explain(_ operation: OperationKind?, table: String, row: Record, claims: Claims,
                 _ txn: any LocalReadTransaction) throws -> RuleExplanation.Decision {
        let grants = rules.rules(for: table).map { operation == nil ? $0.read : $0.write.filter { $0.operations.contains(operation!) } } ?? []
        var checks: [RuleExplanation.GrantCheck] = []
        for grant in grants {
            let (admits, reason) = try check(grant, row, claims, txn)
            checks.append(RuleExplanation.GrantCheck(grant: Self.describe(grant, reading: operation == nil), admits: admits, reason: reason))
        }
        return RuleExplanation.Decision(operation: operation?.rawValue ?? "read", allowed: checks.contains(where: \.admits),
                                        grants: checks)
    }

    /// One grant's test, with what it found.
    private func check(_ grant: Grant, _ row: Record, _ claims: Claims, _ txn: any LocalReadTransaction) throws -> (Bool, String) {
        for condition in grant.conditions where !condition.holds(for: claims) {
            let held = claims.values(of: condition.claim)
            return (false, "the token's claim '\(condition.claim)' holds \(held.isEmpty ? "nothing" : Self.list(held)), "
                + "not one of \(Self.list(condition.values))")
        }
        let identity = claims.identity
        switch grant.kind {
        case .owner:
            let owner = row[OfflineSyncService.Meta.owner]
            return identity.isExactly(owner) ? (true, "'\(identity.text)' created the row")
                : (false, "the row was created by \(Self.show(owner)), not '\(identity.text)'")
        case .everyone:
            return (true, "every authenticated identity")
        case .identityField(let field):
            return identity.isExactly(row[field]) ? (true, "field '\(field)' holds '\(identity.text)'")
                : (false, "field '\(field)' holds \(Self.show(row[field])), not '\(identity.text)'")
        case let .member(name, key, roles):
            guard let membership = rules.memberships[name] else { return (false, "the rules define no membership '\(name)'") }
            guard let group = Self.value(of: key, in: row) else {
                return (false, "the row's '\(key)' is empty, so it is in no group of '\(name)'")
            }
            if try isMember(identity, of: group, through: membership, roles: roles, txn) {
                return (true, "'\(identity.text)' is a member of \(Self.show(group)) in '\(membership.table)'"
                    + (roles.map { " with a role in \(Self.list($0))" } ?? ""))
            }
            guard let roles, let roleField = membership.role,
                  let row = try txn.first(in: membership.table, matching: Query(
                      Field(membership.member) == .string(identity.text) && Field(membership.group) == group
                          && Field(SystemField.deleted) == false)) else {
                return (false, "no live row of '\(membership.table)' has '\(membership.member)' = '\(identity.text)' "
                    + "and '\(membership.group)' = \(Self.show(group))")
            }
            return (false, "'\(identity.text)' is a member of \(Self.show(group)) in '\(membership.table)' with role "
                + "\(Self.show(row[roleField])), not one of \(Self.list(roles))")
        case let .ownerOf(target, key):
            guard let item = Self.value(of: key, in: row)?.stringValue else {
                return (false, "the row's '\(key)' names no row of '\(target)'")
            }
            guard let owned = try txn.record(in: target, id: rowLocator(target, item, identity)) else {
                return (false, "'\(target)' has no row '\(item)'")
            }
            if owned.deleted { return (false, "row '\(item)' of '\(target)' is deleted") }
            let owner = owned[OfflineSyncService.Meta.owner]
            return identity.isExactly(owner) ? (true, "'\(identity.text)' created row '\(item)' of '\(target)'")
                : (false, "row '\(item)' of '\(target)' was created by \(Self.show(owner)), not '\(identity.text)'")
        }
    }

    /// A grant as the rules document writes it.
    static func describe(_ grant: Grant, reading: Bool) -> String {
        var text: String
        switch grant.kind {
        case .owner: text = "owner"
        case .everyone: text = "everyone"
        case .identityField(let field): text = "identity: \(field)"
        case let .member(name, key, roles):
            text = "member: \(name), key: \(key)" + (roles.map { ", roles: \(list($0))" } ?? "")
        case let .ownerOf(table, key): text = "owner_of: \(table), key: \(key)"
        }
        if !grant.conditions.isEmpty {
            text += ", when: " + grant.conditions.map { "\($0.claim) in \(list($0.values))" }.joined(separator: " and ")
        }
        if !reading, grant.operations != Grant.allOperations {
            text += ", operations: " + list(grant.operations.map(\.rawValue).sorted())
        }
        return text
    }

    private static func list(_ values: [String]) -> String {
        "[" + values.map { "'\($0)'" }.joined(separator: ", ") + "]"
    }

    private static func show(_ value: Value) -> String {
        switch value {
        case .null: return "nothing"
        case .string(let text): return "'\(text)'"
        default: return "\(value)"
        }
    }
}

extension OfflineSyncService {
    /// Why the rules let `claims` read the row `id` of `table` and make each change to it, or
    /// why not (``RuleExplanation``). Reads the row and the memberships in one transaction, as
    /// a pull or a push would decide. An operator's question: the answer names values the
    /// identity may not read, so only the admin route and the command line ask it.
    public func explain(claims: Claims, table: String, id: String) async throws -> RuleExplanation {
        try Names.validateId(id)
        let shared = isShared(table)
        let served = rules.rules(for: table) != nil
        let defined = try await store.read { txn in try txn.tables().contains { $0.name == table } }
        return try await store.read { txn in
            let stored = defined ? try txn.record(in: table, id: shared ? id : Self.rowId(owner: claims.identity.text, item: id)) : nil
            var explanation = RuleExplanation(identity: claims.identity.text, table: table, id: id,
                                              storage: !served ? "not served" : shared ? "shared" : "owner-only",
                                              exists: stored != nil, deleted: stored?.deleted ?? false, decisions: [])
            // The row as this identity would insert it: its fields, owned by the identity.
            var inserted = stored ?? Record(id: id, fields: [Meta.item: .string(id)])
            inserted.deleted = false
            inserted.fields[Meta.owner] = .string(claims.identity.text)
            guard served else {
                explanation.decisions = ["read", "insert", "update", "delete"].map {
                    RuleExplanation.Decision(operation: $0, allowed: false, grants: [])
                }
                return explanation
            }
            explanation.decisions.append(try stored.map { try self.evaluator.explain(nil, table: table, row: $0, claims: claims, txn) }
                ?? RuleExplanation.Decision(operation: "read", allowed: false, grants: []))
            explanation.decisions.append(try self.evaluator.explain(.insert, table: table, row: inserted, claims: claims, txn))
            for kind in [OperationKind.update, .delete] {
                explanation.decisions.append(try stored.map { try self.evaluator.explain(kind, table: table, row: $0, claims: claims, txn) }
                    ?? RuleExplanation.Decision(operation: kind.rawValue, allowed: false, grants: []))
            }
            return explanation
        }
    }
}
