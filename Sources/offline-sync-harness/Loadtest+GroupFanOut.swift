import Foundation
import NIOCore
import OfflineSync
import OfflineSyncCommandSupport
import OfflineSyncHTTP
import OfflineSyncServer
import OfflineSyncTransport
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Fan-out through the sync rules, in the goal's shape: a server of its own pinned to one
/// core (`taskset`) and the load generator to the others; `members` identities, each with one
/// device on the change channel, all members of one list (a large group of the rules), every
/// one of them also reading a table `everyone` reads. One write a second, alternating between
/// the list's todos and the public table, by a seeding identity.
///
/// Measured on each device: from the start of the write's push to its notice. The devices do
/// not pull (the pulls that follow a notice are what `fan-out` measures), so this is the
/// notification path alone; and the server's memory per connection. Each device is a
/// WebSocket that only reads (``NoticeReaders``), so the one core the generator has keeps up
/// with 10,000 of them and the figure is the server's. Identities outside the
/// list listen too: they hear the public table and must hear nothing of the list's todos.
struct GroupFanOut {
    let members: Int
    /// Writes to each of the two tables.
    let writes: Int
    let directory: URL
    let secret: String
    let tokens: TokenAuthority
    /// The CPU the server is pinned to; the generator takes the others. `nil`: no pinning
    /// (a machine with one CPU).
    let serverCPU: Int?

    static let rules = """
        version: 1
        memberships:
          lt_members: { table: lt_members, member: user_id, group: list_id }
        tables:
          lt_list_todos:
            read: [{ member: lt_members, key: list_id }]
            write: [{ everyone: true, when: { roles: seeder } }]
          lt_members:
            read: [{ identity: user_id }]
            write: [{ everyone: true, when: { roles: seeder } }]
          lt_public:
            read: everyone
            write: [{ everyone: true, when: { roles: seeder } }]

        """
    static let tables = ["lt_list_todos", "lt_public"]

    /// One device's counts: notices heard per table.
    final class Device: Sendable {
        let subscribed = Atomic(false)
        let listNotices = Atomic(0)
        let publicNotices = Atomic(0)
    }

    /// When the latest write to each table began.
    final class LatestWrite: Sendable {
        private let started = Mutex([String: ContinuousClock.Instant]())
        func mark(_ table: String) { started.withLock { $0[table] = .now } }
        func start(of table: String) -> ContinuousClock.Instant? { started.withLock { $0[table] } }
    }

    func run() async throws -> LoadOutcome {
        let name = "fan-out-\(members)-group"
        let data = directory.appendingPathComponent(name)
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        let rulesFile = data.appendingPathComponent("rules.yaml")
        try Self.rules.write(to: rulesFile, atomically: true, encoding: .utf8)
        let cpus = ProcessInfo.processInfo.activeProcessorCount
        let pinned = serverCPU.flatMap { cpus > 1 ? $0 : nil }
        let server = try ServerProcess.start(data: data, secret: secret, extraArguments: ["--rules", rulesFile.path],
                                             cpus: pinned.map(String.init))
        defer { _ = server.stop() }
        if let pinned { try Self.pin(getpid(), to: (0..<cpus).filter { $0 != pinned }) }
        defer { if pinned != nil { try? Self.pin(getpid(), to: Array(0..<cpus)) } }

        let seeder = HTTPRemoteStore(baseURL: server.baseURL, token: { [tokens] in try await tokens.mint(identity: "seeder", roles: ["seeder"]) })
        try await seedMembers(seeder)
        let idle = ServerProcess.residentBytes(of: server.process.processIdentifier)
        let readers = try NoticeReaders(base: server.baseURL)
        do {
            let outcome = try await measure(name: name, server: server, seeder: seeder, idle: idle, readers: readers, pinned: pinned)
            await readers.shutDown()
            return outcome
        } catch {
            await readers.shutDown()
            throw error
        }
    }

    /// Opens the devices' channels, writes, and counts what each device heard.
    private func measure(name: String, server: ServerProcess, seeder: HTTPRemoteStore, idle: Int?,
                         readers: NoticeReaders, pinned: Int?) async throws -> LoadOutcome {
        let latest = LatestWrite()
        let latency = LatencyRecorder()
        let devices = (0..<members).map { _ in Device() }
        let outsiders = (0..<max(2, members / 100)).map { _ in Device() }
        var listeners: [(token: String, device: Device, latency: LatencyRecorder?)] = []
        for (index, device) in devices.enumerated() {
            listeners.append((try await tokens.mint(identity: "member-\(index)"), device, latency))
        }
        for (index, device) in outsiders.enumerated() {
            listeners.append((try await tokens.mint(identity: "outsider-\(index)"), device, nil))
        }
        let everyone = devices + outsiders
        let began = ContinuousClock.now
        // A few handshakes at a time, as a fleet of devices coming online would.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, (token, device, latency)) in listeners.enumerated() {
                if index >= 32 { try await group.next() }
                group.addTask {
                    try await readers.open(token: token) { message in
                        Self.heard(NativeRemote.channelMessage(String(buffer: message)), device: device, latest: latest, latency: latency)
                    }
                }
            }
            try await group.waitForAll()
        }
        while everyone.contains(where: { !$0.subscribed.load(ordering: .acquiring) }) {
            guard ContinuousClock.now - began < .seconds(120) else {
                throw SyncError(.transient, "\(name): only \(everyone.filter { $0.subscribed.load(ordering: .acquiring) }.count) of \(everyone.count) channels subscribed within 120 s")
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        say("\(name): \(members) members and \(outsiders.count) outsiders subscribed in \(ContinuousClock.now - began)\(pinned.map { ", server on CPU \($0)" } ?? "")")
        let memory = Propagation.connectionMemory(idle: idle, connected: ServerProcess.residentBytes(of: server.process.processIdentifier),
                                                  connections: everyone.count)

        try await write(seeder, latest: latest)
        let deadline = ContinuousClock.now + .seconds(30)
        while devices.contains(where: { $0.listNotices.load(ordering: .acquiring) < writes || $0.publicNotices.load(ordering: .acquiring) < writes }),
              ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(100))
        }
        let missed = devices.reduce(0) {
            $0 + max(0, writes - $1.listNotices.load(ordering: .acquiring)) + max(0, writes - $1.publicNotices.load(ordering: .acquiring))
        }
        let leaked = outsiders.reduce(0) { $0 + $1.listNotices.load(ordering: .acquiring) }
        let missedByOutsiders = outsiders.reduce(0) { $0 + max(0, writes - $1.publicNotices.load(ordering: .acquiring)) }
        say("\(name): \(writes) writes to the list and \(writes) to the public table, one a second: to notice \(latency.summary); \(memory["serverKiBPerConnection"].map { "\($0)" } ?? "?") KiB of server memory per connection")
        var failures: [String] = []
        if missed + missedByOutsiders > 0 { failures.append("\(name): \(missed + missedByOutsiders) notices missed") }
        if leaked > 0 { failures.append("\(name): \(leaked) notices of the list reached identities outside it") }
        let json: [String: Any] = [
            "name": name, "clients": members, "writesPerTable": writes, "ratePerSecond": 1, "serverCPU": pinned.map { $0 as Any } ?? NSNull(),
            "outsiders": outsiders.count, "missedNotices": missed + missedByOutsiders, "leakedNotices": leaked, "writeToNotice": latency.json,
        ]
        return LoadOutcome(json: json.merging(memory) { first, _ in first }, failures: failures)
    }

    /// Makes every member identity a member of the list `big`, 1,000 per push.
    private func seedMembers(_ seeder: HTTPRemoteStore) async throws {
        for start in stride(from: 0, to: members, by: 1_000) {
            let rows = (start..<min(start + 1_000, members)).map { index in
                PushOperation(id: "op-m-\(index)", table: "lt_members", itemId: "m-\(index)", kind: .insert,
                              item: Record(id: "m-\(index)", fields: ["list_id": .string("big"), "user_id": .string("member-\(index)")]),
                              baseVersion: nil)
            }
            let results = try await seeder.push(rows)
            guard results.allSatisfy({ if case .applied = $0.outcome { true } else { false } }) else {
                throw SyncError(.rejected, "a membership of the list was not applied")
            }
        }
    }

    /// One write a second, alternating between the list's todos and the public table.
    private func write(_ seeder: HTTPRemoteStore, latest: LatestWrite) async throws {
        let start = ContinuousClock.now
        for index in 0..<(writes * 2) {
            let due = start + .seconds(1) * index
            if due > .now { try await Task.sleep(until: due) }
            let table = Self.tables[index % 2]
            latest.mark(table)
            let id = "w-\(index)"
            let results = try await seeder.push([PushOperation(id: "op-\(id)", table: table, itemId: id, kind: .insert,
                                                               item: Record(id: id, fields: ["n": .int(Int64(index)), "list_id": .string("big")]),
                                                               baseVersion: nil)])
            guard case .applied = results.first?.outcome else { throw SyncError(.rejected, "write \(id) to \(table) was not applied") }
        }
    }

    /// One device's message, as the client reads it: the change channel is open, or a table it counts changed.
    static func heard(_ message: NativeRemote.ChannelMessage?, device: Device, latest: LatestWrite, latency: LatencyRecorder?) {
        switch message {
        case .event(.subscribed):
            device.subscribed.store(true, ordering: .releasing)
        case .event(.changed(let table)) where tables.contains(table):
            if let started = latest.start(of: table) { latency?.record(.now - started) }
            if table == "lt_public" {
                device.publicNotices.add(1, ordering: .relaxed)
            } else {
                device.listNotices.add(1, ordering: .relaxed)
            }
        default:
            break
        }
    }

    /// Pins every thread of process `pid` to `cpus` (`taskset -a -p`).
    static func pin(_ pid: Int32, to cpus: [Int]) throws {
        let process = try ChildProcess(executable: "/usr/bin/taskset",
                                       arguments: ["-a", "-p", "-c", cpus.map(String.init).joined(separator: ","), String(pid)],
                                       standardOutput: .null)
        guard process.terminationStatus == 0 else { throw SyncError(.transient, "taskset could not pin process \(pid)") }
    }
}
