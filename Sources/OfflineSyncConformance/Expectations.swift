import OfflineSync

// Small assertion helpers. Each throws a ConformanceFailure carrying the caller's
// #fileID and #line; the runner adds the group and case names.

/// A failure at the caller's location.
func failure(_ message: String, file: String = #fileID, line: Int = #line) -> ConformanceFailure {
    ConformanceFailure(message, file: file, line: line)
}

/// Fails unless `condition` holds.
func expect(_ condition: Bool, _ message: @autoclosure () -> String,
            file: String = #fileID, line: Int = #line) throws {
    if !condition { throw ConformanceFailure(message(), file: file, line: line) }
}

/// Fails unless `actual == expected`.
func expectEqual<T: Equatable>(_ actual: T, _ expected: T, _ what: @autoclosure () -> String,
                               file: String = #fileID, line: Int = #line) throws {
    if actual != expected {
        throw ConformanceFailure("\(what()): expected \(expected), got \(actual)", file: file, line: line)
    }
}

/// Fails unless `actual` is exactly `expected` (ids, field names and values byte for byte).
func expectRecord(_ actual: Record?, _ expected: Record, _ what: @autoclosure () -> String,
                  file: String = #fileID, line: Int = #line) throws {
    guard let actual else {
        throw ConformanceFailure("\(what()): record '\(Render.string(expected.id))' is missing", file: file, line: line)
    }
    if let difference = Render.difference(expected, actual) {
        throw ConformanceFailure("\(what()): \(difference)", file: file, line: line)
    }
}

/// Fails unless `actual` holds exactly the `expected` records in the same order, naming the
/// first differing position.
func expectRecords(_ actual: [Record], _ expected: [Record], _ what: @autoclosure () -> String,
                   file: String = #fileID, line: Int = #line) throws {
    if let difference = Render.difference(expected, actual) {
        throw ConformanceFailure("\(what()): \(difference)", file: file, line: line)
    }
}

/// Runs `body` and rethrows a non-failure error as a failure at the caller's location.
@discardableResult
func must<T>(_ body: @autoclosure () async throws -> T, _ what: @autoclosure () -> String,
             file: String = #fileID, line: Int = #line) async throws -> T {
    do {
        return try await body()
    } catch let failure as ConformanceFailure {
        throw failure
    } catch {
        throw ConformanceFailure("\(what()): unexpected error \(describe(error))", file: file, line: line)
    }
}

/// Fails unless `body` throws a ``SyncError`` with this code.
func expectThrows<T>(_ code: SyncError.Code, _ what: @autoclosure () -> String,
                     file: String = #fileID, line: Int = #line,
                     _ body: () async throws -> T) async throws {
    try await expectThrows(anyOf: [code], what(), file: file, line: line, body)
}

/// Fails unless `body` throws a ``SyncError`` with one of these codes; returns that error.
@discardableResult
func expectThrows<T>(anyOf codes: Set<SyncError.Code>, _ what: @autoclosure () -> String,
                     file: String = #fileID, line: Int = #line,
                     _ body: () async throws -> T) async throws -> SyncError {
    let expected = codes.map(\.description).sorted().joined(separator: " or ")
    do {
        _ = try await body()
    } catch let failure as ConformanceFailure {
        throw failure
    } catch let error as SyncError {
        if codes.contains(error.code) { return error }
        throw ConformanceFailure("\(what()): expected SyncError \(expected), got \(describe(error))", file: file, line: line)
    } catch {
        throw ConformanceFailure("\(what()): expected SyncError \(expected), got \(describe(error))", file: file, line: line)
    }
    throw ConformanceFailure("\(what()): expected SyncError \(expected), but nothing was thrown", file: file, line: line)
}

/// Runs `body`; returns its result, or `nil` when it threw ``SyncError/Code/invalidName``.
/// Any other error is a failure: a name is either usable or refused as invalid.
func acceptedOrInvalidName<T>(_ what: @autoclosure () -> String, file: String = #fileID, line: Int = #line,
                              _ body: () async throws -> T) async throws -> T? {
    do {
        return try await body()
    } catch let failure as ConformanceFailure {
        throw failure
    } catch let error as SyncError where error.code == .invalidName {
        return nil
    } catch {
        throw ConformanceFailure("\(what()): expected success or SyncError invalidName, got \(describe(error))", file: file, line: line)
    }
}

/// A one-line description of an error, with its code when it is a ``SyncError``.
func describe(_ error: any Error) -> String {
    if let error = error as? SyncError { return "SyncError \(error.code) (\(error.message))" }
    return "\(type(of: error)) (\(error))"
}

/// An error the suite throws from transaction bodies to force a rollback.
struct IntentionalRollback: Error, Equatable {
    let marker: Int
}
