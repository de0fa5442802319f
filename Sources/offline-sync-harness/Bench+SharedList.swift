import AsyncHTTPClient
import Foundation
import NIOCore
import OfflineSync
import OfflineSyncCommandSupport
import OfflineSyncServer
import OfflineSyncService
import OfflineSyncWire

/// The server process's memory, read from `/proc`: what one request made it grow by.
enum ServerMemory {
    /// Sets the process's peak RSS (VmHWM) back to its current RSS (Linux's `clear_refs` 5),
    /// so the peak read after a request is that request's.
    static func resetPeak(_ pid: Int32) throws {
        try Data("5".utf8).write(to: URL(fileURLWithPath: "/proc/\(pid)/clear_refs"))
    }

    /// `key` (`VmRSS`, `VmHWM`) of process `pid`, in bytes.
    static func bytes(_ key: String, of pid: Int32) throws -> Int {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(key + ":") }),
              let kilobytes = line.split(separator: " ").compactMap({ Int($0) }).first else {
            throw SyncError(.storageFailure, "no \(key) in /proc/\(pid)/status")
        }
        return kilobytes * 1024
    }
}

/// `tables-list-shared`: the first page of a Datasync list, as the CommunityToolkit client
/// asks for it (`$orderby=updatedAt&$count=true&__includedeleted=true`), over a shared table
/// in which the caller may read 1,000,000 rows (a member of one list of 1,000,000 todos),
/// against the same list of an owner-only table holding 1,000,000 rows of the caller. The
/// server's peak RSS growth during the request is reported as `serverRSSGrowthMiB`.
enum TablesListShared: BenchWorkload {
    static let name = "tables-list-shared"
    static let baseline = "same-list-of-owner-only-table"
    static let count = 1_000_000
    static var fixedRecords: Int? { count }

    /// One list, `huge`, of 1,000,000 todos, the bench identity its only member.
    static func seed() async throws -> URL {
        try await SyncBench.cachedSeed("seed-shared-list-1m", describing: "a shared list of 1,000,000 todos",
                                       rules: try SyncRules(yaml: SharedBench.rules)) { service in
            try await SharedBench.seed(service, [SharedBench.insert(SharedBench.membership(SyncBench.identity, in: "huge"),
                                                                    into: "list_members")])
            for start in stride(from: 0, to: count, by: 10_000) {
                try await SharedBench.seed(service, (start..<start + 10_000).map {
                    SharedBench.insert(SharedBench.todo($0, in: "huge"), into: "list_todos")
                })
            }
        }
    }

    static func ours(directory: URL, records: Int, batch: Int) async throws -> Double {
        let (server, secret) = try SyncBench.startServer(directory: directory, seed: try await seed(), rules: SharedBench.rules)
        defer { _ = server.stop() }
        return try await firstPage(server, secret: secret, table: "list_todos")
    }

    static func raw(directory: URL, records: Int, batch: Int) async throws -> Double {
        let (server, secret) = try SyncBench.startServer(directory: directory, seed: try await SyncBench.seed(count: count))
        defer { _ = server.stop() }
        return try await firstPage(server, secret: secret, table: "items")
    }

    /// Times the first page's request and checks it: a full page, and a count of every row.
    /// A request for one row goes first, not timed: the server opens a table's storage on its
    /// first use, and a seed written by an earlier version has its indexes rebuilt then.
    static func firstPage(_ server: ServerProcess, secret: String, table: String) async throws -> Double {
        let token = try await TokenAuthority(secret: Array(secret.utf8)).mint(identity: SyncBench.identity)
        func get(_ query: String) -> HTTPClientRequest {
            var request = HTTPClientRequest(url: server.baseURL + "/tables/\(table)?" + query)
            request.headers.add(name: "Authorization", value: "Bearer \(token)")
            request.headers.add(name: "ZUMO-API-VERSION", value: "3.0.0")
            return request
        }
        let warmUp = try await HTTPClient.shared.execute(get("$top=1"), timeout: .seconds(600))
        _ = try await warmUp.body.collect(upTo: 1 << 20)
        guard warmUp.status.code == 200 else { throw SyncError(.storageFailure, "the warm-up list answered \(warmUp.status.code)") }
        let request = get("$orderby=updatedAt&$count=true&__includedeleted=true")
        let pid = server.process.processIdentifier
        try ServerMemory.resetPeak(pid)
        let before = try ServerMemory.bytes("VmRSS", of: pid)
        var body = ByteBuffer()
        let seconds = try await LocalWrites.measure {
            let response = try await HTTPClient.shared.execute(request, timeout: .seconds(300))
            body = try await response.body.collect(upTo: 16 << 20)
            guard response.status.code == 200 else {
                throw SyncError(.storageFailure, "the list answered \(response.status.code): \(String(buffer: body))")
            }
        }
        let growth = try ServerMemory.bytes("VmHWM", of: pid) - before
        BenchMetrics.shared.set("serverRSSGrowthMiB", Double(growth) / 1_048_576)
        guard case .object(let members)? = try? JSON.parse(Array(buffer: body)),
              case .array(let items)? = members.first(where: { $0.key == "items" })?.value, !items.isEmpty,
              case .number(let total)? = members.first(where: { $0.key == "count" })?.value, Int(total) == count else {
            throw SyncError(.storageFailure, "the list's first page is not a full page counting \(count) rows")
        }
        BenchMetrics.shared.set("pageRows", Double(items.count))
        return seconds
    }
}
