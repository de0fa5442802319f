import Foundation
import OfflineSync
import OfflineSyncService
import OfflineSyncWire
import Synchronization

/// Cognito streams written as JSON lines, one file per stream, in a directory: the server's
/// stand-in for the Kinesis stream a pool names.
public final class JSONLinesStreamSink: DatasetStreamSink {
    /// The directory holding `<stream name>.jsonl`.
    public let directory: URL
    /// Held while appending, so two publications never interleave their lines in a file.
    private let appending = Mutex(())

    /// Creates a sink writing under `directory` (created on first write).
    public init(directory: URL) {
        self.directory = directory
    }

    /// Appends one line per record: `identityPoolId`, `identityId`, `datasetName`, `key`,
    /// `value` (absent for a removed key), `syncCount`, `lastModifiedDate` (ISO 8601) and
    /// `lastModifiedBy`.
    public func publish(stream: String, records: [DatasetStreamRecord]) async throws {
        var out: [UInt8] = []
        for item in records {
            var members: [(key: String, value: JSON)] = [
                ("identityPoolId", .string(item.identityPoolId)), ("identityId", .string(item.identityId)),
                ("datasetName", .string(item.datasetName)), ("key", .string(item.record.key)),
            ]
            if let value = item.record.value { members.append(("value", .string(value))) }
            members += [("syncCount", .number(String(item.record.syncCount))),
                        ("lastModifiedDate", .string(WireDate.iso8601(item.record.lastModifiedDate))),
                        ("lastModifiedBy", .string(item.record.lastModifiedBy))]
            JSON.object(members).write(into: &out)
            out.append(UInt8(ascii: "\n"))
        }
        let safeName = String(stream.map { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" || $0 == "." ? $0 : "_" })
        let file = directory.appendingPathComponent("\(safeName).jsonl")
        let bytes = out
        try appending.withLock { _ in
            do {
                try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
                if !FileManager.default.fileExists(atPath: file.path) {
                    _ = FileManager.default.createFile(atPath: file.path, contents: nil)
                }
                let handle = try FileHandle(forWritingTo: file)
                defer { try? handle.close() }
                try handle.seekToEnd()
                try handle.write(contentsOf: Data(bytes))
            } catch {
                throw SyncError(.storageFailure, "could not append to stream file \(file.lastPathComponent)")
            }
        }
    }
}
