import Foundation
import OfflineSync
import OfflineSyncEncryptedFile
import OfflineSyncLMDB
import OfflineSyncStoreKit

extension FuzzTarget {
    /// The stores' readers of their own files, fed a file as a user's device could hold it
    /// after damage: opened through the public API, every table read, then closed.
    static let storeTargets: [FuzzTarget] = [
        FuzzTarget("encrypted-file", "an encrypted-file store's file (header, snapshot and frames), opened with the key that wrote the seeds") { input throws(FuzzFinding) in
            try await withScratchDirectory { directory throws(FuzzFinding) in
                let path = directory + "/store.osync"
                try write(input, to: path)
                let key: EncryptedFileStore.Key
                do { key = try EncryptedFileStore.Key.raw(storeKey) } catch { throw FuzzFinding("the fuzz key is refused: \(error)") }
                let opened = try await refusing("EncryptedFileStore(path:key:)", { try await EncryptedFileStore(path: path, key: key) })
                try await readAll(opened, "encrypted-file")
                try checkFile(path, against: input, openedAs: opened != nil)
            }
        },
        FuzzTarget("lmdb", "an LMDB store's data.mdb (meta pages, then every page the trees reach), opened by LMDBStore") { input throws(FuzzFinding) in
            try await withScratchDirectory { directory throws(FuzzFinding) in
                let path = directory + "/data.mdb"
                try write(input, to: path)
                let opened = try await refusing("LMDBStore(directory:)", { try await LMDBStore(directory: directory) })
                try await readAll(opened, "lmdb")
                if opened == nil { try checkFile(path, against: input, openedAs: false) }
            }
        },
    ]

    /// The raw key the encrypted-file seeds were written with.
    static let storeKey = [UInt8](repeating: 0x5A, count: 32)

    /// Reads every row of every table of `store`, then closes it.
    static func readAll(_ store: (any LocalStore)?, _ what: String) async throws(FuzzFinding) {
        guard let store else { return }
        _ = try await refusing("reading every table of an opened \(what) store", {
            try await store.read { transaction in
                for table in try transaction.tables() {
                    _ = try transaction.records(in: table.name, matching: Query())
                }
            }
        })
        _ = try await refusing("closing an opened \(what) store", { try await store.close() })
    }

    /// Throws unless the file at `path` is still `original` — or, for a store that opened,
    /// `original` with a torn last frame cut off: a damaged file is reported and never
    /// overwritten.
    static func checkFile(_ path: String, against original: [UInt8], openedAs opened: Bool) throws(FuzzFinding) {
        guard let now = readFile(path) else { throw FuzzFinding("\(path) is gone after the open") }
        if opened {
            try expect(now.count <= original.count && now[...] == original[..<now.count], "an opened store's file changed other than by cutting its tail")
        } else {
            try expect(now == original, "a store that refused to open changed its file (\(original.count) bytes became \(now.count))")
        }
    }

    /// The file's bytes (StoreKit's POSIX reader: Foundation's leaks a buffer per call, which
    /// the fuzzer's leak check reports).
    static func readFile(_ path: String) -> [UInt8]? { fileContents(path) }

    static func write(_ bytes: [UInt8], to path: String) throws(FuzzFinding) {
        guard FileManager.default.createFile(atPath: path, contents: Data(bytes)) else { throw FuzzFinding("cannot write \(path)") }
    }

    /// Runs `body` in a new directory under the temporary directory, removed afterwards.
    static func withScratchDirectory(_ body: (String) async throws(FuzzFinding) -> Void) async throws(FuzzFinding) {
        let directory = NSTemporaryDirectory() + "offline-sync-fuzz-\(UUID().uuidString)"
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw FuzzFinding("cannot create \(directory): \(error)")
        }
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await body(directory)
    }
}
