import Foundation
import OfflineSync
import OfflineSyncCommandSupport
#if canImport(Glibc)
import Glibc
#endif

/// The built executable `name` beside the test bundle (`swift build --build-tests` builds
/// every product); throws `notFound` when it is missing.
package func builtExecutable(_ name: String) throws -> URL {
    let url = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent(name)
    guard FileManager.default.isExecutableFile(atPath: url.path) else {
        throw SyncError(.notFound, "\(url.path) is missing: build it first (swift build --build-tests)")
    }
    return url
}

/// `offline-sync-harness <arguments>` in a child process: its standard output is collected
/// line by line on a thread of its own, and a line can be sent to its standard input.
package final class HarnessChild: Sendable {
    package let process: ChildProcess
    private let collected = Box<(lines: [String], ended: Bool)>(([], false))

    package init(_ arguments: [String]) throws {
        process = try ChildProcess(executable: try builtExecutable("offline-sync-harness").path, arguments: arguments,
                                   standardInput: .pipe, standardOutput: .pipe)
        guard let handle = process.standardOutput else { throw SyncError(.transient, "the harness's output is not a pipe") }
        let thread = Thread { [collected] in
            var line: [UInt8] = []
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                for byte in chunk {
                    if byte == UInt8(ascii: "\n") {
                        let text = String(decoding: line, as: UTF8.self)
                        collected.withLock { $0.lines.append(text) }
                        line.removeAll()
                    } else {
                        line.append(byte)
                    }
                }
            }
            collected.withLock { $0.ended = true }
        }
        thread.start()
    }

    /// Every line printed so far.
    package var lines: [String] { collected.value.lines }

    /// Whether standard output has ended (the process exited or was killed).
    package var ended: Bool { collected.value.ended }

    /// Sends one line to the child's standard input.
    package func send(_ line: String) {
        process.standardInput?.write(Data((line + "\n").utf8))
    }

    /// Kills the child with SIGKILL and waits for it to be gone and for every line it printed
    /// before it died to be read (at most 10 s for those: the pipe ends once the process is
    /// gone), so ``lines`` then holds all of them.
    package func kill() {
        process.signal(SIGKILL)
        process.waitUntilExit()
        let deadline = ContinuousClock.now + .seconds(10)
        while !ended, ContinuousClock.now < deadline { usleep(1_000) }
    }

    deinit {
        if process.isRunning { kill() }
    }
}
