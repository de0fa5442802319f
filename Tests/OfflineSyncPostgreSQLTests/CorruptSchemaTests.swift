import Foundation
import OfflineSync
import OfflineSyncConformance
@testable import OfflineSyncPostgreSQL
import Testing

/// The PostgreSQL counterpart of `offline-sync corrupt-sweep`: a store has no file to damage,
/// so the sweep damages what the adapter reads back — the catalog's encoded table schemas and
/// names, the rows' encoded ids, versions, values and undeclared fields, the tables
/// themselves — and opens the schema as an app does. Each case must end with a typed error
/// (at open or while reading) or with the records readable, and must leave every table,
/// column, index and comment of the schema exactly as it was.
@Suite("PostgreSQL: a damaged catalog or damaged rows give a typed error and are left as they were",
       .enabled(if: TestServer.shouldRun, TestServer.skipMessage))
struct CorruptSchemaTests {
    static let table = TableSchema("data", fields: [FieldDefinition("n", .int, indexed: true), FieldDefinition("s", .string),
                                                    FieldDefinition("doc", .object)])
    /// `OFFLINE_SYNC_PG_SWEEP_CASES`: how many random cases beside the fixed ones (default 24).
    static let randomCases = ProcessInfo.processInfo.environment["OFFLINE_SYNC_PG_SWEEP_CASES"].flatMap(Int.init) ?? 24

    /// One way to damage the schema; `table` is the data table's quoted name.
    struct Damage: CustomStringConvertible {
        var description: String
        var sql: (_ schema: String, _ table: String) -> [String]
    }

    /// Changes a bytea column of one row: a flipped bit, a cut, or other bytes.
    static func bytea(_ place: String, _ column: String, _ row: String, _ random: inout SplitMix64) -> Damage {
        let choice = random.below(4), position = random.below(4096)
        let (what, expression): (String, String)
        switch choice {
        case 0: (what, expression) = ("bit \(position) flipped", "set_bit(\(column), \(position) % (8 * length(\(column))), 1 - get_bit(\(column), \(position) % (8 * length(\(column)))))")
        case 1: (what, expression) = ("cut to \(position % 7) bytes", "substring(\(column) from 1 for \(position % 7))")
        case 2: (what, expression) = ("byte \(position) zeroed", "set_byte(\(column), \(position) % length(\(column)), 0)")
        default: (what, expression) = ("replaced by JSON text", "convert_to('{\"tables\":[]}', 'UTF8')")
        }
        return Damage(description: "\(place) \(column) of \(row): \(what)") { schema, table in
            let target = place == "catalog" ? "\(schema).\"__osync_catalog\"" : table
            let key = place == "catalog" ? "\"name\" = convert_to('data', 'UTF8')" : "\"id\" = convert_to('\(row)', 'UTF8')"
            return ["UPDATE \(target) SET \(column) = \(expression) WHERE \(key) AND length(\(column)) > 0"]
        }
    }

    static func damages() -> [Damage] {
        var random = SplitMix64(seed: 0x5EED_0C0A)
        var list: [Damage] = [
            Damage(description: "the data table dropped") { _, table in ["DROP TABLE \(table)"] },
            Damage(description: "a column dropped") { _, table in ["ALTER TABLE \(table) DROP COLUMN \"c1\""] },
            Damage(description: "a column's type changed") { _, table in ["ALTER TABLE \(table) ALTER COLUMN \"c0\" TYPE text USING \"c0\"::text"] },
            Damage(description: "the catalog's number of the table changed") { schema, _ in
                ["UPDATE \(schema).\"__osync_catalog\" SET \"num\" = \"num\" + 1000"]
            },
            Damage(description: "the catalog's schema emptied") { schema, _ in ["UPDATE \(schema).\"__osync_catalog\" SET \"schema\" = ''::bytea"] },
            Damage(description: "the catalog's name emptied") { schema, _ in ["UPDATE \(schema).\"__osync_catalog\" SET \"name\" = ''::bytea"] },
            Damage(description: "a row's id emptied") { _, table in ["UPDATE \(table) SET \"id\" = ''::bytea WHERE \"id\" = convert_to('r007', 'UTF8')"] },
            Damage(description: "a row's undeclared fields replaced by a JSON array") { _, table in
                ["UPDATE \(table) SET \"extra\" = convert_to('[1,2]', 'UTF8') WHERE \"id\" = convert_to('r003', 'UTF8')"]
            },
            Damage(description: "a row's mirror of an object replaced") { _, table in
                ["UPDATE \(table) SET \"j2\" = '[1]'::jsonb WHERE \"id\" = convert_to('r004', 'UTF8')"]
            },
            Damage(description: "a foreign table beside the store") { schema, _ in ["CREATE TABLE \(schema).\"orders\" (id int PRIMARY KEY, total numeric)"] },
        ]
        for _ in 0..<randomCases {
            let row = String(format: "r%03d", random.below(40))
            switch random.below(3) {
            case 0: list.append(bytea("catalog", ["\"schema\"", "\"name\""][random.below(2)], "data", &random))
            case 1: list.append(bytea("row", ["\"id\"", "\"version\"", "\"extra\""][random.below(3)], row, &random))
            default: list.append(bytea("row", ["\"c1\"", "\"c2\""][random.below(2)], row, &random))
            }
        }
        return list
    }

    /// Everything the schema holds: tables, columns, indexes, comments and rows, hashed.
    static func fingerprint(_ raw: PGConnection, _ schema: String) throws -> [String] {
        var parts: [String] = []
        let columns = try raw.execute("""
            SELECT table_name || '.' || column_name || ':' || data_type FROM information_schema.columns
            WHERE table_schema = $1 ORDER BY table_name, column_name
            """, [.text(schema)])
        parts += (0..<columns.count).compactMap { columns.bytes($0, 0).map { String(decoding: $0, as: UTF8.self) } }
        let indexes = try raw.execute("SELECT indexdef FROM pg_indexes WHERE schemaname = $1 ORDER BY indexname", [.text(schema)])
        parts += (0..<indexes.count).compactMap { indexes.bytes($0, 0).map { String(decoding: $0, as: UTF8.self) } }
        let tables = try raw.execute("""
            SELECT c.relname, coalesce(obj_description(c.oid, 'pg_class'), '') FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = $1 AND c.relkind = 'r' ORDER BY c.relname
            """, [.text(schema)])
        for row in 0..<tables.count {
            let name = String(decoding: tables.bytes(row, 0) ?? [], as: UTF8.self)
            let rows = try raw.execute("SELECT coalesce(string_agg(md5(t::text), ',' ORDER BY md5(t::text)), '') FROM \"\(schema)\".\"\(name)\" t")
            parts.append("\(name) [\(String(decoding: tables.bytes(row, 1) ?? [], as: UTF8.self))] \(String(decoding: rows.bytes(0, 0) ?? [], as: UTF8.self))")
        }
        return parts
    }

    @Test("each damage ends in a typed error or readable records, and changes nothing")
    func sweep() async throws {
        guard let url = TestServer.require() else { return }
        let raw = try PGConnection.connect(url, password: nil)
        defer { raw.close() }
        var outcomes: [String: Int] = [:]
        var random = SplitMix64(seed: 7)
        let records = (0..<40).map { i in
            Record(id: String(format: "r%03d", i), fields: ["n": .int(Int64(i)), "s": .string(String(repeating: "s", count: 1 + random.below(60))),
                                                            "doc": .object(["k": .int(Int64(i))]), "free": .string("undeclared \(i)")])
        }
        for damage in Self.damages() {
            let schema = TestServer.schema(for: "corrupt-" + UUID().uuidString)
            defer { _ = try? raw.execute("DROP SCHEMA IF EXISTS \"\(schema)\" CASCADE") }
            let store = try await PostgreSQLStore(connectionString: url, options: .init(poolSize: 1, schema: schema))
            try await store.defineTable(Self.table)
            try await store.write { txn in for record in records { try txn.upsert(record, in: "data") } }
            try await store.close()
            let number = try #require(try raw.execute("SELECT \"num\" FROM \"\(schema)\".\"__osync_catalog\"").int64(0, 0))
            let quoted = "\"\(schema)\""
            do {
                for statement in damage.sql(quoted, "\(quoted).\"\(PGTable.tableName(number))\"") { _ = try raw.execute(statement) }
            } catch let error as SyncError where error.message.contains("SQLSTATE 23505") {
                // A damaged id equal to another row's: the primary key refuses it, so no store
                // can hold this damage.
                outcomes["impossible (the damaged id is another row's)", default: 0] += 1
                continue
            }
            let before = try Self.fingerprint(raw, schema)

            var outcome: String
            do {
                let opened = try await PostgreSQLStore(connectionString: url, options: .init(poolSize: 1, schema: schema))
                do {
                    let read = try await opened.read { txn in try txn.tables().flatMap { try txn.records(in: $0.name, matching: .all) } }
                    outcome = read.sorted { $0.id < $1.id } == records ? "intact" : "undetected"
                } catch let error as SyncError {
                    outcome = "detected \(error.code)"
                }
                try await opened.close()
            } catch let error as SyncError {
                outcome = "refused \(error.code)"
            }
            outcomes[outcome, default: 0] += 1
            let typed: Set<SyncError.Code> = [.corrupted, .notADatabase, .foreignDatabase, .unsupported, .tableNotDefined]
            let code = outcome.split(separator: " ").dropFirst().first.map(String.init)
            #expect(code == nil || typed.map { "\($0)" }.contains(code!), "\(damage): \(outcome) is not a typed refusal")
            #expect(try Self.fingerprint(raw, schema) == before, "\(damage): opening and reading changed the schema")
        }
        print("postgres corrupt sweep: \(Self.damages().count) cases: " + outcomes.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
    }
}
