import Foundation
import COfflineSyncSystem
import OfflineSync
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Attachment files in a directory: the `AttachmentFileStore` of the file-backed adapters.
///
/// Layout: `objects/<2 hex digits>/<name>` for stored files, `tmp/<random>.part` for files
/// being written, `tmp/<name>.download` for downloads (kept when cut off, so the next one
/// goes on from their end). A file is written under `tmp/`, flushed with `fsync`, renamed
/// into `objects/` and the directory flushed, so a crash leaves either the whole file under
/// its name or a temporary file that ``removeLeftovers()`` deletes (a download's after a
/// week unused). A download's file is held under an exclusive `flock` while a writer has it,
/// so two processes (an app and its extension) never append to one. The directories are made on
/// the first write: a store that never keeps an attachment leaves nothing beside it.
///
/// Without sealing, a stored file is the attachment's bytes, named by its hash, and
/// ``plainFileURL(for:)`` hands it out. With a ``BlobSealing`` (an encrypting store), nothing
/// of the bytes, their hash or their size is readable without the store's key: see
/// ``SealedBlobFormat``.
public final class BlobDirectory: AttachmentFileStore, @unchecked Sendable {
    /// The directory.
    public let path: String
    let sealing: (any BlobSealing)?
    /// Temporary files of writers alive in this process (never removed as leftovers).
    private let liveTemporaries = Mutex<Set<String>>([])

    /// A directory at `path` (made on the first write), plain or sealed.
    public init(path: String, sealing: (any BlobSealing)? = nil) {
        self.path = path
        self.sealing = sealing
    }

    var objects: String { path + "/objects" }
    var temporaries: String { path + "/tmp" }

    /// The stored file's path for a hash.
    func objectPath(_ sha256: String) -> String {
        let name = sealing?.fileName(for: sha256) ?? sha256
        return "\(objects)/\(name.prefix(2))/\(name)"
    }

    public func makeWriter() throws -> any AttachmentFileWriter {
        try BlobFiles.makeDirectory(temporaries)
        let temporary = "\(temporaries)/\(UUID.randomString()).part"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw BlobFiles.failure("cannot create \(temporary)") }
        let file = liveFile(descriptor, at: temporary, keepable: false)
        if let sealing { return try SealedBlobWriter(file, sealing: sealing) }
        return PlainBlobWriter(file)
    }

    public func downloadWriter(for sha256: String) throws -> any AttachmentFileWriter {
        try BlobFiles.makeDirectory(temporaries)
        let partial = partialPath(sha256)
        let descriptor = open(partial, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw BlobFiles.failure("cannot create \(partial)") }
        // Held elsewhere (another process downloads it), or renamed into place between the
        // open and the lock: this download starts a file of its own.
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0, BlobFiles.isLinked(descriptor, at: partial) else {
            close(descriptor)
            return try makeWriter()
        }
        let file = liveFile(descriptor, at: partial, keepable: true)
        if let sealing { return try SealedBlobWriter(resuming: file, sealing: sealing) }
        return try PlainBlobWriter(resuming: file)
    }

    /// A file being written at `path`, counted as live (never a leftover) until it finishes.
    private func liveFile(_ descriptor: Int32, at path: String, keepable: Bool) -> BlobTemporaryFile {
        liveTemporaries.withLock { _ = $0.insert(path) }
        let release: @Sendable () -> Void = { [weak self] in self?.liveTemporaries.withLock { _ = $0.remove(path) } }
        return BlobTemporaryFile(directory: self, descriptor: descriptor, path: path, keepable: keepable, release: release)
    }

    /// Deletes a kept download unless a writer (of any process) has it.
    private func removeKeptDownload(_ partial: String) {
        guard !liveTemporaries.withLock({ $0.contains(partial) }) else { return }
        let descriptor = open(partial, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return }
        defer { close(descriptor) }
        if flock(descriptor, LOCK_EX | LOCK_NB) == 0, BlobFiles.isLinked(descriptor, at: partial) { _ = unlink(partial) }
    }

    /// Where a download of this hash is kept until it is whole (named as its stored file is).
    func partialPath(_ sha256: String) -> String {
        "\(temporaries)/\(sealing?.fileName(for: sha256) ?? sha256).download"
    }

    public func size(of sha256: String) throws -> Int64? {
        let path = objectPath(sha256)
        if let sealing {
            guard BlobFiles.exists(path) else { return nil }
            let header = try SealedBlobReader.header(path: path, sealing: sealing)
            guard header.sha256 == sha256 else { throw SealedBlobFormat.damaged(path) }
            return header.size
        }
        var info = stat()
        if stat(path, &info) != 0 {
            if errno == ENOENT { return nil }
            throw BlobFiles.failure("cannot read \(path)")
        }
        return Int64(info.st_size)
    }

    public func reader(for sha256: String) throws -> any AttachmentFileReader {
        let path = objectPath(sha256)
        guard BlobFiles.exists(path) else {
            throw SyncError(.notFound, "attachment \(sha256.prefix(12))… is not stored here")
        }
        if let sealing { return try SealedBlobReader(path: path, sealing: sealing, expected: sha256) }
        return try PlainBlobReader(path: path)
    }

    public func remove(_ sha256: String) throws {
        removeKeptDownload(partialPath(sha256))
        let path = objectPath(sha256)
        if unlink(path) != 0 && errno != ENOENT { throw BlobFiles.failure("cannot remove \(path)") }
    }

    public func files() throws -> [AttachmentFileInfo] {
        var found: [AttachmentFileInfo] = []
        for bucket in BlobFiles.list(objects) {
            for name in BlobFiles.list("\(objects)/\(bucket)") {
                let path = "\(objects)/\(bucket)/\(name)"
                let attributes = try? FileManager.default.attributesOfItem(atPath: path)
                let modified = (attributes?[.modificationDate] as? Date).map(Timestamp.init) ?? Timestamp(millisecondsSince1970: 0)
                if let sealing {
                    // The name hides the hash: the sealed header holds it. An unreadable
                    // header is a damaged file, which no record can use.
                    guard let header = try? SealedBlobReader.header(path: path, sealing: sealing) else {
                        _ = unlink(path)
                        continue
                    }
                    found.append(AttachmentFileInfo(sha256: header.sha256, size: header.size, modified: modified))
                } else if Attachment.isHash(name) {
                    let size = (attributes?[.size] as? NSNumber)?.int64Value ?? 0
                    found.append(AttachmentFileInfo(sha256: name, size: size, modified: modified))
                }
            }
        }
        return found
    }

    public func removeLeftovers() throws {
        let live = liveTemporaries.withLock { $0 }
        let weekAgo = Date().timeIntervalSince1970 - Self.keptDownloadLifetime
        for name in BlobFiles.list(temporaries) {
            let path = "\(temporaries)/\(name)"
            if live.contains(path) { continue }
            if name.hasSuffix(".part") { _ = unlink(path) }
            if name.hasSuffix(".download"), let modified = BlobFiles.modified(path), modified < weekAgo { removeKeptDownload(path) }
        }
    }

    /// How long a kept download stays unused before ``removeLeftovers()`` deletes it.
    static let keptDownloadLifetime: Double = 7 * 86_400

    public func plainFileURL(for sha256: String) -> URL? {
        guard sealing == nil else { return nil }
        let path = objectPath(sha256)
        return BlobFiles.exists(path) ? URL(fileURLWithPath: path) : nil
    }

    /// Moves a finished temporary file to its name and flushes the directory; drops it when
    /// the name is taken (the same bytes are already stored).
    func install(_ temporary: String, as sha256: String, durable: Bool = true) throws {
        let target = objectPath(sha256)
        let bucket = String(target[..<target.lastIndex(of: "/")!])
        try BlobFiles.makeDirectory(bucket)
        if BlobFiles.exists(target) {
            _ = unlink(temporary)
            return
        }
        guard rename(temporary, target) == 0 else { throw BlobFiles.failure("cannot rename \(temporary) to \(target)") }
        if durable { try BlobFiles.syncDirectory(bucket) }
    }
}

/// POSIX helpers of ``BlobDirectory``.
enum BlobFiles {
    static func failure(_ what: String) -> SyncError {
        SyncError(.storageFailure, "\(what): \(String(cString: strerror(errno)))")
    }

    static func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }

    /// Whether the open file is the one at `path` (not one renamed or removed since).
    static func isLinked(_ descriptor: Int32, at path: String) -> Bool {
        var open = stat(), named = stat()
        return fstat(descriptor, &open) == 0 && stat(path, &named) == 0
            && open.st_dev == named.st_dev && open.st_ino == named.st_ino
    }

    /// When the file was last written, in seconds since 1970; `nil` when it cannot be read.
    static func modified(_ path: String) -> Double? {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.modificationDate] as? Date)?.timeIntervalSince1970
    }

    /// `mkdir -p`, flushing each parent it adds to.
    static func makeDirectory(_ path: String) throws {
        if exists(path) { return }
        let parent = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
        if !parent.isEmpty { try makeDirectory(parent) }
        if mkdir(path, 0o700) != 0 && errno != EEXIST { throw failure("cannot create \(path)") }
        if !parent.isEmpty { try syncDirectory(parent) }
    }

    static func syncDirectory(_ path: String) throws {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw failure("cannot open \(path)") }
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else { throw failure("cannot flush \(path)") }
    }

    /// The names in a directory (none when it does not exist).
    static func list(_ path: String) -> [String] {
        (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
    }

    /// Writes all of `bytes` at the descriptor's position.
    static func writeAll(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer, path: String) throws {
        var done = 0
        while done < bytes.count {
            let count = write(descriptor, bytes.baseAddress! + done, bytes.count - done)
            if count < 0 {
                if errno == EINTR { continue }
                throw failure("cannot write \(path)")
            }
            done += count
        }
    }

    /// Reads up to `count` bytes at `offset` (fewer only at the end of the file).
    static func readAt(_ descriptor: Int32, offset: Int64, count: Int, path: String) throws -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let read = bytes.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress! + done, count - done, off_t(offset) + off_t(done)) }
            if read < 0 {
                if errno == EINTR { continue }
                throw failure("cannot read \(path)")
            }
            if read == 0 { break }
            done += read
        }
        if done < count { bytes.removeSubrange(done...) }
        return bytes
    }
}

/// A file being written under `tmp/`: written in order, then flushed and given its name, or
/// removed. What both writers share.
final class BlobTemporaryFile {
    private let directory: BlobDirectory
    private(set) var descriptor: Int32
    let path: String
    /// Whether ``keep()`` leaves the file for a later writer (a download's) or removes it.
    private let keepable: Bool
    private let release: @Sendable () -> Void

    init(directory: BlobDirectory, descriptor: Int32, path: String, keepable: Bool, release: @escaping @Sendable () -> Void) {
        self.directory = directory
        self.descriptor = descriptor
        self.path = path
        self.keepable = keepable
        self.release = release
    }

    deinit { cancel() }

    var isOpen: Bool { descriptor >= 0 }

    /// Bytes written and not yet handed to the disk (see ``write(_:)``).
    private var unflushed = 0
    /// Where the bytes not yet handed to the disk start.
    private var flushedUpTo: Int64 = 0

    /// Bytes written before the disk is asked to start writing them (8 MiB).
    static let writeBehind = 8 << 20

    func write(_ bytes: UnsafeRawBufferPointer) throws {
        guard isOpen else { throw SyncError(.storeClosed, "the attachment writer has finished") }
        try BlobFiles.writeAll(descriptor, bytes, path: path)
        unflushed += bytes.count
        // Write-behind: the disk starts on each 8 MiB while the rest is still being read and
        // hashed, so the flush at the end waits for the last few MiB, not the whole file.
        // Only a hint (nothing on Darwin): `fsync` in
        // ``finish(as:last:)`` is what makes the file durable.
        if unflushed >= Self.writeBehind {
            _ = osync_write_behind(descriptor, flushedUpTo, Int64(unflushed))
            flushedUpTo += Int64(unflushed)
            unflushed = 0
        }
    }

    /// The file's current length (a kept download's bytes).
    func length() throws -> Int64 {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw BlobFiles.failure("cannot read \(path)") }
        return Int64(info.st_size)
    }

    /// Cuts the file to `offset` and goes on writing there (a kept download's end).
    func resume(at offset: Int64) throws {
        guard ftruncate(descriptor, off_t(offset)) == 0, lseek(descriptor, off_t(offset), SEEK_SET) == off_t(offset) else {
            throw BlobFiles.failure("cannot resume \(path)")
        }
        flushedUpTo = offset
        unflushed = 0
    }

    /// Up to `count` bytes at `offset` of what was written.
    func read(at offset: Int64, count: Int) throws -> [UInt8] {
        guard isOpen else { throw SyncError(.storeClosed, "the attachment writer has finished") }
        return try BlobFiles.readAt(descriptor, offset: offset, count: count, path: path)
    }

    /// Closes the file and leaves it where it is, for a later writer to go on with (a
    /// download's; any other is removed, as ``cancel()`` does).
    func keep() {
        guard keepable else { return cancel() }
        guard isOpen else { return }
        close(descriptor)
        descriptor = -1
        release()
    }

    /// Runs `last` on the open descriptor (a header written in place), flushes the file to
    /// disk and moves it to its name.
    /// With `durable` false (a download, which can be fetched again and is checked against
    /// its hash when read), the file is renamed without waiting for the disk: a crash may
    /// leave it short or damaged, which the next read reports and fetches again.
    func finish(as sha256: String, durable: Bool = true, last: (Int32) throws -> Void = { _ in }) throws {
        guard isOpen else { throw SyncError(.storeClosed, "the attachment writer has finished") }
        try last(descriptor)
        if durable { guard fsync(descriptor) == 0 else { throw BlobFiles.failure("cannot flush \(path)") } }
        close(descriptor)
        descriptor = -1
        defer { release() }
        try directory.install(path, as: sha256, durable: durable)
    }

    func cancel() {
        guard isOpen else { return }
        close(descriptor)
        descriptor = -1
        _ = unlink(path)
        release()
    }
}

/// A writer of a plain file: the bytes as they are.
final class PlainBlobWriter: AttachmentFileWriter {
    private let file: BlobTemporaryFile
    private(set) var size: Int64 = 0

    init(_ file: BlobTemporaryFile) { self.file = file }

    /// Goes on from the end of a kept download.
    init(resuming file: BlobTemporaryFile) throws {
        self.file = file
        size = try file.length()
        try file.resume(at: size)
    }

    func append(_ bytes: UnsafeRawBufferPointer) throws {
        try file.write(bytes)
        size += Int64(bytes.count)
    }

    func commit(as sha256: String) throws { try file.finish(as: sha256) }

    func commitCached(as sha256: String) throws { try file.finish(as: sha256, durable: false) }

    func cancel() { file.cancel() }

    func keep() { file.keep() }

    func readBack(at offset: Int64, count: Int) throws -> [UInt8] {
        try file.read(at: offset, count: max(0, min(Int64(count), size - offset)).clampedInt)
    }
}

/// A reader of a plain file.
final class PlainBlobReader: AttachmentFileReader {
    private let descriptor: Int32
    private let path: String
    let size: Int64

    init(path: String) throws {
        descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw BlobFiles.failure("cannot open \(path)") }
        self.path = path
        var info = stat()
        guard fstat(descriptor, &info) == 0 else {
            close(descriptor)
            throw BlobFiles.failure("cannot read \(path)")
        }
        size = Int64(info.st_size)
    }

    deinit { close(descriptor) }

    func read(at offset: Int64, count: Int) throws -> [UInt8] {
        try BlobFiles.readAt(descriptor, offset: offset, count: max(0, min(Int64(count), size - offset)).clampedInt, path: path)
    }
}

extension Int64 {
    var clampedInt: Int { Int(clamping: self) }
}
