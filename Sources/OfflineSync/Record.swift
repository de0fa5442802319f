/// One row of a sync table: an id, fields, and the system properties the remote assigns.
///
/// At the top level a field set to `.null` is the same as a missing field: the setter
/// drops it, so every store round-trips the record exactly. Field names may not be one of
/// the system property names (`id`, `version`, `updatedAt`, `deleted`, in any case).
public struct Record: Sendable, Hashable, CustomStringConvertible {
    /// The record's id, unique in its table. Any non-empty string up to 1,024 UTF-8 bytes.
    public var id: String
    private var storage: [String: Value]
    /// The opaque version the remote assigned, or `nil` for a record never synced.
    public var version: String?
    /// When the remote last changed the record, or `nil` for a record never synced.
    public var updatedAt: Timestamp?
    /// `true` for a tombstone (a record deleted on the remote).
    public var deleted: Bool

    /// Creates a record. `.null` fields are dropped.
    public init(id: String, fields: [String: Value] = [:], version: String? = nil,
                updatedAt: Timestamp? = nil, deleted: Bool = false) {
        self.id = id
        self.storage = Record.droppingNulls(fields)
        self.version = version
        self.updatedAt = updatedAt
        self.deleted = deleted
    }

    /// A record of fields the caller guarantees hold no `.null` (the core's own rows, a
    /// store's row decoded column by column, which leaves out its null columns), so they
    /// are not scanned again.
    package init(id: String, nonNullFields fields: [String: Value], version: String? = nil,
                 updatedAt: Timestamp? = nil, deleted: Bool = false) {
        assert(!fields.values.contains(where: { $0.isNull }), "a field is null")
        self.id = id
        self.storage = fields
        self.version = version
        self.updatedAt = updatedAt
        self.deleted = deleted
    }

    /// The record's fields, without system properties. Setting a field to `.null` removes it.
    public var fields: [String: Value] {
        get { storage }
        set { storage = Record.droppingNulls(newValue) }
    }

    /// `fields` without its `.null` entries; the same dictionary (no copy) when it has none.
    private static func droppingNulls(_ fields: [String: Value]) -> [String: Value] {
        fields.values.contains(where: { $0.isNull }) ? fields.filter { !$0.value.isNull } : fields
    }

    /// A field's value, or `.null` when absent. Also answers the system names
    /// `id`, `version`, `updatedAt` and `deleted`, as queries see them.
    public subscript(field: String) -> Value {
        get {
            switch field {
            case SystemField.id: return .string(id)
            case SystemField.version: return version.map(Value.string) ?? .null
            case SystemField.updatedAt: return updatedAt.map(Value.date) ?? .null
            case SystemField.deleted: return .bool(deleted)
            default:
                guard let index = storage.index(forKey: field), ExactString.sameBytes(storage[index].key, field)
                else { return .null }
                return storage[index].value
            }
        }
        set {
            if newValue.isNull { storage.removeValue(forKey: field) } else { storage[field] = newValue }
        }
    }

    /// Exact equality, including field-name bytes.
    public static func == (lhs: Record, rhs: Record) -> Bool {
        ExactString.sameBytes(lhs.id, rhs.id) && lhs.version == rhs.version && lhs.updatedAt == rhs.updatedAt
            && lhs.deleted == rhs.deleted && Value.object(lhs.storage) == Value.object(rhs.storage)
    }

    /// Hashes consistently with `==`.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(Array(id.utf8))
        hasher.combine(version)
        hasher.combine(updatedAt)
        hasher.combine(deleted)
        hasher.combine(Value.object(storage))
    }

    /// Names the record and its field names, never its values (they may be private).
    public var description: String {
        "Record(id: \(id), fields: [\(storage.keys.sorted(by: Value.utf8Less).joined(separator: ", "))], version: \(version ?? "nil"), deleted: \(deleted))"
    }

    /// The same record with its system properties cleared (what a client sends as an insert).
    public var withoutSystemProperties: Record {
        if version == nil && updatedAt == nil && !deleted { return self }
        var copy = self
        copy.version = nil
        copy.updatedAt = nil
        copy.deleted = false
        return copy
    }
}

/// The names under which queries see a record's system properties.
public enum SystemField {
    /// The record id.
    public static let id = "id"
    /// The remote-assigned version.
    public static let version = "version"
    /// The remote-assigned modification time.
    public static let updatedAt = "updatedAt"
    /// The tombstone flag.
    public static let deleted = "deleted"
    /// All four, as queries accept them.
    public static let all: Set<String> = [id, version, updatedAt, deleted]
}
