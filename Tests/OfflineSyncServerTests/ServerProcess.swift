import Foundation
import OfflineSync
import OfflineSyncCommandSupport
import OfflineSyncServer
import OfflineSyncTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `offline-sync serve` in a child process on a free loopback port, as an operator runs it.
final class ServerProcess: Sendable {
    let process: ChildProcess
    let baseURL: String
    let port: Int
    private let output: FileHandle

    /// Starts `offline-sync serve --port 0` with the tests' token secret and waits until it
    /// listens (reading its output off the cooperative pool: see ``offThePool(_:)``).
    static func start(data: URL, store: String? = nil, extraArguments: [String] = []) async throws -> ServerProcess {
        try await offThePool { try launch(data: data, store: store, extraArguments: extraArguments) }
    }

    private static func launch(data: URL, store: String?, extraArguments: [String]) throws -> ServerProcess {
        var environment = ProcessInfo.processInfo.environment
        environment["OFFLINE_SYNC_TOKEN_SECRET"] = String(decoding: testSecret, as: UTF8.self)
        environment["OFFLINE_SYNC_STORE"] = nil
        let process = try ChildProcess(executable: try builtExecutable("offline-sync").path,
                                       arguments: ["serve", "--port", "0", "--data", data.path, "--log-level", "warning"]
                                           + (store.map { ["--store", $0] } ?? []) + extraArguments,
                                       environment: environment, standardOutput: .pipe)
        guard let handle = process.standardOutput else { throw SyncError(.transient, "the server's output is not a pipe") }
        var line: [UInt8] = []
        while true {
            guard let byte = handle.readData(ofLength: 1).first else {
                process.waitUntilExit()
                throw SyncError(.transient, "the server exited (status \(process.terminationStatus)) before listening")
            }
            if byte != UInt8(ascii: "\n") { line.append(byte); continue }
            let text = String(decoding: line, as: UTF8.self)
            line.removeAll()
            if let range = text.range(of: "listening on "),
               let url = text[range.upperBound...].split(separator: " ").first,
               let port = url.split(separator: ":").last.flatMap({ Int($0) }) {
                return ServerProcess(process: process, baseURL: String(url), port: port, output: handle)
            }
        }
    }

    private init(process: ChildProcess, baseURL: String, port: Int, output: FileHandle) {
        self.process = process
        self.baseURL = baseURL
        self.port = port
        self.output = output
    }

    /// Sends a signal.
    func signal(_ number: Int32) { process.signal(number) }

    /// Waits for the exit (off the cooperative pool) and returns the status and whatever the
    /// server printed.
    func exited() async throws -> (status: Int32, output: String) {
        try await offThePool { self.waitForExit() }
    }

    /// Waits for the exit and returns the status and whatever the server printed, blocking
    /// the calling thread.
    private func waitForExit() -> (status: Int32, output: String) {
        let rest = output.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: rest, as: UTF8.self))
    }

    /// Stops with SIGTERM and waits for the exit status, blocking the calling thread (for
    /// `defer`, on a test's error path).
    func stop() -> Int32 {
        signal(SIGTERM)
        return waitForExit().status
    }

    /// Stops with SIGTERM and waits for the exit status on a thread outside Swift's
    /// cooperative pool: the server's graceful shutdown waits for this process's clients to
    /// close their connections, which needs the pool, so blocking it here could hold both
    /// sides until the server's grace period ends.
    func stopped() async -> Int32 {
        (try? await offThePool { self.stop() }) ?? -1
    }
}

extension LoopbackSocket {
    /// Reads until the peer closes the connection, off the cooperative pool (the peer may be
    /// a server in this process, whose handlers need the pool). Throws when the connection
    /// stays open with nothing arriving for two minutes.
    func readAll() async throws -> [UInt8] {
        let (bytes, ended) = try await offThePool { self.readToEnd(quiet: .seconds(120)) }
        guard ended else { throw SyncError(.transient, "the peer kept the connection open with nothing to send for 120 s") }
        return bytes
    }
}

extension ServerProcess {
    /// Runs `body` with two server processes sharing the test PostgreSQL database at `url`
    /// (one fresh schema), each with its own data directory under `directory`. Both are
    /// stopped afterwards; `body` ends them with `stopped()` to check their exit status.
    static func withTwoInstances(sharing url: String, in directory: URL, extraArguments: [String] = [],
                                 _ body: (ServerProcess, ServerProcess) async throws -> Void) async throws {
        let store = TestPostgres.storeURL(url)
        let one = try await start(data: directory.appendingPathComponent("one"), store: store, extraArguments: extraArguments)
        defer { _ = one.stop() }
        let two = try await start(data: directory.appendingPathComponent("two"), store: store, extraArguments: extraArguments)
        defer { _ = two.stop() }
        try await body(one, two)
    }
}
