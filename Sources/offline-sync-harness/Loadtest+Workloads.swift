import Foundation
import OfflineSync
import OfflineSyncCommandSupport
import OfflineSyncHTTP
import OfflineSyncServer
import Synchronization

/// Propagation: one client writes a row at a time at `rate` into a table of `tableRows` rows;
/// `clients` other devices of the same identity hold the change channel open and pull from
/// their own cursors (which start at the table's end) when told.
/// Measured per receiving device: from the start of the write's push to the notice, and to the
/// page that carries the row. A few devices of another identity listen too: any notice they
/// hear is a leak.
struct Propagation {
    /// The workload's name in the results (`propagation`, `fan-out`).
    let name: String
    /// The identity whose devices write and receive (each run its own, so its table starts empty).
    let identity: String
    /// Where the writer pushes.
    let base: String
    let tokens: TokenAuthority
    let clients: Int
    let writes: Int
    let rate: Int
    let tableRows: Int
    /// The server's resident memory now, in bytes: read before the clients connect and once
    /// they all listen, for the memory each connection costs the server.
    var serverMemory: @Sendable () -> Int? = { nil }
    /// The server's CPU seconds so far, read around the writes: what a delivered change (its
    /// notice and the pull it causes) costs the server.
    var serverCPU: @Sendable () -> Double? = { nil }
    /// The database server's CPU seconds so far (PostgreSQL's), read the same way.
    var databaseCPU: @Sendable () -> Double? = { nil }
    /// Where the receiving devices listen and pull, when not at ``base`` (another instance
    /// over the same store).
    var receiverBase: String?
    /// Change channels of the receiving identity opened on sockets that are never read (slow
    /// consumers), once the receivers listen; the server should close each.
    var deafChannels = 0
    /// The change channels the server has open now (its `/metrics` gauge), to see the deaf ones closed.
    var openChannels: @Sendable () async -> Int? = { nil }

    static let table = "lt_notes"

    /// When each write's push began, by row id.
    final class SendTimes: Sendable {
        private let times = Mutex([String: ContinuousClock.Instant]())
        func mark(_ id: String) { times.withLock { $0[id] = .now } }
        func start(of id: String) -> ContinuousClock.Instant? { times.withLock { $0[id] } }
    }

    /// What one receiving device saw.
    final class Receiver: Sendable {
        let seen = Mutex(Set<String>())
        let subscribed = Atomic(false)
        let notices = Atomic(0)
    }

    func run() async throws -> LoadOutcome {
        let alice = try await tokens.mint(identity: identity)
        let bob = try await tokens.mint(identity: identity + "-outsider")
        let sent = SendTimes()
        let toNotice = LatencyRecorder()
        let toPage = LatencyRecorder()
        let writer = HTTPRemoteStore(baseURL: base, token: { alice })
        let cursor = try await seed(writer)
        let receivers = (0..<clients).map { _ in Receiver() }
        let outsiders = (0..<max(2, clients / 100)).map { _ in Receiver() }
        let idleMemory = serverMemory()
        let listeningBase = receiverBase ?? base

        let listening = Task {
            await withTaskGroup(of: Void.self) { group in
                for receiver in receivers {
                    group.addTask {
                        await Self.listen(base: listeningBase, token: alice, from: cursor, receiver: receiver, sent: sent, toNotice: toNotice, toPage: toPage)
                    }
                }
                for outsider in outsiders {
                    group.addTask { await Self.listen(base: listeningBase, token: bob, from: nil, receiver: outsider, sent: sent, toNotice: nil, toPage: nil) }
                }
            }
        }
        defer { listening.cancel() }
        let everyone = receivers + outsiders
        let started = ContinuousClock.now
        while everyone.contains(where: { !$0.subscribed.load(ordering: .acquiring) }) {
            guard ContinuousClock.now - started < .seconds(120) else {
                throw SyncError(.transient, "only \(everyone.filter { $0.subscribed.load(ordering: .acquiring) }.count) of \(everyone.count) change channels subscribed within 120 s")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        say("\(name): \(clients) receivers and \(outsiders.count) other-identity listeners subscribed in \(ContinuousClock.now - started)")
        let memory = Self.connectionMemory(idle: idleMemory, connected: serverMemory(), connections: everyone.count)
        if let perConnection = memory["serverKiBPerConnection"] { say("\(name): server memory per connection \(perConnection) KiB") }

        let deaf = try await openDeafChannels(token: alice, listening: everyone.count)
        let cpuBefore = serverCPU(), databaseBefore = databaseCPU()
        try await write(writer, sent: sent)
        // Every receiver should have every row; give the last notices time to land.
        let deadline = ContinuousClock.now + .seconds(30)
        while receivers.contains(where: { $0.seen.withLock { $0.count } < writes }), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        let cpu = serverCPU().flatMap { after in cpuBefore.map { after - $0 } }
        let databaseSpent = databaseCPU().flatMap { after in databaseBefore.map { after - $0 } }
        var slow: [String: Any]?
        if let deaf { slow = try await closeOut(deaf, listening: everyone.count) }
        let missed = receivers.reduce(0) { $0 + writes - $1.seen.withLock { $0.count } }
        let leaked = outsiders.reduce(0) { $0 + $1.notices.load(ordering: .acquiring) + $1.seen.withLock { $0.count } }
        say("\(name): \(writes) writes at \(rate)/s to \(clients) receivers: to notice \(toNotice.summary); to page \(toPage.summary)")
        var failures: [String] = []
        if missed > 0 { failures.append("\(name): \(missed) row deliveries missed (of \(writes * clients))") }
        if leaked > 0 { failures.append("\(name): \(leaked) notices or rows reached another identity") }
        if deafChannels > 0, (slow?["deafChannelsClosed"] as? Int) != deafChannels {
            failures.append("\(name): \((slow?["deafChannelsClosed"] as? Int) ?? 0) of \(deafChannels) channels that never read were closed by the server")
        }
        var json: [String: Any] = [
            "name": name, "clients": clients, "ratePerSecond": rate, "writes": writes, "tableRows": tableRows,
            "receiversOnAnotherInstance": receiverBase != nil,
            "otherIdentityListeners": outsiders.count, "missedDeliveries": missed, "leakedNotices": leaked,
            "noticesReceived": receivers.reduce(0) { $0 + $1.notices.load(ordering: .acquiring) },
            "writeToNotice": toNotice.json, "writeToPage": toPage.json,
        ]
        let deliveries = receivers.reduce(0) { $0 + $1.seen.withLock { $0.count } }
        for (key, spent) in [("server", cpu), ("database", databaseSpent)] {
            guard let spent else { continue }
            json[key + "CPUSeconds"] = spent
            json[key + "CPUMillisecondsPerDelivery"] = spent * 1000 / Double(max(deliveries, 1))
            say("\(name): the \(key)'s CPU \(String(format: "%.3f", spent * 1000 / Double(max(deliveries, 1)))) ms a delivered row (notice and pull)")
        }
        return LoadOutcome(json: json.merging(memory) { first, _ in first }.merging(slow ?? [:]) { first, _ in first }, failures: failures)
    }

    /// The deaf channels and the server's memory while they are open.
    struct DeafChannels {
        let sockets: [LoopbackSocket]
        let memoryBefore: Int?
        let sampler: MemorySampler
    }

    /// Opens ``deafChannels`` channels that are never read, once `listening` channels are
    /// open, and waits until the server counts them; `nil` when there are none to open.
    private func openDeafChannels(token: String, listening: Int) async throws -> DeafChannels? {
        guard deafChannels > 0, let port = URL(string: receiverBase ?? base)?.port else { return nil }
        let before = serverMemory()
        let sockets = try (0..<deafChannels).map { _ in try LoopbackSocket.deafChannel(port: port, token: token) }
        let started = ContinuousClock.now
        while await openChannels() != listening + deafChannels {
            guard ContinuousClock.now - started < .seconds(60) else {
                sockets.forEach { $0.hangUp() }
                throw SyncError(.transient, "the server did not count \(deafChannels) more change channels within 60 s")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        say("\(name): \(deafChannels) change channels that never read are open")
        return DeafChannels(sockets: sockets, memoryBefore: before, sampler: MemorySampler(serverMemory))
    }

    /// After the writes: waits (up to 120 s) until the server has closed the deaf channels,
    /// checks from each socket that its connection ended, and reports the server's memory.
    private func closeOut(_ deaf: DeafChannels, listening: Int) async throws -> [String: Any] {
        let lastWrite = ContinuousClock.now
        while let open = await openChannels(), open > listening, ContinuousClock.now - lastWrite < .seconds(120) {
            try await Task.sleep(for: .milliseconds(100))
        }
        let waited = ContinuousClock.now - lastWrite
        let peak = await deaf.sampler.stop()
        let after = serverMemory()
        var closed = 0
        for socket in deaf.sockets {
            if await Task.detached(operation: { socket.readToEnd(quiet: .seconds(2)).ended }).value { closed += 1 }
            socket.hangUp()
        }
        let mib = { (bytes: Int?) -> Any in bytes.map { Double($0) / 1_048_576 } ?? NSNull() }
        let growth = deaf.memoryBefore.map { Double(peak - $0) / 1_048_576 }
        say("\(name): \(closed) of \(deaf.sockets.count) channels that never read were closed (all within \(waited) of the last write); server memory \(growth.map { String(format: "%+.1f", $0) } ?? "?") MiB at its peak over the \(String(format: "%.1f", Double(deaf.memoryBefore ?? 0) / 1_048_576)) MiB before they opened")
        return [
            "deafChannels": deaf.sockets.count, "deafChannelsClosed": closed,
            "deafClosedSecondsAfterLastWrite": Double(waited.components.seconds) + Double(waited.components.attoseconds) / 1e18,
            "serverRSSBeforeDeafMiB": mib(deaf.memoryBefore), "serverRSSPeakMiB": mib(peak), "serverRSSAfterMiB": mib(after),
            "serverRSSPeakOverBeforeMiB": growth.map { $0 as Any } ?? NSNull(),
        ]
    }

    /// The writer: one row per push, on a fixed schedule (a late push goes at once).
    private func write(_ writer: HTTPRemoteStore, sent: SendTimes) async throws {
        let interval = Duration.seconds(1) / rate
        let begin = ContinuousClock.now
        for index in 0..<writes {
            let due = begin + interval * index
            if due > .now { try await Task.sleep(until: due) }
            let id = String(format: "row-%07d", index)
            sent.mark(id)
            let results = try await writer.push([PushOperation(id: "op-" + id, table: Self.table, itemId: id, kind: .insert,
                                                               item: Record(id: id, fields: ["n": .int(Int64(index))]), baseVersion: nil)])
            guard case .applied = results.first?.outcome else { throw SyncError(.rejected, "write \(id) was not applied: \(results)") }
        }
    }

    /// The server's resident memory before the clients connected and once all listened, and
    /// the difference per connection (empty when the server's memory cannot be read).
    static func connectionMemory(idle: Int?, connected: Int?, connections: Int) -> [String: Any] {
        guard let idle, let connected, connections > 0 else { return [:] }
        return [
            "serverRSSIdleMiB": Double(idle) / 1_048_576, "serverRSSConnectedMiB": Double(connected) / 1_048_576,
            "serverKiBPerConnection": (Double(connected - idle) / 1024 / Double(connections) * 10).rounded() / 10,
        ]
    }

    /// Fills the table with `tableRows` rows in batches of 5,000, then reads it to its end
    /// once (the page stream): the cursor every receiver starts from, as a device that has
    /// synced before does.
    private func seed(_ writer: HTTPRemoteStore) async throws -> String? {
        guard tableRows > 0 else { return nil }
        let started = ContinuousClock.now
        for start in stride(from: 0, to: tableRows, by: 5_000) {
            let operations = (start..<min(start + 5_000, tableRows)).map { row in
                let id = String(format: "seed-%07d", row)
                return PushOperation(id: "op-" + id, table: Self.table, itemId: id, kind: .insert,
                                     item: Record(id: id, fields: ["n": .int(Int64(row))]), baseVersion: nil)
            }
            _ = try await writer.push(operations)
        }
        var cursor: String?
        var rows = 0
        let stream = writer.openPull(PullRequest(table: Self.table, limit: 1_000))
        while let page = try await stream.next() {
            rows += page.records.count
            cursor = page.nextCursor
        }
        guard rows == tableRows else { throw SyncError(.transient, "seeded \(tableRows) rows, pulled \(rows)") }
        say("\(name): seeded \(tableRows) rows in \(ContinuousClock.now - started)")
        return cursor
    }

    /// One device: the change channel, and on each notice a pull from its cursor.
    static func listen(base: String, token: String, from start: String?, receiver: Receiver, sent: SendTimes,
                       toNotice: LatencyRecorder?, toPage: LatencyRecorder?) async {
        let remote = HTTPRemoteStore(baseURL: base, configuration: .init(maxAttempts: 10), token: { token })
        var cursor = start
        for await event in remote.changes() {
            switch event {
            case .subscribed:
                receiver.subscribed.store(true, ordering: .releasing)
            case .changed(let table):
                receiver.notices.add(1, ordering: .relaxed)
                guard table == Self.table else { continue }
                let noticed = ContinuousClock.now
                do {
                    while true {
                        let page = try await remote.pull(PullRequest(table: table, cursor: cursor, limit: 1_000))
                        let arrived = ContinuousClock.now
                        cursor = page.nextCursor
                        for record in page.records {
                            let fresh = receiver.seen.withLock { $0.insert(record.id).inserted }
                            guard fresh, let start = sent.start(of: record.id) else { continue }
                            toNotice?.record(noticed - start)
                            toPage?.record(arrived - start)
                        }
                        if page.endsPull { break }
                    }
                } catch {
                    // A failed pull is caught up by the next notice (the cursor did not move).
                    continue
                }
            default:
                continue
            }
            if Task.isCancelled { break }
        }
    }
}

/// Concurrent writers: `writers` clients, each its own identity, push batches of `batch` new
/// rows as fast as they are answered for `duration` seconds. Measured: the push latency and
/// the operations per second; then each writer's rows are counted on the server: exactly the
/// rows acknowledged, none lost and none twice. The baseline: the same rows, as the server
/// stored them, inserted again `batch` at a time with the store's C library (sqlite3 into a
/// file of its own; libpq into a new table of the same PostgreSQL server).
struct ConcurrentWriters {
    let base: String
    let tokens: TokenAuthority
    let writers: Int
    let batch: Int
    let duration: Int
    /// The baseline: the rows the writers stored, inserted again `batch` at a time with the
    /// store's own C library (rows inserted, seconds); `nil` for none.
    let baseline: (@Sendable () async throws -> (rows: Int, seconds: Double))?
    /// The workload's name in the results.
    var name = "concurrent-writers"
    /// Restarts a server instance under the load, once a third of ``duration`` has passed;
    /// the pushes begun from then until a second after it returns are measured apart.
    var restart: (@Sendable () async throws -> Void)?
    /// The most rows the baseline inserts (its rate is per row).
    static let baselineRows = 200_000
    /// How many tables the writers share out between them (writer `i` writes table
    /// `i % tables`): with more than one, pushes of different tables may run at once.
    var tables = 1
    /// Called as the pushing begins (`true`) and once it has ended (`false`), outside the
    /// set-up and the counting afterwards: for figures read around the measured window.
    var window: @Sendable (_ begins: Bool) -> Void = { _ in }
    /// Fields every row carries besides its number (a shared table's group key).
    var fields: [String: Value] = [:]
    /// Runs before the pushing, with each writer's client (a shared table's memberships).
    var prepare: (@Sendable ([HTTPRemoteStore]) async throws -> Void)?
    /// Whether the table is shared and every writer reads every row: the rows are then
    /// counted by one pull of the whole table, not one per writer.
    var sharedTable = false

    static let table = "lt_rows"

    /// The table writer `index` writes.
    func table(of index: Int) -> String {
        tables == 1 ? Self.table : "\(Self.table)_\(index % tables)"
    }

    /// One client per writer, each its own identity.
    private func clients() async throws -> [HTTPRemoteStore] {
        var remotes: [HTTPRemoteStore] = []
        for index in 0..<writers {
            let token = try await tokens.mint(identity: "\(name)-\(index)")
            remotes.append(HTTPRemoteStore(baseURL: base, configuration: .init(maxAttempts: 10), token: { token }))
        }
        return remotes
    }

    func run() async throws -> LoadOutcome {
        let latency = LatencyRecorder()
        let log = RestartLog()
        let remotes = try await clients()
        if let prepare { try await prepare(remotes) }
        window(true)
        let end = ContinuousClock.now + .seconds(duration)
        let begin = ContinuousClock.now
        let acknowledged = try await withThrowingTaskGroup(of: (Int, Int, Int).self) { group in
            if let restart {
                group.addTask {
                    try await Task.sleep(for: .seconds(duration) / 3)
                    let began = ContinuousClock.now
                    try await restart()
                    log.window.withLock { $0 = (began, ContinuousClock.now + .seconds(1)) }
                    say("\(name): instance restarted in \(ContinuousClock.now - began)")
                    return (-1, 0, 0)
                }
            }
            for (index, remote) in remotes.enumerated() {
                group.addTask {
                    var rows = 0
                    var refused = 0
                    while ContinuousClock.now < end {
                        let operations = (rows..<rows + batch).map { row in
                            let id = "w\(index)-\(row)"
                            return PushOperation(id: "op-" + id, table: table(of: index), itemId: id, kind: .insert,
                                                 item: Record(id: id, fields: fields.merging(["n": .int(Int64(row))]) { $1 }),
                                                 baseVersion: nil)
                        }
                        let started = ContinuousClock.now
                        let results = try await remote.push(operations)
                        latency.record(ContinuousClock.now - started)
                        if restart != nil { log.pushes.withLock { $0.append((started, ContinuousClock.now - started)) } }
                        refused += results.filter { if case .applied = $0.outcome { return false } else { return true } }.count
                        rows += batch
                    }
                    return (index, rows, refused)
                }
            }
            var counts: [(Int, Int, Int)] = []
            for try await count in group where count.0 >= 0 { counts.append(count) }
            return counts
        }
        let elapsed = ContinuousClock.now - begin
        window(false)
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let total = acknowledged.reduce(0) { $0 + $1.1 }
        let refused = acknowledged.reduce(0) { $0 + $1.2 }
        let (lost, duplicated) = try await countRows(acknowledged, remotes: remotes)
        let perSecond = Double(total) / seconds
        var json: [String: Any] = [
            "name": name, "writers": writers, "tables": tables, "batch": batch, "durationSeconds": seconds, "operations": total,
            "operationsPerSecond": perSecond, "notApplied": refused, "lost": lost, "duplicated": duplicated, "push": latency.json,
        ]
        var line = "\(name): \(writers) clients\(tables > 1 ? " over \(tables) tables" : ""), batches of \(batch): \(total) operations in \(String(format: "%.1f", seconds)) s = \(Int(perSecond)) ops/s"
        if let baseline {
            let (rawRows, rawSeconds) = try await baseline()
            let rawPerSecond = Double(rawRows) / rawSeconds
            json["rawInsertsPerSecond"] = rawPerSecond
            json["rawRows"] = rawRows
            json["ratioToRaw"] = perSecond / rawPerSecond
            line += " (raw multi-row inserts \(Int(rawPerSecond)) rows/s: \(String(format: "%.2f", perSecond / rawPerSecond))×)"
        }
        say(line + "; push \(latency.summary)")
        var failures: [String] = []
        if let (began, ended) = log.window.withLock({ $0 }) {
            let during = LatencyRecorder()
            for (started, took) in log.pushes.withLock({ $0 }) where started >= began && started <= ended { during.record(took) }
            json["pushDuringRestart"] = during.json
            json["restartSeconds"] = Double((ended - began - .seconds(1)).components.seconds) + Double((ended - began - .seconds(1)).components.attoseconds) / 1e18
            say("\(name): pushes begun during the restart: \(during.summary)")
        } else if restart != nil {
            failures.append("\(name): the instance was not restarted")
        }
        if refused > 0 { failures.append("\(name): \(refused) operations were not applied") }
        if lost > 0 { failures.append("\(name): \(lost) acknowledged operations are missing on the server") }
        if duplicated > 0 { failures.append("\(name): \(duplicated) rows were pulled twice") }
        return LoadOutcome(json: json, failures: failures)
    }
}

extension ConcurrentWriters {
    /// Counts every writer's rows on the server, through its own identity: the acknowledged
    /// rows missing, and the rows pulled twice.
    func countRows(_ acknowledged: [(Int, Int, Int)], remotes: [HTTPRemoteStore]) async throws -> (lost: Int, duplicated: Int) {
        if sharedTable { return try await countSharedRows(acknowledged, remote: remotes[0]) }
        var lost = 0
        var duplicated = 0
        for (index, rows, _) in acknowledged {
            var ids = Set<String>()
            var count = 0
            let stream = remotes[index].openPull(PullRequest(table: table(of: index), limit: 1_000))
            while let page = try await stream.next() {
                count += page.records.count
                ids.formUnion(page.records.map(\.id))
            }
            lost += max(0, rows - ids.count)
            duplicated += count - ids.count
        }
        return (lost, duplicated)
    }

    /// ``countRows(_:remotes:)`` for a shared table: one writer pulls the whole table once,
    /// and each writer's acknowledged rows (`w<writer>-<row>`) are looked up in it.
    private func countSharedRows(_ acknowledged: [(Int, Int, Int)], remote: HTTPRemoteStore) async throws -> (lost: Int, duplicated: Int) {
        var ids = Set<String>()
        var count = 0
        let stream = remote.openPull(PullRequest(table: Self.table, limit: 1_000))
        while let page = try await stream.next() {
            count += page.records.count
            ids.formUnion(page.records.map(\.id))
        }
        var lost = 0
        for (index, rows, _) in acknowledged {
            lost += (0..<rows).count { !ids.contains("w\(index)-\($0)") }
        }
        return (lost, count - ids.count)
    }
}

/// With a restart under the writers: when each push began and how long it took, and the
/// restart's window (from the signal to a second after the replacement took connections).
private final class RestartLog: Sendable {
    let pushes = Mutex([(ContinuousClock.Instant, Duration)]())
    let window = Mutex<(ContinuousClock.Instant, ContinuousClock.Instant)?>(nil)
}
