import Foundation
import OfflineSyncTestSupport
import Testing

@Suite("README")
struct ReadmeExampleTests {
    @Test("the README's example is ReadmeExample.swift, which this target compiles, and it runs")
    func exampleCompilesAndRuns() async throws {
        let example = try DocumentExample(in: "README.md", showing: "Tests/OfflineSyncServiceTests/ReadmeExample.swift")
        #expect(example.shown == example.source, "the README shows ReadmeExample.swift as it is")

        let shown = try await withTemporaryDirectory { try await readmeExample(in: $0) }
        #expect(shown.map(\.title) == ["Buy oat milk", "Call mum"])
        #expect(shown.allSatisfy { $0.version != nil }, "pulled models carry the server's version")
    }
}
