import Foundation
import OfflineSync
import OfflineSyncConformance
import OfflineSyncServer
import OfflineSyncService
import OfflineSyncTestSupport
import Testing

@Suite("Sync rules documents: the YAML language, and refusals that name the line")
struct SyncRulesYAMLTests {
    static let sharedLists = """
    version: 1
    memberships:
      list_members:
        table: list_members
        member: user_id
        group: list_id
        role: role
    tables:
      lists:
        read:
          - owner
          - member: list_members
            key: id
        write:
          - owner
          - member: list_members
            key: id
            roles: [editor]
            ops: [update]
      todos:
        read:
          - member: list_members
            key: list_id
        write:
          - member: list_members
            key: list_id
      list_members:
        read:
          - member: list_members
            key: list_id
          - identity: user_id
        write:
          - owner_of: lists
            key: list_id
      announcements:
        read: everyone
        write:
          - everyone: true
            when: { roles: admin }
    """

    @Test("a document with every kind of grant reads as the Swift value it spells")
    func readsEveryGrant() throws {
        let rules = try SyncRules(yaml: Self.sharedLists)
        #expect(rules.defaultAccess == .owner)
        #expect(rules.memberships["list_members"] == Membership(table: "list_members", member: "user_id", group: "list_id", role: "role"))
        #expect(rules.tables["lists"] == TableRules(
            read: [Grant(.owner), Grant(.member("list_members", key: "id", roles: nil))],
            write: [Grant(.owner), Grant(.member("list_members", key: "id", roles: ["editor"]), operations: [.update])]))
        #expect(rules.tables["list_members"]?.read[1] == Grant(.identityField("user_id")))
        #expect(rules.tables["list_members"]?.write == [Grant(.ownerOf("lists", key: "list_id"))])
        #expect(rules.tables["announcements"] == TableRules(
            read: [Grant(.everyone)], write: [Grant(.everyone, when: [Condition(claim: "roles", values: ["admin"])])]))
        #expect(rules.tables["lists"]?.isOwnerOnly == false)
        #expect(rules.rules(for: "notes") == .ownerOnly)
        #expect(rules.problems().isEmpty)
    }

    @Test("default: deny leaves unnamed tables with no rules at all")
    func denyByDefault() throws {
        let rules = try SyncRules(yaml: "version: 1\ndefault: deny\ntables:\n  notes: { read: owner, write: [] }\n")
        #expect(rules.rules(for: "other") == nil)
        #expect(rules.rules(for: "notes") == TableRules(read: [Grant(.owner)], write: []))
    }

    /// Each broken document, the line its refusal must name, and words the message must hold.
    static let broken: [(yaml: String, line: Int, words: String)] = [
        ("tables: {}\n", 1, "version: 1"),
        ("version: 2\n", 1, "version must be 1"),
        ("version: 1\ncolour: red\n", 2, "unknown key 'colour'"),
        ("version: 1\ntables:\n  todos:\n    read: [owner]\n", 3, "needs both read and write"),
        ("version: 1\ntables:\n  todos:\n    read: [owner]\n    write:\n      - sometimes\n", 6, "unknown grant 'sometimes'"),
        ("version: 1\ntables:\n  todos:\n    read:\n      - member: crew\n        key: list_id\n    write: []\n", 5,
         "membership 'crew' is not declared"),
        ("version: 1\ntables:\n  todos:\n    read:\n      - member: crew\n    write: []\n", 5, "needs a key"),
        ("version: 1\ntables:\n  todos:\n    read: [owner]\n    write:\n      - owner: true\n        ops: [upsert]\n", 7,
         "unknown operation 'upsert'"),
        ("version: 1\ntables:\n  todos:\n    read:\n      - owner: true\n        ops: [insert]\n    write: []\n", 6,
         "unknown key 'ops'"),
        ("version: 1\ntables:\n  __secret:\n    read: owner\n    write: owner\n", 3, "reserved"),
        ("version: 1\ntables:\n  todos:\n    read:\n      - identity: __owner\n    write: []\n", 5, "reserved"),
        ("version: 1\nmemberships:\n  crew:\n    table: crews\n    member: user_id\n    group: crew_id\ntables:\n  todos: {read: owner, write: owner}\n",
         3, "has no rules"),
        ("version: 1\nmemberships:\n  crew: {table: crews, member: u, group: g}\ntables:\n  crews: {read: owner, write: owner}\n  todos:\n    read:\n      - member: crew\n        key: crew_id\n        roles: [admin]\n    write: []\n",
         8, "no role field"),
        ("version: 1\ntables:\n  todos:\n    read: owner\n    write:\n      - everyone: true\n        when: { roles: [] }\n", 7,
         "at least one value"),
        ("version: 1\ntables:\n  todos:\n    read: [owner\n", 5, "not valid YAML"),
        ("version: 1\ntables:\n  todos: {read: owner, write: owner}\n  todos: {read: owner, write: owner}\n", 4, "twice"),
    ]

    @Test("an unusable document is refused with its line and its problem", arguments: broken.indices)
    func refusalsNameTheLine(index: Int) async throws {
        let (yaml, line, words) = Self.broken[index]
        let error = try #require(await syncError { _ = try SyncRules(yaml: yaml, source: "rules.yaml") })
        #expect(error.code == .invalidConfiguration)
        #expect(error.message.hasPrefix("rules.yaml:\(line): "), "\(error.message)")
        #expect(error.message.contains(words), "\(error.message)")
    }

    @Test("a rules file that cannot be read is refused with its path")
    func unreadableFile() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("missing.yaml").path
            let error = try #require(await syncError { _ = try SyncRules(contentsOfFile: path) })
            #expect(error.code == .invalidConfiguration)
            #expect(error.message.contains("missing.yaml"))
        }
    }

    @Test("every worked example in Docs/SyncRules.md is a valid rules document")
    func documentedExamplesAreValid() throws {
        let docs = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Docs/SyncRules.md")
        let text = try String(contentsOf: docs, encoding: .utf8)
        let blocks = text.components(separatedBy: "```yaml\n").dropFirst().map { $0.components(separatedBy: "```")[0] }
        let documents = blocks.filter { $0.hasPrefix("version: 1\n") && !$0.contains("<") }
        #expect(documents.count == 3)
        for (index, yaml) in documents.enumerated() {
            let rules = try SyncRules(yaml: yaml, source: "SyncRules.md example \(index + 1)")
            #expect(!rules.tables.isEmpty)
        }
    }

    @Test("the conformance suite's shared-lists document is the Swift value the in-process backends use")
    func conformanceRulesMatch() throws {
        #expect(try SyncRules(yaml: RemoteStoreConformance.sharedListsRules) == sharedListsRules(ownerReadsMembers: false))
    }
}
