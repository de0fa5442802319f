import OfflineSync

/// One parser under fuzzing: a name `make fuzz` and the corpus directories use, what it
/// reads, and the function libFuzzer calls with each input.
///
/// `run` feeds the input to the parser the way the server, the client or a store feeds
/// it, then checks what a parser must hold whatever the input: a refusal is a typed
/// ``SyncError`` (or the token parser's refusal), never a trap or a foreign error, and what
/// it accepts survives being written out and read back unchanged. A broken promise is a
/// ``FuzzFinding``; a trap is libFuzzer's own finding.
package struct FuzzTarget: Sendable {
    /// The target's name: `[a-z0-9-]+`, also its corpus directory's name.
    package let name: String
    /// What the target feeds, for `offline-sync-fuzz list` and Docs/Reliability.md.
    package let summary: String
    /// Feeds one input. Async because the stores open asynchronously.
    package let run: @Sendable ([UInt8]) async throws(FuzzFinding) -> Void

    package init(_ name: String, _ summary: String, run: @escaping @Sendable ([UInt8]) async throws(FuzzFinding) -> Void) {
        self.name = name
        self.summary = summary
        self.run = run
    }

    /// Every target, in the order `make fuzz` runs them.
    package static let all: [FuzzTarget] = wireTargets + serverTargets + consoleTargets + storeTargets + attachmentTargets + grdbTargets

    /// The target called `name`, if there is one.
    package static func named(_ name: String) -> FuzzTarget? { all.first { $0.name == name } }
}

/// A promise a parser broke on one input: what was expected and what happened.
package struct FuzzFinding: Error, CustomStringConvertible, Sendable {
    package let description: String
    package init(_ description: String) { self.description = description }
}

/// Runs `body`, passing on a ``SyncError`` (a typed refusal, which is what bad input should
/// get) and turning any other error into a finding.
func refusing<T>(_ what: String, _ body: () throws -> T) throws(FuzzFinding) -> T? {
    do {
        return try body()
    } catch is SyncError {
        return nil
    } catch {
        throw FuzzFinding("\(what) threw \(type(of: error)), not a SyncError: \(error)")
    }
}

/// ``refusing(_:_:)`` for an async body.
func refusing<T>(_ what: String, _ body: () async throws -> T) async throws(FuzzFinding) -> T? {
    do {
        return try await body()
    } catch is SyncError {
        return nil
    } catch {
        throw FuzzFinding("\(what) threw \(type(of: error)), not a SyncError: \(error)")
    }
}

/// Throws a finding unless `condition` holds.
func expect(_ condition: Bool, _ message: @autoclosure () -> String) throws(FuzzFinding) {
    if !condition { throw FuzzFinding(message()) }
}

/// The input as text, as a server reads a header, a query string or a YAML file: invalid
/// UTF-8 is repaired (U+FFFD), as `String(decoding:as:)` does wherever bytes become text.
func text(_ input: [UInt8]) -> String { String(decoding: input, as: UTF8.self) }
