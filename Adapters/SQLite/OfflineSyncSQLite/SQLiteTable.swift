import COfflineSyncSQLite3
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import OfflineSync
import OfflineSyncStoreKit

/// A defined table as SQL sees it: its schema, its quoted names and the statements that read
/// and write its rows. Built from a catalog row; immutable. A class: every row read or written
/// looks its table up, and lending a reference costs one retain where copying a struct of a
/// dozen strings and arrays cost a retain each (seen in pull-1m's profile).
///
/// Layout: `id` (TEXT, BINARY collation, primary key), `version` (TEXT), `updatedAt` (INTEGER
/// ms), `deleted` (INTEGER 0/1), `extra` (BLOB: the undeclared fields as a ``ValueCodec``
/// object, NULL when none), then one column `"f_<name>"` per declared field, declared without
/// a type so SQLite never converts what it stores, and last `sum` (INTEGER): the CRC-32C of
/// every other column of the row (``checksum(of:)``), checked on every read so a damaged
/// byte is ``SyncError/Code/corrupted``, never data (format 2; format 1 had no `sum`).
final class SQLiteTable {
    /// The catalog row number (stable across migrations; names the table's indexes).
    let number: Int64
    let schema: TableSchema
    /// The schema as stored in the catalog.
    let schemaBytes: [UInt8]
    /// The quoted table name.
    let sqlName: String
    /// The quoted column of each declared field, in schema order.
    let fieldColumns: [String]
    /// Where each field lives.
    let layout: SQLTableLayout

    /// Every column, `sum` last.
    let selectList: String
    /// Every column but `sum` (a format-1 table's columns).
    let uncheckedSelectList: String
    /// The position of `sum` in ``selectList``.
    let sumColumn: Int32
    let selectByID: SQLiteSQL
    let upsert: SQLiteSQL
    /// ``upsert``'s insert, which writes nothing when the id is taken: the statement's change
    /// count says which happened (``SQLiteWriteTransaction/insert(_:in:)``).
    let insertIfAbsent: SQLiteSQL
    /// The upserts of several rows in one statement: entry `k` writes `2^k` rows (entry 0 is
    /// ``upsert``), up to ``rowsPerUpsert``. Powers of two, so a batch of any size is a few
    /// cached statements — SQLite prepares each once per connection — instead of one
    /// statement text per size. One statement for many rows opens the table's and indexes'
    /// cursors and runs the statement's setup once, not per row.
    let upserts: [SQLiteSQL]
    let deleteByID: SQLiteSQL
    /// The deletes of several ids in one statement: entry `k` deletes up to `2^k` ids (entry 0
    /// is ``deleteByID``), up to 64 — powers of two, as ``upserts``.
    let deletes: [SQLiteSQL]
    /// The look-ups of several ids in one statement: entry `k` selects the rows of up to `2^k`
    /// ids (entry 0 is ``selectByID``), up to 64 — powers of two, as ``deletes``.
    let selectsByID: [SQLiteSQL]

    /// Every declared field's name with a placeholder value, and each name's index in it:
    /// ``decodeRow(_:verify:)`` copies the dictionary and sets the values by index, so a row's
    /// field names are not hashed again (hashing them and growing the dictionary was a fifth
    /// of a 100-row query's time). `nil` when two names are equal as Swift strings
    /// (canonically equivalent), so names and indices do not pair up one to one.
    private let fieldTemplate: (fields: [String: Value], indices: [Dictionary<String, Value>.Index])?

    /// Column position of the first declared field in ``selectList``.
    static let firstFieldColumn = Int32(SQLTableLayout.firstFieldColumn)
    /// The checksum column.
    static let sumColumnName = "\"sum\""

    init(number: Int64, schema: TableSchema, schemaBytes: [UInt8]) {
        self.number = number
        self.schema = schema
        self.schemaBytes = schemaBytes
        sqlName = SQLiteName.quote(schema.name)
        fieldColumns = schema.fields.map { SQLiteName.fieldColumn($0.name) }
        layout = SQLTableLayout(schema)
        let columns = SQLTableLayout.systemColumns + fieldColumns + [Self.sumColumnName]
        selectList = columns.joined(separator: ", ")
        uncheckedSelectList = columns.dropLast().joined(separator: ", ")
        sumColumn = Int32(columns.count - 1)
        selectByID = SQLiteSQL("SELECT \(selectList) FROM \(sqlName) WHERE \"id\" = ?1")
        let placeholders = (1...columns.count).map { "?\($0)" }.joined(separator: ", ")
        let updates = columns.dropFirst().map { "\($0) = excluded.\($0)" }.joined(separator: ", ")
        let insert = "INSERT INTO \(sqlName) (\(selectList)) VALUES ", onConflict = " ON CONFLICT(\"id\") DO UPDATE SET \(updates)"
        upsert = SQLiteSQL(insert + "(\(placeholders))" + onConflict)
        insertIfAbsent = SQLiteSQL(insert + "(\(placeholders)) ON CONFLICT(\"id\") DO NOTHING")
        var upserts = [upsert]
        let row = "(" + Array(repeating: "?", count: columns.count).joined(separator: ", ") + ")"
        while 1 << upserts.count <= Self.rowsPerUpsert(columns: columns.count) {
            upserts.append(SQLiteSQL(insert + Array(repeating: row, count: 1 << upserts.count).joined(separator: ", ") + onConflict))
        }
        self.upserts = upserts
        deleteByID = SQLiteSQL("DELETE FROM \(sqlName) WHERE \"id\" = ?1")
        // `head` with 2, 4, … 64 placeholders in its `IN` list: entries 1 to 6 of a family.
        func idLists(_ head: String) -> [SQLiteSQL] {
            (1...6).map { level in SQLiteSQL(head + (1...(1 << level)).map { "?\($0)" }.joined(separator: ", ") + ")") }
        }
        deletes = [deleteByID] + idLists("DELETE FROM \(sqlName) WHERE \"id\" IN (")
        selectsByID = [selectByID] + idLists("SELECT \(selectList) FROM \(sqlName) WHERE \"id\" IN (")
        var template = [String: Value](minimumCapacity: schema.fields.count)
        for field in schema.fields { template[field.name] = .null }
        // As many keys as fields: every name is its own key, so each has an index.
        fieldTemplate = template.count == schema.fields.count
            ? (template, schema.fields.compactMap { template.index(forKey: $0.name) }) : nil
    }

    /// Cuts `count` items (positions `0..<count`) into runs for a family of statements of
    /// `levels` sizes — entry `k` handles `2^k` items, as ``upserts``, ``deletes`` and
    /// ``selectsByID`` do — the largest run that fits first, and calls `body` with each run
    /// and its entry: a batch of any length is a few cached statements.
    static func powerOfTwoRuns(_ count: Int, levels: Int, _ body: (_ run: Range<Int>, _ level: Int) throws -> Void) rethrows {
        var start = 0
        while start < count {
            var level = levels - 1
            while 1 << level > count - start { level -= 1 }
            let end = start + 1 << level
            try body(start..<end, level)
            start = end
        }
    }

    /// The most rows one statement of ``upserts`` writes for a table of `columns` columns: 64,
    /// or fewer so that the statement has at most 999 parameters, the least any SQLite build
    /// allows (`SQLITE_MAX_VARIABLE_NUMBER`); at least 1. Past a few dozen rows a longer
    /// statement saves nothing measurable and costs its text and its prepared program.
    static func rowsPerUpsert(columns: Int) -> Int {
        var rows = 64
        while rows > 1 && rows * columns > 999 { rows /= 2 }
        return rows
    }

    /// `CREATE TABLE` for this layout under the quoted name `sqlName` — exactly as SQLite keeps
    /// it in `sqlite_master`, which ``SQLiteStoreFile/verifySchema(_:formatVersion:path:)`` relies on.
    /// Without `checksummed`, the layout of format 1 (no `sum` column).
    func createTableSQL(named sqlName: String, checksummed: Bool = true) -> String {
        let system = "\"id\" TEXT NOT NULL PRIMARY KEY, \"version\" TEXT, \"updatedAt\" INTEGER, \"deleted\" INTEGER NOT NULL, \"extra\" BLOB"
        let fields = fieldColumns.map { ", \($0)" }.joined()
        return "CREATE TABLE \(sqlName) (\(system)\(fields)\(checksummed ? ", \(Self.sumColumnName) INTEGER" : ""))"
    }

    /// `CREATE INDEX` for each of ``indexColumns``, with the index's unquoted name — exactly as
    /// SQLite keeps them in `sqlite_master`.
    var createIndexSQL: [(name: String, sql: String)] {
        indexColumns.enumerated().map { position, columns in
            ("\(SQLiteName.indexPrefix(table: number))\(position)",
             "CREATE INDEX \(SQLiteName.index(table: number, position: position)) ON \(sqlName) (\(columns.joined(separator: ", ")))")
        }
    }

    /// A plain `INSERT` of a full row into the quoted table `sqlName` (used by migrations).
    func insertSQL(into sqlName: String) -> String {
        let count = SQLTableLayout.systemColumns.count + fieldColumns.count + 1
        let placeholders = (1...count).map { "?\($0)" }.joined(separator: ", ")
        return "INSERT INTO \(sqlName) (\(selectList)) VALUES (\(placeholders))"
    }

    /// The column lists of the indexes the schema asks for: one per `indexed` field, then
    /// the composite ``TableSchema/indexes``.
    var indexColumns: [[String]] {
        var result = schema.fields.filter(\.indexed).map { [SQLiteName.fieldColumn($0.name)] }
        for index in schema.indexes {
            result.append(index.fields.map { column($0)?.sql ?? SQLiteName.fieldColumn($0) })
        }
        return result
    }

    /// Whether both describe the same columns (names byte for byte, types, order).
    func hasSameColumns(as other: SQLiteTable) -> Bool {
        schema.hasSameFields(as: other.schema)
    }

    /// The declared field with this exact name, if any.
    func declaredField(_ name: String) -> FieldDefinition? {
        layout.position(of: name).map { schema.fields[$0] }
    }

    /// The column behind a system property or declared field; `nil` for an undeclared field
    /// (kept in `extra`, so SQL cannot see it).
    func column(_ field: String) -> SQLColumn? {
        layout.column(field) { fieldColumns[$0] }
    }

    // MARK: Rows

    /// The parameters of ``upsert`` (and ``insertSQL(into:)``) for a record: system columns,
    /// the undeclared fields as one encoded object, each declared field's column value, then
    /// the checksum of all of them.
    func bindings(for record: Record) -> [SQLiteValue] {
        makeBindings(record) { layout.split(record.fields, declared: $0) }
    }

    /// ``bindings(for:)`` of a record checked against the schema first
    /// (``TableSchema/validate(_:)``, throwing what it throws), in the same pass over its fields.
    func validatedBindings(for record: Record) throws -> [SQLiteValue] {
        try makeBindings(record) { try layout.validateAndSplit(record, declared: $0) }
    }

    /// The parameters of a row of ``ValidatedRows`` checked against a schema with this
    /// table's layout (``TableSchema/hasSameLayout(as:)``): each declared value goes to its
    /// column by position, with no look-up and no second check.
    func bindings(for row: ValidatedRow) -> [SQLiteValue] {
        makeBindings(id: row.id, version: row.version, updatedAt: row.updatedAt, deleted: row.deleted) { declared in
            for (position, value) in row.declared.enumerated() where !value.isNull { declared(position, value) }
            return row.undeclared.isEmpty ? nil : ValueCodec.encodeObject(distinct: row.undeclared)
        }
    }

    /// A row's parameters, the declared fields and `extra` as `split` hands them out.
    private func makeBindings(_ record: Record, split: ((Int, Value) -> Void) throws -> [UInt8]?) rethrows -> [SQLiteValue] {
        try makeBindings(id: record.id, version: record.version, updatedAt: record.updatedAt, deleted: record.deleted, split: split)
    }

    private func makeBindings(id: String, version: String?, updatedAt: Timestamp?, deleted: Bool,
                              split: ((Int, Value) -> Void) throws -> [UInt8]?) rethrows -> [SQLiteValue] {
        // Made at full length and filled in place: the declared values go straight to their
        // columns (no array of them per row, no growing this one).
        let first = SQLTableLayout.firstFieldColumn, sum = Int(sumColumn)
        var values = [SQLiteValue](repeating: .null, count: sum + 1)
        values[0] = .text(id)
        if let version { values[1] = .text(version) }
        if let updatedAt { values[2] = .int(updatedAt.millisecondsSince1970) }
        values[3] = .int(deleted ? 1 : 0)
        let fields = schema.fields
        if let extra = try split({ position, value in values[first + position] = Self.columnValue(value, fields[position].type) }) {
            values[4] = .blob(extra)
        }
        values[sum] = .int(Int64(Self.checksum(of: values[..<sum])))
        return values
    }

    /// The CRC-32C of a row's columns as SQLite stores them: per column its storage class,
    /// then an integer's or a double's 8 bytes, or a text's or blob's length and bytes.
    static func checksum(of values: ArraySlice<SQLiteValue>) -> UInt32 {
        RowChecksum.compute { sum in
            for value in values {
                // Each value as the cell SQLite will store (``RowChecksum/add(_:)`` defines the bytes).
                switch value {
                case .null: sum.add(.null)
                case .int(let v): sum.add(.int(v))
                // SQLite stores a NaN as NULL (a valid Value never holds one).
                case .double(let v) where v.isNaN: sum.add(.null)
                case .double(let v): sum.add(.double(v))
                case .text(var text): text.withUTF8 { sum.add(.text(UnsafeRawBufferPointer($0))) }
                case .blob(let bytes): bytes.withUnsafeBytes { sum.add(.blob($0)) }
                }
            }
        }
    }

    /// ``checksum(of:)`` of the current row's columns before ``sumColumn``, read in place (a
    /// text SQLite runs out of memory fetching counts as empty, so the row fails its check).
    func checksum(of statement: SQLiteStatement) -> UInt32 {
        RowChecksum.compute { sum in
            for column in 0..<sumColumn {
                sum.add((try? statement.cell(column)) ?? .text(UnsafeRawBufferPointer(start: nil, count: 0)))
            }
        }
    }

    /// How a declared field's value is stored: bool as 0/1, int, double as REAL, string as
    /// TEXT, bytes as BLOB, date as INTEGER ms, arrays, objects and `any` as a ``ValueCodec`` BLOB.
    static func columnValue(_ value: Value, _ type: FieldType) -> SQLiteValue {
        switch (type, value) {
        case (_, .null): return .null
        case (.array, _), (.object, _), (.any, _): return .blob(ValueCodec.encode(value))
        case (_, .bool(let b)): return .int(b ? 1 : 0)
        case (_, .int(let i)): return .int(i)
        case (_, .double(let d)): return .double(d)
        case (_, .string(let s)): return .text(s)
        case (_, .bytes(let b)): return .blob(b)
        case (_, .date(let t)): return .int(t.millisecondsSince1970)
        case (_, .array), (_, .object): return .blob(ValueCodec.encode(value))
        }
    }

    /// Decodes the current row of a statement that selected ``selectList``, checking its
    /// `sum`; with `verify: false`, of one that selected ``uncheckedSelectList``.
    ///
    /// One pass: each column is fetched once and both fed to the checksum and decoded (the
    /// checksum's own pass fetched every column a second time: a tenth of a query's time). A
    /// row that fails its checksum is reported as such even when the damage also breaks its
    /// decoding.
    ///
    /// `id`, when the caller looked the row up by it, is the record's id if the row's id
    /// column holds its bytes (as a lookup by id finds): the string is reused instead of made
    /// again from the column (a get by id made three strings per row).
    func decodeRow(_ statement: SQLiteStatement, verify: Bool = true, id knownID: String? = nil) throws -> Record {
        let record: Record
        let sum: UInt32
        do {
            (record, sum) = try RowChecksum.compute { try decodeColumns(statement, feeding: &$0, knownID: knownID) }
        } catch {
            if verify, !checksumHolds(statement, Int64(checksum(of: statement))) { throw checksumFailure }
            throw error
        }
        if verify, !checksumHolds(statement, Int64(sum)) { throw checksumFailure }
        return record
    }

    private func checksumHolds(_ statement: SQLiteStatement, _ sum: Int64) -> Bool {
        statement.columnType(sumColumn) == SQLITE_INTEGER && statement.int64(sumColumn) == sum
    }

    private var checksumFailure: SyncError {
        SyncError(.corrupted, "table '\(schema.name)': a row fails its checksum: the store file is damaged")
    }

    /// The row's record, every column before ``sumColumn`` fed to `sum` as
    /// ``checksum(of:)`` feeds it.
    private func decodeColumns(_ statement: SQLiteStatement, feeding sum: inout RowChecksum, knownID: String?) throws -> Record {
        func cell(_ column: Int32) throws -> SQLiteCell {
            let cell = try statement.cell(column)
            sum.add(cell)
            return cell
        }
        guard case .text(let idBytes) = try cell(0) else { throw corrupted("id") }
        let id: String
        if var knownID, knownID.withUTF8({ known in
            known.count == idBytes.count && (known.isEmpty || memcmp(known.baseAddress!, idBytes.baseAddress!, known.count) == 0)
        }) {
            id = knownID
        } else {
            id = try SQLiteCell.string(idBytes)
        }
        let version: String?
        switch try cell(1) {
        case .null: version = nil
        case .text(let bytes): version = try SQLiteCell.string(bytes)
        default: throw corrupted("version")
        }
        let updatedAt: Timestamp?
        switch try cell(2) {
        case .null: updatedAt = nil
        case .int(let ms): updatedAt = Timestamp(millisecondsSince1970: ms)
        default: throw corrupted("updatedAt")
        }
        let deleted: Bool
        switch try cell(3) {
        case .int(0): deleted = false
        case .int(1): deleted = true
        default: throw corrupted("deleted")
        }
        var fields: [String: Value] = [:]
        switch try cell(4) {
        case .null:
            if let template = fieldTemplate {
                return Record(id: id, nonNullFields: try declaredFields(template) { try cell($0) },
                              version: version, updatedAt: updatedAt, deleted: deleted)
            }
        case .blob(let bytes):
            guard let object = try ValueCodec.decodeObject(bytes, reservingExtra: schema.fields.count) else {
                throw corrupted("extra")
            }
            fields = object
        default: throw corrupted("extra")
        }
        let checkClashes = !fields.isEmpty
        for (position, field) in schema.fields.enumerated() {
            let value = try decodeField(try cell(Self.firstFieldColumn + Int32(position)), field)
            if value.isNull { continue }
            if checkClashes, fields.index(forKey: field.name) != nil {
                throw SyncError(.corrupted, "table '\(schema.name)': a row keeps field '\(field.name)' both in its column and among its undeclared fields")
            }
            fields[field.name] = value
        }
        return Record(id: id, fields: fields, version: version, updatedAt: updatedAt, deleted: deleted)
    }

    /// The declared fields of a row with no undeclared ones, the nulls left out, built from
    /// ``fieldTemplate``; `cell` fetches a column.
    private func declaredFields(_ template: (fields: [String: Value], indices: [Dictionary<String, Value>.Index]),
                                _ cell: (Int32) throws -> SQLiteCell) throws -> [String: Value] {
        var fields = template.fields
        var absent: [Int] = []
        for (position, field) in schema.fields.enumerated() {
            let value = try decodeField(try cell(Self.firstFieldColumn + Int32(position)), field)
            if value.isNull {
                absent.append(position)
            } else {
                // Setting a value by index keeps the copy's keys and their places: no hashing.
                fields.values[template.indices[position]] = value
            }
        }
        if absent.count == schema.fields.count { return [:] }
        // Removing keys moves others, so the indices are not used after the first removal.
        for position in absent { fields.removeValue(forKey: schema.fields[position].name) }
        return fields
    }

    private func decodeField(_ cell: SQLiteCell, _ field: FieldDefinition) throws -> Value {
        switch (field.type, cell) {
        case (_, .null): return .null
        case (.bool, .int(0)): return .bool(false)
        case (.bool, .int(1)): return .bool(true)
        case (.int, .int(let i)): return .int(i)
        case (.double, .double(let d)): return .double(d)
        case (.string, .text(let bytes)): return .string(try SQLiteCell.string(bytes))
        case (.bytes, .blob(let bytes)): return .bytes(Array(bytes))
        case (.date, .int(let ms)): return .date(Timestamp(millisecondsSince1970: ms))
        case (.array, .blob(let bytes)), (.object, .blob(let bytes)), (.any, .blob(let bytes)):
            let value = try ValueCodec.decode(bytes)
            guard field.type.accepts(value), !value.isNull else { throw corrupted(field: field.name) }
            return value
        default:
            throw corrupted(field: field.name)
        }
    }

    private func corrupted(_ column: String) -> SyncError {
        SyncError(.corrupted, "table '\(schema.name)': column '\(column)' holds a value of an unexpected kind")
    }

    private func corrupted(field: String) -> SyncError {
        SyncError(.corrupted, "table '\(schema.name)': the column of field '\(field)' holds a value of an unexpected kind")
    }
}

/// A row's checksum fed through a buffer on the stack: column tags, integers and short texts
/// reach the CRC-32C in runs rather than one call each (each call fetched the CRC's table
/// anew, and one byte at a time skips its eight-byte loop: 8% of a 100-row query's time).
/// The CRC of the bytes is the same however they are cut.
struct RowChecksum {
    private var sum = CRC32C()
    private let buffer: UnsafeMutableRawBufferPointer
    private var used = 0

    private init(buffer: UnsafeMutableRawBufferPointer) { self.buffer = buffer }

    /// The CRC-32C of everything `body` adds.
    static func compute(_ body: (inout RowChecksum) -> Void) -> UInt32 {
        compute { (sum: inout RowChecksum) -> Void in body(&sum) }.sum
    }

    /// What `body` returns, and the CRC-32C of everything it added.
    static func compute<T>(_ body: (inout RowChecksum) throws -> T) rethrows -> (T, sum: UInt32) {
        try withUnsafeTemporaryAllocation(byteCount: 256, alignment: 8) { buffer in
            var feed = RowChecksum(buffer: buffer)
            let result = try body(&feed)
            feed.flush()
            return (result, feed.sum.value)
        }
    }

    /// Adds a column as ``SQLiteTable/checksum(of:)`` does: its storage class, then an
    /// integer's or a double's 8 bytes, or a text's or blob's length and bytes.
    mutating func add(_ cell: SQLiteCell) {
        switch cell {
        case .null: add(byte: UInt8(SQLITE_NULL))
        case .int(let v): add(byte: UInt8(SQLITE_INTEGER)); add(int64: v)
        case .double(let v): add(byte: UInt8(SQLITE_FLOAT)); add(int64: Int64(bitPattern: v.bitPattern))
        case .text(let bytes): add(byte: UInt8(SQLITE_TEXT)); add(int64: Int64(bytes.count)); add(bytes)
        case .blob(let bytes): add(byte: UInt8(SQLITE_BLOB)); add(int64: Int64(bytes.count)); add(bytes)
        }
    }

    private mutating func flush() {
        sum.update(UnsafeRawBufferPointer(rebasing: buffer[..<used]))
        used = 0
    }

    mutating func add(byte: UInt8) {
        if used == buffer.count { flush() }
        buffer[used] = byte
        used += 1
    }

    /// Adds the integer's 8 big-endian bytes.
    mutating func add(int64 value: Int64) {
        if buffer.count - used < 8 { flush() }
        buffer.storeBytes(of: UInt64(bitPattern: value).bigEndian, toByteOffset: used, as: UInt64.self)
        used += 8
    }

    mutating func add(_ bytes: UnsafeRawBufferPointer) {
        if bytes.count > buffer.count - used {
            flush()
            // Longer than the buffer: straight to the CRC.
            if bytes.count > buffer.count {
                sum.update(bytes)
                return
            }
        }
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        (buffer.baseAddress! + used).copyMemory(from: base, byteCount: bytes.count)
        used += bytes.count
    }
}
