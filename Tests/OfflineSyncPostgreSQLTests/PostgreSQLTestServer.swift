import Foundation
import Testing

/// The test server: `OFFLINE_SYNC_TEST_POSTGRES_URL` (set by `Scripts/with-postgres.sh`).
enum TestServer {
    /// The server URL, or `nil` when unset.
    static let url: String? = {
        let value = ProcessInfo.processInfo.environment["OFFLINE_SYNC_TEST_POSTGRES_URL"] ?? ""
        return value.isEmpty ? nil : value
    }()

    /// Whether the CI environment variable is set: then a missing server fails the tests.
    static let isCI: Bool = !(ProcessInfo.processInfo.environment["CI"] ?? "").isEmpty

    /// Tests run when a server is configured, or on CI (where they fail without one).
    static let shouldRun = url != nil || isCI

    /// The trait that skips a suite, with a clear message, when no server is configured.
    static let skipMessage: Comment = "OFFLINE_SYNC_TEST_POSTGRES_URL is not set: PostgreSQL tests skipped (run them with Scripts/with-postgres.sh swift test)"

    /// The server URL; records an issue (failing the test) when it is missing.
    static func require() -> String? {
        if let url { return url }
        Issue.record("OFFLINE_SYNC_TEST_POSTGRES_URL is not set but CI is: the PostgreSQL tests need a server (Scripts/with-postgres.sh)")
        return nil
    }

    /// The run's id (`OFFLINE_SYNC_TEST_RUN`, set by `Scripts/with-postgres.sh`, which drops
    /// the run's `osync_test_<run>_*` schemas afterwards), or `local`.
    static let run: String = {
        let value = ProcessInfo.processInfo.environment["OFFLINE_SYNC_TEST_RUN"] ?? ""
        return value.isEmpty || value.utf8.count > 16 || !value.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) })
            ? "local" : value
    }()

    /// A schema name unique to a directory (or any string), under the run's prefix.
    static func schema(for key: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in key.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        return "osync_test_\(run)_" + String(hash, radix: 16)
    }

    /// The server URL with its password replaced.
    static func withPassword(_ url: String, _ password: String) -> String {
        guard let start = url.range(of: "://"), let at = url.range(of: "@", range: start.upperBound..<url.endIndex),
              let colon = url.range(of: ":", range: start.upperBound..<at.lowerBound) else { return url }
        return String(url[..<colon.upperBound]) + password + String(url[at.lowerBound...])
    }

    /// The server URL with its port replaced.
    static func withPort(_ url: String, _ port: Int) -> String {
        guard let start = url.range(of: "://"), let at = url.range(of: "@", range: start.upperBound..<url.endIndex),
              let slash = url.range(of: "/", range: at.upperBound..<url.endIndex),
              let colon = url.range(of: ":", range: at.upperBound..<slash.lowerBound) else { return url }
        return String(url[..<colon.upperBound]) + String(port) + String(url[slash.lowerBound...])
    }

    /// The password of the server URL.
    static func password(_ url: String) -> String {
        guard let start = url.range(of: "://"), let at = url.range(of: "@", range: start.upperBound..<url.endIndex),
              let colon = url.range(of: ":", range: start.upperBound..<at.lowerBound) else { return "" }
        return String(url[colon.upperBound..<at.lowerBound])
    }
}
