import Foundation
import OfflineSync
import OfflineSyncPostgreSQL
import OfflineSyncService
import OfflineSyncTestSupport
import Testing

/// Two service instances, each over its own PostgreSQLStore (its own pool) on one schema —
/// two server processes sharing a database — with eight writers and a client pulling while
/// they write. Whatever the interleaving, the client must see every committed change in
/// commit order, each at most once, and end with exactly the service's state. Pulls carry
/// each item's current state, so a version a later commit replaced before the client pulled
/// is superseded (as in every state-based sync); every change nothing superseded — checked
/// with write-once entries — arrives exactly once.
@Suite("Two service instances on one PostgreSQL schema: a puller beside eight writers",
       .enabled(if: TestServer.shouldRun, TestServer.skipMessage))
struct ConcurrentWritersTests {
    static let table = "docs"
    static let identity: Identity = "user-1"

    /// One applied change, as its push returned it.
    struct Change: Sendable {
        var item: String
        var record: Record
        /// The version this change replaced (the base of an update or delete, the tombstone
        /// a re-insert replaced), `nil` for a first insert.
        var predecessor: String?
        /// Logical times around the push that applied it: before it was sent, after it returned.
        var sent: Int
        var returned: Int
    }

    /// One pulled record with where and when it was pulled.
    struct Pulled: Sendable {
        var record: Record
        var pull: Int
        var position: Int
    }

    /// Every applied change, in the order the pushes returned.
    final class Ledger: Sendable {
        private let stored = Box<[Change]>([])
        func add(_ change: Change) { stored.withLock { $0.append(change) } }
        var changes: [Change] { stored.value }
    }

    /// The sequence number in a service cursor (`epoch:sequence`).
    static func sequence(_ cursor: String?) -> Int64 {
        guard let cursor, let last = cursor.split(separator: ":").last else { return 0 }
        return Int64(last) ?? -1
    }

    @Test func everyCommittedChangeArrivesOnceInCommitOrder() async throws {
        guard TestServer.require() != nil else { return }
        let directory = URL(fileURLWithPath: "/tmp/concurrent-writers-" + UUID().uuidString)
        let stores = [try await makeStore(directory, poolSize: 3), try await makeStore(directory, poolSize: 3)]
        let services = [try await OfflineSyncService(store: stores[0]), try await OfflineSyncService(store: stores[1])]
        let remotes = services.map { $0.remote(for: Self.identity) }
        let clock = Counter()                 // a logical clock: every tick is after every earlier tick
        let ledger = Ledger()

        // Three items every writer updates, created before the writers start.
        let shared = (0..<3).map { "shared-\($0)" }
        var sharedVersions: [String: String] = [:]
        for item in shared {
            let sent = clock.next()
            let results = try await remotes[0].push([PushOperation(
                id: "setup-" + item, table: Self.table, itemId: item, kind: .insert,
                item: Record(id: item, fields: ["by": -1]), baseVersion: nil)])
            guard case .applied(let record) = results.first?.outcome else {
                Issue.record("setting up \(item): \(String(describing: results.first?.outcome))")
                return
            }
            ledger.add(Change(item: item, record: record, predecessor: nil, sent: sent, returned: clock.next()))
            sharedVersions[item] = record.version
        }

        // The client: pulls page after page, alternating between the two instances, until the
        // writers are done and a pull that started after that is empty.
        let writersDone = Box(false)
        let puller = Task { () throws -> (pulled: [Pulled], pullStarts: [Int], caughtUp: [Bool], pages: Int) in
            var cursor: String?
            var pulled: [Pulled] = []
            var pullStarts: [Int] = []
            var caughtUp: [Bool] = []
            var pull = 0
            while true {
                let finished = writersDone.value
                let start = clock.next()
                let page = try await remotes[pull % 2].pull(PullRequest(table: Self.table, cursor: cursor, limit: 7))
                #expect(!page.cursorReset, "pull \(pull) reset the cursor")
                if page.records.isEmpty {
                    #expect(page.nextCursor == cursor || cursor == nil, "an empty page moved the cursor")
                } else {
                    #expect(Self.sequence(page.nextCursor) > Self.sequence(cursor),
                            "pull \(pull): cursor \(page.nextCursor) does not follow \(cursor ?? "nil")")
                }
                #expect(Set(page.records.map(\.id)).count == page.records.count, "pull \(pull) has an item twice")
                for record in page.records { pulled.append(Pulled(record: record, pull: pull, position: pulled.count)) }
                pullStarts.append(start)
                caughtUp.append(page.remaining == 0)
                cursor = page.nextCursor
                pull += 1
                if finished && page.records.isEmpty && page.remaining == 0 { return (pulled, pullStarts, caughtUp, pull) }
                // Now and then the client lags, so some versions are superseded before it pulls.
                if page.records.isEmpty || pull % 3 == 0 { try await Task.sleep(for: .milliseconds(page.records.isEmpty ? 2 : 8)) }
            }
        }

        // Eight writers, four per instance, 25 batches each: their own items (inserted,
        // updated, deleted, re-inserted) and updates of the shared items on the version they
        // last saw — applied, or a conflict that tells them the current one.
        let writers = 8, batches = 25, ownItems = 4
        let conflicts = try await withThrowingTaskGroup(of: Int.self) { group in
            for writer in 0..<writers {
                let remote = remotes[writer < 4 ? 0 : 1]
                let initialShared = sharedVersions
                group.addTask {
                    var known: [String: Record] = [:]       // own items: the last applied record
                    var sharedKnown = initialShared
                    var conflicts = 0
                    for batch in 0..<batches {
                        var operations: [PushOperation] = []
                        var predecessors: [String: String?] = [:]
                        let own = "w\(writer)-\(batch % ownItems)"
                        let fields: [String: Value] = ["w": .int(Int64(writer)), "b": .int(Int64(batch))]
                        if let current = known[own], !current.deleted {
                            operations.append(PushOperation(id: "w\(writer)-b\(batch)-own", table: Self.table, itemId: own,
                                                            kind: .update, item: Record(id: own, fields: fields),
                                                            baseVersion: current.version))
                        } else {
                            operations.append(PushOperation(id: "w\(writer)-b\(batch)-own", table: Self.table, itemId: own,
                                                            kind: .insert, item: Record(id: own, fields: fields), baseVersion: nil))
                        }
                        predecessors["w\(writer)-b\(batch)-own"] = .some(known[own]?.version)
                        let doomed = "w\(writer)-\((batch + 1) % ownItems)"
                        if batch % 6 == 5, let current = known[doomed], !current.deleted {
                            operations.append(PushOperation(id: "w\(writer)-b\(batch)-delete", table: Self.table, itemId: doomed,
                                                            kind: .delete, item: nil, baseVersion: current.version))
                            predecessors["w\(writer)-b\(batch)-delete"] = .some(current.version)
                        }
                        // An entry written once and never again: nothing can supersede it, so
                        // the client must receive this very change, exactly once.
                        let entry = "log-w\(writer)-b\(batch)"
                        operations.append(PushOperation(id: "w\(writer)-b\(batch)-log", table: Self.table, itemId: entry,
                                                        kind: .insert, item: Record(id: entry, fields: fields), baseVersion: nil))
                        predecessors["w\(writer)-b\(batch)-log"] = .some(nil)
                        let common = shared[(writer + batch) % shared.count]
                        operations.append(PushOperation(id: "w\(writer)-b\(batch)-shared", table: Self.table, itemId: common,
                                                        kind: .update, item: Record(id: common, fields: ["by": .int(Int64(writer)), "b": .int(Int64(batch))]),
                                                        baseVersion: sharedKnown[common]))
                        predecessors["w\(writer)-b\(batch)-shared"] = .some(sharedKnown[common])

                        let sent = clock.next()
                        let results = try await remote.push(operations)
                        let returned = clock.next()
                        #expect(results.map(\.operationId) == operations.map(\.id))
                        for (operation, result) in zip(operations, results) {
                            switch result.outcome {
                            case .applied(let record):
                                ledger.add(Change(item: operation.itemId, record: record,
                                                  predecessor: predecessors[operation.id] ?? nil, sent: sent, returned: returned))
                                if operation.itemId.hasPrefix("shared-") { sharedKnown[operation.itemId] = record.version }
                                else { known[operation.itemId] = record }
                            case .conflict(let server) where operation.itemId.hasPrefix("shared-"):
                                conflicts += 1
                                sharedKnown[operation.itemId] = server.version
                            default:
                                Issue.record("writer \(writer) batch \(batch): \(operation.kind) of \(operation.itemId) gave \(result.outcome)")
                            }
                        }
                    }
                    return conflicts
                }
            }
            var total = 0
            for try await count in group { total += count }
            return total
        }
        writersDone.value = true
        let (pulled, pullStarts, caughtUp, pages) = try await puller.value

        let changes = ledger.changes
        var byVersion: [String: Change] = [:]
        for change in changes {
            let version = try #require(change.record.version)
            let assignedTwice = byVersion[version] != nil
            #expect(!assignedTwice, "version \(version) was assigned twice")
            byVersion[version] = change
        }

        // Each item's changes form one chain from its first insert: an applied change always
        // replaced the version before it (no lost update, no fork).
        var chainPosition: [String: Int] = [:]     // version → position in its item's chain
        var finalVersion: [String: String] = [:]   // item → last version
        for (item, itemChanges) in Dictionary(grouping: changes, by: \.item) {
            var successor: [String?: String] = [:]
            for change in itemChanges {
                let forked = successor[change.predecessor] != nil
                #expect(!forked, "\(item): two applied changes replaced \(change.predecessor ?? "nothing") — a lost update")
                successor[change.predecessor] = change.record.version!
            }
            var position = 0
            var version = successor[nil]
            var last: String?
            while let current = version {
                chainPosition[current] = position
                position += 1
                last = current
                version = successor[current]
            }
            #expect(position == itemChanges.count, "\(item): the applied changes do not form one chain")
            finalVersion[item] = last
        }

        // Every pulled record is an applied change, exactly as the push returned it, pulled once.
        var seen = Set<String>()
        for entry in pulled {
            let version = try #require(entry.record.version)
            #expect(seen.insert(version).inserted, "version \(version) of \(entry.record.id) was pulled twice")
            guard let change = byVersion[version] else {
                Issue.record("pulled \(entry.record.id) at version \(version), which no push returned")
                continue
            }
            #expect(entry.record == change.record, "\(entry.record.id) pulled differs from what the push returned")
        }

        // Every change nothing superseded — all the write-once entries — arrives exactly once.
        let pulledVersions = Dictionary(grouping: pulled, by: { $0.record.version! }).mapValues(\.count)
        let writeOnce = changes.filter { $0.item.hasPrefix("log-") }
        #expect(writeOnce.count == writers * batches)
        for change in writeOnce {
            #expect(pulledVersions[change.record.version!] == 1,
                    "\(change.item)@\(change.record.version!) was pulled \(pulledVersions[change.record.version!] ?? 0) times")
        }

        // Commit order: per item, versions arrive in chain order; across items, a change whose
        // push returned before another's was sent is pulled before it.
        var lastPosition: [String: Int] = [:]
        for entry in pulled {
            guard let position = chainPosition[entry.record.version!] else { continue }
            if let previous = lastPosition[entry.record.id] {
                #expect(position > previous, "\(entry.record.id): version \(entry.record.version!) pulled after a later one")
            }
            lastPosition[entry.record.id] = position
        }
        for later in pulled {
            guard let laterChange = byVersion[later.record.version!] else { continue }
            for earlier in pulled where earlier.position > later.position {
                guard let earlierChange = byVersion[earlier.record.version!] else { continue }
                #expect(!(earlierChange.returned < laterChange.sent),
                        "\(earlier.record.id)@\(earlier.record.version!) committed before \(later.record.id)@\(later.record.version!) but was pulled after it")
            }
        }

        // No gap: once a pull that started after a change's push returned has caught up (its
        // page left nothing after it), that change or a later version of its item has been
        // delivered, by that pull or an earlier one.
        var reached: [[String: Int]] = []          // after each pull: item → furthest chain position pulled
        var furthest: [String: Int] = [:]
        var index = 0
        for pull in 0..<pages {
            while index < pulled.count && pulled[index].pull == pull {
                let entry = pulled[index]
                if let position = chainPosition[entry.record.version!] {
                    furthest[entry.record.id] = max(furthest[entry.record.id] ?? -1, position)
                }
                index += 1
            }
            reached.append(furthest)
        }
        for change in changes {
            guard let pull = pullStarts.indices.first(where: { pullStarts[$0] > change.returned && caughtUp[$0] }) else {
                Issue.record("no pull caught up after \(change.item)@\(change.record.version!) committed")
                continue
            }
            let position = chainPosition[change.record.version!] ?? 0
            #expect((reached[pull][change.item] ?? -1) >= position,
                    "\(change.item)@\(change.record.version!) was committed before pull \(pull) started but was not delivered by the time it caught up")
        }

        // The client's final state is the service's, read directly from either instance.
        var clientState: [String: Record] = [:]
        for entry in pulled { clientState[entry.record.id] = entry.record }
        for service in services {
            var direct: [String: Record] = [:]
            var cursor: String?
            repeat {
                let page = try await service.pull(identity: Self.identity, PullRequest(table: Self.table, cursor: cursor, limit: 1000))
                for record in page.records { direct[record.id] = record }
                if page.records.isEmpty || page.remaining == 0 { break }
                cursor = page.nextCursor
            } while true
            #expect(clientState == direct, "the client's pulled state differs from the service's")
        }
        #expect(clientState.count == shared.count + writers * ownItems + writers * batches)
        for (item, version) in finalVersion { #expect(clientState[item]?.version == version, "\(item): final version") }

        // The run exercised what it claims to: many changes, conflicts, deletes, several pages.
        let deletes = changes.filter(\.record.deleted).count
        #expect(changes.count >= writers * batches)
        #expect(conflicts > 0 && deletes > 0 && pages > 10)
        print("concurrent writers: \(changes.count) applied changes (\(deletes) deletes), \(conflicts) conflicts; the client pulled \(pulled.count) in \(pages) pulls, \(changes.count - pulled.count) superseded before it pulled them")
        for store in stores { try await store.close() }
    }
}
