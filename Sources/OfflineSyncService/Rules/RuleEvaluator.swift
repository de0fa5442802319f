import OfflineSync

/// Decides about single rows under ``SyncRules``: may this caller read this stored row, may
/// it make this change. Memberships and owners are looked up in the service's store through
/// the transaction the decision is part of, so a decision and the write it allows see the
/// same data.
///
/// Rows are the service's stored rows: app fields plus the owner, the item id and the change
/// sequence under the reserved prefix (``OfflineSyncService``'s `Meta` columns). A deleted
/// row (a tombstone) admits through no grant that needs a membership or an owned row to
/// exist; the row itself is judged as stored, tombstone or not, so the identities that could
/// read a row can read its deletion.
struct RuleEvaluator: Sendable {
    let rules: SyncRules

    /// How the evaluator finds rows of other tables: the stored row of `table` with item id
    /// `item` as the caller `identity` would address it (owner-only tables keep one row per
    /// identity and item; shared tables one per item).
    let rowLocator: @Sendable (_ table: String, _ item: String, _ identity: Identity) -> String

    // MARK: Reading

    /// Whether `claims` may read `row` of `table`. With `ignoringConditions`, claim
    /// conditions count as met: what the view log records for an identity whose token it
    /// cannot see (the rows it *might* read), before a pull checks again with the token's claims.
    /// With `memo`, membership answers are kept and reused for the rest of the transaction
    /// `txn` (a sweep of a group's log asks the same question for every row).
    func canRead(_ row: Record, in table: String, claims: Claims, ignoringConditions: Bool = false,
                 _ txn: any LocalReadTransaction, memo: ReadMemo? = nil) throws -> Bool {
        guard let tableRules = rules.rules(for: table) else { return false }
        for grant in tableRules.read where try admits(grant, row, claims, ignoringConditions: ignoringConditions, txn, memo: memo) {
            return true
        }
        return false
    }

    // MARK: Writing

    /// Whether `claims` may apply `kind` to `table`: an insert judged on the row as it would
    /// be stored, a delete on the stored row, an update on both (so no one moves a row out of
    /// their own reach or into another's).
    func canWrite(_ kind: OperationKind, in table: String, current: Record?, proposed: Record?, claims: Claims,
                  _ txn: any LocalReadTransaction, memo: ReadMemo? = nil) throws -> Bool {
        guard let tableRules = rules.rules(for: table) else { return false }
        func allowed(_ row: Record) throws -> Bool {
            for grant in tableRules.write where grant.operations.contains(kind) {
                if try admits(grant, row, claims, ignoringConditions: false, txn, memo: memo) { return true }
            }
            return false
        }
        // The rows judged, without an array of them: a push asks once per row it writes.
        switch kind {
        case .insert:
            guard let proposed else { return false }
            return try allowed(proposed)
        case .update:
            guard current != nil || proposed != nil else { return false }
            if let current, try !allowed(current) { return false }
            if let proposed, try !allowed(proposed) { return false }
            return true
        case .delete:
            guard let current else { return false }
            return try allowed(current)
        }
    }

    // MARK: Grants

    private func admits(_ grant: Grant, _ row: Record, _ claims: Claims, ignoringConditions: Bool,
                        _ txn: any LocalReadTransaction, memo: ReadMemo?) throws -> Bool {
        guard ignoringConditions || grant.conditions.allSatisfy({ $0.holds(for: claims) }) else { return false }
        switch grant.kind {
        case .owner:
            return claims.identity.isExactly(row[OfflineSyncService.Meta.owner])
        case .everyone:
            return true
        case .identityField(let field):
            return claims.identity.isExactly(row[field])
        case let .member(name, key, roles):
            guard let membership = rules.memberships[name], let group = Self.value(of: key, in: row) else { return false }
            guard let memo else { return try isMember(claims.identity, of: group, through: membership, roles: roles, txn) }
            let question = ReadMemo.Membership(identity: claims.identity, name: name, group: group, roles: roles)
            if let known = memo.answer(question) { return known }
            let answer = try isMember(claims.identity, of: group, through: membership, roles: roles, txn)
            memo.remember(answer, for: question)
            return answer
        case let .ownerOf(table, key):
            guard let item = Self.value(of: key, in: row)?.stringValue else { return false }
            let id = rowLocator(table, item, claims.identity)
            guard let owned = try txn.record(in: table, id: id), !owned.deleted else { return false }
            return claims.identity.isExactly(owned[OfflineSyncService.Meta.owner])
        }
    }

    /// Whether a live row of the membership's table makes `identity` a member of `group`
    /// (with one of `roles`, when given).
    func isMember(_ identity: Identity, of group: Value, through membership: Membership, roles: [String]?,
                  _ txn: any LocalReadTransaction) throws -> Bool {
        var predicate = Field(membership.member) == .string(identity.text) && Field(membership.group) == group
            && Field(SystemField.deleted) == false
        if let roles, let role = membership.role {
            predicate = predicate && Field(role).isIn(roles.map(Value.string))
        }
        return try txn.first(in: membership.table, matching: Query(predicate)) != nil
    }

    /// A row's value for a grant's key: the item id for ``SystemField/id``, else the field
    /// (`nil` when absent or null: such a row matches no group).
    static func value(of key: String, in row: Record) -> Value? {
        let value = key == SystemField.id ? row[OfflineSyncService.Meta.item] : row[key]
        return value.isNull ? nil : value
    }
}

/// Answers read decisions share within one transaction, so a page that checks a thousand
/// rows of one group asks the store once whether the caller is in it, and a push that tells a
/// group's members of a thousand rows asks once per member. Valid only in the transaction it
/// was filled in, and only until a membership changes there (a push clears it then); not
/// shared between tasks.
final class ReadMemo {
    struct Membership: Hashable {
        let identity: Identity
        let name: String
        let group: Value
        let roles: [String]?
    }

    private var memberships: [Membership: Bool] = [:]
    /// The last question answered and its answer: a batch into one list asks the same one for
    /// every row, and comparing it costs less than hashing it.
    private var last: (question: Membership, answer: Bool)?

    /// The remembered answer to `question`, if any.
    func answer(_ question: Membership) -> Bool? {
        if let last, last.question == question { return last.answer }
        guard let known = memberships[question] else { return nil }
        last = (question, known)
        return known
    }

    func remember(_ answer: Bool, for question: Membership) {
        memberships[question] = answer
        last = (question, answer)
    }

    /// Forgets every answer (a membership changed).
    func forget() {
        memberships.removeAll()
        last = nil
    }
}
