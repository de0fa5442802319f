import Foundation
import OfflineSync

/// Makes a SigV4-signed request that changes something run once while its date is valid.
///
/// A replay of the same bytes (captured on the wire, or an SDK's retry that reused the
/// signing second) gets the first run's answer instead of running again. The ledger lives in
/// the server's store (`__cs_signatures`), so every instance sharing that store agrees. A
/// claim left running for longer than `abandonAfter` (its server died) may be taken over.
/// Signatures older than `window` (at least twice the clock skew a date may have) are
/// forgotten a few at a time: by then the date check refuses the request anyway.
final class SignedRequestLedger: Sendable {
    /// What ``claim(_:window:abandonAfter:)`` found for a signature.
    enum Claim: Sendable, Equatable {
        /// The first time: run the request, then ``complete(_:answer:)`` (or ``release(_:)``
        /// when it failed).
        case claimed
        /// The request ran and succeeded already: these are its answer's bytes.
        case answered([UInt8])
        /// The same request is running now.
        case inProgress
    }

    /// `__cs_signatures`: one row per signature claimed, keyed by the signature.
    struct SignatureRow: StoredRow {
        static let table = "__cs_signatures"
        enum CodingKeys: String, CodingKey { case id, at, answer }

        var id: String
        /// When the request was claimed.
        var at: Timestamp
        /// The answer's bytes, once the request succeeded.
        var answer: Data?

        static let schema = TableSchema(table, fields: [column(.at, .date, indexed: true), column(.answer, .bytes)],
                                        undeclaredFields: .reject)
    }

    private let store: any LocalStore

    /// Opens the ledger in `store`, defining its table.
    init(store: any LocalStore) async throws {
        self.store = store
        try await store.defineTable(SignatureRow.schema)
    }

    /// Claims `signature` for this run; see ``Claim``.
    func claim(_ signature: String, window: Duration, abandonAfter: Duration = .seconds(30)) async throws -> Claim {
        let now = Timestamp.now()
        let cutoff = Timestamp(millisecondsSince1970: now.millisecondsSince1970 - window.components.seconds * 1000)
        let stale = now.millisecondsSince1970 - abandonAfter.components.seconds * 1000
        return try await store.write { txn in
            if let row = try SignatureRow.find(txn, id: signature) {
                if let answer = row.answer { return .answered(Array(answer)) }
                if row.at.millisecondsSince1970 > stale { return .inProgress }
            }
            try SignatureRow(id: signature, at: now).save(txn)
            for old in try txn.records(in: SignatureRow.table, matching: Query(SignatureRow.field(.at) < .date(cutoff), limit: 16)) {
                try SignatureRow.delete(txn, id: old.id)
            }
            return .claimed
        }
    }

    /// Keeps the answer of a claimed request that succeeded, for its replays.
    func complete(_ signature: String, answer: [UInt8]) async throws {
        try await store.write { txn in
            guard var row = try SignatureRow.find(txn, id: signature) else { return }
            row.answer = Data(answer)
            try row.save(txn)
        }
    }

    /// Forgets a claimed signature whose request failed, so the same bytes may run again
    /// (an error is not replayed: the server's data may have moved on since).
    func release(_ signature: String) async throws {
        try await store.write { txn in _ = try SignatureRow.delete(txn, id: signature) }
    }
}
