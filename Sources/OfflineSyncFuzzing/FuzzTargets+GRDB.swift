import OfflineSync
import OfflineSyncGRDB
import OfflineSyncSQLite

extension FuzzTarget {
    /// What OfflineSyncGRDB reads from an app's own tables, which other code of the app (or
    /// another program) may have written.
    static let grdbTargets: [FuzzTarget] = [
        FuzzTarget("grdb-column", "a column of an app's GRDB table as another program may have written it (INTEGER, REAL, TEXT, BLOB or NULL), read for a field type by GRDBColumnCodec") { input throws(FuzzFinding) in
            guard input.count >= 2 else { return }
            let fieldType = FieldType.allCases[Int(input[0]) % FieldType.allCases.count]
            let stored = column(kind: input[1], Array(input.dropFirst(2)))
            guard let value = try readColumn(stored, as: fieldType) else { return }
            try expect(fieldType.accepts(value), "a \(fieldType.rawValue) column holding \(stored) was read as \(value), which the type does not accept")
            // What the codec reads, it writes; and that column reads back as the same value.
            // (A value a column cannot hold exactly, a NaN or -0 in a REAL, is kept beside the row.)
            guard GRDBColumnCodec.isExact(value, as: fieldType) else { return }
            let written = GRDBColumnCodec.encode(value, as: fieldType)
            guard let again = try readColumn(written, as: fieldType) else {
                throw FuzzFinding("a \(fieldType.rawValue) column holding \(stored) was read as \(value), whose own column \(written) is refused")
            }
            try expect(again == value, "a \(fieldType.rawValue) column holding \(stored) was read as \(value), written as \(written) and read again as \(again)")
        },
    ]

    /// The column the GRDB target's input describes: `kind` (mod 5) NULL, INTEGER or REAL (the
    /// payload's first 8 bytes, little-endian), TEXT (the payload as UTF-8, repaired as SQLite's
    /// text is read) or BLOB (the payload). A REAL NaN is NULL: SQLite keeps no NaN.
    static func column(kind: UInt8, _ payload: [UInt8]) -> SQLiteValue {
        var bits: UInt64 = 0
        for (offset, byte) in payload.prefix(8).enumerated() { bits |= UInt64(byte) << UInt64(8 * offset) }
        switch kind % 5 {
        case 0: return .null
        case 1: return .int(Int64(bitPattern: bits))
        case 2:
            let real = Double(bitPattern: bits)
            return real.isNaN ? .null : .double(real)
        case 3: return .text(text(payload))
        default: return .blob(payload)
        }
    }

    /// The GRDB target's input for a column of `stored` read as a field of `fieldType`.
    static func columnInput(_ fieldType: FieldType, _ stored: SQLiteValue) -> [UInt8] {
        let index = UInt8(FieldType.allCases.firstIndex(of: fieldType) ?? 0)
        func word(_ bits: UInt64) -> [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: bits >> UInt64(8 * $0)) } }
        switch stored {
        case .null: return [index, 0]
        case .int(let integer): return [index, 1] + word(UInt64(bitPattern: integer))
        case .double(let real): return [index, 2] + word(real.bitPattern)
        case .text(let string): return [index, 3] + Array(string.utf8)
        case .blob(let bytes): return [index, 4] + bytes
        }
    }

    /// The value the codec reads from `stored` for a field of `fieldType`; `nil` when it refuses
    /// the column, which it must do with ``SyncError/Code/schemaMismatch``.
    static func readColumn(_ stored: SQLiteValue, as fieldType: FieldType) throws(FuzzFinding) -> Value? {
        do {
            return try GRDBColumnCodec.decode(stored, as: fieldType, table: "todos", id: "a", field: "f")
        } catch let error as SyncError {
            try expect(error.code == .schemaMismatch, "a \(fieldType.rawValue) column holding \(stored) was refused with \(error), not schemaMismatch")
            return nil
        } catch {
            throw FuzzFinding("GRDBColumnCodec.decode threw \(type(of: error)), not a SyncError: \(error)")
        }
    }
}
