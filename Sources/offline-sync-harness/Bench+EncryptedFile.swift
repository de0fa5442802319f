import Crypto
import Foundation
import OfflineSync
import OfflineSyncEncryptedFile
import OfflineSyncStoreKit

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// 100,000 records through `SyncTable` into an `EncryptedFileStore` (raw key, AES-256-GCM),
/// against swift-crypto sealing the same bytes our store persists per transaction — each
/// record's `ValueCodec` bytes and its `__operations` row's, length-prefixed — and appending
/// them to a file with a sync per transaction.
enum LocalWritesEncryptedFile: BenchWorkload {
    static let name = "local-writes-encrypted-file"
    static let baseline = "raw-swift-crypto"
    static let key: [UInt8] = (0..<32).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }

    static func ours(directory: URL, records: Int, batch: Int) async throws -> Double {
        let store = try await EncryptedFileStore(path: directory.appendingPathComponent("bench.osync").path,
                                                 key: try .raw(key))
        return try await LocalWrites.throughSyncTable(store, records: records, batch: batch)
    }

    static func raw(directory: URL, records: Int, batch: Int) async throws -> Double {
        let path = directory.appendingPathComponent("bench.raw")
        let fd = open(path.path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw SyncError(.storageFailure, "cannot create \(path.path)") }
        defer { _ = close(fd) }
        let symmetricKey = SymmetricKey(data: key)
        var frameNumber: UInt64 = 0
        var sequence: Int64 = 0
        return try await LocalWrites.measure {
            for first in stride(from: 0, to: records, by: batch) {
                // One transaction: every record's encoded bytes and its queue row's, each
                // length-prefixed, sealed as one frame.
                let transaction = UUID.random().uuidString
                let now = Timestamp.now()
                var plaintext: [UInt8] = []
                func append(_ encoded: [UInt8]) {
                    withUnsafeBytes(of: UInt32(encoded.count).littleEndian) { plaintext.append(contentsOf: $0) }
                    plaintext.append(contentsOf: encoded)
                }
                for i in first..<min(first + batch, records) {
                    let record = LocalWrites.record(i)
                    sequence += 1
                    let operation = LocalWrites.operationRow(inserting: record, id: UUID.random().uuidString, sequence: sequence,
                                                             transaction: transaction, now: now)
                    append(ValueCodec.encode(record))
                    append(ValueCodec.encode(operation))
                }
                var aad: [UInt8] = []
                withUnsafeBytes(of: frameNumber.littleEndian) { aad.append(contentsOf: $0) }
                let box = try AES.GCM.seal(plaintext, using: symmetricKey, nonce: AES.GCM.Nonce(), authenticating: aad)
                var frame: [UInt8] = []
                let body = box.combined!
                withUnsafeBytes(of: UInt32(body.count).littleEndian) { frame.append(contentsOf: $0) }
                frame.append(contentsOf: body)
                let written = frame.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
                guard written == frame.count else { throw SyncError(.storageFailure, "short write") }
                guard syncData(fd) == 0 else { throw SyncError(.storageFailure, "fdatasync failed") }
                frameNumber += 1
            }
        }
    }
}

/// The same sync call the store makes per commit.
private func syncData(_ fd: Int32) -> Int32 {
    #if canImport(Darwin)
    return fcntl(fd, F_FULLFSYNC)
    #else
    return fdatasync(fd)
    #endif
}
