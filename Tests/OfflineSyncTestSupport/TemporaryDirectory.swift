import Foundation

/// Runs `body` with a fresh, empty directory under the system's temporary directory and
/// removes it afterwards, also when `body` throws. Each call gets its own directory, so tests
/// running in parallel never see each other's files.
package func withTemporaryDirectory<T>(_ body: (URL) async throws -> T) async throws -> T {
    let url = FileManager.default.temporaryDirectory
        .appendingPathComponent("OfflineSyncTests-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: url) }
    return try await body(url)
}
