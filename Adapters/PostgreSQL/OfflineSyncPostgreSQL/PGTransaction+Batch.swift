import OfflineSync
import OfflineSyncStoreKit

extension PGTransaction {
    /// Answers the reads in one round trip (libpq's pipeline mode): each read by id and each
    /// query SQL answers whole goes out as one statement, after the buffered upserts of a
    /// queried table, and the results are decoded in order. A read by id of a buffered row is
    /// answered from the buffer; a query that needs the evaluator streams on its own, as
    /// ``records(in:matching:)`` does. Every local write of the core reads its item and the
    /// item's newest queued operation this way, so it costs one round trip, not two.
    func read(_ reads: [LocalRead]) throws -> [[Record]] {
        enum Answer {
            case known([Record])
            case result(Int, PGTable)
        }
        var statements: [PGStatement] = []
        var answers: [Answer] = []
        answers.reserveCapacity(reads.count)
        for read in reads {
            switch read {
            case let .record(table, id):
                let info = try self.table(table)
                if let buffered = pending[info.number]?.rows[ExactString(id)] {
                    answers.append(.known([buffered.record(in: info.schema)]))
                    continue
                }
                statements.append(PGStatement(info.selectByID, [.bytes(Array(id.utf8))]))
                answers.append(.result(statements.count - 1, info))
            case let .records(table, query):
                let info = try self.table(table)
                guard case let .whole(sql, parameters) = try plan(query, info) else {
                    answers.append(.known(try records(in: table, matching: query)))
                    continue
                }
                statements += takePending(info.number)
                statements.append(PGStatement(sql, parameters))
                answers.append(.result(statements.count - 1, info))
            }
        }
        let results = try live().executeAll(statements)
        return try answers.map { answer in
            switch answer {
            case .known(let records): return records
            case let .result(index, info): return try decodeAll(results[index], info)
            }
        }
    }
}
