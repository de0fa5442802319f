import COfflineSyncSQLite3
import Foundation
import OfflineSync
import OfflineSyncHTTP
import OfflineSyncServer
import OfflineSyncService

/// Writes into a list of 10,000 members (a large group: logged once, read by the members'
/// pulls) against the same writes into an owner-only table of the same server, over HTTP.
enum SharedBigBench {
    static let members = 10_000

    /// One list, `team`, with 10,000 members and no todos.
    static func teamSeed() async throws -> URL {
        try await SyncBench.cachedSeed("seed-shared-team-10k", describing: "a list of 10,000 members",
                                       rules: try SyncRules(yaml: SharedBench.rules)) { service in
            try await SharedBench.seed(service, (0..<members).map { number in
                SharedBench.insert(SharedBench.membership(String(format: "member-%05d", number), in: "team"), into: "list_members")
            })
        }
    }

    /// Runs `body` with a member's remote on a server over the team's seed; then reports, as
    /// `storeGrowthBytes`, how many bytes the server's store grew by (the server stopped).
    static func withTeam(directory: URL, _ body: (HTTPRemoteStore) async throws -> Double) async throws -> Double {
        let seed = try await teamSeed()
        let (server, secret) = try SyncBench.startServer(directory: directory, seed: seed, rules: SharedBench.rules)
        let seconds: Double
        do {
            seconds = try await body(try await SyncBench.remote(server, secret: secret, identity: "member-00000"))
        } catch {
            _ = server.stop()
            throw error
        }
        _ = server.stop()
        let data = directory.appendingPathComponent("server/server.sqlite").path
        BenchMetrics.shared.set("storeGrowthBytes", Double(try usedBytes(data) - usedBytes(seed.path)))
        return seconds
    }

    /// The bytes a SQLite database's pages hold (free pages left out), its WAL checkpointed first.
    static func usedBytes(_ path: String) throws -> Int {
        let db = try RawSQLite.open(path)
        defer { sqlite3_close_v2(db) }
        func integer(_ sql: String) throws -> Int {
            let statement = try RawSQLite.prepare(db, sql)
            defer { sqlite3_finalize(statement) }
            guard sqlite3_step(statement) == SQLITE_ROW else { throw SyncError(.storageFailure, "\(sql) returned no row") }
            return Int(sqlite3_column_int64(statement, 0))
        }
        _ = try integer("PRAGMA wal_checkpoint(TRUNCATE)")
        return try (integer("PRAGMA page_count") - integer("PRAGMA freelist_count")) * integer("PRAGMA page_size")
    }

    /// Todo `i` of the team's list, or the same record in the owner-only table `items`.
    static func row(_ i: Int, shared: Bool, version: Int = 0) -> (table: String, record: Record) {
        shared ? ("list_todos", SharedBench.todo(i, in: "team", version: version)) : ("items", SyncBench.record(i, version: version))
    }

    static func inserts(_ count: Int, shared: Bool) -> [PushOperation] {
        (0..<count).map { i in
            let (table, record) = row(i, shared: shared)
            return SharedBench.insert(record, into: table)
        }
    }
}

/// `push-shared-big`: 1,000 new todos pushed in one batch into a list with 10,000 members,
/// against the same 1,000 rows pushed into an owner-only table of the same server. Each side
/// first pushes one row of its own, not measured, so that neither pays for its table's first
/// use in the measured push (the owner-only table is not in the seed: its creation, two
/// commits, fell in the baseline's time and flattered the ratio).
enum PushSharedBig: BenchWorkload {
    static let name = "push-shared-big"
    static let baseline = "same-push-into-owner-only-table"
    static let count = 1000
    static var fixedRecords: Int? { count }

    static func ours(directory: URL, records: Int, batch: Int) async throws -> Double { try await run(directory, shared: true) }
    static func raw(directory: URL, records: Int, batch: Int) async throws -> Double { try await run(directory, shared: false) }

    static func run(_ directory: URL, shared: Bool) async throws -> Double {
        try await SharedBigBench.withTeam(directory: directory) { member in
            let (table, first) = SharedBigBench.row(count, shared: shared)
            try await SharedBench.push(member, [SharedBench.insert(first, into: table)])
            let operations = SharedBigBench.inserts(count, shared: shared)
            return try await LocalWrites.measure { try await SharedBench.push(member, operations) }
        }
    }
}

/// `update-shared-big`: 100 single-row pushes, each updating one todo of the list with 10,000
/// members, against 100 single-row updates of an owner-only table of the same server (the
/// rows pushed beforehand, not measured).
enum UpdateSharedBig: BenchWorkload {
    static let name = "update-shared-big"
    static let baseline = "same-updates-of-owner-only-table"
    static let count = 100
    static var fixedRecords: Int? { count }

    static func ours(directory: URL, records: Int, batch: Int) async throws -> Double { try await run(directory, shared: true) }
    static func raw(directory: URL, records: Int, batch: Int) async throws -> Double { try await run(directory, shared: false) }

    static func run(_ directory: URL, shared: Bool) async throws -> Double {
        try await SharedBigBench.withTeam(directory: directory) { member in
            try await SharedBench.push(member, SharedBigBench.inserts(PushSharedBig.count, shared: shared))
            return try await LocalWrites.measure {
                for i in 0..<count {
                    let (table, record) = SharedBigBench.row(i * 7, shared: shared, version: 1)
                    try SharedBench.checkApplied(try await member.push([PushOperation(
                        id: "update-\(i)", table: table, itemId: record.id, kind: .update, item: record, baseVersion: nil)]))
                }
            }
        }
    }
}

/// `push-shared-k`: what fanning a write out to each member's own log costs as a group
/// grows, the curve the fan-out limit *K* is chosen on (Docs/SyncRules.md): 1,000 new todos
/// pushed into a list of 100 members, with a server whose limit (1,000) keeps every list of
/// the test small, against the same push into an owner-only table. The same push into lists
/// of 10, 50 and 100 members is reported as `secondsAt10`, `secondsAt50` and
/// `secondsAt100`; into a list of 2,000 members (over the limit: large, logged once) as
/// `secondsAt2000`.
enum PushSharedK: BenchWorkload {
    static let name = "push-shared-k"
    static let baseline = "same-push-into-owner-only-table"
    static let count = 1000
    static var fixedRecords: Int? { count }

    static func ours(directory: URL, records: Int, batch: Int) async throws -> Double {
        let (server, secret) = try SyncBench.startServer(directory: directory, rules: SharedBench.rules,
                                                         extraArguments: ["--group-fanout-limit", "1000"])
        defer { _ = server.stop() }
        let seeder = try await SyncBench.remote(server, secret: secret, identity: "seeder", roles: ["seeder"])
        let sizes = [10, 50, 100, 2000]
        try await SharedBench.push(seeder, sizes.flatMap { size in
            (0..<size).map { SharedBench.insert(SharedBench.membership(String(format: "member-%05d", $0), in: "k\(size)"),
                                                into: "list_members") }
        })
        let member = try await SyncBench.remote(server, secret: secret, identity: "member-00000")
        var atK = 0.0
        for size in sizes {
            let operations = (0..<count).map { i in
                var record = SharedBench.todo(i, in: "k\(size)")
                record.id = "k\(size)-\(record.id)"
                return SharedBench.insert(record, into: "list_todos")
            }
            let seconds = try await LocalWrites.measure { try await SharedBench.push(member, operations) }
            BenchMetrics.shared.set("secondsAt\(size)", seconds)
            if size == 100 { atK = seconds }
        }
        return atK
    }

    static func raw(directory: URL, records: Int, batch: Int) async throws -> Double {
        let (server, secret) = try SyncBench.startServer(directory: directory, rules: SharedBench.rules)
        defer { _ = server.stop() }
        let member = try await SyncBench.remote(server, secret: secret, identity: "member-00000")
        return try await LocalWrites.measure { try await SharedBench.push(member, SharedBigBench.inserts(count, shared: false)) }
    }
}

/// `push-shared-big-postgres`: push-shared-big with the server's store on PostgreSQL (the
/// server `OFFLINE_SYNC_TEST_POSTGRES_URL` names, each side in a schema of its own, dropped
/// afterwards). The list's 10,000 memberships are pushed by a seeder first, then each side
/// pushes one row of its own, all unmeasured.
enum PushSharedBigPostgreSQL: BenchWorkload {
    static let name = "push-shared-big-postgres"
    static let baseline = "same-push-into-owner-only-table"
    static var fixedRecords: Int? { PushSharedBig.count }

    static func ours(directory: URL, records: Int, batch: Int) async throws -> Double { try await run(directory, shared: true) }
    static func raw(directory: URL, records: Int, batch: Int) async throws -> Double { try await run(directory, shared: false) }

    static func run(_ directory: URL, shared: Bool) async throws -> Double {
        let url = try LocalWritesPostgreSQL.server(), schema = LocalWritesPostgreSQL.schemaName(directory)
        // Runs after the server stopped (defers run last first).
        defer {
            do {
                try RawPostgreSQL(url).execute("DROP SCHEMA IF EXISTS \"\(schema)\" CASCADE")
            } catch {
                FileHandle.standardError.write(Data("push-shared-big-postgres: schema \(schema) left behind: \(error)\n".utf8))
            }
        }
        let store = url + (url.contains("?") ? "&" : "?") + "schema=" + schema
        let (server, secret) = try SyncBench.startServer(directory: directory, rules: SharedBench.rules, extraArguments: ["--store", store])
        defer { _ = server.stop() }
        let seeder = try await SyncBench.remote(server, secret: secret, identity: "seeder", roles: ["seeder"])
        try await SharedBench.push(seeder, (0..<SharedBigBench.members).map { number in
            SharedBench.insert(SharedBench.membership(String(format: "member-%05d", number), in: "team"), into: "list_members")
        })
        let member = try await SyncBench.remote(server, secret: secret, identity: "member-00000")
        let (table, first) = SharedBigBench.row(PushSharedBig.count, shared: shared)
        try await SharedBench.push(member, [SharedBench.insert(first, into: table)])
        let operations = SharedBigBench.inserts(PushSharedBig.count, shared: shared)
        return try await LocalWrites.measure { try await SharedBench.push(member, operations) }
    }
}
