import Foundation
import OfflineSync
@testable import OfflineSyncServer
import OfflineSyncSQLite
import OfflineSyncTestSupport
import Testing

/// The ledger that runs a SigV4-signed change once, over a SQLite file shared by two
/// ledgers, as two server instances share their store.
@Suite("SignedRequestLedger: a signed change runs once")
struct SignedRequestLedgerTests {
    static func withLedgers<T>(_ body: (SignedRequestLedger, SignedRequestLedger, SQLiteStore) async throws -> T) async throws -> T {
        try await withTemporaryDirectory { directory in
            let store = try await SQLiteStore(path: directory.appendingPathComponent("server.sqlite").path)
            return try await withClosing(store) { store in
                try await body(try await SignedRequestLedger(store: store), try await SignedRequestLedger(store: store), store)
            }
        }
    }

    @Test("the first claim runs; while it runs a replay waits; once complete a replay gets the first answer")
    func claimThenReplay() async throws {
        try await Self.withLedgers { first, second, _ in
            #expect(try await first.claim("sig-1", window: .seconds(900)) == .claimed)
            #expect(try await second.claim("sig-1", window: .seconds(900)) == .inProgress)
            try await first.complete("sig-1", answer: Array("{\"Records\":[]}".utf8))
            #expect(try await second.claim("sig-1", window: .seconds(900)) == .answered(Array("{\"Records\":[]}".utf8)))
            #expect(try await first.claim("sig-2", window: .seconds(900)) == .claimed, "another signature is another request")
        }
    }

    @Test("a released claim (the request failed) may run again; an abandoned one is taken over")
    func releaseAndTakeOver() async throws {
        try await Self.withLedgers { first, second, _ in
            #expect(try await first.claim("sig-1", window: .seconds(900)) == .claimed)
            try await first.release("sig-1")
            #expect(try await second.claim("sig-1", window: .seconds(900)) == .claimed)
            // Its server died while running it: after `abandonAfter` another instance takes it over.
            #expect(try await first.claim("sig-1", window: .seconds(900), abandonAfter: .zero) == .claimed)
        }
    }

    @Test("signatures older than the window are forgotten as new claims are made")
    func forgetsOldSignatures() async throws {
        try await Self.withLedgers { ledger, _, store in
            let old = Timestamp(millisecondsSince1970: Timestamp.now().millisecondsSince1970 - 3_600_000)
            try await store.write { txn in
                for n in 0..<20 {
                    try txn.upsert(Record(id: "old-\(n)", fields: ["at": .date(old), "answer": .bytes([1])]), in: SignedRequestLedger.SignatureRow.table)
                }
            }
            #expect(try await ledger.claim("new", window: .seconds(900)) == .claimed)
            let left = try await store.read { txn in try txn.records(in: SignedRequestLedger.SignatureRow.table, matching: Query()).count }
            #expect(left == 20 - 16 + 1, "one claim forgets at most 16 old signatures")
            #expect(try await ledger.claim("newer", window: .seconds(900)) == .claimed)
            let remaining = try await store.read { txn in try txn.records(in: SignedRequestLedger.SignatureRow.table, matching: Query()).map(\.id) }
            #expect(Set(remaining) == ["new", "newer"])
        }
    }
}
