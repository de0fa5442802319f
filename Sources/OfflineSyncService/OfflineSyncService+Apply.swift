import Foundation
import OfflineSync

// The one write path: every pushed insert, update and delete, of an owner-only or a shared
// table, goes through `apply`. The two kinds differ only where the rules come in: where the
// row is stored (under its owner, or once per item), which change sequence numbers it, who
// may read and write it, and which logs learn of it.

extension OfflineSyncService {
    /// Applies one operation for `claims`, in the push's transaction. `id` is the row it
    /// names (the item id, or for an owner-only table the caller's own row of it), `nil`
    /// when the item id is invalid: the operation is then refused with 400.
    ///
    /// - An owner-only row lives under the caller's own id, so the caller always reads it and
    ///   may write it; its table's own sequence numbers it.
    /// - A shared row lives once per item id and the shared sequence numbers it. A change the
    ///   rules refuse, or that touches a row the caller may not read, is a 403 with no server
    ///   copy; a conflict carries the server's copy only when the caller may read it. The
    ///   logs (own and group) learn of the change in the same transaction.
    ///
    /// `push.rows` answers the operation's own row (the batch read it with the others; the
    /// operation is its `index`) and learns what this operation writes to it. The row is held
    /// in `push.pending` (the push holds its outcomes and group-log entries there too) as a
    /// row of ``ValidatedRows``, checked once against `layout`'s schema with the service's
    /// fields placed by position, which the store writes without checking it again: until the
    /// batch reads the store itself, it reads those rows only through `push.rows` (and the
    /// log entries through ``SharedEffects/groupLogs``). An operation that does — one whose
    /// row the batch did not read, or a shared table's while rows the rules read are held
    /// (``mustWriteOut(before:in:)``) — writes `push.pending` out first, so it sees every
    /// earlier operation's writes. A row the rules read (a membership, an `owner_of` target)
    /// of a shared table is written at once: the rules of the next operation read it.
    ///
    /// The row it writes carries `key` (the operation's outcome key) in `__op`, and the answer
    /// says `remembered`: the row is the operation's remembered outcome while it holds the
    /// key, so the push stores no outcome row for it. A write that takes over a row holding
    /// another operation's key first stores that operation's outcome — the row as it stands,
    /// made public — under its key, so a replay of it is still answered. A refusal carries its
    /// code when it has one (`forbidden`, `attachmentMissing`: ``PushResult/rejectionCode``).
    func apply(_ operation: PushOperation, index: Int, key: String, row id: String?, layout: StorageLayout,
               in push: inout PushTransaction) throws -> (outcome: PushOutcome, code: SyncError.Code?, remembered: Bool) {
        guard let id else { return (Self.invalidId(operation.itemId), nil, false) }
        let txn = push.txn, claims = push.claims
        let table = operation.table, item = operation.itemId
        let shared = isShared(table)
        if !push.rows.holdsRow(of: index) || (shared && mustWriteOut(before: table, in: push.pending))
            || Self.mayReference(operation.item) {
            try push.pending.flush(txn)
        }
        // Built only when it is the answer: most operations are allowed.
        var forbidden: PushRefusal { Self.forbidden(operation) }
        let current = try push.rows.row(of: index, in: table, id: id, txn)
        // Membership answers are remembered for the push (``SharedEffects/memo``) until it
        // writes a membership: a batch into one list asks once whether the writer is in it.
        let memo = push.effects.memo
        let readable = try !shared || (current.map { try evaluator.canRead($0, in: table, claims: claims, txn, memo: memo) } ?? false)
        let fields: [String: Value]
        var owner = claims.identity.text
        switch operation.kind {
        case .insert:
            if let current, !current.deleted {
                guard readable else { return forbidden.answer }
                return (.conflict(serverRecord: Self.publicRecord(current)), nil, false)
            }
            guard let item = operation.item else { return (.rejected(reason: "an insert needs an item", status: 400), nil, false) }
            fields = item.fields
        case .update, .delete:
            guard let current else { return (.rejected(reason: "item '\(item)' does not exist", status: 404), nil, false) }
            guard readable else { return forbidden.answer }
            owner = current[Meta.owner].stringValue ?? claims.identity.text
            if current.deleted {
                return (operation.kind == .delete ? .applied(Self.publicRecord(current)) : .conflict(serverRecord: Self.publicRecord(current)),
                        nil, false)
            }
            if let base = operation.baseVersion, base != current.version { return (.conflict(serverRecord: Self.publicRecord(current)), nil, false) }
            if operation.kind == .update {
                guard let item = operation.item else { return (.rejected(reason: "an update needs an item", status: 400), nil, false) }
                fields = item.fields
            } else {
                fields = Self.publicRecord(current).fields
            }
        }
        if let reserved = fields.keys.first(where: { $0.hasPrefix(Names.reservedPrefix) }) {
            return (.rejected(reason: "field name '\(reserved)' uses the reserved prefix '\(Names.reservedPrefix)'", status: 400), nil, false)
        }
        let sequence = try push.nextSequence(of: shared ? SequenceRow.shared : table)
        let updatedAt = try push.nextStamp(of: table), deleted = operation.kind == .delete
        // The answer's record is the row without the service's own fields: `fields` as it is
        // now (no field of the caller's uses the reserved prefix).
        let applied = PushOutcome.applied(Record(id: item, fields: fields, version: sequence.version,
                                                 updatedAt: updatedAt, deleted: deleted))
        let proposed = ProposedWrite(index: index, key: key, id: id, fields: fields,
                                     own: layout.serviceFields(owner: owner, item: item, sequence: sequence.value, key: key),
                                     sequence: sequence.value, version: sequence.version, updatedAt: updatedAt, deleted: deleted,
                                     current: current)
        let refusal = shared ? try writeShared(proposed, of: operation, readable: readable, layout: layout, &push)
                             : try holdOwned(proposed, in: table, layout: layout, &push)
        if let refusal { return refusal.answer }
        return (applied, nil, true)
    }

    /// Whether a shared operation on `table` must write out `pending` before it reads the
    /// store: the rules decide from membership rows and `owner_of` targets (and a change of
    /// one reads the rows of the groups it changes), so an operation on such a table, or any
    /// shared operation while such rows are held, sees the batch's earlier writes in the store.
    /// Other shared operations read what the batch wrote only through its reads and memos.
    func mustWriteOut(before table: String, in pending: PendingWrites) -> Bool {
        let read = ruleIndex.readByRules
        return read.contains(table) || read.contains { pending.holdsRows(in: $0) }
    }

    /// Whether `item` references an attachment: whether the caller may read one it names is
    /// decided from the rows that reference it (``attachmentChange(from:to:claims:_:)``),
    /// which the batch may have written, so such an operation writes the held rows out first.
    /// Only objects and arrays are scanned: an item of other fields is answered at once.
    private static func mayReference(_ item: Record?) -> Bool {
        guard let fields = item?.fields, fields.values.contains(where: \.mayHoldAttachment) else { return false }
        // A malformed reference is refused before anything is read.
        return !Attachment.scan(fields).references.isEmpty
    }

    /// Holds an owner-only operation's row in `push.pending`, checked once, as the store's
    /// row: the caller's fields by name, the service's by position, with no dictionary of them
    /// built (``ValidatedRows``). Returns the refusal, or `nil` when the row is held.
    private func holdOwned(_ proposed: ProposedWrite, in table: String, layout: StorageLayout,
                           _ push: inout PushTransaction) throws -> PushRefusal? {
        let txn = push.txn
        // Outside the refusal's `catch`: a failure to write the held rows is the store's, not
        // this row's, and fails the push.
        try push.pending.makeRoom(in: table, txn)
        do {
            try push.pending.add(id: proposed.id, fields: proposed.fields, positioned: proposed.own, version: proposed.version,
                                 updatedAt: proposed.updatedAt, deleted: proposed.deleted, in: table, schema: layout.schema, txn)
        } catch let error as SyncError {
            return PushRefusal(reason: error.message, status: 400)
        }
        let references: AttachmentReferenceChange
        do {
            references = try attachmentChange(from: proposed.current, to: proposed.deleted ? nil : proposed.fields,
                                              claims: push.claims, txn)
        } catch let refusal as PushRefusal {
            push.pending.removeLast(in: table)
            return refusal
        }
        try keepOutcome(of: proposed.current, takenOverBy: proposed.key, &push)
        try record(references, table: table, row: proposed.id, txn)
        push.rows.wrote(push.pending.lastChecked(in: table)!, by: proposed.index)
        return nil
    }

    /// Writes a shared table's row if the rules allow it, and tells the logs; the rules read
    /// the row as a record, with the service's fields. Returns the refusal, or `nil` when the
    /// row is written.
    private func writeShared(_ proposed: ProposedWrite, of operation: PushOperation, readable: Bool, layout: StorageLayout,
                             _ push: inout PushTransaction) throws -> PushRefusal? {
        let txn = push.txn, claims = push.claims, table = operation.table, memo = push.effects.memo
        var fields = proposed.fields
        // An item decoded with room for these (``fieldsAddedToPushedItems``) is only copied,
        // not grown: reserving on a shared dictionary copies and rehashes every field.
        if fields.capacity < fields.count + Meta.count { fields.reserveCapacity(fields.count + Meta.count) }
        for (position, value) in proposed.own { fields[layout.schema.fields[position].name] = value }
        let row = Record(id: proposed.id, fields: fields, version: proposed.version, updatedAt: proposed.updatedAt,
                         deleted: proposed.deleted)
        // A row the rules read is written at once (the next operation's rules read it), the
        // others held (``mustWriteOut(before:in:)``).
        let holds = !ruleIndex.readByRules.contains(table)
        // The row checked for the store, when it is written at once.
        var checked: ValidatedRows?
        if holds { try push.pending.makeRoom(in: table, txn) }
        do {
            if holds {
                try push.pending.add(id: proposed.id, fields: proposed.fields, positioned: proposed.own, version: proposed.version,
                                     updatedAt: proposed.updatedAt, deleted: proposed.deleted, in: table, schema: layout.schema, txn)
            } else {
                checked = ValidatedRows(schema: layout.schema)
                try checked!.append(row)
            }
        } catch let error as SyncError {
            return PushRefusal(reason: error.message, status: 400)
        }
        let references: AttachmentReferenceChange
        do { references = try attachmentChange(from: proposed.current, to: proposed.deleted ? nil : proposed.fields, claims: claims, txn) }
        catch let refusal as PushRefusal {
            if holds { push.pending.removeLast(in: table) }
            return refusal
        }
        let live = proposed.current.flatMap { $0.deleted ? nil : $0 }
        guard try evaluator.canWrite(operation.kind, in: table, current: operation.kind == .insert ? nil : live,
                                     proposed: proposed.deleted ? nil : row, claims: claims, txn, memo: memo) else {
            if holds { push.pending.removeLast(in: table) }
            // The compensating write: the caller may read the row it may not change, so its
            // next pull brings the server's copy back, whatever its cursor.
            if let live, readable {
                let again = try push.nextSequence(of: SequenceRow.shared).value
                try tell(claims.identity, about: live, of: table, at: again, evenIfUnseen: true, &push)
            }
            return Self.forbidden(operation)
        }
        if push.isConcurrent { try holdChanged(from: proposed.current, to: row, in: table, &push) }
        try keepOutcome(of: proposed.current, takenOverBy: proposed.key, &push)
        if let checked { try txn.upsert(checked, in: table) }
        try record(references, table: table, row: proposed.id, txn)
        push.rows.wrote(row, by: proposed.index)
        try logChange(of: table, from: proposed.current, to: row, at: proposed.sequence, &push)
        if try !evaluator.canRead(row, in: table, claims: claims, txn, memo: memo) {
            // A write the caller may make but not read back (a list's owner adding a member
            // whose rows only members read): its copy leaves the caller's device next pull.
            try tell(claims.identity, about: row, of: table, at: proposed.sequence, evenIfUnseen: true, &push)
        }
        return nil
    }

    /// Before a write beside other writers changes what their logging decides from, holds it
    /// exclusively (``PushTransaction/decidingRecord(in:id:exclusive:)``), in key order: the
    /// rows of the groups a membership row leaves and joins (the change writes them), and a
    /// row that `owner_of` grants point at. Other writers hold them shared; the exclusive hold
    /// waits for those that hold them, and keeps out those that come after until this push
    /// ends — first, so that a stream of writers into a busy group never starves the change,
    /// and so that the change's own logging, which holds the group shared, does not meet
    /// another change of the group in a deadlock. Other orders can still deadlock (a batch
    /// that writes into a group and then changes its members; a membership change and a write
    /// of the `owner_of` target its rows name, each holding one and waiting for the other):
    /// the store settles a deadlock as any conflict, rolling one back and running it again.
    private func holdChanged(from before: Record?, to after: Record, in table: String, _ push: inout PushTransaction) throws {
        var groups = Set<String>()
        for (name, membership) in ruleIndex.memberships[table] ?? [] {
            for row in [before, after].compactMap({ $0 }) {
                if let value = RuleEvaluator.value(of: membership.group, in: row) { groups.insert(Group.member(name, value).key.text) }
            }
        }
        for id in groups.sorted(by: Value.utf8Less) { _ = try push.decidingRecord(in: GroupRow.table, id: id, exclusive: true) }
        if !ownerOfDependents(of: table).isEmpty { _ = try push.decidingRecord(in: table, id: after.id, exclusive: true) }
    }

    /// The answer to an operation the rules do not allow: 403, code `forbidden`.
    private static func forbidden(_ operation: PushOperation) -> PushRefusal {
        PushRefusal(reason: "no grant of the sync rules on table '\(operation.table)' lets this identity \(operation.kind.rawValue) item '\(operation.itemId)'",
                    status: 403, code: .forbidden)
    }

    /// The answer to an operation whose item id ``Names/validateId(_:)`` refuses: 400, with why.
    private static func invalidId(_ item: String) -> PushOutcome {
        var reason = "record id is invalid"
        do { try Names.validateId(item) } catch let error as SyncError { reason = error.message } catch {}
        return .rejected(reason: reason, status: 400)
    }

    /// Before a write by the operation with outcome key `key` takes over `current`: when the
    /// row holds another operation's key, that operation's outcome — the row as it stands,
    /// made public — goes to `__srv_operations` under its key (and to the batch's own reads,
    /// should the batch replay it too), so a replay of it is still answered.
    private func keepOutcome(of current: Record?, takenOverBy key: String, _ push: inout PushTransaction) throws {
        guard let current, let holder = current[Meta.operation].stringValue, !ExactString.sameBytes(holder, key) else { return }
        let kept = OutcomeRow(id: holder, outcome: .applied(Self.publicRecord(current)), createdAt: push.now)
        try push.pending.add(kept.record(), in: OutcomeRow.table, push.txn)
        push.rows.stored(kept, underKey: holder)
    }
}

/// What an allowed operation writes: its row (`id`), the caller's fields, the service's own
/// by position in the table's storage schema, the row's change sequence number, version and
/// stamp, and the row it replaces (`current`), for operation `index` of the batch, whose
/// outcome key is `key`.
struct ProposedWrite {
    let index: Int
    let key: String
    let id: String
    let fields: [String: Value]
    let own: [(position: Int, value: Value)]
    let sequence: Int64
    let version: String
    let updatedAt: Timestamp
    let deleted: Bool
    let current: Record?
}

/// A served table's storage schema (the app's fields, then the service's own) and where the
/// service's fields sit in it, found once per push.
struct StorageLayout {
    let schema: TableSchema
    private let owner: Int, item: Int, sequence: Int, operation: Int

    init(_ schema: TableSchema) {
        self.schema = schema
        // ``OfflineSyncService/storageSchema(for:)`` declares every one of them.
        owner = schema.position(ofField: OfflineSyncService.Meta.owner)!
        item = schema.position(ofField: OfflineSyncService.Meta.item)!
        sequence = schema.position(ofField: OfflineSyncService.Meta.sequence)!
        operation = schema.position(ofField: OfflineSyncService.Meta.operation)!
    }

    /// The service's fields of a row, by position.
    func serviceFields(owner ownerId: String, item itemId: String, sequence number: Int64,
                       key: String) -> [(position: Int, value: Value)] {
        [(owner, .string(ownerId)), (item, .string(itemId)), (sequence, .int(number)), (operation, .string(key))]
    }
}

/// What one push carries from operation to operation inside its write transaction: who
/// pushes and when, the rows the batch read and what its operations wrote to them, the
/// owner-only rows held for one multi-row write, the clocks of the tables it touched, and
/// what its shared writes did (for the push's report). ``OfflineSyncService/apply(_:index:key:row:layout:in:)``
/// and the logs and memberships it updates take it whole, so adding to what a push keeps
/// changes one type, not every signature along the way.
struct PushTransaction {
    let txn: any LocalWriteTransaction
    let claims: Claims
    let now: Timestamp
    var rows: OfflineSyncService.BatchReads
    var pending = PendingWrites()
    var clocks: OfflineSyncService.TableClocks
    var effects = SharedEffects()

    /// With `order`, a transaction of a ``CommitOrderedStore``: its tables' numbers and stamps
    /// (and the shared sequence's) come from it (``OfflineSyncService/TableClock``);
    /// `beside` when it runs beside other writers (``CommitOrderedStore/concurrentWrite(_:)``).
    init(txn: any LocalWriteTransaction, claims: Claims, now: Timestamp, rows: OfflineSyncService.BatchReads, order: ChangeOrder? = nil,
         beside: Bool = false) {
        self.txn = txn
        self.claims = claims
        self.now = now
        self.rows = rows
        clocks = OfflineSyncService.TableClocks(order: order)
        isConcurrent = beside
    }

    /// Whether the push runs beside other writers (a ``CommitOrderedStore``'s concurrent
    /// write): its shared writes then hold the rows they decide from.
    let isConcurrent: Bool

    /// The row `id` of `table`, held until the push ends when it runs beside other writers
    /// (``HoldingWriteTransaction``; `exclusive` for a write about to change it), else read
    /// as it is: a row the push decides from (whom to tell of a change) then cannot change
    /// before the push commits unless the push sees the change.
    ///
    /// Throws ``TooManyHolds`` past ``holdLimit`` distinct rows: the push then runs alone.
    mutating func decidingRecord(in table: String, id: String, exclusive: Bool = false) throws -> Record? {
        guard isConcurrent else { return try txn.record(in: table, id: id) }
        guard let holding = txn as? any HoldingWriteTransaction else {
            throw SyncError(.storageFailure, "the store's concurrent writes cannot hold rows (HoldingWriteTransaction), which shared tables need")
        }
        held.insert(CompositeKey.packed(table, last: id))
        if held.count > Self.holdLimit { throw TooManyHolds() }
        return try holding.heldRecord(in: table, id: id, exclusive: exclusive)
    }

    /// The most distinct rows one push beside other writers holds. Each hold may take a slot
    /// of the store's lock table (PostgreSQL's is `max_locks_per_transaction` × connections,
    /// shared by every session): a batch into hundreds of small groups runs alone instead.
    static let holdLimit = 64

    /// The rows held so far (``decidingRecord(in:id:exclusive:)``), by table and id.
    private var held = Set<String>()

    /// Thrown by a push beside other writers that would hold more than ``holdLimit`` rows:
    /// the service rolls it back and runs it alone (``CommitOrderedStore/orderedWrite(_:)``).
    struct TooManyHolds: Error {}

    /// The next sequence number of `table` (or of the shared sequence), and the version it
    /// gives a row.
    mutating func nextSequence(of table: String) throws -> (version: String, value: Int64) {
        try clocks.nextSequence(of: table, txn)
    }

    /// The last sequence number drawn of `table` (or of the shared sequence).
    mutating func lastSequence(of table: String) throws -> Int64 {
        try clocks.lastSequence(of: table, txn)
    }

    /// The next update stamp of `table`.
    mutating func nextStamp(of table: String) throws -> Timestamp {
        try clocks.nextStamp(of: table, now: now, txn)
    }
}
