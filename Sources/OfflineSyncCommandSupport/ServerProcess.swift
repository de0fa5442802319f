import ArgumentParser
import Foundation

/// `offline-sync serve` in a child process on a free loopback port, as the demo and the
/// benchmarks run it.
///
package struct ServerProcess: Sendable {
    /// The child process.
    package let process: ChildProcess
    /// `http://127.0.0.1:<port>`, read from the server's "listening on" line.
    package let baseURL: String

    /// The `offline-sync` tool: this executable when it is the tool, otherwise the one beside it
    /// (the harness is built into the same directory).
    package static func toolExecutable() throws -> URL {
        guard let running = Bundle.main.executableURL else { throw ValidationError("cannot find this tool's executable") }
        if running.lastPathComponent == "offline-sync" { return running }
        let sibling = running.deletingLastPathComponent().appendingPathComponent("offline-sync")
        guard FileManager.default.isExecutableFile(atPath: sibling.path) else {
            throw ValidationError("'offline-sync' is not built beside \(running.path): run `swift build --product offline-sync`")
        }
        return sibling
    }

    /// Starts the server over `data` with `secret` as its token secret (and `serve`'s
    /// `extraArguments`, such as `--rules FILE`, and `environment` added to this process's,
    /// such as `OFFLINE_SYNC_ADMIN_KEY`) and waits for its "listening on" line. Throws when
    /// the server exits before it listens.
    ///
    /// With `cpus` (a `taskset` CPU list such as `0`), the server runs pinned to those CPUs
    /// (Linux's `/usr/bin/taskset`; where there is none, the start throws).
    package static func start(data: URL, secret: String, extraArguments: [String] = [],
                              environment extra: [String: String] = [:], cpus: String? = nil) throws -> ServerProcess {
        let arguments = ["serve", "--port", "0", "--data", data.path, "--log-level", "warning"] + extraArguments
        var environment = ProcessInfo.processInfo.environment
        environment["OFFLINE_SYNC_TOKEN_SECRET"] = secret
        environment["OFFLINE_SYNC_STORE"] = nil
        environment.merge(extra) { $1 }
        let process: ChildProcess
        if let cpus {
            // taskset execs the tool in its own process, so the pid is the server's.
            process = try ChildProcess(executable: "/usr/bin/taskset", arguments: ["-c", cpus, try toolExecutable().path] + arguments,
                                       environment: environment, standardOutput: .pipe)
        } else {
            process = try ChildProcess(executable: try toolExecutable().path, arguments: arguments, environment: environment,
                                       standardOutput: .pipe)
        }
        var line: [UInt8] = []
        guard let handle = process.standardOutput else { throw ValidationError("the server's output is not a pipe") }
        while true {
            let byte = handle.readData(ofLength: 1)
            guard let first = byte.first else {
                process.waitUntilExit()
                throw ValidationError("the server exited (status \(process.terminationStatus)) before it was listening")
            }
            if first != UInt8(ascii: "\n") { line.append(first); continue }
            let text = String(decoding: line, as: UTF8.self)
            line.removeAll()
            if let range = text.range(of: "listening on ") {
                let url = text[range.upperBound...].split(separator: " ").first.map(String.init) ?? ""
                // Keep draining the server's output so it never blocks on a full pipe.
                handle.readabilityHandler = { _ = $0.availableData }
                return ServerProcess(process: process, baseURL: url)
            }
        }
    }

    /// The server's peak resident memory so far (`VmHWM` in `/proc/<pid>/status`), in
    /// bytes; `nil` where there is no such file.
    package func peakRSSBytes() -> Int? { Self.statusBytes("VmHWM:", of: process.processIdentifier) }

    /// The resident memory of process `pid` now, from `/proc` (`nil` where there is none).
    package static func residentBytes(of pid: Int32) -> Int? { statusBytes("VmRSS:", of: pid) }

    /// A size line of `/proc/<pid>/status`, in bytes.
    private static func statusBytes(_ field: String, of pid: Int32) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix(field) }),
              let kilobytes = line.split(separator: " ").compactMap({ Int($0) }).first else { return nil }
        return kilobytes * 1024
    }

    /// Sends SIGTERM and waits for the exit status.
    package func stop() -> Int32 {
        process.terminate()
        return process.terminationStatus
    }
}
