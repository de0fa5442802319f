import Foundation
import OfflineSync
import OfflineSyncHTTP
import OfflineSyncCommandSupport
import OfflineSyncServer
import OfflineSyncService
import OfflineSyncSQLite

/// What the sharing workloads share: the rules (todos shared through list memberships, both
/// read and written by a `seeder` role that is in no list: it reads the tables directly and
/// has no view to keep), the seeded
/// server databases, and the clients.
enum SharedBench {
    static let rules = """
        version: 1
        memberships:
          list_members: { table: list_members, member: user_id, group: list_id }
        tables:
          list_todos:
            read: [{ member: list_members, key: list_id }, { everyone: true, when: { roles: seeder } }]
            write: [{ member: list_members, key: list_id }, { everyone: true, when: { roles: seeder } }]
          list_members:
            read: [{ identity: user_id }, { everyone: true, when: { roles: seeder } }]
            write: [{ everyone: true, when: { roles: seeder } }]

        """

    static let todoSchema = TableSchema("list_todos", fields: SyncBench.schema.fields + [FieldDefinition("list_id", .string)])
    static let seeder = Claims(identity: "seeder", roles: ["seeder"])

    static func list(_ number: Int) -> String { String(format: "list-%05d", number) }

    /// Todo `i` of `list`: the sync workloads' 200-byte record with its list.
    static func todo(_ i: Int, in list: String, version: Int = 0) -> Record {
        var record = SyncBench.record(i, version: version)
        record.id = String(format: "todo-%07d", i)
        record.fields["list_id"] = .string(list)
        return record
    }

    static func membership(_ user: String, in list: String) -> Record {
        Record(id: "m-\(user)-\(list)", fields: ["list_id": .string(list), "user_id": .string(user)])
    }

    static func insert(_ record: Record, into table: String) -> PushOperation {
        PushOperation(id: "op-\(table)-\(record.id)", table: table, itemId: record.id, kind: .insert, item: record, baseVersion: nil)
    }

    /// Pushes `operations` as the seeder through `service`, 1,000 at a time, and checks each
    /// was applied.
    static func seed(_ service: OfflineSyncService, _ operations: [PushOperation]) async throws {
        for start in stride(from: 0, to: operations.count, by: 1000) {
            try checkApplied(try await service.push(claims: seeder, Array(operations[start..<min(start + 1000, operations.count)])))
        }
    }

    /// Pushes `operations` over HTTP through `remote`, 1,000 at a time (the server's batch
    /// limit), and checks each was applied.
    static func push(_ remote: HTTPRemoteStore, _ operations: [PushOperation]) async throws {
        for start in stride(from: 0, to: operations.count, by: 1000) {
            try checkApplied(try await remote.push(Array(operations[start..<min(start + 1000, operations.count)])))
        }
    }

    static func checkApplied(_ results: [PushResult]) throws {
        for result in results {
            guard case .applied = result.outcome else {
                throw SyncError(.storageFailure, "\(result.operationId) was not applied: \(result.outcome)")
            }
        }
    }

    /// The 1,000,000 todos of 10,000 lists of 100 (todo `i` is in list `i / 100`), with
    /// 15,010 memberships: `wide` in lists 0..<5,000, `narrow` in lists 0..<10, and each list
    /// shared with one of 1,000 other users. 1,501,000 view entries in all.
    static func manyListsSeed() async throws -> URL {
        try await SyncBench.cachedSeed("seed-shared-1m", describing: "1,000,000 todos in 10,000 shared lists",
                                       rules: try SyncRules(yaml: rules)) { service in
            var memberships: [PushOperation] = []
            for number in 0..<10_000 {
                memberships.append(insert(membership("member-\(number % 1000)", in: list(number)), into: "list_members"))
                if number < 5000 { memberships.append(insert(membership("wide", in: list(number)), into: "list_members")) }
                if number < 10 { memberships.append(insert(membership("narrow", in: list(number)), into: "list_members")) }
            }
            try await seed(service, memberships)
            for start in stride(from: 0, to: 1_000_000, by: 10_000) {
                try await seed(service, (start..<start + 10_000).map { insert(todo($0, in: list($0 / 100)), into: "list_todos") })
            }
        }
    }

    /// One list, `big`, of `count` todos, and no members yet.
    static func bigListSeed(_ count: Int) async throws -> URL {
        try await SyncBench.cachedSeed(count == 10_000 ? "seed-shared-big-list" : "seed-shared-list-\(count)",
                                       describing: "a shared list of \(count) todos", rules: try SyncRules(yaml: rules)) { service in
            try await seed(service, (0..<count).map { insert(todo($0, in: "big"), into: "list_todos") })
        }
    }

    /// A client of `user` over a SQLite store in `directory`, with `list_todos` defined.
    static func client(_ user: String, server: ServerProcess, secret: String, directory: URL) async throws -> (SyncContext, SQLiteStore) {
        let store = try await SQLiteStore(path: directory.appendingPathComponent("client-\(user).sqlite").path)
        let context = try await SyncContext(store: store, remote: try await SyncBench.remote(server, secret: secret, identity: user),
                                            options: SyncOptions(pullPageSize: 1000))
        try await context.defineTable(todoSchema)
        return (context, store)
    }

    /// Runs `body` with the seeder's remote and `user`'s client, on a server over the seed of
    /// the `big` list of `count` todos, and closes the client's store afterwards.
    static func withBigList(_ count: Int, directory: URL, user: String,
                            _ body: (HTTPRemoteStore, SyncContext, SQLiteStore) async throws -> Double) async throws -> Double {
        let (server, secret) = try SyncBench.startServer(directory: directory, seed: try await bigListSeed(count), rules: rules)
        defer { _ = server.stop() }
        let writer = try await SyncBench.remote(server, secret: secret, identity: "seeder", roles: ["seeder"])
        let (context, store) = try await client(user, server: server, secret: secret, directory: directory)
        let seconds = try await body(writer, context, store)
        try await store.close()
        return seconds
    }

    /// Runs `body` with the bench identity's remote and a client with `items` defined, on a
    /// server holding `count` rows of that identity, and closes the client's store afterwards.
    static func withOwnRows(_ count: Int, directory: URL,
                            _ body: (HTTPRemoteStore, SyncContext, SQLiteStore) async throws -> Double) async throws -> Double {
        let (server, secret) = try SyncBench.startServer(directory: directory, seed: try await SyncBench.seed(count: count))
        defer { _ = server.stop() }
        let remote = try await SyncBench.remote(server, secret: secret)
        let store = try await SQLiteStore(path: directory.appendingPathComponent("client.sqlite").path)
        let context = try await SyncContext(store: store, remote: remote, options: SyncOptions(pullPageSize: 1000))
        try await context.defineTable(SyncBench.schema)
        let seconds = try await body(remote, context, store)
        try await store.close()
        return seconds
    }

    static func localItems(_ store: SQLiteStore) async throws -> Int {
        try await store.read { try $0.count(in: "items", matching: .all) }
    }

    static func localTodos(_ store: SQLiteStore) async throws -> Int {
        try await store.read { try $0.count(in: "list_todos", matching: .all) }
    }
}

/// `pull-delta-shared`: the incremental pull of 100 changed todos by a member of 5,000 lists
/// (500,000 readable rows) of a 1,000,000-row table, against the same by a member of 10
/// lists (1,000 readable rows); each round also changes 1,000 todos neither may read. Best
/// of 5 rounds each.
enum PullDeltaShared: BenchWorkload {
    static let name = "pull-delta-shared"
    static let baseline = "same-delta-member-of-10-lists"
    static var fixedRecords: Int? { 100 }

    static func ours(directory: URL, records: Int, batch: Int) async throws -> Double {
        try await run(directory: directory, user: "wide", readable: 500_000)
    }

    static func raw(directory: URL, records: Int, batch: Int) async throws -> Double {
        try await run(directory: directory, user: "narrow", readable: 1000)
    }

    /// The best of five delta pulls by `user`, who may read `readable` todos. With
    /// `largeLists`, the last lists of the seed each get 150 more members (`wide` among them),
    /// over the server's fan-out limit, before the first pull.
    static func run(directory: URL, user: String, readable: Int, largeLists: Int = 0) async throws -> Double {
        let seed = try await SharedBench.manyListsSeed()
        let (server, secret) = try SyncBench.startServer(directory: directory, seed: seed, rules: SharedBench.rules)
        defer { _ = server.stop() }
        let writer = try await SyncBench.remote(server, secret: secret, identity: "seeder", roles: ["seeder"])
        let crowd = ["wide"] + (0..<149).map { "crowd-\($0)" }
        try await SharedBench.push(writer, (10_000 - largeLists..<10_000).flatMap { number in
            crowd.map { SharedBench.insert(SharedBench.membership($0, in: SharedBench.list(number)), into: "list_members") }
        })
        let (context, store) = try await SharedBench.client(user, server: server, secret: secret, directory: directory)
        _ = try await context.pull("list_todos", queryId: "all")   // the first, full pull: not measured
        guard try await SharedBench.localTodos(store) == readable else {
            throw SyncError(.storageFailure, "\(user)'s first pull stored \(try await SharedBench.localTodos(store)) todos, not \(readable)")
        }
        var best = Double.infinity
        for round in 1...5 {
            // 100 changes in lists 0..<10 (todos 0..<1,000), which both users read, and 1,000
            // in lists 5,000 to 8,999, which neither reads.
            let changed = (0..<100).map { $0 * 10 + round } + (0..<1000).map { 500_000 + $0 * 400 + round }
            try await SharedBench.push(writer, changed.map { i in
                PushOperation(id: "delta-\(round)-\(i)", table: "list_todos", itemId: String(format: "todo-%07d", i), kind: .update,
                              item: SharedBench.todo(i, in: SharedBench.list(i / 100), version: round), baseVersion: nil)
            })
            var summary: PullSummary?
            let seconds = try await LocalWrites.measure { summary = try await context.pull("list_todos", queryId: "all") }
            guard summary?.received == 100, summary?.updated == 100 else {
                throw SyncError(.storageFailure, "the delta pull received \(summary?.received ?? 0) records, updated \(summary?.updated ?? 0)")
            }
            best = min(best, seconds)
        }
        try await store.close()
        return best
    }
}

/// `pull-delta-mixed`: pull-delta-shared's delta pull by a member of the same 5,000 small
/// lists and of 20 large ones (150 members each, over the fan-out limit, so their changes
/// are read from the groups' logs), against the member of 10 small lists on the same server.
enum PullDeltaMixed: BenchWorkload {
    static let name = "pull-delta-mixed"
    static let baseline = "same-delta-member-of-10-lists"
    static var fixedRecords: Int? { 100 }

    static func ours(directory: URL, records: Int, batch: Int) async throws -> Double {
        try await PullDeltaShared.run(directory: directory, user: "wide", readable: 502_000, largeLists: 20)
    }

    static func raw(directory: URL, records: Int, batch: Int) async throws -> Double {
        try await PullDeltaShared.run(directory: directory, user: "narrow", readable: 1000, largeLists: 20)
    }
}

/// `move-in`: a user is added to a list of 10,000 todos; measured from the push that adds
/// the membership until the todos are in the user's store. The baseline is the floor: the
/// first pull of 10,000 rows the user owns.
enum MoveIn: BenchWorkload {
    static let name = "move-in"
    static let baseline = "first-pull-of-10k-own-rows"
    static var fixedRecords: Int? { 10_000 }

    static func ours(directory: URL, records: Int, batch: Int) async throws -> Double { try await MoveRows.moveIn(10_000, directory) }
    static func raw(directory: URL, records: Int, batch: Int) async throws -> Double { try await MoveRows.firstPull(10_000, directory) }
}

/// `move-in-big`: `move-in` with a list of 100,000 todos, against the first pull of 100,000
/// own rows (pull-1m's path, a tenth of its rows).
enum MoveInBig: BenchWorkload {
    static let name = "move-in-big"
    static let baseline = "first-pull-of-100k-own-rows"
    static var fixedRecords: Int? { 100_000 }

    static func ours(directory: URL, records: Int, batch: Int) async throws -> Double { try await MoveRows.moveIn(100_000, directory) }
    static func raw(directory: URL, records: Int, batch: Int) async throws -> Double { try await MoveRows.firstPull(100_000, directory) }
}

/// `move-out`: a user is removed from a list of 10,000 todos it holds; measured from the
/// push that deletes the membership until the todos are gone from the user's store. The
/// baseline is the pull of 10,000 deletions of rows the user owns (the deletions pushed
/// beforehand, not measured).
enum MoveOut: BenchWorkload {
    static let name = "move-out"
    static let baseline = "pull-of-10k-own-deletions"
    static var fixedRecords: Int? { 10_000 }

    static func ours(directory: URL, records: Int, batch: Int) async throws -> Double { try await MoveRows.moveOut(10_000, directory) }
    static func raw(directory: URL, records: Int, batch: Int) async throws -> Double { try await MoveRows.pullDeletions(10_000, directory) }
}

/// `move-out-big`: `move-out` with a list of 100,000 todos, against the pull of 100,000
/// deletions of own rows.
enum MoveOutBig: BenchWorkload {
    static let name = "move-out-big"
    static let baseline = "pull-of-100k-own-deletions"
    static var fixedRecords: Int? { 100_000 }

    static func ours(directory: URL, records: Int, batch: Int) async throws -> Double { try await MoveRows.moveOut(100_000, directory) }
    static func raw(directory: URL, records: Int, batch: Int) async throws -> Double { try await MoveRows.pullDeletions(100_000, directory) }
}

/// The move workloads' two sides, for a list of `count` todos.
enum MoveRows {
    static func moveIn(_ count: Int, _ directory: URL) async throws -> Double {
        try await SharedBench.withBigList(count, directory: directory, user: "newcomer") { writer, context, store in
            _ = try await context.pull("list_todos", queryId: "all")   // nothing in view yet
            let seconds = try await LocalWrites.measure {
                try await SharedBench.push(writer, [SharedBench.insert(SharedBench.membership("newcomer", in: "big"), into: "list_members")])
                _ = try await context.pull("list_todos", queryId: "all")
            }
            let stored = try await SharedBench.localTodos(store)
            guard stored == count else { throw SyncError(.storageFailure, "move-in stored \(stored) of \(count) todos") }
            return seconds
        }
    }

    static func firstPull(_ count: Int, _ directory: URL) async throws -> Double {
        try await SharedBench.withOwnRows(count, directory: directory) { _, context, store in
            let seconds = try await LocalWrites.measure { _ = try await context.pull("items", queryId: "all") }
            let stored = try await SharedBench.localItems(store)
            guard stored == count else { throw SyncError(.storageFailure, "the first pull stored \(stored) of \(count)") }
            return seconds
        }
    }

    static func moveOut(_ count: Int, _ directory: URL) async throws -> Double {
        try await SharedBench.withBigList(count, directory: directory, user: "leaver") { writer, context, store in
            let membership = SharedBench.membership("leaver", in: "big")
            try await SharedBench.push(writer, [SharedBench.insert(membership, into: "list_members")])
            _ = try await context.pull("list_todos", queryId: "all")
            guard try await SharedBench.localTodos(store) == count else { throw SyncError(.storageFailure, "move-out's move-in fell short") }
            var summary: PullSummary?
            let seconds = try await LocalWrites.measure {
                try await SharedBench.push(writer, [PushOperation(id: "remove-leaver", table: "list_members", itemId: membership.id,
                                                                  kind: .delete, item: nil, baseVersion: nil)])
                summary = try await context.pull("list_todos", queryId: "all")
            }
            let stored = try await SharedBench.localTodos(store)
            guard stored == 0, summary?.removedFromView == count else {
                throw SyncError(.storageFailure, "move-out left \(stored) todos, counted \(summary?.removedFromView ?? 0) removals")
            }
            return seconds
        }
    }

    static func pullDeletions(_ count: Int, _ directory: URL) async throws -> Double {
        try await SharedBench.withOwnRows(count, directory: directory) { remote, context, store in
            _ = try await context.pull("items", queryId: "all")
            try await SharedBench.push(remote, (0..<count).map { i in
                PushOperation(id: "delete-\(i)", table: "items", itemId: String(format: "item-%07d", i), kind: .delete, item: nil, baseVersion: nil)
            })
            var summary: PullSummary?
            let seconds = try await LocalWrites.measure { summary = try await context.pull("items", queryId: "all") }
            let stored = try await SharedBench.localItems(store)
            guard stored == 0, summary?.deleted == count else {
                throw SyncError(.storageFailure, "the deletions' pull left \(stored) rows, deleted \(summary?.deleted ?? 0)")
            }
            return seconds
        }
    }
}
