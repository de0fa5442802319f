/// The naming rules every store enforces, kept in one place.
///
/// Table names: 1–128 UTF-8 bytes, no NUL and no control characters. Names starting with
/// `__` are reserved for OfflineSync's own system tables: a ``SyncContext`` refuses them
/// for app tables, while a ``LocalStore`` accepts them so system tables can be stored.
/// Field names: 1–128 UTF-8 bytes, no NUL, not a system property name in any letter case.
/// SQL adapters always quote names; none is ever spliced raw into a statement.
public enum Names {
    /// The prefix reserved for system tables and the service's own fields.
    public static let reservedPrefix = "__"
    /// The longest accepted name, in UTF-8 bytes.
    public static let maxLength = 128
    /// The longest accepted record id, in UTF-8 bytes.
    public static let maxIdLength = 1024

    /// Throws ``SyncError/Code/invalidName`` unless `name` is a valid table name.
    public static func validateTable(_ name: String) throws {
        try validateCommon(name, what: "table")
    }

    /// Throws ``SyncError/Code/invalidName`` unless `name` is a valid app table name
    /// (a table name that does not use the reserved prefix).
    public static func validateAppTable(_ name: String) throws {
        try validateTable(name)
        if name.hasPrefix(reservedPrefix) {
            throw SyncError(.invalidName, "table name '\(name)' uses the reserved prefix '\(reservedPrefix)'")
        }
    }

    /// Throws ``SyncError/Code/invalidName`` unless `name` is a valid field name.
    public static func validateField(_ name: String) throws {
        try validateCommon(name, what: "field")
        // System names are ASCII of 2, 7 or 9 bytes: only then compare ignoring case.
        let length = name.utf8.count
        if (length == 2 || length == 7 || length == 9), reservedFieldNames.contains(name.lowercased()) {
            throw SyncError(.invalidName, "field name '\(name)' is a system property name")
        }
    }

    private static let reservedFieldNames: Set<String> = Set(SystemField.all.map { $0.lowercased() })

    /// Throws ``SyncError/Code/invalidName`` unless `id` is a valid record id.
    public static func validateId(_ id: String) throws {
        if id.isEmpty { throw SyncError(.invalidName, "record id is empty") }
        if id.utf8.count > maxIdLength {
            throw SyncError(.invalidName, "record id is longer than \(maxIdLength) UTF-8 bytes")
        }
        // Over the contiguous bytes when the string has them (a native string does): the
        // generic walk of the UTF-8 view was a visible share of a push's CPU.
        if id.utf8.withContiguousStorageIfAvailable({ $0.contains(0) }) ?? id.utf8.contains(0) {
            throw SyncError(.invalidName, "record id contains a NUL character")
        }
    }

    private static func validateCommon(_ name: String, what: String) throws {
        if name.isEmpty { throw SyncError(.invalidName, "\(what) name is empty") }
        if name.utf8.count > maxLength {
            throw SyncError(.invalidName, "\(what) name is longer than \(maxLength) UTF-8 bytes")
        }
        // C0 controls and DEL are single bytes in UTF-8 and never part of a longer sequence.
        if name.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) {
            throw SyncError(.invalidName, "\(what) name contains a control character")
        }
    }
}
