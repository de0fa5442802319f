import Foundation
import OfflineSyncCommandSupport
import OfflineSyncTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

@Suite("Child processes: spawned without Foundation's Process")
struct ChildProcessTests {
    /// Runs `executable` with its output piped and returns the whole output, after the exit.
    private func output(of executable: String, _ arguments: [String]) async throws -> (String, ChildProcess) {
        let child = try ChildProcess(executable: executable, arguments: arguments, standardOutput: .pipe)
        let data = try await offThePool { child.standardOutput?.readDataToEndOfFile() ?? Data() }
        try await offThePool { child.waitUntilExit() }
        return (String(decoding: data, as: UTF8.self), child)
    }

    @Test("an exit status is the child's; a signal's end is told apart; a missing executable throws")
    func statuses() async throws {
        let (_, exited) = try await output(of: "/bin/sh", ["-c", "exit 3"])
        #expect(exited.terminationStatus == 3)
        #expect(!exited.exitedBySignal)
        #expect(!exited.isRunning)

        let sleeper = try ChildProcess(executable: "/bin/sleep", arguments: ["60"])
        #expect(sleeper.isRunning)
        sleeper.signal(SIGKILL)
        try await offThePool { sleeper.waitUntilExit() }
        #expect(sleeper.exitedBySignal)
        #expect(sleeper.terminationStatus == SIGKILL)
        // Reaped: signalling again reaches nobody (the pid may be another process's by now).
        sleeper.signal(SIGKILL)

        #expect(throws: POSIXError.self) {
            _ = try ChildProcess(executable: "/nonexistent/tool", arguments: [])
        }
    }

    @Test("the child inherits no descriptor but its standard three, no blocked or ignored signal, and exactly the environment given")
    func cleanStart() async throws {
        try await withTemporaryDirectory { directory in
            // A descriptor this process leaves open across exec.
            let path = directory.appendingPathComponent("held").path
            #expect(FileManager.default.createFile(atPath: path, contents: Data("x".utf8)))
            let held = open(path, O_RDONLY)
            #expect(held > 3)
            defer { close(held) }

            // `ls` opens the directory it lists as descriptor 3.
            let (listing, _) = try await output(of: "/bin/ls", ["/proc/self/fd"])
            let descriptors = Set(listing.split(separator: "\n").map(String.init))
            #expect(descriptors.isSubset(of: ["0", "1", "2", "3"]), "inherited: \(descriptors.sorted())")

            let (status, _) = try await output(of: "/bin/cat", ["/proc/self/status"])
            // Signals 1–31, as bits of /proc's hexadecimal masks (glibc keeps 32 and 33 for itself).
            func standardSignals(_ field: String) -> UInt64? {
                status.split(separator: "\n").first { $0.hasPrefix(field) }
                    .flatMap { UInt64($0.dropFirst(field.count).trimmingCharacters(in: .whitespaces), radix: 16) }
                    .map { $0 & 0x7fff_ffff }
            }
            #expect(standardSignals("SigBlk:") == 0)
            #expect(standardSignals("SigIgn:") == 0)

            let child = try ChildProcess(executable: "/usr/bin/env", arguments: [], environment: ["ONLY": "this one"],
                                         standardOutput: .pipe)
            let environment = try await offThePool { child.standardOutput?.readDataToEndOfFile() ?? Data() }
            #expect(String(decoding: environment, as: UTF8.self) == "ONLY=this one\n")
            #expect(try await offThePool { child.terminationStatus } == 0)
        }
    }

    @Test("a line written to the child's standard input comes back on its output; standard error can join it")
    func pipes() async throws {
        let child = try ChildProcess(executable: "/bin/sh", arguments: ["-c", "read line; echo \"got $line\"; echo oops >&2"],
                                     standardInput: .pipe, standardOutput: .pipe, mergeStandardError: true)
        child.standardInput?.write(Data("hello\n".utf8))
        let data = try await offThePool { child.standardOutput?.readDataToEndOfFile() ?? Data() }
        #expect(String(decoding: data, as: UTF8.self) == "got hello\noops\n")
        #expect(try await offThePool { child.terminationStatus } == 0)
    }

    @Test("several threads may wait for one child at once; each sees the same status")
    func concurrentWaits() async throws {
        let child = try ChildProcess(executable: "/bin/sh", arguments: ["-c", "sleep 0.2; exit 7"])
        let statuses = try await withThrowingTaskGroup(of: Int32.self) { group in
            for _ in 0..<4 { group.addTask { try await offThePool { child.terminationStatus } } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(statuses == [7, 7, 7, 7])
    }
}
