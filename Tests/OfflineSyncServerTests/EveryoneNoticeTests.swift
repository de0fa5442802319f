import Foundation
import OfflineSync
import OfflineSyncHTTP
import OfflineSyncServer
import OfflineSyncService
import OfflineSyncTestSupport
import Testing

@Suite("Server: change notices of tables everyone reads")
struct EveryoneNoticeTests {
    static let rules = """
        version: 1
        tables:
          catalogue:
            read: everyone
            write: [{ everyone: true, when: { roles: editor } }]
          staff_notes:
            read: [{ everyone: true, when: { roles: staff } }]
            write: [{ everyone: true, when: { roles: editor } }]

        """

    static func insert(_ table: String, _ id: String) -> PushOperation {
        PushOperation(id: "op-\(table)-\(id)", table: table, itemId: id, kind: .insert, item: Record(id: id, fields: ["n": 1]), baseVersion: nil)
    }

    @Test("a write to a table everyone reads reaches every identity whose claims meet the grant, and no other")
    func everyoneHearsThePublicTable() async throws {
        try await LiveServer.with(rules: try SyncRules(yaml: Self.rules)) { live in
            func remote(_ identity: String, roles: Set<String> = []) async throws -> HTTPRemoteStore {
                let token = try await live.server.tokens.mint(identity: identity, roles: roles)
                return HTTPRemoteStore(baseURL: live.baseURL, token: { token })
            }
            let bob = EventLog(try await remote("bob").changes())
            let carol = EventLog(try await remote("carol", roles: ["staff"]).changes())
            // The writer's other device hears its own write, as any reader does.
            let aliceElsewhere = EventLog(try await remote("alice", roles: ["editor"]).changes())
            for log in [bob, carol, aliceElsewhere] { #expect(await log.waitFor(.subscribed)) }

            let alice = try await remote("alice", roles: ["editor"])
            let written = try await alice.push([Self.insert("staff_notes", "s1")])
            #expect(written.first.map { if case .applied = $0.outcome { true } else { false } } == true)
            _ = try await alice.push([Self.insert("catalogue", "c1")])

            #expect(await carol.waitFor(.changed(table: "staff_notes")))
            #expect(await carol.waitFor(.changed(table: "catalogue")))
            #expect(await aliceElsewhere.waitFor(.changed(table: "catalogue")))
            // bob's claims do not meet the staff grant: up to the catalogue's notice, nothing of staff_notes.
            let before = await bob.consume(through: .changed(table: "catalogue"))
            #expect(before != nil, "bob did not hear the catalogue change")
            #expect(!(before ?? []).contains(.changed(table: "staff_notes")), "bob heard of a table he may not read: \(before ?? [])")
            // And what he heard, he can pull.
            let page = try await remote("bob").pull(PullRequest(table: "catalogue"))
            #expect(page.records.map(\.id) == ["c1"])
            for log in [bob, carol, aliceElsewhere] { await log.stop() }
        }
    }
}
