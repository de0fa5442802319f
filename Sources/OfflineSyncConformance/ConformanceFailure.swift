/// One failed expectation of the conformance suite: which group and case, what went wrong,
/// and where in the suite's source the expectation is.
///
/// Messages name tables, fields, ids and values the suite itself wrote (never secrets).
public struct ConformanceFailure: Error, Sendable, CustomStringConvertible {
    /// The group the case belongs to (a ``LocalStoreConformance/Group`` raw value).
    public let group: String
    /// The case within the group.
    public let testCase: String
    /// What the store did wrong.
    public let message: String
    /// The suite source file of the failed expectation (`#fileID`), or `""` when unknown.
    public let file: String
    /// The line of the failed expectation, or `0` when unknown.
    public let line: Int

    /// Creates a failure.
    public init(group: String, testCase: String, message: String, file: String, line: Int) {
        self.group = group
        self.testCase = testCase
        self.message = message
        self.file = file
        self.line = line
    }

    /// A failure raised inside a case; the runner fills in group and case.
    init(_ message: String, file: String, line: Int) {
        self.init(group: "", testCase: "", message: message, file: file, line: line)
    }

    /// The same failure, attributed to a group and case.
    func located(group: String, testCase: String) -> ConformanceFailure {
        ConformanceFailure(group: group, testCase: testCase, message: message, file: file, line: line)
    }

    /// `group/case: message (file:line)`.
    public var description: String {
        let location = file.isEmpty ? "" : " (\(file):\(line))"
        return "\(group)/\(testCase): \(message)\(location)"
    }
}

/// Every failed case of a group (or of the whole suite), thrown by the per-group entries
/// such as ``LocalStoreConformance/crud()`` and by ``LocalStoreConformance/all()``.
public struct ConformanceFailures: Error, Sendable, CustomStringConvertible {
    /// The failures, in the order the cases ran. Never empty.
    public let failures: [ConformanceFailure]

    /// Wraps a non-empty list of failures.
    public init(_ failures: [ConformanceFailure]) {
        precondition(!failures.isEmpty, "ConformanceFailures needs at least one failure")
        self.failures = failures
    }

    /// One line per failure, after a count.
    public var description: String {
        let header = failures.count == 1 ? "1 conformance case failed:" : "\(failures.count) conformance cases failed:"
        return ([header] + failures.map { "  - \($0)" }).joined(separator: "\n")
    }
}

/// The outcome of one conformance case.
public struct ConformanceCaseResult: Sendable, CustomStringConvertible {
    /// The group (a ``LocalStoreConformance/Group`` raw value).
    public let group: String
    /// The case name, unique within its group.
    public let name: String
    /// Why the case failed, or `nil`.
    public let failure: ConformanceFailure?
    /// Why the case did not run (the store lacks a capability it needs), or `nil` if it ran.
    public let skipReason: String?

    /// Creates a result.
    public init(group: String, name: String, failure: ConformanceFailure?, skipReason: String? = nil) {
        self.group = group
        self.name = name
        self.failure = failure
        self.skipReason = skipReason
    }

    /// The case ran and every expectation held.
    public var passed: Bool { failure == nil && skipReason == nil }
    /// The case did not run (see ``skipReason``).
    public var skipped: Bool { skipReason != nil }

    /// `PASS group/case`, `SKIP group/case (reason)` or `FAIL group/case: message (file:line)`.
    public var description: String {
        if let failure { return "FAIL \(failure)" }
        if let skipReason { return "SKIP \(group)/\(name) (\(skipReason))" }
        return "PASS \(group)/\(name)"
    }
}
