/// The type a declared field accepts (besides `null`, which every field accepts).
public enum FieldType: String, Sendable, Hashable, Codable, CaseIterable {
    /// ``Value/bool(_:)``
    case bool
    /// ``Value/int(_:)``
    case int
    /// ``Value/double(_:)``
    case double
    /// ``Value/string(_:)``
    case string
    /// ``Value/bytes(_:)``
    case bytes
    /// ``Value/date(_:)``
    case date
    /// ``Value/array(_:)``
    case array
    /// ``Value/object(_:)``
    case object
    /// Any value kind (stored as an encoded value; not orderable in SQL).
    case any

    /// Whether `value` is acceptable for a field of this type.
    public func accepts(_ value: Value) -> Bool {
        switch (self, value) {
        case (_, .null), (.any, _): return true
        case (.bool, .bool), (.int, .int), (.double, .double), (.string, .string), (.bytes, .bytes),
             (.date, .date), (.array, .array), (.object, .object): return true
        default: return false
        }
    }

    /// Whether SQL can compare and order values of this type directly.
    public var isScalar: Bool {
        switch self {
        case .bool, .int, .double, .string, .bytes, .date: return true
        case .array, .object, .any: return false
        }
    }
}

/// A field the schema declares: SQL stores give it a real, typed column.
public struct FieldDefinition: Sendable, Hashable, Codable {
    /// The field name.
    public var name: String
    /// The accepted value type.
    public var type: FieldType
    /// Whether the store should index the field for queries.
    public var indexed: Bool

    /// Declares a field.
    public init(_ name: String, _ type: FieldType, indexed: Bool = false) {
        self.name = name
        self.type = type
        self.indexed = indexed
    }
}

/// A composite index over several declared fields, in order.
public struct IndexDefinition: Sendable, Hashable, Codable {
    /// The declared fields the index covers, most significant first.
    public var fields: [String]
    /// Creates an index definition.
    public init(_ fields: [String]) { self.fields = fields }
}

/// What a store does with a field the schema does not declare.
public enum UndeclaredFieldPolicy: String, Sendable, Hashable, Codable {
    /// Keep it (SQL stores put undeclared fields in an encoded column). The default.
    case store
    /// Refuse the write with ``SyncError/Code/typeMismatch``.
    case reject
}

/// The shape of a table: its declared fields, indexes and what to do with other fields.
///
/// Redefining a table with a different schema migrates the rows already stored: a newly
/// declared field picks up the values that rows kept as undeclared fields (each must fit the
/// declared type, or the redefinition fails and changes nothing); a field no longer
/// declared keeps its values as an undeclared field. Data is never dropped.
public struct TableSchema: Sendable, Hashable, Codable {
    /// The table name (see ``Names``).
    public var name: String
    /// The declared fields.
    public var fields: [FieldDefinition] {
        didSet { lookup = FieldLookup(fields) }
    }
    /// The declared fields by exact name: derived from `fields`.
    private var lookup: FieldLookup
    /// Extra composite indexes.
    public var indexes: [IndexDefinition]
    /// What happens to undeclared fields.
    public var undeclaredFields: UndeclaredFieldPolicy

    /// Creates a schema.
    public init(_ name: String, fields: [FieldDefinition] = [], indexes: [IndexDefinition] = [],
                undeclaredFields: UndeclaredFieldPolicy = .store) {
        self.name = name
        self.fields = fields
        self.lookup = FieldLookup(fields)
        self.indexes = indexes
        self.undeclaredFields = undeclaredFields
    }

    private enum CodingKeys: String, CodingKey {
        case name, fields, indexes, undeclaredFields
    }

    /// Decodes a schema (the field index is rebuilt, not stored).
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(try container.decode(String.self, forKey: .name),
                  fields: try container.decode([FieldDefinition].self, forKey: .fields),
                  indexes: try container.decode([IndexDefinition].self, forKey: .indexes),
                  undeclaredFields: try container.decode(UndeclaredFieldPolicy.self, forKey: .undeclaredFields))
    }


    /// The declared field with this exact name, if any.
    public func field(named name: String) -> FieldDefinition? {
        lookup.position(of: name).map { fields[$0] }
    }

    /// The position in ``fields`` of the field named exactly `name` (names that differ only
    /// in Unicode normalisation are different fields), or `nil`.
    package func position(ofField name: String) -> Int? {
        lookup.position(of: name)
    }

    /// Checks names and internal consistency. Throws ``SyncError/Code/invalidName`` or
    /// ``SyncError/Code/schemaMismatch``.
    public func validate() throws {
        try Names.validateTable(name)
        var seen = Set<String>()
        for field in fields {
            try Names.validateField(field.name)
            // Case-insensitive: SQL engines fold identifier case.
            guard seen.insert(field.name.lowercased()).inserted else {
                throw SyncError(.invalidName, "table '\(name)' declares field '\(field.name)' twice (names are compared ignoring case)")
            }
        }
        for index in indexes {
            if index.fields.isEmpty { throw SyncError(.schemaMismatch, "table '\(name)' has an index with no fields") }
            for fieldName in index.fields where field(named: fieldName) == nil && !SystemField.all.contains(fieldName) {
                throw SyncError(.schemaMismatch, "index of table '\(name)' names undeclared field '\(fieldName)'")
            }
        }
    }

    /// Checks a record against the schema before it is stored: id, field names, declared
    /// types, NaN, and the undeclared-field policy. Throws a ``SyncError``.
    public func validate(_ record: Record) throws {
        try validate(record, declared: { _, _ in }, undeclared: { _, _ in })
    }

    /// ``validate(_:)``, handing each field out as it is checked: a declared one to `declared`
    /// (its position in ``fields`` and its value), an undeclared one the schema keeps to
    /// `undeclared`. One look-up of each name serves both the check and a store's layout of
    /// the row (a SQL adapter's columns), which looked every name up twice when it validated
    /// and then split the record (`perf`, local-writes-sqlite). When it throws, what it handed
    /// out so far is to be discarded.
    package func validate(_ record: Record, declared: (Int, Value) -> Void,
                          undeclared: (String, Value) -> Void) throws {
        try validate(id: record.id, fields: record.fields, declared: declared, undeclared: undeclared)
    }

    /// ``validate(_:declared:undeclared:)`` of a record's id and fields.
    package func validate(id: String, fields recordFields: [String: Value], declared: (Int, Value) -> Void,
                          undeclared: (String, Value) -> Void) throws {
        try Names.validateId(id)
        for (key, value) in recordFields {
            if let position = lookup.position(of: key) {
                // Declared names were checked by `validate()` when the table was defined.
                try validate(value, of: position)
                declared(position, value)
            } else {
                try value.validate(path: key)
                try Names.validateField(key)
                if undeclaredFields == .reject {
                    throw SyncError(.typeMismatch, "field '\(key)' is not declared by table '\(name)', which rejects undeclared fields")
                }
                undeclared(key, value)
            }
        }
    }

    /// Checks `value` for the declared field at `position`: its type accepts it and it holds
    /// no NaN. Throws ``SyncError/Code/typeMismatch`` or ``SyncError/Code/invalidValue``.
    package func validate(_ value: Value, of position: Int) throws {
        let field = fields[position]
        try value.validate(path: field.name)
        guard field.type.accepts(value) else {
            throw SyncError(.typeMismatch, "field '\(field.name)' of table '\(name)' is declared \(field.type.rawValue) but the value is \(value.kind.rawValue)")
        }
    }

    /// Whether a row checked against `other` is laid out and checked as this schema would
    /// do it: the same declared fields (names byte for byte, not by Unicode equivalence,
    /// types, order) and the same undeclared-field policy. A store writes
    /// ``ValidatedRows`` checked against such a schema without checking them again.
    public func hasSameLayout(as other: TableSchema) -> Bool {
        undeclaredFields == other.undeclaredFields && hasSameFields(as: other)
    }

    /// Whether both declare the same fields: names byte for byte, types, order (what a SQL
    /// store's columns are made from).
    package func hasSameFields(as other: TableSchema) -> Bool {
        fields.count == other.fields.count
            && zip(fields, other.fields).allSatisfy { $0.type == $1.type && $0.name.utf8.elementsEqual($1.name.utf8) }
    }
}
