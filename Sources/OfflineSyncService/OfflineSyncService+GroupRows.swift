import Foundation
import OfflineSync
import OfflineSyncStoreKit

// The bookkeeping of shared data at any group size (Docs/SyncRules.md, "How the server
// enforces them"): a log per group, the groups' sizes and modes, and each identity's spans of
// membership. Each row type is declared once: its columns (the coding keys) and its schema.

/// The name of one group of readers (the members of one list, the owner of one row an
/// `owner_of` grant points at), as the service stores it and as notifications and cursors
/// carry it. Apps and servers treat it as opaque: they compare keys, and subscribe to them
/// (``OfflineSyncService/groupSubscriptions(claims:)``).
///
/// Two keys are equal when their bytes are: a group's key holds its value (a list id, say),
/// and two values that differ only in Unicode normalisation are two groups to every store.
public struct GroupKey: Hashable, Sendable, Codable, CustomStringConvertible {
    private let exact: ExactString

    /// The key's text, as stored.
    public var text: String { exact.value }

    /// A key as read back from a store, a cursor or another server instance. The service
    /// makes keys from the groups its rules name, and reads a key back into its group once,
    /// where it enters (a cursor naming no group it writes is an invalid cursor).
    package init(_ text: String) { exact = ExactString(text) }

    public var description: String { text }

    public init(from decoder: any Decoder) throws {
        self.init(try decoder.singleValueContainer().decode(String.self))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(text)
    }
}

extension OfflineSyncService {
    /// A set of readers a read grant names by a key rather than by an identity: the members of
    /// one group of a membership, or the owner of one row of an `owner_of` target table. Its
    /// ``key`` names it in the group log, the group table and the reach table. Equal when
    /// the keys are: every part compares by bytes.
    enum Group: Hashable {
        /// The members of the group whose key is `value` in the membership `name`.
        case member(String, Value)
        /// The owner of the row `item` of `table` (while that row is live).
        case ownerOf(String, String)

        /// The group's stored name: `m<membership>` or `o<table>`, length-prefixed, then the
        /// group value (`s` and the string, or `i` and the integer; an integral double is its
        /// integer, as the stores compare them) or the item id.
        var key: GroupKey {
            switch self {
            case let .member(name, value): return GroupKey("m" + CompositeKey.packed(name, last: Self.encode(value)))
            case let .ownerOf(table, item): return GroupKey("o" + CompositeKey.packed(table, last: item))
            }
        }

        /// The group a stored key names; `nil` for a key this version did not write.
        init?(key: GroupKey) {
            let key = key.text
            guard let kind = key.first, let (parts, rest) = CompositeKey.unpack(key.dropFirst(), count: 1) else { return nil }
            switch kind {
            case "m":
                guard let value = Self.decode(rest) else { return nil }
                self = .member(parts[0], value)
            case "o": self = .ownerOf(parts[0], String(rest))
            default: return nil
            }
        }

        static func == (lhs: Group, rhs: Group) -> Bool {
            switch (lhs, rhs) {
            case let (.member(a, x), .member(b, y)): return ExactString.sameBytes(a, b) && x == y
            case let (.ownerOf(a, x), .ownerOf(b, y)): return ExactString.sameBytes(a, b) && ExactString.sameBytes(x, y)
            default: return false
            }
        }

        func hash(into hasher: inout Hasher) {
            switch self {
            case let .member(name, value):
                hasher.combine(0)
                hasher.combine(ExactString(name))
                hasher.combine(value)
            case let .ownerOf(table, item):
                hasher.combine(1)
                hasher.combine(ExactString(table))
                hasher.combine(ExactString(item))
            }
        }

        private static func encode(_ value: Value) -> String {
            switch value {
            case .string(let text): return "s" + text
            case .int(let number): return "i" + String(number)
            case .double(let number) where number.rounded() == number && abs(number) < 9.0e18: return "i" + String(Int64(number))
            default: return "v" + ValueCodec.encode(value).map { String($0, radix: 16) }.joined(separator: ".")
            }
        }

        private static func decode(_ text: Substring) -> Value? {
            guard let kind = text.first else { return nil }
            let body = text.dropFirst()
            switch kind {
            case "s": return .string(String(body))
            case "i": return Int64(body).map(Value.int)
            case "v":
                let bytes = body.split(separator: ".").compactMap { UInt8($0, radix: 16) }
                return try? ValueCodec.decode(bytes)
            default: return nil
            }
        }
    }

    /// Half-open spans of the shared change sequence, `[from, to)`, `to == Int64.max` while
    /// open, each with an optional role: when an item was in a group (``GroupLogRow``), or
    /// when an identity belonged to one and with which role (``ReachRow``). Stored as one
    /// ``ValueCodec`` value, so a row holds its whole history.
    struct Spans: Equatable {
        struct Span: Equatable {
            var from: Int64
            var to: Int64
            var role: String?
        }
        var spans: [Span] = []

        /// Whether the last span is still open.
        var isOpen: Bool { spans.last?.to == .max }
        /// The role of the open span.
        var openRole: String? { isOpen ? spans.last?.role : nil }
        /// Where the open span began.
        var openSince: Int64? { isOpen ? spans.last?.from : nil }

        mutating func open(at sequence: Int64, role: String? = nil) {
            if isOpen { close(at: sequence) }
            spans.append(Span(from: sequence, to: .max, role: role))
        }

        mutating func close(at sequence: Int64) {
            guard isOpen else { return }
            spans[spans.count - 1].to = sequence
            if spans[spans.count - 1].from >= sequence { spans.removeLast() }
        }

        /// Whether some span of `self` overlaps some span of `other` whose role is in
        /// `roles` (any role when `roles` is nil).
        func overlaps(_ other: Spans, roles: Set<String>?) -> Bool {
            for mine in spans {
                for theirs in other.spans where roles == nil || theirs.role.map(roles!.contains) == true {
                    if mine.from < theirs.to && theirs.from < mine.to { return true }
                }
            }
            return false
        }

        var data: Data {
            Data(ValueCodec.encode(Value.array(spans.map { span in
                .array([.int(span.from), .int(span.to), span.role.map(Value.string) ?? .null])
            })))
        }

        init() {}

        /// Decodes stored spans; ``SyncError/Code/corrupted`` when they do not decode.
        init(_ data: Data) throws {
            guard case .array(let items) = try ValueCodec.decode(Array(data)) else {
                throw SyncError(.corrupted, "stored membership spans are unreadable")
            }
            for item in items {
                guard case .array(let parts) = item, parts.count == 3, let from = parts[0].intValue, let to = parts[1].intValue else {
                    throw SyncError(.corrupted, "stored membership spans are unreadable")
                }
                spans.append(Span(from: from, to: to, role: parts[2].stringValue))
            }
        }
    }

    /// `__srv_glog`: the group log. One entry per (group, table, item) an item ever belonged
    /// to: the shared sequence of the last change that touched the item while in or leaving
    /// the group, and the spans it was in the group. A write costs one entry per group of the
    /// row before and after it, whatever the groups' sizes. Members of a large group read its
    /// entries on pull; a member's move-in or move-out sweeps them (``GroupLogRow/after(_:group:inGroup:table:)``).
    ///
    /// The stored `group` field is the group's key while the item is in the group, and the key
    /// after a marker once it has left: a sweep reads the rows still in the group from the
    /// table itself, in change order (their entries' sequences are their own), and only the
    /// entries of rows that left from this log. Both forms stay inside this type: the others
    /// see ``key`` and ``inGroup``.
    struct GroupLogRow: StoredRow {
        static let table = "__srv_glog"
        enum CodingKeys: String, CodingKey { case id, group, table, item, sequence, spans }

        /// Before a group's key in the entries of items that left it. No key starts with it
        /// (keys start with `m` or `o`).
        private static let leftMarker = "x"

        var id: String
        /// The stored form: the group's key, or the marker and the key.
        private var group: String
        var table: String
        var item: String
        var sequence: Int64
        var spans: Data

        static let schema = TableSchema(table, fields: [
            column(.group, .string), column(.table, .string), column(.item, .string),
            column(.sequence, .int), column(.spans, .bytes),
        ], indexes: [IndexDefinition([CodingKeys.group.rawValue, CodingKeys.table.rawValue, CodingKeys.sequence.rawValue])],
           undeclaredFields: .reject)

        /// An entry of the group with key `key`, stored under the key while the item is in
        /// the group (`spans` open) and under the closed form once it left.
        init(id: String, key: GroupKey, table: String, item: String, sequence: Int64, spans: Spans) {
            self.init(id: id, group: Self.stored(key, inGroup: spans.isOpen), table: table, item: item,
                      sequence: sequence, spans: spans.data)
        }

        private init(id: String, group: String, table: String, item: String, sequence: Int64, spans: Data) {
            self.id = id
            self.group = group
            self.table = table
            self.item = item
            self.sequence = sequence
            self.spans = spans
        }

        /// The entry as stored, spelled field by field as the generic encoder would: a push
        /// writes one per row it logs to a group, and the encoder cost more than the write.
        func record() throws -> Record {
            Record(id: id, nonNullFields: [
                Self.name(.group): .string(group), Self.name(.table): .string(table), Self.name(.item): .string(item),
                Self.name(.sequence): .int(sequence), Self.name(.spans): .bytes(Array(spans)),
            ])
        }

        /// Holds the entry in `pending` (written with the push's other held rows) as a row
        /// checked against ``schema``, its fields by position: no dictionary of them is built,
        /// and a push holds one entry per row it logs to a group.
        func hold(in pending: inout PendingWrites, _ txn: any LocalWriteTransaction) throws {
            let at = Self.positions
            try pending.add(id: id, fields: [:], positioned: [
                (at.group, .string(group)), (at.table, .string(table)), (at.item, .string(item)),
                (at.sequence, .int(sequence)), (at.spans, .bytes(Array(spans))),
            ], version: nil, updatedAt: nil, deleted: false, in: Self.table, schema: Self.schema, txn)
        }

        /// Where each field sits in ``schema``.
        private static let positions = (group: position(.group), table: position(.table), item: position(.item),
                                        sequence: position(.sequence), spans: position(.spans))

        private static func position(_ key: CodingKeys) -> Int { schema.position(ofField: name(key))! }

        /// The group's key, whether the item is still in it or not.
        var key: GroupKey { GroupKey(inGroup ? group : String(group.dropFirst(Self.leftMarker.count))) }

        /// Whether the item is in the group (as stored: the last change the entry logged).
        var inGroup: Bool { !group.hasPrefix(Self.leftMarker) }

        private static func stored(_ key: GroupKey, inGroup: Bool) -> String {
            inGroup ? key.text : leftMarker + key.text
        }

        static func id(group: GroupKey, table: String, item: String) -> String {
            CompositeKey.packed(group.text, table, last: item)
        }

        /// The entries of `table` after `sequence` of the items in `group` (`inGroup`), or of
        /// those that left it.
        static func after(_ sequence: Int64, group: GroupKey, inGroup: Bool, table: String) -> QueryPredicate {
            field(.group) == .string(stored(group, inGroup: inGroup)) && field(.table) == .string(table)
                && field(.sequence) > .int(sequence)
        }

        /// The same entry with `spans` (its stored form follows them), as rewritten by an upgrade.
        func with(spans: Spans) -> GroupLogRow {
            GroupLogRow(id: id, key: key, table: table, item: item, sequence: sequence, spans: spans)
        }

        /// The entries `query` selects, read field by field: a pull reads a thousand a page,
        /// and the generic decoder costs more than the store's read. Throws
        /// ``SyncError/Code/corrupted`` for an entry that does not hold its fields.
        static func entries(_ txn: any LocalReadTransaction, _ query: Query) throws -> [GroupLogRow] {
            try txn.records(in: table, matching: query).map { row in
                guard let group = row[name(.group)].stringValue, let table = row[name(.table)].stringValue,
                      let item = row[name(.item)].stringValue, let sequence = row[name(.sequence)].intValue,
                      case .bytes(let spans) = row[name(.spans)] else {
                    throw SyncError(.corrupted, "a row of \(Self.table) does not hold a group-log entry")
                }
                return GroupLogRow(id: row.id, group: group, table: table, item: item, sequence: sequence, spans: Data(spans))
            }
        }
    }

    /// How a group's writes reach its members.
    enum GroupMode: String, Codable {
        /// At most the fan-out limit of members: a write also records an entry in each
        /// member's own log, so a member of thousands of small groups pulls one log.
        case small
        /// Over the limit, and the members' markers are being written in bounded steps: writes
        /// still fan out until every member can read the group's log.
        case converting
        /// Over the limit: a write is logged once, in the group's log, which each member's pull
        /// reads beside its own.
        case large
        /// Was large and fell to half the limit, beside concurrent writers: writes fan out as
        /// a small group's do and are logged as a large group's are, and members' pulls still
        /// read the log, until a write that runs alone turns the group small
        /// (``OfflineSyncService/shrinkGroups(_:)``). It is a step of its own so that a write
        /// whose snapshot still had the group large (it waited for the first alone write) runs
        /// before the second begins, below the number where members stop reading the log.
        case shrinking
    }

    /// `__srv_groups`: one row per membership group the service has seen change: its count of
    /// live membership rows and its mode. A group without a row is small and is counted
    /// when it next changes.
    struct GroupRow: StoredRow {
        static let table = "__srv_groups"
        enum CodingKeys: String, CodingKey { case id, members, mode, largeUntil, progress }

        var id: String
        /// Live membership rows (a member with two rows counts twice: only thresholds use it).
        var members: Int64
        var mode: GroupMode
        /// When the group was last turned back from large to small: members' pulls from a cursor
        /// before it still read the group's log (writes then were not fanned out).
        var largeUntil: Int64?
        /// While converting: the last member whose marker was written.
        var progress: String?
        /// Made for a group that had none (not stored).
        var isNew = false

        static let schema = TableSchema(table, fields: [
            column(.members, .int), column(.mode, .string), column(.largeUntil, .int), column(.progress, .string),
        ], undeclaredFields: .reject)

        /// The group's key (the row's id).
        var key: GroupKey { GroupKey(id) }

        init(key: GroupKey, members: Int64, mode: GroupMode) {
            self.init(id: key.text, members: members, mode: mode)
        }

        init(id: String, members: Int64, mode: GroupMode, largeUntil: Int64? = nil, progress: String? = nil) {
            self.id = id
            self.members = members
            self.mode = mode
            self.largeUntil = largeUntil
            self.progress = progress
        }

        static func find(_ txn: any LocalReadTransaction, key: GroupKey) throws -> GroupRow? {
            try find(txn, id: key.text)
        }

        /// Whether a member's pull from `cursor` must read the group's log.
        func isRead(after cursor: Int64) -> Bool {
            mode != .small || (largeUntil ?? .min) > cursor
        }
    }

    /// `__srv_reach`: an identity's spans of membership in one group (with its role), and
    /// whether it is *marked*: a member of a group that is or was large, whose log its pulls
    /// read. Pulls find their marked groups through the (identity, marked) index, so a pull
    /// costs O(the caller's large groups), not O(its groups).
    struct ReachRow: StoredRow {
        static let table = "__srv_reach"
        enum CodingKeys: String, CodingKey { case id, identity, group, spans, marked }

        var id: String
        var identity: String
        var group: GroupKey
        var spans: Data
        var marked: Bool

        static let schema = TableSchema(table, fields: [
            column(.identity, .string), column(.group, .string), column(.spans, .bytes), column(.marked, .bool),
        ], indexes: [IndexDefinition([CodingKeys.identity.rawValue, CodingKeys.marked.rawValue])],
           undeclaredFields: .reject)

        static func id(identity: String, group: GroupKey) -> String {
            CompositeKey.packed(identity, last: group.text)
        }
    }
}
