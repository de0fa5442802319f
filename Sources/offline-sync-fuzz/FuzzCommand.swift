import Foundation
import OfflineSyncFuzzing

/// `offline-sync-fuzz`: the parsers' fuzz targets (``FuzzTarget``).
///
/// Built normally (as `make test` builds it) it replays inputs: `offline-sync-fuzz replay
/// TARGET PATH…` feeds each file (each file of each directory) to the target and exits 1 if
/// any breaks a promise. Built by `make fuzz` (`-sanitize=fuzzer,address -DFUZZING`) it is
/// libFuzzer: `offline-sync-fuzz TARGET [libFuzzer options] CORPUS…`. Both list the targets
/// with `offline-sync-fuzz list`.
@main
struct FuzzCommand {
    static func main() {
        var arguments = CommandLine.arguments
        let program = arguments.removeFirst()
        guard let command = arguments.first else { usage(program) }
        if command == "list" {
            for target in FuzzTarget.all { print("\(target.name)\t\(target.summary)") }
            exit(0)
        }
        if command == "seeds", arguments.count == 2 {
            writeSeeds(into: arguments[1])
        }
        #if FUZZING
        guard let target = FuzzTarget.named(command) else { usage(program) }
        fuzz(target, program: program, options: Array(arguments.dropFirst()))
        #else
        guard command == "replay", arguments.count >= 3, let target = FuzzTarget.named(arguments[1]) else { usage(program) }
        var failures = 0
        var inputs = 0
        for path in arguments.dropFirst(2) {
            for file in files(at: path) {
                inputs += 1
                guard let data = FileManager.default.contents(atPath: file) else {
                    print("cannot read \(file)")
                    failures += 1
                    continue
                }
                if let finding = run(target, [UInt8](data)) {
                    print("\(file): \(finding)")
                    failures += 1
                }
            }
        }
        print("\(target.name): \(inputs) inputs, \(failures) failing")
        exit(failures == 0 ? 0 : 1)
        #endif
    }

    static func usage(_ program: String) -> Never {
        #if FUZZING
        print("usage: \(program) list | seeds DIR | TARGET [libFuzzer options] [CORPUS…]")
        #else
        print("usage: \(program) list | seeds DIR | replay TARGET PATH…")
        #endif
        exit(2)
    }

    /// Writes ``FuzzSeeds`` into `directory`/TARGET/NAME and exits.
    static func writeSeeds(into directory: String) -> Never {
        let done = DispatchSemaphore(value: 0)
        let outcome = SeedsOutcome()
        Task {
            do {
                for seed in try await FuzzSeeds.all() {
                    let folder = directory + "/" + seed.target
                    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
                    try Data(seed.bytes).write(to: URL(fileURLWithPath: folder + "/" + seed.name))
                    outcome.written += 1
                }
            } catch {
                outcome.failure = "\(error)"
            }
            done.signal()
        }
        done.wait()
        if let failure = outcome.failure {
            print("cannot write the seeds: \(failure)")
            exit(1)
        }
        print("\(outcome.written) seeds written under \(directory)")
        exit(0)
    }

    /// `path` itself, or the regular files directly inside it, sorted.
    static func files(at path: String) -> [String] {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue else { return [path] }
        let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
        return names.filter { !$0.hasPrefix(".") }.sorted().map { path + "/" + $0 }
    }
}

/// Where a target's answer crosses from its task to the thread that waits for it.
private final class Outcome: @unchecked Sendable {
    var finding: FuzzFinding?
}

private final class SeedsOutcome: @unchecked Sendable {
    var written = 0
    var failure: String?
}

/// Runs `target` on `input` and waits for it: libFuzzer's callback is synchronous, and the
/// stores open asynchronously. The caller's thread is never one of the concurrency pool's.
func run(_ target: FuzzTarget, _ input: [UInt8]) -> FuzzFinding? {
    let done = DispatchSemaphore(value: 0)
    let outcome = Outcome()
    Task {
        do throws(FuzzFinding) { try await target.run(input) } catch { outcome.finding = error }
        done.signal()
    }
    done.wait()
    return outcome.finding
}

#if FUZZING
/// libFuzzer's driver (compiler-rt's FuzzerInterface.h): parses the options, then calls
/// `callback` with each input.
@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(_ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
                         _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt) -> CInt

/// libFuzzer's own `main` is linked in too and calls this symbol; it is never run, since the
/// executable's `main` is ``FuzzCommand``, but it must exist.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt { fuzzCallback(data, size) }

/// The target the driver feeds; set once, before the driver starts.
nonisolated(unsafe) private var selected: FuzzTarget?

private func fuzzCallback(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let target = selected else { return 0 }
    let input = size == 0 ? [] : Array(UnsafeBufferPointer(start: data, count: size))
    if let finding = run(target, input) {
        FileHandle.standardError.write(Data("offline-sync-fuzz \(target.name): \(finding)\n".utf8))
        abort()
    }
    return 0
}

/// Hands the process to libFuzzer with `options` (its flags and corpus directories).
func fuzz(_ target: FuzzTarget, program: String, options: [String]) -> Never {
    selected = target
    var arguments = ([program] + options).map { strdup($0) }
    arguments.append(nil)
    var argc = CInt(options.count + 1)
    let status = arguments.withUnsafeMutableBufferPointer { buffer in
        var argv = buffer.baseAddress!
        return LLVMFuzzerRunDriver(&argc, &argv, { fuzzCallback($0, $1) })
    }
    exit(status)
}
#endif
