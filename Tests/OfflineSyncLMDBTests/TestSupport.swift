import COfflineSyncLMDB
import Foundation
import OfflineSync
import OfflineSyncLMDB
import OfflineSyncTestSupport

/// Opens a store in `directory`, runs `body`, and closes the store, even when `body` throws.
func withStore<T>(in directory: URL, options: LMDBStore.Options = .init(),
                  _ body: (LMDBStore) async throws -> T) async throws -> T {
    try await withClosing(try await LMDBStore(directory: directory, options: options), body)
}

/// A 64-bit FNV-1a digest of every regular file under `directory`, by relative path.
func digests(_ directory: URL) -> [String: UInt64] {
    var result: [String: UInt64] = [:]
    let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
    for name in names {
        guard let data = FileManager.default.contents(atPath: directory.appendingPathComponent(name).path) else { continue }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in data { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
        result[name] = hash
    }
    return result
}

/// A raw LMDB environment, for building foreign environments in tests.
final class RawEnvironment {
    private(set) var env: OpaquePointer?

    init(directory: String) throws {
        try check(mdb_env_create(&env))
        try check(mdb_env_set_maxdbs(env, 8))
        try check(mdb_env_open(env, directory, 0, 0o644))
    }

    deinit { close() }

    /// Puts key/value pairs into the main database (`database == nil`) or a named one.
    func put(_ pairs: [(String, [UInt8])], database: String? = nil) throws {
        var txn: OpaquePointer?
        try check(mdb_txn_begin(env, nil, 0, &txn))
        var dbi = MDB_dbi()
        try check(mdb_dbi_open(txn, database, UInt32(MDB_CREATE), &dbi))
        for (key, value) in pairs {
            var k = Array(key.utf8), v = value
            let rc = k.withUnsafeMutableBytes { kb in
                v.withUnsafeMutableBytes { vb in
                    var kv = MDB_val(mv_size: kb.count, mv_data: kb.baseAddress)
                    var vv = MDB_val(mv_size: vb.count, mv_data: vb.baseAddress)
                    return mdb_put(txn, dbi, &kv, &vv, 0)
                }
            }
            if rc != MDB_SUCCESS { mdb_txn_abort(txn); try check(rc) }
        }
        try check(mdb_txn_commit(txn))
    }

    func close() {
        if let env { mdb_env_close(env) }
        env = nil
    }

    private func check(_ rc: Int32) throws {
        guard rc == MDB_SUCCESS else { throw SyncError(.storageFailure, "raw LMDB: \(String(cString: mdb_strerror(rc)))") }
    }
}
