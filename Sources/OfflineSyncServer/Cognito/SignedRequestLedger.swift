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

    static let table = "__cs_signatures"
    private let store: any LocalStore

    /// Opens the ledger in `store`, defining its table.
    init(store: any LocalStore) async throws {
        self.store = store
        try await store.defineTable(TableSchema(Self.table, fields: [
            FieldDefinition("at", .date, indexed: true), FieldDefinition("answer", .bytes),
        ], undeclaredFields: .reject))
    }

    /// Claims `signature` for this run; see ``Claim``.
    func claim(_ signature: String, window: Duration, abandonAfter: Duration = .seconds(30)) async throws -> Claim {
        let now = Timestamp.now()
        let cutoff = Timestamp(millisecondsSince1970: now.millisecondsSince1970 - window.components.seconds * 1000)
        let stale = now.millisecondsSince1970 - abandonAfter.components.seconds * 1000
        return try await store.write { txn in
            if let row = try txn.record(in: Self.table, id: signature) {
                if case .bytes(let answer) = row["answer"] { return .answered(answer) }
                if let at = row["at"].dateValue, at.millisecondsSince1970 > stale { return .inProgress }
            }
            try txn.upsert(Record(id: signature, fields: ["at": .date(now)]), in: Self.table)
            for old in try txn.records(in: Self.table, matching: Query(Field("at") < .date(cutoff), limit: 16)) {
                _ = try txn.delete(id: old.id, in: Self.table)
            }
            return .claimed
        }
    }

    /// Keeps the answer of a claimed request that succeeded, for its replays.
    func complete(_ signature: String, answer: [UInt8]) async throws {
        try await store.write { txn in
            guard var row = try txn.record(in: Self.table, id: signature) else { return }
            row["answer"] = .bytes(answer)
            try txn.upsert(row, in: Self.table)
        }
    }

    /// Forgets a claimed signature whose request failed, so the same bytes may run again
    /// (an error is not replayed: the server's data may have moved on since).
    func release(_ signature: String) async throws {
        try await store.write { txn in _ = try txn.delete(id: signature, in: Self.table) }
    }
}
