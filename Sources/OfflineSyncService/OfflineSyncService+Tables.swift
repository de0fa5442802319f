import Foundation
import OfflineSync
import OfflineSyncStoreKit

// The service's two bookkeeping tables, each declared once: its row, its columns (the
// coding keys) and its schema.

extension OfflineSyncService {
    /// `__srv_tables`: one row per served table, keyed by the table's name: the epoch that
    /// prefixes its versions and cursors (a new epoch tells clients their cursors are void)
    /// the last change sequence it assigned and the last `updatedAt` it stamped (see
    /// ``TableClock``).
    struct SequenceRow: StoredRow {
        static let table = "__srv_tables"
        /// The row of the shared change sequence, which every shared table draws from (so a
        /// group's log and a membership's events order across tables), kept under a name no
        /// app table can have.
        static let shared = "__shared"
        enum CodingKeys: String, CodingKey { case id, epoch, sequence, stamp }

        var id: String
        var epoch: String
        var sequence: Int64
        /// `nil` until the table's first write (and in stores written before stamps were kept:
        /// the first write then stamps the clock's time).
        var stamp: Timestamp?

        init(id: String, epoch: String, sequence: Int64, stamp: Timestamp? = nil) {
            self.id = id
            self.epoch = epoch
            self.sequence = sequence
            self.stamp = stamp
        }

        static let schema = TableSchema(table, fields: [column(.epoch, .string), column(.sequence, .int), column(.stamp, .date)],
                                        undeclaredFields: .reject)

        /// The row of `table`; ``SyncError/Code/corrupted`` when it is missing.
        static func of(_ txn: any LocalReadTransaction, table: String) throws -> SequenceRow {
            guard let row = try find(txn, id: table) else {
                throw SyncError(.corrupted, "the sequence row of table '\(table)' is missing")
            }
            return row
        }
    }

    /// `__srv_operations`: the outcomes of pushed operations that are not held by a row,
    /// keyed by ``rowId(owner:item:)`` of the identity and the operation id, so a replayed
    /// batch is answered with its first outcome — conflicts, rejections, a delete of a
    /// tombstone, and an applied operation's outcome once a later write took its row over
    /// (an applied write's outcome is otherwise its row: `__op`, ``apply``). Pruned by
    /// ``pruneOperationOutcomes(olderThan:)``.
    struct OutcomeRow: StoredRow {
        static let table = "__srv_operations"
        enum CodingKeys: String, CodingKey { case id, outcome, createdAt }

        var id: String
        /// The outcome in ``ValueCodec``'s encoding (see ``init(id:outcome:answering:createdAt:)``).
        var outcome: Data
        var createdAt: Timestamp

        static let schema = TableSchema(table, fields: [column(.outcome, .bytes), column(.createdAt, .date, indexed: true)],
                                        undeclaredFields: .reject)

        /// The keys of the encoded outcome object.
        private enum Key: String { case kind, record, reason, status, code }
        /// The kinds of outcome, as stored.
        private enum Kind: String { case applied, conflict, rejected }
        /// The first byte of every outcome stored as an object; an applied insert's or update's
        /// outcome is stored as a record's encoding instead, whose first byte differs.
        private static let objectTag = ValueCodec.encode(.object([:]))[0]

        /// The outcome of `operation` (the one it answers, when known), as stored.
        ///
        /// An applied insert or update stored exactly the operation's item, so only what the
        /// service added is kept: the stored record without its fields (id, version,
        /// updatedAt, deleted, in ``ValueCodec``'s record encoding). ``pushOutcome(answering:)``
        /// rebuilds the record from the replayed operation, which carries the same item (an
        /// operation id names one operation: a client resends it unchanged and queues later
        /// changes behind it). Stores written before applied outcomes moved into their rows hold
        /// many such rows, and they stay readable; the push now stores an applied insert's or
        /// update's outcome here only when its row is taken over, without its operation, so
        /// whole. Every other outcome keeps its record, in an object; a rejection keeps its
        /// reason, status and `code` (a ``SyncError/Code``'s name, only when it has one).
        init(id: String, outcome: PushOutcome, code: SyncError.Code? = nil, answering operation: PushOperation? = nil,
             createdAt: Timestamp) {
            let value: Value
            switch outcome {
            case .applied(let record):
                if let operation, ExactString.sameBytes(record.id, operation.itemId),
                   operation.storedRecord(version: nil, updatedAt: nil, deleted: false) != nil {
                    assert(operation.storedRecord(version: record.version, updatedAt: record.updatedAt, deleted: record.deleted) == record,
                           "an applied record that is not its item")
                    let kept = Record(id: record.id, version: record.version, updatedAt: record.updatedAt, deleted: record.deleted)
                    self.init(id: id, outcome: Data(ValueCodec.encode(kept)), createdAt: createdAt)
                    return
                }
                value = .object([Key.kind.rawValue: .string(Kind.applied.rawValue), Key.record.rawValue: .bytes(ValueCodec.encode(record))])
            case .conflict(let record):
                value = .object([Key.kind.rawValue: .string(Kind.conflict.rawValue), Key.record.rawValue: .bytes(ValueCodec.encode(record))])
            case let .rejected(reason, status):
                var object: [String: Value] = [Key.kind.rawValue: .string(Kind.rejected.rawValue), Key.reason.rawValue: .string(reason),
                                               Key.status.rawValue: status.map { .int(Int64($0)) } ?? .null]
                if let code { object[Key.code.rawValue] = .string(code.description) }
                value = .object(object)
            }
            self.init(id: id, outcome: Data(ValueCodec.encode(value)), createdAt: createdAt)
        }

        init(id: String, outcome: Data, createdAt: Timestamp) {
            self.id = id
            self.outcome = outcome
            self.createdAt = createdAt
        }

        /// The row as ``RecordEncoder`` would store it, spelled by hand: one is written per
        /// pushed operation (`OutcomeRowTests` checks the two agree).
        func record() -> Record {
            Record(id: id, fields: [CodingKeys.outcome.rawValue: .bytes([UInt8](outcome)),
                                    CodingKeys.createdAt.rawValue: .date(createdAt)])
        }

        /// The stored outcome, as an answer to `operation` (the same id sent again); an applied
        /// insert or update kept without its record is rebuilt from the operation's item. An
        /// operation that cannot be that one — a delete, or another item — is refused (409)
        /// rather than told it was applied. ``SyncError/Code/corrupted`` when the row does not
        /// decode.
        func pushOutcome(answering operation: PushOperation) throws -> PushOutcome {
            try pushAnswer(answering: operation).outcome
        }

        /// The stored outcome (``pushOutcome(answering:)``) and a rejection's code, when it was
        /// stored with one. A rejection stored before codes were kept has none (its reason
        /// may still begin with one, which is sent on as it is).
        func pushAnswer(answering operation: PushOperation) throws -> (outcome: PushOutcome, code: SyncError.Code?) {
            if let first = outcome.first, first != Self.objectTag {
                let kept = try ValueCodec.decodeRecord(Array(outcome))
                guard kept.fields.isEmpty else { throw SyncError(.corrupted, "a stored push outcome is unreadable") }
                guard ExactString.sameBytes(operation.itemId, kept.id),
                      let record = operation.storedRecord(version: kept.version, updatedAt: kept.updatedAt, deleted: kept.deleted) else {
                    return (.rejected(reason: "operation id '\(operation.id)' was applied before as an insert or update of another item: an operation id names one operation", status: 409), nil)
                }
                return (.applied(record), nil)
            }
            guard case .object(let object) = try ValueCodec.decode(Array(outcome)),
                  let kind = object[Key.kind.rawValue]?.stringValue.flatMap(Kind.init(rawValue:)) else {
                throw SyncError(.corrupted, "a stored push outcome is unreadable")
            }
            switch kind {
            case .applied, .conflict:
                guard let recordBytes = object[Key.record.rawValue]?.bytesValue else {
                    throw SyncError(.corrupted, "a stored push outcome has no record")
                }
                let record = try ValueCodec.decodeRecord(recordBytes)
                return (kind == .applied ? .applied(record) : .conflict(serverRecord: record), nil)
            case .rejected:
                return (.rejected(reason: object[Key.reason.rawValue]?.stringValue ?? "",
                                  status: object[Key.status.rawValue]?.intValue.map { Int($0) }),
                        object[Key.code.rawValue]?.stringValue.flatMap { SyncError.Code(name: $0) })
            }
        }
    }

    /// `__srv_view`: each identity's own log of shared tables. An entry per (identity, table,
    /// item) whose view the identity was told of directly — as the row's owner, through an
    /// identity field, or as a member of a small group —: the shared sequence of the last such
    /// change, and whether the row is in view now. Beside them, one *event* per (identity,
    /// table, group) whose membership changed (``group`` set): the pull sweeps that group's
    /// log there (move-in, move-out). A pull reads the caller's entries after its cursor, in
    /// sequence order, through the (identity, table, sequence) index.
    struct ViewRow: StoredRow {
        static let table = "__srv_view"
        enum CodingKeys: String, CodingKey { case id, identity, table, item, sequence, visible, group }

        var id: String
        var identity: String
        var table: String
        var item: String
        var sequence: Int64
        /// `false`: the row left the identity's view (a pull sends its id as removed).
        var visible: Bool
        /// For an event, the key of the group (``Group/key``) whose membership changed.
        var group: GroupKey?

        static let schema = TableSchema(table, fields: [
            column(.identity, .string), column(.table, .string), column(.item, .string),
            column(.sequence, .int), column(.visible, .bool), column(.group, .string),
        ], indexes: [IndexDefinition([CodingKeys.identity.rawValue, CodingKeys.table.rawValue, CodingKeys.sequence.rawValue]),
                     IndexDefinition([CodingKeys.table.rawValue, CodingKeys.sequence.rawValue])],
           undeclaredFields: .reject)

        /// The entry's id: unambiguous for any identity, table and item.
        static func id(identity: String, table: String, item: String) -> String {
            CompositeKey.packed(identity, table, last: item)
        }

        /// An event of `identity`'s membership of `group`, for `table`, at `sequence`:
        /// `visible` while the membership is live.
        static func event(identity: Identity, table: String, group: GroupKey, sequence: Int64, visible: Bool) -> ViewRow {
            // `!` first, which no entry's id (a length first) starts with.
            ViewRow(id: "!" + CompositeKey.packed(identity.text, table, last: group.text), identity: identity.text, table: table,
                    item: "", sequence: sequence, visible: visible, group: group)
        }

        /// The caller's entries and events of `table` after `sequence`.
        static func after(_ sequence: Int64, identity: String, table: String) -> QueryPredicate {
            field(.identity) == .string(identity) && field(.table) == .string(table) && field(.sequence) > .int(sequence)
        }

        /// Writes the entry field by field, as the generic encoder would (an absent group is
        /// no field): a push into a small group writes one entry per member per row, and the
        /// encoder cost as much as the store's write.
        func save(_ txn: any LocalWriteTransaction) throws {
            var fields: [String: Value] = [
                Self.name(.identity): .string(identity), Self.name(.table): .string(table), Self.name(.item): .string(item),
                Self.name(.sequence): .int(sequence), Self.name(.visible): .bool(visible),
            ]
            if let group { fields[Self.name(.group)] = .string(group.text) }
            try txn.upsert(Record(id: id, fields: fields), in: Self.table)
        }

        /// The caller's entries of `table` after `sequence`, without events (a pull that reads
        /// the table directly has no group to sweep).
        static func entries(after sequence: Int64, identity: String, table: String) -> QueryPredicate {
            after(sequence, identity: identity, table: table) && .isNull(CodingKeys.group.rawValue)
        }
    }
}
