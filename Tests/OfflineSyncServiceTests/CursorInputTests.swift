import Foundation
import OfflineSync
import OfflineSyncService
import OfflineSyncSQLite
import OfflineSyncTestSupport
import Testing

/// A pull's cursor is client input. Whatever it holds, a cursor this service did not write
/// is `invalidCursor`: never a trap that takes the server down with every other caller.
@Suite("Pull cursors from clients")
struct CursorInputTests {
    @Test("a sweep cursor whose group is not lowercase hex is an invalid cursor, whatever characters stand in it")
    func groupThatIsNotHex() async throws {
        try await withTemporaryDirectory { directory in
            let store = try await SQLiteStore(path: directory.appendingPathComponent("server.sqlite").path)
            let service = try await OfflineSyncService(store: store, rules: sharedListsRules(ownerReadsMembers: false), groupFanoutLimit: 1)
            let first = try await service.pull(identity: "bob", PullRequest(table: "todos"))
            let epoch = try #require(first.nextCursor.split(separator: ":").first)
            // A wide character where two digits should be made the hex reader step past the
            // end of the text and trap (found by the change-notice fuzz target, which reads
            // group keys the same way).
            // Hex that spells no group the service names is refused as well.
            for group in ["604c\u{51C}", "\u{1F600}", "+f", "ABCD", "zz", "6", "6g", OfflineSyncService.hex("g\u{0}\u{E9}"),
                          OfflineSyncService.hex("m12:list_members"), OfflineSyncService.hex("q12:list_memberssL")] {
                let error = await #expect(throws: SyncError.self, "\(group)") {
                    _ = try await service.pull(identity: "bob", PullRequest(table: "todos", cursor: "\(epoch):v:5:3:\(group)"))
                }
                #expect(error?.code == .invalidCursor, "\(group)")
            }
            // The form the service writes still reads.
            _ = try await service.pull(identity: "bob", PullRequest(table: "todos", cursor: "\(epoch):v:5:3:" + OfflineSyncService.hex("m12:list_memberssL")))
            try await store.close()
        }
    }
}
