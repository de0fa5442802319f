import Foundation
import OfflineSync
import OfflineSyncService
import OfflineSyncStoreKit
import Testing

private enum Priority: String, Codable, CaseIterable, QueryValue { case low, high }
private enum Mood: String, Codable, QueryValue { case calm, busy } // not CaseIterable

private struct Address: Codable, Sendable, Equatable { var city: String; var zip: Int }

/// A model touching every kind the derived schema maps.
private struct Task1: SyncModel, Equatable {
    static let tableName = "tasks"
    static let indexes = [IndexDefinition(Columns.done), IndexDefinition(Columns.priority, Columns.due)]

    var id: String
    var title: String
    var done: Bool
    var count: Int
    var ratio: Double
    var due: Date?
    var blob: Data
    var tags: [String]
    var scores: [String: Int]
    var address: Address
    var priority: Priority
    var mood: Mood?
    var extra: Value
    var ref: UUID
    var version: String?
    var updatedAt: Date?

    enum Columns {
        static let title = Column(\Task1.title, CodingKeys.title)
        static let done = Column(\Task1.done, CodingKeys.done)
        static let count = Column(\Task1.count, CodingKeys.count)
        static let due = Column(\Task1.due, CodingKeys.due)
        static let priority = Column(\Task1.priority, CodingKeys.priority)
        static let mood = Column(\Task1.mood, CodingKeys.mood)
    }

    init(id: String, title: String, done: Bool = false, count: Int = 0, due: Date? = nil,
         priority: Priority = .low, mood: Mood? = nil) {
        self.id = id; self.title = title; self.done = done; self.count = count; ratio = 0.5; self.due = due
        blob = Data([1, 2]); tags = ["a"]; scores = ["x": 1]; address = Address(city: "Oslo", zip: 1)
        self.priority = priority; self.mood = mood; extra = .int(1); ref = UUID(uuidString: "00000000-0000-0000-0000-000000000001")!
    }
}

private struct Strict: SyncModel {
    static let tableName = "strict"
    var id: String
    var mood: Mood
}

private struct BadIndex: SyncModel {
    static let tableName = "bad"
    static let indexes = [IndexDefinition(["nope"])]
    var id: String
    var name: String
}

private struct List: SyncModel, Equatable {
    static let tableName = "lists"
    var id: String
    var name: String
}

@Suite("Typed models: derived schemas, typed columns, transactions, observations, resolvers")
struct TypedModelTests {
    @Test("the schema is derived from the coding keys and their types, with the declared indexes")
    func derivedSchema() throws {
        let schema = try Task1.schema
        #expect(schema.name == "tasks")
        let fields = schema.fields.map { "\($0.name):\($0.type.rawValue)\($0.indexed ? "+" : "")" }
        #expect(fields == ["title:string", "done:bool+", "count:int", "ratio:double", "due:date", "blob:bytes",
                           "tags:array", "scores:object", "address:object", "priority:string", "mood:string",
                           "extra:any", "ref:string"])
        #expect(schema.indexes == [IndexDefinition(["priority", "due"])])
        #expect(schema.undeclaredFields == .store)
        #expect(try List.schema == TableSchema("lists", fields: [FieldDefinition("name", .string)]))
    }

    @Test("a model the probe cannot build, or an index on no field, is a typed configuration error")
    func underivableSchemas() throws {
        #expect { _ = try Strict.schema } throws: { ($0 as? SyncError)?.code == .invalidConfiguration && "\($0)".contains("mood") }
        #expect { _ = try BadIndex.schema } throws: { ($0 as? SyncError)?.code == .invalidConfiguration && "\($0)".contains("nope") }
    }

    @Test("typed columns build the predicates Field builds, with literals as the model encodes them; == nil tests null")
    func typedColumns() async throws {
        #expect((Task1.Columns.done == false).predicate == (Field("done") == .bool(false)))
        #expect((Task1.Columns.priority == .high).predicate == (Field("priority") == "high"))
        #expect((Task1.Columns.due == nil).predicate == QueryPredicate.isNull("due"))
        #expect((Task1.Columns.mood != nil).predicate == QueryPredicate.not(.isNull("mood")))
        let when = Date(timeIntervalSince1970: 1_800_000_000.5)
        #expect((Task1.Columns.due < when).predicate == QueryPredicate.compare("due", .less, .date(Timestamp(when))))

        let context = try await SyncContext(store: InMemoryStore(), remote: OfflineSyncService(store: InMemoryStore()).remote(for: "u"))
        try await context.defineTable(Task1.self)
        let tasks = context.table(Task1.self)
        try await tasks.insert(Task1(id: "a", title: "alpha", done: true, count: 3, due: when, priority: .high))
        try await tasks.insert(Task1(id: "b", title: "beta", count: 1, priority: .low, mood: .busy))
        try await tasks.insert(Task1(id: "c", title: "gamma", count: 2, due: when.addingTimeInterval(-60), priority: .high))
        func ids(_ request: ModelQuery<Task1>) async throws -> [String] { try await tasks.query(request).map(\.id) }
        #expect(try await ids(Task1.filter(Task1.Columns.priority == .high).order(Task1.Columns.count.descending)) == ["a", "c"])
        #expect(try await ids(Task1.filter(Task1.Columns.due == nil)) == ["b"])
        #expect(try await ids(Task1.filter(Task1.Columns.due < when)) == ["c"])
        #expect(try await ids(Task1.filter(Task1.Columns.mood == .busy)) == ["b"])
        #expect(try await ids(Task1.filter(Task1.Columns.title.hasPrefix("g") || Task1.Columns.count.isIn([1])).order(Task1.Columns.title.ascending)) == ["b", "c"])
        // Chained conditions are joined; the limit cuts after the order.
        #expect(try await ids(Task1.filter(Task1.Columns.priority == .high).filter(Task1.Columns.count < 3)) == ["c"])
        #expect(try await ids(Task1.order(Task1.Columns.count.ascending).limit(2)) == ["b", "c"])
        #expect(try await tasks.count(Task1.Columns.priority == .high) == 2)
        #expect(try await tasks.get("a") == Task1(id: "a", title: "alpha", done: true, count: 3, due: when, priority: .high))
    }

    @Test("a typed transaction writes models of two tables in one commit, and observations see it once")
    func typedTransactionAndObservation() async throws {
        let service = try await OfflineSyncService(store: InMemoryStore())
        let context = try await SyncContext(store: InMemoryStore(), remote: service.remote(for: "u"))
        try await context.defineTable(Task1.self)
        try await context.defineTable(List.self)
        var lists = context.table(List.self).observe().makeAsyncIterator()
        var open = context.table(Task1.self).observe(Task1.filter(Task1.Columns.done == false)).makeAsyncIterator()
        var one = context.table(Task1.self).observe(id: "t1").makeAsyncIterator()
        #expect(try await lists.next() == [])
        #expect(try await open.next() == [])
        #expect(try await one.next() == .some(nil))

        try await context.transaction { txn in
            try txn.insert(List(id: "L1", name: "home"))
            try txn.insert(Task1(id: "t1", title: "sweep"))
            try txn.insert(Task1(id: "t2", title: "dust", done: true))
        }
        #expect(try await lists.next() == [List(id: "L1", name: "home")])
        #expect(try await open.next()?.map(\.id) == ["t1"])
        #expect(try await one.next()??.title == "sweep")
        #expect(try await context.queuedOperationCount() == 3)
        let pushed = try await context.push()
        #expect(pushed.batches == 1, "one transaction, one batch")

        try await context.transaction { txn in
            var task = try #require(try txn.get(Task1.self, id: "t2"))
            task.done = false
            try txn.update(task)
            try txn.delete(id: "L1", from: List.self)
            #expect(try txn.query(Task1.filter(Task1.Columns.done == false)).map(\.id).sorted() == ["t1", "t2"])
        }
        #expect(try await open.next()?.map(\.id).sorted() == ["t1", "t2"])
        #expect(try await lists.next() == [])
    }

    @Test("a typed resolver merges local and server models; a delete conflict goes to the fallback")
    func typedResolver() async throws {
        let service = try await OfflineSyncService(store: InMemoryStore())
        let resolver = ModelConflictResolver(otherwise: ConflictPolicy.serverWins)
            .merging(Task1.self) { local, server in
                var merged = server
                merged.done = local.done || server.done
                merged.count = local.count + server.count
                return merged
            }
        let phone = try await SyncContext(store: InMemoryStore(), remote: service.remote(for: "u"),
                                          options: SyncOptions(conflictResolver: resolver))
        let laptop = try await SyncContext(store: InMemoryStore(), remote: service.remote(for: "u"))
        for context in [phone, laptop] { try await context.defineTable(Task1.self) }
        try await phone.table(Task1.self).insert(Task1(id: "t", title: "plan", count: 1))
        try await phone.push()
        try await laptop.table(Task1.self).pull()

        var onPhone = try #require(try await phone.table(Task1.self).get("t"))
        onPhone.done = true
        onPhone.count = 10
        try await phone.table(Task1.self).update(onPhone)
        var onLaptop = try #require(try await laptop.table(Task1.self).get("t"))
        onLaptop.title = "plan the trip"
        onLaptop.count = 5
        try await laptop.table(Task1.self).update(onLaptop)
        try await laptop.push()

        let summary = try await phone.push()
        #expect(summary.conflictsResolved == 1)
        try await laptop.table(Task1.self).pull()
        let merged = try #require(try await laptop.table(Task1.self).get("t"))
        #expect(merged.title == "plan the trip" && merged.done && merged.count == 15)
        #expect(try await phone.table(Task1.self).get("t")?.count == 15)

        // A delete has no local model to merge: the fallback (server wins) restores the row.
        try await phone.table(Task1.self).delete(id: "t")
        onLaptop = merged
        onLaptop.count = 16
        try await laptop.table(Task1.self).update(onLaptop)
        try await laptop.push()
        _ = try await phone.push()
        #expect(try await phone.table(Task1.self).get("t")?.count == 16)
    }
}
