import Foundation
import Synchronization
import OfflineSync
import OfflineSyncStoreKit

/// The authoritative side of sync, over any ``LocalStore``: the single source of truth that
/// clients push to and pull from. Usable in process (``remote(for:)``) and behind a server.
///
/// - **Versions and change sequence.** Every accepted change gets a new opaque version and
///   the next number of its table's change sequence, assigned inside the store's serializable
///   write transaction, so sequence order is commit order. Pull cursors are sequence numbers:
///   a client pulling while others write never skips a change (timestamp cursors do).
/// - **Tombstones.** A delete keeps the row, marked deleted, so every client learns of it.
/// - **Conflicts.** An update or delete whose base version is not the current one, or an
///   insert of an existing id, is not applied; the outcome carries the current record.
/// - **Idempotency.** The outcome of every operation id is stored in the same transaction
///   that applied it; a replayed operation gets that first outcome back, never a second
///   application and never a false conflict.
/// - **Sync rules.** Who reads and writes which rows is decided by ``SyncRules``
///   (Docs/SyncRules.md). Tables whose rules are owner-only (all of them without rules) keep
///   each identity's rows apart, even with the same ids. Other tables are *shared*: one row
///   per item id, checked against the rules on every write (a refusal is a 403 outcome that
///   carries nothing the caller may not read) and served through a per-identity view log,
///   so a pull brings exactly the rows the caller may read, with rows that came into view
///   (move-in) and the ids of rows that left it (move-out, ``PullPage/removed``).
public final class OfflineSyncService: Sendable {
    /// The store holding the service's data.
    public let store: any LocalStore
    private let schemas: [String: TableSchema]
    private let allowUndeclaredTables: Bool
    private let defined = DefinedTables()
    /// Counts of what remains after a pull's cursor, so the next page of the same pull need
    /// not count again (owner-only pulls, and the sweeps of shared ones).
    let remainingCounts = RemainingCounts()
    /// The running hashes of the uploads this instance is receiving.
    let uploadHashes = UploadHashes()
    /// Who may read and write which rows.
    public let rules: SyncRules
    /// ``SyncRules/sharedTables``, worked out once.
    let sharedTables: Set<String>
    /// The tables some `everyone` read grant names: a write to one is announced to every
    /// connection whose claims meet such a grant (``tablesReadByEveryone(claims:)``), since no
    /// view log lists their readers. Worked out once.
    public let tablesWithEveryoneGrants: Set<String>
    let evaluator: RuleEvaluator
    /// What a push asks of the rules for each row it writes, worked out once.
    let ruleIndex: RuleIndex

    /// The service's columns in every app table's rows (stripped from what clients see).
    enum Meta {
        static let owner = "__owner"
        static let item = "__item"
        static let sequence = "__seq"
        /// The key (``OfflineSyncService/rowId(owner:item:)`` of the writer and the operation
        /// id) of the pushed operation that last wrote the row: while the row holds it, that
        /// operation's outcome is the row itself, and a replay is answered from it.
        static let operation = "__op"
        /// How many fields the service adds to a pushed item's to store it (the four above).
        static let count = 4
    }

    /// How many fields the service adds to each pushed item's when it stores it: a decoder
    /// that makes room for them in the item's dictionary saves the service growing it.
    package static let fieldsAddedToPushedItems = Meta.count

    /// The largest pull page the service returns.
    public static let maxPageSize = 1000

    /// Opens a service over `store`, declaring the given app tables (their declared fields
    /// become typed columns in SQL stores). With `allowUndeclaredTables`, pushes to other
    /// tables create them with no declared fields; without it they are rejected. `rules`
    /// decide who reads and writes what (owner-only tables without them); invalid rules are
    /// ``SyncError/Code/invalidConfiguration``.
    ///
    /// `groupFanoutLimit` (*K*) is the largest group whose writes are also recorded in each
    /// member's own log; a larger group's writes are logged once and read by its members'
    /// pulls (Docs/SyncRules.md). A group turns large past *K* members and small again at
    /// *K*/2 or fewer.
    public init(store: any LocalStore, schemas: [TableSchema] = [], allowUndeclaredTables: Bool = true,
                rules: SyncRules = .ownerOnly, groupFanoutLimit: Int = OfflineSyncService.defaultGroupFanoutLimit,
                attachmentLimits: AttachmentLimits = AttachmentLimits()) async throws {
        try rules.validate()
        self.attachmentLimits = attachmentLimits
        guard groupFanoutLimit >= 1 else {
            throw SyncError(.invalidConfiguration, "the group fan-out limit must be at least 1")
        }
        self.fanoutLimit = groupFanoutLimit
        self.store = store
        self.allowUndeclaredTables = allowUndeclaredTables
        self.rules = rules
        let shared = rules.sharedTables
        sharedTables = shared
        ruleIndex = RuleIndex(rules)
        tablesWithEveryoneGrants = Set(rules.tables.compactMap { table, rules in rules.read.contains { $0.kind == .everyone } ? table : nil })
        evaluator = RuleEvaluator(rules: rules) { table, item, identity in
            shared.contains(table) ? item : Self.rowId(owner: identity.text, item: item)
        }
        var byName: [String: TableSchema] = [:]
        for schema in schemas {
            try Names.validateAppTable(schema.name)
            try schema.validate()
            byName[schema.name] = schema
        }
        self.schemas = byName
        try await store.defineTable(SequenceRow.schema)
        try await store.defineTable(OutcomeRow.schema)
        try await store.defineTable(ViewRow.schema)
        for schema in Self.attachmentSchemas { try await store.defineTable(schema) }
        if !shared.isEmpty {
            for schema in [GroupLogRow.schema, GroupRow.schema, ReachRow.schema] { try await store.defineTable(schema) }
            try await openSharedSequence()
            try await separateClosedEntries()
            try await countStoredGroups()
        }
        for schema in schemas { try await ensureTable(schema.name) }
        try await upgradeStoredTables()
    }

    /// Gives every served app table the store already holds this version's storage now, before
    /// the first request, rather than inside it: when the storage schema changed (a service
    /// column added, a table's rules or declared fields changed), the store migrates the
    /// table, which on SQLite rewrites every row with the write lock held — about 7 s for a
    /// million rows on the machine of the README's figures. Throws what that migration
    /// throws (``SyncError/Code/schemaMismatch`` when stored rows do not fit a declared
    /// schema), so such a store is reported when the service opens. Tables the service does
    /// not serve are left as they are.
    private func upgradeStoredTables() async throws {
        let stored = try await store.read { txn in try txn.tables().map(\.name) }
        for table in stored.sorted() where isServed(table) {
            try await ensureTable(table)
        }
    }

    /// Whether requests may use `table`: an app table's name, declared or undeclared ones
    /// allowed, and covered by the rules.
    private func isServed(_ table: String) -> Bool {
        (try? Names.validateAppTable(table)) != nil
            && (schemas[table] != nil || allowUndeclaredTables) && rules.rules(for: table) != nil
    }

    /// The default ``init(store:schemas:allowUndeclaredTables:rules:groupFanoutLimit:attachmentLimits:)``'s
    /// `groupFanoutLimit`.
    ///
    /// Measured (`offline-sync-harness bench --only push-shared-k`, Docs/SyncRules.md): each
    /// member a write fans out to costs about 12 µs per row inside the write transaction, where
    /// every other writer waits, while a large group costs its members' pulls one index range
    /// read each. At 10 members a fan-out write costs about 3.3 times an owner-only one; past
    /// it, writes cost the same whatever the group's size.
    public static let defaultGroupFanoutLimit = 10

    /// The group fan-out limit *K* the service was opened with.
    public let fanoutLimit: Int

    /// The limits on attachments the service was opened with.
    public let attachmentLimits: AttachmentLimits

    /// A ``RemoteStore`` for one identity, for in-process use.
    public func remote(for identity: Identity) -> any RemoteStore {
        IdentityRemote(service: self, claims: Claims(identity: identity))
    }

    /// A ``RemoteStore`` for a caller with these claims (roles for the rules' conditions).
    public func remote(for claims: Claims) -> any RemoteStore {
        IdentityRemote(service: self, claims: claims)
    }

    /// Whether `table` is shared under the service's rules (see ``SyncRules/sharedTables``).
    public func isShared(_ table: String) -> Bool { sharedTables.contains(table) }

    // MARK: Tables

    private func storageSchema(for table: String) -> TableSchema {
        let app = schemas[table] ?? TableSchema(table)
        var fields = app.fields
        fields.append(FieldDefinition(Meta.owner, .string))
        fields.append(FieldDefinition(Meta.item, .string))
        fields.append(FieldDefinition(Meta.sequence, .int))
        fields.append(FieldDefinition(Meta.operation, .string))
        var indexes = app.indexes
        indexes.append(IndexDefinition([Meta.owner, Meta.sequence]))
        if isShared(table) {
            indexes.append(IndexDefinition([Meta.sequence]))
            // The fields the rules look rows up by: declared as strings unless the app
            // declares them, so the store can index them.
            // A membership is looked up by group and member together (is this identity in
            // this group?): one index on both, so the lookup costs the same for a member of
            // 5,000 groups as for a member of one. Other lookups go by one field.
            for membership in rules.memberships.values where membership.table == table {
                let pair = IndexDefinition([membership.group, membership.member])
                if !indexes.contains(pair) { indexes.append(pair) }
            }
            // A grant's key that puts rows in groups is indexed with the change sequence: a
            // member's move-in reads the rows still in a group from the table, in change order.
            for name in groupKeyFields(of: table) {
                let ordered = IndexDefinition([name, Meta.sequence])
                if !indexes.contains(ordered) { indexes.append(ordered) }
            }
            for name in lookupFields(of: table) {
                if !fields.contains(where: { $0.name == name }) { fields.append(FieldDefinition(name, .string)) }
                if !indexes.contains(where: { $0.fields.first == name }) { indexes.append(IndexDefinition([name])) }
            }
        }
        return TableSchema(table, fields: fields, indexes: indexes, undeclaredFields: app.undeclaredFields)
    }

    /// Defines the table's storage and its sequence row on first use. Throws
    /// ``SyncError/Code/forbidden`` for a table the rules give no one (`default: deny` and
    /// not named), `rejected` for one the service does not serve otherwise (an undeclared
    /// table when undeclared tables are not allowed).
    private func ensureTable(_ table: String) async throws {
        if defined.contains(table) { return }
        try Names.validateAppTable(table)
        guard rules.rules(for: table) != nil else {
            throw SyncError(.forbidden, "the sync rules give no identity access to table '\(table)'")
        }
        guard isServed(table) else { throw SyncError(.rejected, "table '\(table)' is not served") }
        try await defineStorage(table)
        if isShared(table) {
            // Decisions look rows up in the other shared tables (memberships, owned rows), so
            // those exist before the first decision about a shared row.
            for other in sharedTables.sorted() where !defined.contains(other) { try await defineStorage(other) }
        }
    }

    /// Defines the table's storage and its sequence row.
    func defineStorage(_ table: String) async throws {
        try await store.defineTable(storageSchema(for: table))
        try await store.write { txn in
            if try SequenceRow.find(txn, id: table) == nil {
                try SequenceRow(id: table, epoch: UUID().uuidString.lowercased(), sequence: 0).save(txn)
            }
        }
        defined.insert(table)
    }

    static func rowId(owner: String, item: String) -> String { CompositeKey.slashed(owner, last: item) }

    /// A stored row as its readers see it: the item id as its id, the service's own fields gone.
    static func publicRecord(_ row: Record) -> Record {
        var row = row
        makePublic(&row)
        return row
    }

    /// ``publicRecord(_:)`` of each row. The rows are changed where they lie, so a row read
    /// from the store loses its own fields without its dictionary being copied first
    /// (copying it was 9% of the server's side of a pull, `perf`, pull-1m).
    static func publicRecords(_ rows: consuming [Record]) -> [Record] {
        var rows = rows
        for index in rows.indices { makePublic(&rows[index]) }
        return rows
    }

    private static func makePublic(_ row: inout Record) {
        if let item = row[Meta.item].stringValue { row.id = item }
        row[Meta.owner] = .null
        row[Meta.item] = .null
        row[Meta.sequence] = .null
        row[Meta.operation] = .null
    }

    /// The identity a row's field names, when the field holds a text ``Identity`` accepts:
    /// the identities a grant reaches through stored rows (owners, members, identity fields).
    /// Any other value is no token's identity, so it reaches no one.
    static func identity(in value: Value) -> Identity? {
        guard case .string(let text) = value else { return nil }
        return try? Identity(text)
    }

    // MARK: Push

    /// Applies a batch for `identity`, in order, in one transaction, and returns one result
    /// per operation. Operation ids seen before return their stored outcome.
    public func push(identity: Identity, _ operations: [PushOperation]) async throws -> [PushResult] {
        try await push(claims: Claims(identity: identity), operations)
    }

    /// Applies a batch for the caller with `claims` (see ``push(identity:_:)``); the rules'
    /// claim conditions see them.
    public func push(claims: Claims, _ operations: [PushOperation]) async throws -> [PushResult] {
        try await pushReporting(claims: claims, operations).results
    }

    /// What a push did: one result per operation, and for each shared table it changed, the
    /// identities whose view of it changed — whom a server notifies (every identity that can
    /// read a changed row, and any that just lost one).
    public struct PushReport: Sendable, Hashable {
        /// One result per operation, in order.
        public var results: [PushResult]
        /// Shared tables the push changed, each with the identities whose own log changed.
        public var viewsChanged: [String: Set<Identity>]
        /// Shared tables the push changed, each with the large groups (the keys
        /// ``groupSubscriptions(claims:)`` returns) whose log changed: the members whose pulls
        /// read that log may read the change.
        public var groupsChanged: [String: Set<GroupKey>] = [:]
        /// Identities whose reading of large groups' logs began, ended or changed role (they
        /// joined or left one, their role in one changed, or a group of theirs turned large),
        /// each with those groups' keys: their notification connections re-read
        /// ``groupSubscriptions(claims:)``.
        public var regrouped: [Identity: Set<GroupKey>] = [:]
        /// Groups whose change of mode, made after the push committed (a group past the
        /// fan-out limit turning large, or one that shrank turning small), failed, with the
        /// failure's code. The push stands, and the group stays in a mode that serves every
        /// read correctly; the next push that touches it tries again. A server logs them.
        public var groupChangesFailed: [GroupKey: SyncError.Code] = [:]
    }

    /// Applies a batch (see ``push(claims:_:)``) and reports whose views it changed.
    public func pushReporting(claims: Claims, _ operations: [PushOperation]) async throws -> PushReport {
        let identity = claims.identity.text
        // A table the service will not serve refuses each of its operations with the refusal's
        // code, stored with the outcome as every other refusal's is (a replay gets it back).
        // A failure that may pass on a retry (a busy or closed store) refuses nothing: the push
        // fails whole and is sent again, rather than stored as refused for good.
        var unserved: [String: PushRefusal] = [:]
        for table in Set(operations.map(\.table)) {
            do { try await ensureTable(table) } catch let error as SyncError where !Self.isRetryable(error.code) {
                unserved[table] = PushRefusal(reason: error.message, status: error.code == .forbidden ? 403 : 404, code: error.code)
            }
        }
        let layouts = Dictionary(uniqueKeysWithValues: Set(operations.map(\.table)).map { ($0, StorageLayout(storageSchema(for: $0))) })
        let refused = unserved
        let keys = operations.map { Self.rowId(owner: identity, item: $0.id) }
        // The row each operation names (`nil` for an invalid id, which ``apply`` refuses),
        // worked out once for the lookup and the write.
        let rowIds = operations.map { operation -> String? in
            guard (try? Names.validateId(operation.itemId)) != nil else { return nil }
            return isShared(operation.table) ? operation.itemId : Self.rowId(owner: identity, item: operation.itemId)
        }
        // The rows the operations name (for served tables and valid ids: the others are
        // answered without a lookup), read with the stored outcomes in one batch.
        let wanted = operations.indices.map { index -> (table: String, id: String)? in
            guard refused[operations[index].table] == nil, let id = rowIds[index] else { return nil }
            return (operations[index].table, id)
        }
        // `beside`: the transaction runs beside other writers (a commit-ordered store's
        // concurrent write), so its shared writes hold the rows they decide from.
        let apply: @Sendable (any LocalWriteTransaction, ChangeOrder?, _ beside: Bool) throws -> (PushReport, Set<GroupKey>, Set<GroupKey>) = { txn, order, beside in
            var results: [PushResult] = []
            results.reserveCapacity(operations.count)
            var push = PushTransaction(txn: txn, claims: claims, now: order?.clock ?? Timestamp.now(),
                                       rows: try BatchReads(outcomes: keys, rows: wanted, txn), order: order, beside: beside)
            try self.readGroupLogs(of: operations, rows: wanted, &push)
            for (index, operation) in operations.enumerated() {
                defer { push.rows.finished(index) }
                if let stored = push.rows.outcome(of: index) {
                    let (outcome, code) = try stored.pushAnswer(answering: operation)
                    results.append(PushResult(operationId: operation.id, outcome: outcome, rejectionCode: code))
                    continue
                }
                // An operation whose row still holds its key was applied, and the row is its
                // outcome (the outcome moves to `__srv_operations` only when a later write
                // takes the row over: ``apply``).
                if push.rows.holdsRow(of: index), let (table, id) = wanted[index], let row = try push.rows.row(of: index, in: table, id: id, txn),
                   let holder = row[Meta.operation].stringValue, ExactString.sameBytes(holder, keys[index]) {
                    results.append(PushResult(operationId: operation.id, outcome: .applied(Self.publicRecord(row))))
                    continue
                }
                let outcome: PushOutcome, code: SyncError.Code?, remembered: Bool
                if let refusal = refused[operation.table] {
                    (outcome, code, remembered) = refusal.answer
                } else {
                    (outcome, code, remembered) = try self.apply(operation, index: index, key: keys[index], row: rowIds[index],
                                                                 layout: layouts[operation.table]!, in: &push)
                }
                if !remembered {
                    let stored = OutcomeRow(id: keys[index], outcome: outcome, code: code, answering: operation, createdAt: push.now)
                    try push.pending.add(stored.record(), in: OutcomeRow.table, txn)
                    push.rows.stored(stored, by: index)
                }
                results.append(PushResult(operationId: operation.id, outcome: outcome, rejectionCode: code))
            }
            try push.pending.flush(txn)
            for row in push.clocks.rowsToSave { try row.save(txn) }
            let effects = push.effects
            return (PushReport(results: results, viewsChanged: effects.identities, groupsChanged: effects.groups,
                               regrouped: effects.regrouped), effects.converting, effects.shrinking)
        }
        // A push of owner-only tables writes its tables' rows and clocks, its own outcomes
        // and its rows' attachment references: nothing a push of other owner-only tables
        // writes. It reads beyond them only to allow an attachment reference (another table's
        // row that lets the caller read the file), which a concurrent push may drop just
        // after: as if this push came first. Shared tables draw on one sequence and read and
        // write memberships and logs across tables, so on a store of one writer their pushes
        // run alone. On a ``CommitOrderedStore`` every push runs beside every other one: the
        // store settles two that touch one row, its commit order, not a counter, orders the
        // changes, and a shared write holds the rows it decides its logs from (a group's row,
        // an `owner_of` target) so that a membership change cannot pass it unseen
        // (``CommitOrderedStore/holdsRows``; on a store that cannot, shared pushes run alone).
        let served = Set(operations.map(\.table)).filter { refused[$0] == nil }
        let report: (PushReport, Set<GroupKey>, Set<GroupKey>)
        if let ordered = store as? any CommitOrderedStore {
            if ordered.holdsRows || !served.contains(where: isShared) {
                do {
                    report = try await ordered.concurrentWrite { try apply($0, $1, true) }
                } catch is PushTransaction.TooManyHolds {
                    report = try await ordered.orderedWrite { try apply($0, $1, false) }
                }
            } else {
                // A store that cannot hold rows: shared pushes run alone, in its order.
                report = try await ordered.orderedWrite { try apply($0, $1, false) }
            }
        } else if served.contains(where: isShared) {
            report = try await store.write { try apply($0, nil, false) }
        } else {
            report = try await store.write(confinedTo: served) { try apply($0, nil, false) }
        }
        var pushed = report.0
        await changeModes(converting: report.1, shrinking: report.2, reporting: &pushed)
        return pushed
    }

    /// After a push committed, the groups it left converting or shrinking change mode in
    /// writes of their own. A group whose step failed stays converting (its writes fan out as
    /// a small group's do, which is correct, only dearer), large or shrinking (both correct),
    /// is named in the report's ``PushReport/groupChangesFailed``, and is taken up again by the
    /// next push that touches it.
    private func changeModes(converting: Set<GroupKey>, shrinking: Set<GroupKey>, reporting report: inout PushReport) async {
        let conversion = await convertGroups(converting)
        report.regrouped.merge(conversion.marked) { $0.union($1) }
        let shrunk = shrinking.isEmpty ? [] : await shrinkGroups(shrinking)
        for (group, error) in conversion.failed + shrunk {
            report.groupChangesFailed[group] = (error as? SyncError)?.code ?? .storageFailure
        }
    }

    /// Whether a failure with `code` may pass on a retry: the store was busy, closed or failed,
    /// which says nothing about the request.
    static func isRetryable(_ code: SyncError.Code) -> Bool {
        [.busy, .transient, .storeClosed, .storageFailure].contains(code)
    }

    /// A row's version: its table's epoch (the first 8 characters) and its change sequence
    /// number in base 36, `<epoch>-<sequence>`.
    static func version(epoch: String, sequence: Int64) -> String {
        version(prefix: versionPrefix(epoch: epoch), sequence: sequence)
    }

    /// The part of `epoch`'s versions before the sequence number.
    static func versionPrefix(epoch: String) -> String { "\(epoch.prefix(8))-" }

    /// `prefix` and `sequence` in base 36 (lower-case digits, as `String(_:radix:)` writes
    /// them), in one allocation: every pushed operation makes one.
    static func version(prefix: String, sequence: Int64) -> String {
        guard sequence >= 0 else { return prefix + String(sequence, radix: 36) }
        var version = prefix
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 13) { digits in
            var start = digits.count
            var rest = UInt64(sequence)
            repeat {
                let digit = UInt8(rest % 36)
                start -= 1
                digits[start] = digit < 10 ? 0x30 + digit : 0x61 + digit - 10
                rest /= 36
            } while rest > 0
            // Thirteen or fewer ASCII bytes: a small string, no allocation of its own.
            version.append(String(decoding: UnsafeBufferPointer(rebasing: digits[start...]), as: UTF8.self))
        }
        return version
    }

    // MARK: Pull

    /// Returns the next page of `identity`'s changes to a table after the request's cursor,
    /// in commit order, with the exact count of matching changes after it.
    public func pull(identity: Identity, _ request: PullRequest) async throws -> PullPage {
        try await pull(claims: Claims(identity: identity), request)
    }

    /// The next page for the caller with `claims` (see ``pull(identity:_:)``). For a shared
    /// table the page holds the rows in the caller's view and ``PullPage/removed`` the ids that
    /// left it.
    public func pull(claims: Claims, _ request: PullRequest) async throws -> PullPage {
        try await ensureTable(request.table)
        if isShared(request.table) { return try await pullShared(claims: claims, request) }
        let predicate = try Self.mapPredicate(request.predicate)
        let limit = min(max(request.limit, 1), Self.maxPageSize)
        return try await pagedBelowHorizon(table: request.table) { txn, horizon in
            try self.ownedPage(claims: claims, request, predicate: predicate, limit: limit, horizon: horizon, txn)
        }
    }

    /// A pull's page, read by `page` with the store's horizon on a ``CommitOrderedStore``
    /// (`nil` on any other), which returns it with how many changes after the cursor it held
    /// back at or above the horizon (0 when the page moved the cursor: it is answered as it
    /// is).
    ///
    /// Changes above the horizon are held back, even when the snapshot holds them: a writer
    /// that began earlier may still commit below them. A pull that found only held changes
    /// waits for the horizon to pass them (they are committed: it does as soon as the writers
    /// begun before them end), and past the wait answers `busy` (the client tries again)
    /// rather than a page that is empty but says more remain.
    func pagedBelowHorizon(table: String,
                           _ page: @escaping @Sendable (any LocalReadTransaction, Int64?) throws -> (page: PullPage, held: Int)) async throws -> PullPage {
        guard let ordered = store as? any CommitOrderedStore else {
            return try await store.read { txn in try page(txn, nil).page }
        }
        let deadline = ContinuousClock.now + .milliseconds(horizonWaitMilliseconds.load(ordering: .relaxed))
        var pause = Duration.milliseconds(1)
        while true {
            let (found, held) = try await ordered.orderedRead(stamps: false) { txn, horizon in try page(txn, horizon.final) }
            if !found.records.isEmpty || !found.removed.isEmpty || held == 0 {
                return found
            }
            guard ContinuousClock.now < deadline else {
                throw SyncError(.busy, "changes to table '\(table)' are committing behind a write that began before them; try again")
            }
            try await Task.sleep(for: pause)
            pause = min(pause * 2, .milliseconds(50))
        }
    }

    /// How long, in milliseconds, a pull on a ``CommitOrderedStore`` that found only changes
    /// above the horizon waits for it to pass them before answering ``SyncError/Code/busy``.
    /// 2,000 unless a test changes it.
    package let horizonWaitMilliseconds = Atomic<Int>(2_000)

    /// A page of `claims`' owner-only rows after the request's cursor, and how many of the
    /// changes after it are held back by `horizon` (only below it when given; see
    /// ``CommitOrderedStore``).
    private func ownedPage(claims: Claims, _ request: PullRequest, predicate: QueryPredicate, limit: Int, horizon: Int64?,
                           _ txn: any LocalReadTransaction) throws -> (page: PullPage, held: Int) {
        let identity = claims.identity.text, table = request.table
        let meta = try SequenceRow.of(txn, table: table)
        let epoch = meta.epoch
        var after: Int64 = 0
        var reset = false
        if let text = request.cursor {
            let cursor = try PullCursor(parsing: text)
            guard cursor.mode == nil else { throw SyncError(.invalidCursor, "the cursor is not one this service issued") }
            if cursor.epoch == epoch { after = cursor.position.main } else { reset = true }
        }
        let mine: QueryPredicate = Field(Meta.owner) == .string(identity)
        let wanted: QueryPredicate = predicate == .all ? .all : (predicate || Field(SystemField.deleted) == true)
        // Below the horizon every change is final, so a count there stays true until the
        // horizon moves: it keys the remembered counts as the table's counter does otherwise.
        let final: QueryPredicate = horizon.map { Field(Meta.sequence) < .int($0) } ?? .all
        let rows = try txn.records(in: table, matching: Query(
            mine && Field(Meta.sequence) > .int(after) && final && wanted,
            order: [SortKey(Meta.sequence)], limit: limit))
        let last = rows.last?[Meta.sequence].intValue ?? after
        let tableSequence = horizon ?? meta.sequence
        let key = RemainingCounts.Key(table: table, identity: claims.identity, predicate: predicate)
        var remaining: Int
        if rows.count < limit {
            remaining = 0
        } else if let known = remainingCounts.remaining(key, epoch: epoch, after: after, tableSequence: tableSequence) {
            // Nothing was committed to the table since `known` was counted after this
            // cursor, and this page holds every matching change between the cursor and
            // `last`: the count after `last` follows, exactly, without a scan.
            remaining = known - rows.count
        } else {
            remaining = try txn.count(in: table, matching: mine && Field(Meta.sequence) > .int(last) && final && wanted)
        }
        remainingCounts.store(key, epoch: epoch, after: last, tableSequence: tableSequence, remaining: remaining)
        var held = 0
        if let horizon {
            held = try txn.count(in: table, matching: mine && Field(Meta.sequence) >= .int(horizon)
                                     && Field(Meta.sequence) > .int(after) && wanted)
            remaining += held
        }
        return (PullPage(records: Self.publicRecords(rows),
                         nextCursor: PullCursor(epoch: epoch, mode: nil, position: ViewCursor(main: last)).text,
                         remaining: remaining, cursorReset: reset), held)
    }

    // MARK: Queries (list APIs)

    /// The declared schema of a table, if the service was opened with one.
    public func schema(for table: String) -> TableSchema? { schemas[table] }

    /// `identity`'s records of a table that match `predicate`, ordered by `order` and then by
    /// id, after skipping `offset`, at most `limit` (nil: all). Tombstones are included only
    /// with `includeDeleted`. Field names are the client's (`id` is the item id); reserved
    /// names are refused with ``SyncError/Code/invalidQuery``.
    public func query(identity: Identity, table: String, predicate: QueryPredicate = .all, order: [SortKey] = [],
                      offset: Int = 0, limit: Int? = nil, includeDeleted: Bool = false) async throws -> [Record] {
        try await query(claims: Claims(identity: identity), table: table, predicate: predicate, order: order,
                        offset: offset, limit: limit, includeDeleted: includeDeleted)
    }

    /// The records of a table the caller with `claims` may read (see
    /// ``query(identity:table:predicate:order:offset:limit:includeDeleted:)``): its own rows of
    /// an owner-only table; the rows the rules let it read of a shared one.
    public func query(claims: Claims, table: String, predicate: QueryPredicate = .all, order: [SortKey] = [],
                      offset: Int = 0, limit: Int? = nil, includeDeleted: Bool = false) async throws -> [Record] {
        try await queryPage(claims: claims, table: table, predicate: predicate, order: order, offset: offset, limit: limit,
                            includeDeleted: includeDeleted, stampsBelow: nil).records
    }

    /// ``query(claims:table:predicate:order:offset:limit:includeDeleted:)`` as one page of a
    /// read that follows stamps, with the stamp bound it read below (`nil` when it read every
    /// committed row: the store orders no concurrent writers, or no stamp in the query).
    ///
    /// `stampsBelow` is the bound an earlier page of the same read used, or just past a stamp
    /// that page sent: every row stamped below it had committed then, so this page serves them
    /// even when its own stamp horizon reads lower. (On a ``CommitOrderedStore`` a writer that
    /// read its clock before one read and became visible after it lowers the next read's
    /// horizon for a moment; without this, a page could leave out rows its predecessor's bound
    /// let through, which a client following `updatedAt gt` would then pass for good.)
    package func queryPage(claims: Claims, table: String, predicate: QueryPredicate, order: [SortKey], offset: Int, limit: Int?,
                           includeDeleted: Bool, stampsBelow floor: Timestamp?) async throws -> (records: [Record], stampBound: Timestamp?) {
        let mapped = try await listPredicate(claims: claims, table: table, predicate: predicate)
        for key in order where key.field.hasPrefix(Names.reservedPrefix) {
            throw SyncError(.invalidQuery, "field name '\(key.field)' uses the reserved prefix")
        }
        let stamped = order.contains { $0.field == SystemField.updatedAt } || Self.mentions(SystemField.updatedAt, in: mapped)
        if isShared(table) {
            // A shared row's stored id is its item id, so `id` keys need no mapping.
            let (rows, bound) = try await stampedRead(stamped: stamped, below: floor) { txn, final in
                try self.readableRows(claims: claims, table: table, matching: final == .all ? mapped : mapped && final,
                                      includeDeleted: includeDeleted, order: order, offset: offset, limit: limit, txn)
            }
            return (Self.publicRecords(rows), bound)
        }
        let query = Self.ownedPredicate(claims.identity.text, mapped, includeDeleted: includeDeleted)
        let keys = order.map { SortKey($0.field == SystemField.id ? Meta.item : $0.field, ascending: $0.ascending) }
        let (rows, bound) = try await stampedRead(stamped: stamped, below: floor) { txn, final in
            try txn.records(in: table, matching: Query(final == .all ? query : query && final, order: keys, limit: limit, offset: offset))
        }
        return (Self.publicRecords(rows), bound)
    }

    /// Runs `body` in a read with the predicate every row it reads must also
    /// match: `.all`, except on a ``CommitOrderedStore`` when the read is `stamped` (it filters
    /// or orders by `updatedAt`), where it is `updatedAt` below the horizon's stamp, or below
    /// `floor` when that is higher (see ``queryPage(claims:table:predicate:order:offset:limit:includeDeleted:stampsBelow:)``),
    /// returned with the value. Stamps of concurrent writers are not in commit order, so a
    /// client that follows them (a Datasync client's `updatedAt gt` delta, keyset pages by
    /// `updatedAt`) is shown only those that are final: none it passed can commit later.
    private func stampedRead<T: Sendable>(stamped: Bool, below floor: Timestamp? = nil,
                                        _ body: @escaping @Sendable (any LocalReadTransaction, QueryPredicate) throws -> T) async throws -> (T, Timestamp?) {
        guard stamped, let ordered = store as? any CommitOrderedStore else {
            return (try await store.read { try body($0, .all) }, nil)
        }
        return try await ordered.orderedRead(stamps: true) { txn, horizon in
            guard let stamp = horizon.stamp else { throw SyncError(.storageFailure, "the store gave no stamp horizon") }
            let bound = max(stamp, floor ?? stamp)
            return (try body(txn, Field(SystemField.updatedAt) < .date(bound)), bound)
        }
    }

    /// Whether `predicate` names `field` anywhere.
    static func mentions(_ field: String, in predicate: QueryPredicate) -> Bool {
        func named(_ expression: QueryExpression) -> Bool {
            switch expression {
            case .field(let name): return name == field
            case .literal: return false
            case .call(_, let arguments): return arguments.contains(where: named)
            }
        }
        switch predicate {
        case .all: return false
        case let .compare(name, _, _), let .isIn(name, _), let .isNull(name), let .contains(name, _),
             let .hasPrefix(name, _), let .hasSuffix(name, _):
            return name == field
        case let .and(parts), let .or(parts): return parts.contains { mentions(field, in: $0) }
        case let .not(part): return mentions(field, in: part)
        case let .compareExpressions(left, _, right): return named(left) || named(right)
        case let .isNullExpression(expression): return named(expression)
        }
    }

    /// How many of `identity`'s records of a table match `predicate` (tombstones only with `includeDeleted`).
    public func count(identity: Identity, table: String, predicate: QueryPredicate = .all, includeDeleted: Bool = false) async throws -> Int {
        try await count(claims: Claims(identity: identity), table: table, predicate: predicate, includeDeleted: includeDeleted)
    }

    /// How many records of a table the caller with `claims` may read and `predicate` matches;
    /// rows the rules hide are never counted.
    public func count(claims: Claims, table: String, predicate: QueryPredicate = .all, includeDeleted: Bool = false) async throws -> Int {
        let mapped = try await listPredicate(claims: claims, table: table, predicate: predicate)
        if isShared(table) {
            return try await stampedRead(stamped: Self.mentions(SystemField.updatedAt, in: mapped)) { txn, final in
                try self.readableCount(claims: claims, table: table, matching: final == .all ? mapped : mapped && final,
                                       includeDeleted: includeDeleted, txn)
            }.0
        }
        let query = Self.ownedPredicate(claims.identity.text, mapped, includeDeleted: includeDeleted)
        return try await stampedRead(stamped: Self.mentions(SystemField.updatedAt, in: mapped)) { txn, final in
            try txn.count(in: table, matching: final == .all ? query : query && final)
        }.0
    }

    /// `identity`'s record `id` of a table (a tombstone included), or `nil`.
    public func record(identity: Identity, table: String, id: String) async throws -> Record? {
        try await record(claims: Claims(identity: identity), table: table, id: id)
    }

    /// The record `id` of a table (a tombstone included) when the caller with `claims` may
    /// read it; `nil` when there is none or the rules hide it — the two are never told apart.
    public func record(claims: Claims, table: String, id: String) async throws -> Record? {
        try await ensureTable(table)
        if isShared(table) {
            return try await store.read { txn in try self.readableRecord(claims: claims, table: table, id: id, txn) }
        }
        return try await store.read { txn in
            try txn.record(in: table, id: Self.rowId(owner: claims.identity.text, item: id)).map(Self.publicRecord)
        }
    }

    /// Validates the table, and maps the client's predicate onto stored names.
    private func listPredicate(claims: Claims, table: String, predicate: QueryPredicate) async throws -> QueryPredicate {
        try await ensureTable(table)
        return try Self.mapPredicate(predicate)
    }

    /// `identity`'s rows of an owner-only table that match `mapped`.
    private static func ownedPredicate(_ identity: String, _ mapped: QueryPredicate, includeDeleted: Bool) -> QueryPredicate {
        var parts: [QueryPredicate] = [Field(Meta.owner) == .string(identity)]
        if mapped != .all { parts.append(mapped) }
        if !includeDeleted { parts.append(Field(SystemField.deleted) == false) }
        return .and(parts)
    }

    /// Maps a client predicate onto the service's rows: `id` is the item id; reserved names are refused.
    static func mapPredicate(_ predicate: QueryPredicate) throws -> QueryPredicate {
        func field(_ name: String) throws -> String {
            if name.hasPrefix(Names.reservedPrefix) {
                throw SyncError(.invalidQuery, "field name '\(name)' uses the reserved prefix")
            }
            return name == SystemField.id ? Meta.item : name
        }
        switch predicate {
        case .all: return .all
        case let .compare(f, op, v): return .compare(try field(f), op, v)
        case let .isIn(f, vs): return .isIn(try field(f), vs)
        case let .isNull(f): return .isNull(try field(f))
        case let .contains(f, s): return .contains(try field(f), s)
        case let .hasPrefix(f, s): return .hasPrefix(try field(f), s)
        case let .hasSuffix(f, s): return .hasSuffix(try field(f), s)
        case let .and(ps): return .and(try ps.map(mapPredicate))
        case let .or(ps): return .or(try ps.map(mapPredicate))
        case let .not(p): return .not(try mapPredicate(p))
        case let .compareExpressions(l, op, r): return .compareExpressions(try mapExpression(l, field), op, try mapExpression(r, field))
        case let .isNullExpression(e): return .isNullExpression(try mapExpression(e, field))
        }
    }

    private static func mapExpression(_ expression: QueryExpression, _ field: (String) throws -> String) throws -> QueryExpression {
        switch expression {
        case .field(let name): return .field(try field(name))
        case .literal: return expression
        case let .call(function, arguments): return .call(function, try arguments.map { try mapExpression($0, field) })
        }
    }

    // MARK: Maintenance

    /// Forgets stored push outcomes older than `date` (clients replay within minutes; keep
    /// them for as long as a client may stay offline with a batch in flight). Returns how many.
    @discardableResult
    public func pruneOperationOutcomes(olderThan date: Timestamp) async throws -> Int {
        try await store.write { txn in
            var removed = 0
            while true {
                let rows = try txn.records(in: OutcomeRow.table, matching: Query(OutcomeRow.field(.createdAt) < .date(date), limit: 1000))
                if rows.isEmpty { return removed }
                for row in rows { try OutcomeRow.delete(txn, id: row.id) }
                removed += rows.count
            }
        }
    }
}
