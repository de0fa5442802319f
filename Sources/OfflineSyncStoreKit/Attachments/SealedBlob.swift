import OfflineSync
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// How an encrypting store seals attachment files (``BlobDirectory`` with sealing): an
/// authenticated cipher under the store's key, and a keyed name for each hash.
public protocol BlobSealing: Sendable {
    /// Bytes a sealed piece has beyond its plaintext (nonce and tag).
    var overhead: Int { get }
    /// Seals `plain`, binding it to `context` (authenticated, not stored).
    func seal(_ plain: UnsafeRawBufferPointer, context: [UInt8]) throws -> [UInt8]
    /// Opens a sealed piece; throws when it was altered or sealed under another key or context.
    func open(_ sealed: [UInt8], context: [UInt8]) throws -> [UInt8]
    /// The file name for a hash: keyed (an HMAC), so a name does not reveal which file it is.
    func fileName(for sha256: String) -> String
}

/// The layout of a sealed attachment file.
///
/// `OSBLOB01` (8 bytes), a random file id (16 bytes), the sealed header (the hash as 64 ASCII
/// digits and the size as 8 little-endian bytes, bound to the file id), then the bytes in
/// sealed pieces of 64 KiB of plaintext (the last one shorter), each bound to the file id
/// and its index: a piece moved, dropped, swapped with another file's or altered fails to
/// open, and the reader reports `SyncError.Code.attachmentDamaged`.
public enum SealedBlobFormat {
    static let magic = Array("OSBLOB01".utf8)
    static let idSize = 16
    /// Plaintext bytes per sealed piece.
    static let piece = 1 << 16
    static let headerPlain = 64 + 8

    static func headerSize(_ sealing: any BlobSealing) -> Int { magic.count + idSize + headerPlain + sealing.overhead }

    static func pieceContext(_ id: [UInt8], _ index: Int64) -> [UInt8] {
        var context = id
        withUnsafeBytes(of: index.littleEndian) { context.append(contentsOf: $0) }
        return context
    }

    static func headerContext(_ id: [UInt8]) -> [UInt8] { id + Array("header".utf8) }

    static func damaged(_ path: String) -> SyncError {
        SyncError(.attachmentDamaged, "the sealed attachment file \(path) does not open under this store's key")
    }
}

/// A writer of a sealed file: pieces are sealed as they fill, the header at commit.
final class SealedBlobWriter: AttachmentFileWriter {
    private let file: BlobTemporaryFile
    private let sealing: any BlobSealing
    private let id: [UInt8]
    private var pending: [UInt8] = []
    private var pieces: Int64 = 0
    private(set) var size: Int64 = 0

    init(_ file: BlobTemporaryFile, sealing: any BlobSealing) throws {
        self.file = file
        self.sealing = sealing
        id = Self.newID()
        try Self.writePlaceholder(file, id: id, sealing: sealing)
        pending.reserveCapacity(SealedBlobFormat.piece)
    }

    /// Goes on from the last whole sealed piece of a kept download (a piece cut short by a
    /// crash is dropped; its bytes are fetched again). A file too short to have its id
    /// starts over.
    init(resuming file: BlobTemporaryFile, sealing: any BlobSealing) throws {
        self.file = file
        self.sealing = sealing
        pending.reserveCapacity(SealedBlobFormat.piece)
        let headerSize = Int64(SealedBlobFormat.headerSize(sealing))
        let length = try file.length()
        let magic = SealedBlobFormat.magic.count
        let start = length >= headerSize ? try file.read(at: 0, count: magic + SealedBlobFormat.idSize) : []
        guard start.count == magic + SealedBlobFormat.idSize, Array(start[..<magic]) == SealedBlobFormat.magic else {
            id = Self.newID()
            try file.resume(at: 0)
            try Self.writePlaceholder(file, id: id, sealing: sealing)
            return
        }
        id = Array(start[magic...])
        pieces = (length - headerSize) / Int64(SealedBlobFormat.piece + sealing.overhead)
        size = pieces * Int64(SealedBlobFormat.piece)
        try file.resume(at: headerSize + pieces * Int64(SealedBlobFormat.piece + sealing.overhead))
    }

    private static func newID() -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<SealedBlobFormat.idSize).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }

    /// The magic and file id, then zeros where the sealed header goes at commit (when the
    /// hash is known). The id is written now so a kept download can go on under it.
    private static func writePlaceholder(_ file: BlobTemporaryFile, id: [UInt8], sealing: any BlobSealing) throws {
        var placeholder = SealedBlobFormat.magic + id
        placeholder += [UInt8](repeating: 0, count: SealedBlobFormat.headerSize(sealing) - placeholder.count)
        try placeholder.withUnsafeBytes { try file.write($0) }
    }

    func append(_ bytes: UnsafeRawBufferPointer) throws {
        guard file.isOpen else { throw SyncError(.storeClosed, "the attachment writer has finished") }
        var rest = bytes[...]
        while !rest.isEmpty {
            let take = min(rest.count, SealedBlobFormat.piece - pending.count)
            pending.append(contentsOf: rest.prefix(take))
            rest = rest.dropFirst(take)
            if pending.count == SealedBlobFormat.piece { try flushPiece() }
        }
        size += Int64(bytes.count)
    }

    private func flushPiece() throws {
        let sealed = try pending.withUnsafeBytes { try sealing.seal($0, context: SealedBlobFormat.pieceContext(id, pieces)) }
        try sealed.withUnsafeBytes { try file.write($0) }
        pieces += 1
        pending.removeAll(keepingCapacity: true)
    }

    func commit(as sha256: String) throws { try commit(as: sha256, durable: true) }

    func commitCached(as sha256: String) throws { try commit(as: sha256, durable: false) }

    private func commit(as sha256: String, durable: Bool) throws {
        guard file.isOpen else { throw SyncError(.storeClosed, "the attachment writer has finished") }
        if !pending.isEmpty { try flushPiece() }
        var plain = Array(sha256.utf8)
        withUnsafeBytes(of: size.littleEndian) { plain.append(contentsOf: $0) }
        let header = try plain.withUnsafeBytes { try sealing.seal($0, context: SealedBlobFormat.headerContext(id)) }
        let prefix = SealedBlobFormat.magic + id + header
        try file.finish(as: sha256, size: size, durable: durable) { descriptor in
            let written = prefix.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }
            guard written == prefix.count else { throw BlobFiles.failure("cannot write \(file.path)") }
        }
    }

    func cancel() { file.cancel() }

    func keep() { file.keep() }

    /// Opens the sealed pieces holding the range; the piece still gathering comes from memory.
    func readBack(at offset: Int64, count: Int) throws -> [UInt8] {
        let piece = Int64(SealedBlobFormat.piece), sealedSize = Int64(SealedBlobFormat.piece + sealing.overhead)
        let sealedEnd = pieces * piece
        let end = min(size, offset + Int64(max(0, count)))
        var result: [UInt8] = []
        var position = max(0, offset)
        while position < min(end, sealedEnd) {
            let index = position / piece
            let at = Int64(SealedBlobFormat.headerSize(sealing)) + index * sealedSize
            let sealed = try file.read(at: at, count: Int(sealedSize))
            guard let plain = try? sealing.open(sealed, context: SealedBlobFormat.pieceContext(id, index)), plain.count == SealedBlobFormat.piece else {
                throw SealedBlobFormat.damaged(file.path)
            }
            let from = Int(position - index * piece), to = Int(min(end - index * piece, piece))
            result.append(contentsOf: plain[from..<to])
            position = index * piece + Int64(to)
        }
        if position < end { result.append(contentsOf: pending[Int(position - sealedEnd)..<Int(end - sealedEnd)]) }
        return result
    }
}

/// What reading a sealed file's header found. Only ``damaged(_:)`` says anything about the
/// file: it is what its bytes prove (cut short, not `OSBLOB01`, a header that does not open
/// under the store's key, or holds no hash). ``unreadable(_:)`` is a read that failed now —
/// too many open files, an I/O error, a permission — and is no reason to remove anything.
enum SealedHeaderRead {
    case header(SealedBlobReader.Header)
    /// The file's own bytes prove it damaged (`attachmentDamaged`).
    case damaged(SyncError)
    /// The file could not be read now (`storageFailure`, with the system's reason).
    case unreadable(SyncError)
    /// There is no file (it went since it was listed, or never was).
    case absent
}

/// A reader of a sealed file: opens the pieces a read touches, keeping the last one.
final class SealedBlobReader: AttachmentFileReader {
    private let descriptor: Int32
    private let path: String
    private let sealing: any BlobSealing
    private let id: [UInt8]
    let size: Int64
    private var cached: (index: Int64, plain: [UInt8])?

    struct Header {
        var id: [UInt8]
        var sha256: String
        var size: Int64
    }

    init(path: String, sealing: any BlobSealing, expected sha256: String) throws {
        descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw BlobFiles.failure("cannot open \(path)") }
        self.path = path
        self.sealing = sealing
        do {
            let header = try Self.header(descriptor, path: path, sealing: sealing)
            guard header.sha256 == sha256 else { throw SealedBlobFormat.damaged(path) }
            id = header.id
            size = header.size
        } catch {
            close(descriptor)
            throw error
        }
    }

    deinit { close(descriptor) }

    /// The header of the file open at `descriptor`: ``SyncError/Code/attachmentDamaged`` when
    /// its bytes prove it damaged, the read's own error when it could not be read.
    private static func header(_ descriptor: Int32, path: String, sealing: any BlobSealing) throws -> Header {
        switch readHeader(descriptor, path: path, sealing: sealing) {
        case .header(let header): return header
        case .damaged(let error), .unreadable(let error): throw error
        case .absent: throw SyncError(.notFound, "\(path) is gone")
        }
    }

    /// Reads and opens the header of the file open at `descriptor`, telling what its bytes
    /// prove from a read that failed.
    static func readHeader(_ descriptor: Int32, path: String, sealing: any BlobSealing) -> SealedHeaderRead {
        let bytes: [UInt8]
        do {
            bytes = try BlobFiles.readAt(descriptor, offset: 0, count: SealedBlobFormat.headerSize(sealing), path: path)
        } catch {
            return .unreadable(error as? SyncError ?? SyncError(.storageFailure, "cannot read \(path)"))
        }
        let magic = SealedBlobFormat.magic.count, idEnd = magic + SealedBlobFormat.idSize
        // `readAt` returns fewer bytes only at the end of the file: the file is cut short.
        guard bytes.count == SealedBlobFormat.headerSize(sealing), Array(bytes[..<magic]) == SealedBlobFormat.magic else {
            return .damaged(SealedBlobFormat.damaged(path))
        }
        let id = Array(bytes[magic..<idEnd])
        guard let plain = try? sealing.open(Array(bytes[idEnd...]), context: SealedBlobFormat.headerContext(id)),
              plain.count == SealedBlobFormat.headerPlain else { return .damaged(SealedBlobFormat.damaged(path)) }
        let sha256 = String(decoding: plain[..<64], as: UTF8.self)
        let size = plain[64...].reversed().reduce(Int64(0)) { $0 << 8 | Int64($1) }
        guard Attachment.isHash(sha256), size >= 0 else { return .damaged(SealedBlobFormat.damaged(path)) }
        return .header(Header(id: id, sha256: sha256, size: size))
    }

    func read(at offset: Int64, count: Int) throws -> [UInt8] {
        var result: [UInt8] = []
        var position = max(0, offset)
        let end = min(size, position + Int64(max(0, count)))
        let piece = Int64(SealedBlobFormat.piece)
        while position < end {
            let index = position / piece
            let plain = try self.piece(index)
            let start = Int(position - index * piece)
            let stop = Int(min(end - index * piece, Int64(plain.count)))
            guard start < stop else { throw SealedBlobFormat.damaged(path) }
            result.append(contentsOf: plain[start..<stop])
            position = index * piece + Int64(stop)
        }
        return result
    }

    private func piece(_ index: Int64) throws -> [UInt8] {
        if let cached, cached.index == index { return cached.plain }
        let piece = Int64(SealedBlobFormat.piece)
        let plainCount = Int(min(piece, size - index * piece))
        let sealedSize = Int64(SealedBlobFormat.piece + sealing.overhead)
        let offset = Int64(SealedBlobFormat.headerSize(sealing)) + index * sealedSize
        let sealed = try BlobFiles.readAt(descriptor, offset: offset, count: plainCount + sealing.overhead, path: path)
        guard let plain = try? sealing.open(sealed, context: SealedBlobFormat.pieceContext(id, index)),
              plain.count == plainCount else { throw SealedBlobFormat.damaged(path) }
        cached = (index, plain)
        return plain
    }
}
