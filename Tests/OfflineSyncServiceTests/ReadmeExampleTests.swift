import Foundation
import OfflineSyncTestSupport
import Testing

@Suite("README")
struct ReadmeExampleTests {
    /// The README's example block between these markers is ReadmeExample.swift, byte for byte.
    static let begin = "<!-- example: Tests/OfflineSyncServiceTests/ReadmeExample.swift -->\n```swift\n"
    static let end = "```\n<!-- example end -->"

    @Test("the README's example is ReadmeExample.swift, which this target compiles, and it runs")
    func exampleCompilesAndRuns() async throws {
        let here = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        let source = try String(contentsOf: here.appendingPathComponent("ReadmeExample.swift"), encoding: .utf8)
        let readme = try String(contentsOf: here.appendingPathComponent("../../README.md").standardized, encoding: .utf8)
        let start = try #require(readme.range(of: Self.begin), "the README has the example's opening marker")
        let stop = try #require(readme.range(of: Self.end, range: start.upperBound..<readme.endIndex), "and its closing marker")
        #expect(String(readme[start.upperBound..<stop.lowerBound]) == source, "the README shows ReadmeExample.swift as it is")

        let shown = try await withTemporaryDirectory { try await readmeExample(in: $0) }
        #expect(shown.map(\.title) == ["Buy oat milk", "Call mum"])
        #expect(shown.allSatisfy { $0.version != nil }, "pulled models carry the server's version")
    }
}
