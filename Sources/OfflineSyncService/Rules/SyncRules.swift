import OfflineSync

/// Who may read and write which rows: the server's sync rules, one document for all
/// tables (Docs/SyncRules.md; `offline-sync serve --rules FILE` reads it as YAML).
///
/// Each table has **read** grants and **write** grants. A row is readable by a caller when
/// any read grant admits it; a change is allowed when any write grant for its operation
/// admits it — for an update, admitting both the row as stored and the row as written, so
/// no one moves a row out of their own reach or into another's. Grants:
///
/// - ``Grant/Kind/owner``: the identity that created the row;
/// - ``Grant/Kind/everyone``: every authenticated identity;
/// - ``Grant/Kind/identityField(_:)``: rows whose field holds the caller's identity;
/// - ``Grant/Kind/member(_:key:roles:)``: rows whose `key` field holds a group the caller
///   belongs to through a ``Membership`` (a many-to-many table synced like any other);
/// - ``Grant/Kind/ownerOf(_:key:)``: rows whose `key` field names a row of another table
///   the caller created (whoever owns a list may add its members).
///
/// Any grant may also require token claims (``Condition``). Tables the document does not
/// name follow ``defaultAccess``: owner-only unless it says otherwise, so a server without
/// rules behaves as it always has.
public struct SyncRules: Sendable, Hashable {
    /// What tables the rules do not name allow.
    public enum DefaultAccess: String, Sendable, Hashable, CaseIterable {
        /// Each identity reads and writes the rows it created (the behaviour without rules).
        case owner
        /// Nothing: every table a client uses must be named.
        case deny
    }

    /// What unnamed tables allow.
    public var defaultAccess: DefaultAccess
    /// The memberships grants refer to, by name.
    public var memberships: [String: Membership]
    /// The rules of each named table.
    public var tables: [String: TableRules]

    /// Rules with the given parts; ``validate()`` checks them.
    public init(defaultAccess: DefaultAccess = .owner, memberships: [String: Membership] = [:],
                tables: [String: TableRules] = [:]) {
        self.defaultAccess = defaultAccess
        self.memberships = memberships
        self.tables = tables
    }

    /// The rules of a server without a rules document: every table owner-only.
    public static let ownerOnly = SyncRules()

    /// The tables kept shared — one row per item id, served through the view log: those
    /// whose rules are not owner-only, and those other grants look rows up in (membership
    /// tables and `owner_of` targets), since their changes move rows in and out of views.
    /// Every other table keeps each identity's rows apart, as without rules.
    public var sharedTables: Set<String> {
        var shared = Set(tables.filter { !$0.value.isOwnerOnly }.keys)
        shared.formUnion(memberships.values.map(\.table))
        for grant in tables.values.flatMap({ $0.read + $0.write }) {
            if case let .ownerOf(target, _) = grant.kind { shared.insert(target) }
        }
        return shared
    }

    /// The tables whose rows decide which rows of other tables an identity may read:
    /// membership tables and `owner_of` targets. A write to one of them can change the
    /// writer's own view, so its notices always reach the writer's connections.
    public var viewDecidingTables: Set<String> {
        var tables = Set(memberships.values.map(\.table))
        for grant in self.tables.values.flatMap({ $0.read + $0.write }) {
            if case let .ownerOf(target, _) = grant.kind { tables.insert(target) }
        }
        return tables
    }

    /// The rules that apply to `table`: its own, or the default's (`nil` under
    /// ``DefaultAccess/deny``).
    public func rules(for table: String) -> TableRules? {
        if let rules = tables[table] { return rules }
        switch defaultAccess {
        case .owner: return .ownerOnly
        case .deny: return nil
        }
    }
}

/// A many-to-many membership: rows of `table` each say that the identity in `member`
/// belongs to the group whose key is in `group` (with an optional role in `role`).
public struct Membership: Sendable, Hashable {
    /// The table holding the membership rows (a synced table with rules of its own).
    public var table: String
    /// The field holding the member's identity.
    public var member: String
    /// The field holding the group's key.
    public var group: String
    /// The field holding the member's role in the group, if memberships have roles.
    public var role: String?

    /// A membership held in `table`.
    public init(table: String, member: String, group: String, role: String? = nil) {
        self.table = table
        self.member = member
        self.group = group
        self.role = role
    }
}

/// The read and write grants of one table.
public struct TableRules: Sendable, Hashable {
    /// Grants that make rows readable (any one suffices).
    public var read: [Grant]
    /// Grants that allow changes (any one that covers the operation suffices).
    public var write: [Grant]

    /// Rules with these grants; no grant at all means no one may read or write.
    public init(read: [Grant], write: [Grant]) {
        self.read = read
        self.write = write
    }

    /// Each identity reads and writes the rows it created.
    public static let ownerOnly = TableRules(read: [Grant(.owner)], write: [Grant(.owner)])

    /// Whether every grant is ``Grant/Kind/owner`` without conditions: unless other grants
    /// look rows up in it (``SyncRules/sharedTables``), such a table keeps its rows per
    /// identity, as the service always has (ids are per identity, no row is shared).
    public var isOwnerOnly: Bool {
        (read + write).allSatisfy { $0.kind == .owner && $0.conditions.isEmpty && $0.operations == Grant.allOperations }
            && !read.isEmpty && !write.isEmpty
    }
}

/// One way a row becomes readable or writable.
public struct Grant: Sendable, Hashable {
    /// Whom the grant admits.
    public enum Kind: Sendable, Hashable {
        /// The identity that created the row.
        case owner
        /// Every authenticated identity.
        case everyone
        /// Rows whose field (named here) holds the caller's identity.
        case identityField(String)
        /// Rows whose `key` field (``SystemField/id`` for the row's own id) holds the key of a
        /// group the caller belongs to through the named membership — with one of `roles`
        /// there, when given.
        case member(String, key: String, roles: [String]?)
        /// Rows whose `key` field holds the id of a row of the named table that the caller
        /// created.
        case ownerOf(String, key: String)
    }

    /// Every operation.
    public static let allOperations: Set<OperationKind> = Set(OperationKind.allCases)

    /// Whom the grant admits.
    public var kind: Kind
    /// Token claims the caller must also have (all of them).
    public var conditions: [Condition]
    /// The operations a write grant allows (ignored for reading).
    public var operations: Set<OperationKind>

    /// A grant of `kind`, with `conditions`, for `operations` when it is a write grant.
    public init(_ kind: Kind, when conditions: [Condition] = [], operations: Set<OperationKind> = Grant.allOperations) {
        self.kind = kind
        self.conditions = conditions
        self.operations = operations
    }
}

/// A requirement on the caller's token: the claim `claim` holds one of `values` (for a
/// list-valued claim such as `roles`, one of its entries does).
public struct Condition: Sendable, Hashable {
    /// The claim's name (`roles`, `sub`, or any claim the token carries).
    public var claim: String
    /// The accepted values.
    public var values: [String]

    /// A condition on `claim`.
    public init(claim: String, values: [String]) {
        self.claim = claim
        self.values = values
    }

    /// Whether `claims` satisfy it. Values are compared by their bytes, as identities are: a
    /// claim spelled in another Unicode normalisation is another value.
    public func holds(for claims: Claims) -> Bool {
        let accepted = Set(values.map(ExactString.init))
        return claims.values(of: claim).contains { accepted.contains(ExactString($0)) }
    }
}
