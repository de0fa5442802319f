import ArgumentParser
import COfflineSyncLMDB
import Foundation
import OfflineSync
import OfflineSyncLMDB
import OfflineSyncStoreKit

/// 100,000 records through `SyncTable` into LMDB, against the LMDB C API writing the same
/// bytes: each record ValueCodec-encoded under its id, its operation-queue row encoded the
/// same way, and the queue's three index entries (state; sequence and id; table, item,
/// sequence and id), in the same transactions.
enum LocalWritesLMDB: BenchWorkload {
    static let name = "local-writes-lmdb"
    static let baseline = "raw-lmdb"

    static func ours(directory: URL, records: Int, batch: Int) async throws -> Double {
        let store = try await LMDBStore(directory: directory.appendingPathComponent("env"))
        return try await LocalWrites.throughSyncTable(store, records: records, batch: batch)
    }

    static func raw(directory: URL, records: Int, batch: Int) async throws -> Double {
        let path = directory.appendingPathComponent("env")
        // Both sides start from the same store: our meta database, tables and indexes.
        let store = try await LMDBStore(directory: path)
        let context = try await SyncContext(store: store, remote: UnusedRemote())
        try await context.defineTable(LocalWrites.schema)
        try await store.close()
        return try RawLMDBBaseline(path: path.path).run(records: records, batch: batch)
    }
}

/// The baseline: `mdb_put` of pre-encoded rows into the sub-databases our store created.
struct RawLMDBBaseline {
    let path: String

    func run(records: Int, batch: Int) throws -> Double {
        var env: OpaquePointer?
        try check(mdb_env_create(&env))
        defer { mdb_env_close(env) }
        try check(mdb_env_set_maxdbs(env, 64))
        try check(mdb_env_set_mapsize(env, 64 << 30))
        try check(mdb_env_open(env, path, UInt32(MDB_NOTLS), 0o644))
        var txn: OpaquePointer?
        try check(mdb_txn_begin(env, nil, 0, &txn))
        var meta = MDB_dbi()
        try check(mdb_dbi_open(txn, "offlinesync.meta", 0, &meta))
        func tableNumber(_ name: String) throws -> UInt64 {
            var key = Array("table:\(name)".utf8), data = MDB_val()
            try key.withUnsafeMutableBytes { bytes in
                var keyVal = MDB_val(mv_size: bytes.count, mv_data: bytes.baseAddress)
                try check(mdb_get(txn, meta, &keyVal, &data))
            }
            return UnsafeRawBufferPointer(start: data.mv_data, count: 8).reduce(0) { $0 << 8 | UInt64($1) }
        }
        // The index entries written below, in the store's order (indexed fields, then the
        // composite indexes): a changed queue schema must change them too.
        let schema = SystemTables.operationsSchema
        let layout = schema.fields.filter(\.indexed).map { [$0.name] } + schema.indexes.map(\.fields)
        guard layout == [["state"], ["sequence", "id"], ["table", "itemId", "sequence", "id"]] else {
            throw ValidationError("the queue's indexes changed (\(layout)): update the raw LMDB baseline")
        }
        let items = try tableNumber("items"), operations = try tableNumber(SystemTables.operations)
        var itemsDB = MDB_dbi(), operationsDB = MDB_dbi()
        var indexDB = [MDB_dbi](repeating: 0, count: 3)
        try check(mdb_dbi_open(txn, "t.\(items)", 0, &itemsDB))
        try check(mdb_dbi_open(txn, "t.\(operations)", 0, &operationsDB))
        for position in 0..<3 { try check(mdb_dbi_open(txn, "i.\(operations).0.\(position)", UInt32(MDB_DUPSORT), &indexDB[position])) }
        try check(mdb_txn_commit(txn))

        let cpu = MeasuredWindows.processCPUSeconds(), start = DispatchTime.now().uptimeNanoseconds
        var sequence: Int64 = 0
        for first in stride(from: 0, to: records, by: batch) {
            try check(mdb_txn_begin(env, nil, 0, &txn))
            let transaction = UUID.random().uuidString
            let now = Timestamp.now()
            for i in first..<min(first + batch, records) {
                let record = LocalWrites.record(i)
                sequence += 1
                let operationID = UUID.random().uuidString
                let operation = LocalWrites.operationRow(inserting: record, id: operationID, sequence: sequence,
                                                         transaction: transaction, now: now)
                let itemKey = Array(record.id.utf8), operationKey = Array(operationID.utf8)
                try put(txn, itemsDB, itemKey, ValueCodec.encode(record))
                try put(txn, operationsDB, operationKey, ValueCodec.encode(operation))
                try put(txn, indexDB[0], string("pending"), operationKey)
                try put(txn, indexDB[1], int(sequence) + string(operationID), operationKey)
                try put(txn, indexDB[2], string("items") + string(record.id) + int(sequence) + string(operationID), operationKey)
            }
            try check(mdb_txn_commit(txn))
        }
        return MeasuredWindows.shared.close(started: start, cpu: cpu)
    }

    /// An index key part for an int, as the store encodes it.
    private func int(_ value: Int64) -> [UInt8] {
        let bits = UInt64(bitPattern: value) ^ (1 << 63)
        return [2] + (0..<8).map { UInt8(truncatingIfNeeded: bits >> (56 - 8 * UInt64($0))) }
    }

    /// An index key part for a string without NUL, as the store encodes it.
    private func string(_ value: String) -> [UInt8] { [3] + Array(value.utf8) + [0, 0] }

    private func put(_ txn: OpaquePointer?, _ dbi: MDB_dbi, _ key: [UInt8], _ value: [UInt8]) throws {
        var key = key, value = value
        try key.withUnsafeMutableBytes { keyBytes in
            try value.withUnsafeMutableBytes { valueBytes in
                var keyVal = MDB_val(mv_size: keyBytes.count, mv_data: keyBytes.baseAddress)
                var valueVal = MDB_val(mv_size: valueBytes.count, mv_data: valueBytes.baseAddress)
                try check(mdb_put(txn, dbi, &keyVal, &valueVal, 0))
            }
        }
    }

    private func check(_ rc: Int32) throws {
        guard rc == MDB_SUCCESS else { throw ValidationError("LMDB: \(String(cString: mdb_strerror(rc)))") }
    }
}
