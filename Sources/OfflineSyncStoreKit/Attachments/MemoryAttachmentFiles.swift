import Foundation
import OfflineSync
import Synchronization

/// Attachment files in memory: the `AttachmentFileStore` of ``InMemoryStore`` and of an
/// in-memory SQLite store. Gone with the process, like their rows.
public final class MemoryAttachmentFiles: AttachmentFileStore {
    private let stored = Mutex<[String: (bytes: [UInt8], modified: Timestamp)]>([:])

    /// An empty set of files.
    public init() {}

    public func makeWriter() throws -> any AttachmentFileWriter { Writer(files: self) }

    public func size(of sha256: String) throws -> Int64? {
        stored.withLock { $0[sha256].map { Int64($0.bytes.count) } }
    }

    public func reader(for sha256: String) throws -> any AttachmentFileReader {
        guard let bytes = stored.withLock({ $0[sha256]?.bytes }) else {
            throw SyncError(.notFound, "attachment \(sha256.prefix(12))… is not stored here")
        }
        return Reader(bytes: bytes)
    }

    public func remove(_ sha256: String) throws { stored.withLock { _ = $0.removeValue(forKey: sha256) } }

    public func files() throws -> [AttachmentFileInfo] {
        stored.withLock { $0.map { AttachmentFileInfo(sha256: $0.key, size: Int64($0.value.bytes.count), modified: $0.value.modified) } }
    }

    public func removeLeftovers() throws {}

    public func plainFileURL(for sha256: String) -> URL? { nil }

    private final class Writer: AttachmentFileWriter {
        let files: MemoryAttachmentFiles
        var bytes: [UInt8] = []
        var size: Int64 { Int64(bytes.count) }

        init(files: MemoryAttachmentFiles) { self.files = files }

        func append(_ bytes: UnsafeRawBufferPointer) throws { self.bytes.append(contentsOf: bytes) }

        func commit(as sha256: String) throws {
            let bytes = self.bytes
            files.stored.withLock { stored in
                if stored[sha256] == nil { stored[sha256] = (bytes, Timestamp.now()) }
            }
        }

        func cancel() { bytes = [] }
    }

    private final class Reader: AttachmentFileReader {
        let bytes: [UInt8]
        var size: Int64 { Int64(bytes.count) }

        init(bytes: [UInt8]) { self.bytes = bytes }

        func read(at offset: Int64, count: Int) throws -> [UInt8] {
            let start = Int(clamping: max(0, min(offset, size)))
            return Array(bytes[start..<min(bytes.count, start + max(0, count))])
        }
    }
}
