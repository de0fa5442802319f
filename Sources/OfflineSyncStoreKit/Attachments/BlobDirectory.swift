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
///
/// ``inventory()`` tells a file whose bytes prove it damaged (a sealed header cut short or
/// that does not open) from one it could not read now (any error of the system: too many open
/// files, an I/O error, a permission), and removes neither; ``removeDamaged(_:sparing:)``
/// removes only the first kind.
public final class BlobDirectory: AttachmentFileStore, @unchecked Sendable {
    // @unchecked Sendable: `path` and `sealing` are constants; the two mutable tables are
    // behind mutexes.
    /// The directory.
    public let path: String
    let sealing: (any BlobSealing)?
    /// Temporary files of writers alive in this process (never removed as leftovers).
    private let liveTemporaries = Mutex<Set<String>>([])
    /// Faults injected by the package's tests (``injectFault(_:at:errno:)``), by path.
    private let faults = Mutex<[String: [FaultPoint: Int32]]>([:])

    /// A directory at `path` (made on the first write), plain or sealed.
    public init(path: String, sealing: (any BlobSealing)? = nil) {
        self.path = path
        self.sealing = sealing
    }

    var objects: String { path + "/objects" }
    var temporaries: String { path + "/tmp" }

    /// The stored file's path for a hash.
    package func objectPath(_ sha256: String) -> String {
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
            switch readHeader(at: path, sealing: sealing) {
            case .header(let header):
                guard header.sha256 == sha256 else { throw SealedBlobFormat.damaged(path) }
                return header.size
            case .damaged(let error), .unreadable(let error): throw error
            case .absent: return nil
            }
        }
        guard let info = status(path) else {
            let code = errno
            if code == ENOENT || code == ENOTDIR { return nil }
            throw BlobFiles.failure("cannot read \(path)", errno: code)
        }
        return Int64(info.st_size)
    }

    public func reader(for sha256: String) throws -> any AttachmentFileReader {
        let path = objectPath(sha256)
        // Only a file the system says is not there is absent: any other failure is reported
        // as what it is, never as a missing file.
        guard try BlobFiles.isPresent(path) else {
            throw SyncError(.notFound, "attachment \(sha256.prefix(12))… is not stored here")
        }
        if let sealing { return try SealedBlobReader(path: path, sealing: sealing, expected: sha256) }
        return try PlainBlobReader(path: path)
    }

    public func remove(_ sha256: String) throws {
        removeKeptDownload(partialPath(sha256))
        let path = objectPath(sha256)
        if let code = fault(.remove, at: path) { throw BlobFiles.failure("cannot remove \(path)", errno: code) }
        if unlink(path) != 0 && errno != ENOENT { throw BlobFiles.failure("cannot remove \(path)") }
    }

    /// The files whose hash, size and modification time could be read (``inventory()``'s).
    public func files() throws -> [AttachmentFileInfo] {
        try inventory().files
    }

    /// Lists `objects/` and reads each file's status and, when sealed, its header. Removes
    /// nothing. A sealed header cut short or that does not open is a damaged file; a
    /// directory that cannot be listed, or a file whose status or header cannot be read
    /// (an errno), is unreadable, and so is anything that is not a regular file. A file gone
    /// since the listing is neither.
    public func inventory() throws -> AttachmentInventory {
        var inventory = AttachmentInventory(files: [])
        let buckets: [String]
        do {
            buckets = try names(in: objects)
        } catch {
            inventory.unreadable.append(Self.storageError(error))
            return inventory
        }
        for bucket in buckets {
            let directory = "\(objects)/\(bucket)"
            let entries: [String]
            do {
                entries = try names(in: directory)
            } catch {
                inventory.unreadable.append(Self.storageError(error))
                continue
            }
            for name in entries {
                // Without sealing a stored file is named by its hash; anything else is not one.
                if self.sealing == nil && !Attachment.isHash(name) { continue }
                let path = "\(directory)/\(name)"
                guard let info = status(path) else {
                    let code = errno
                    if code == ENOENT { continue }
                    // Its modification time is unknown: never taken for old.
                    inventory.unreadable.append(BlobFiles.failure("cannot read the status of \(path)", errno: code))
                    continue
                }
                guard (info.st_mode & S_IFMT) == S_IFREG else {
                    inventory.unreadable.append(SyncError(.storageFailure, "\(path) is not a regular file"))
                    continue
                }
                let modified = BlobFiles.modificationTime(info)
                guard let sealing else {
                    inventory.files.append(AttachmentFileInfo(sha256: name, size: Int64(info.st_size), modified: modified))
                    continue
                }
                // The name hides the hash: the sealed header holds it.
                switch readHeader(at: path, sealing: sealing) {
                case .header(let header):
                    inventory.files.append(AttachmentFileInfo(sha256: header.sha256, size: header.size, modified: modified))
                case .damaged(let error):
                    inventory.damaged.append(DamagedAttachmentFile(name: "objects/\(bucket)/\(name)", error: error))
                case .unreadable(let error):
                    inventory.unreadable.append(error)
                case .absent:
                    continue
                }
            }
        }
        return inventory
    }

    /// Removes a sealed file ``inventory()`` found damaged, unless it is the file of one of
    /// `spared` or its header no longer proves the damage (read again just before). A plain
    /// directory finds no damaged file, and removes nothing.
    ///
    /// What goes is the file whose header was read, never another: the header is read on an
    /// open descriptor, the name is then moved aside, and the file moved is removed only when
    /// it is the one read (same device and inode). A good copy an `install(_:as:size:durable:)`
    /// renamed into place in between is put back under its name.
    public func removeDamaged(_ file: DamagedAttachmentFile, sparing spared: Set<String>) throws -> Bool {
        guard let sealing else { return false }
        // Only a name the inventory gives: `objects/<bucket>/<name>`.
        let parts = file.name.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == "objects", !parts.contains(where: { $0.isEmpty || $0 == "." || $0 == ".." }) else {
            return false
        }
        let target = "\(path)/\(file.name)"
        // A file waiting to upload exists nowhere else: kept, damaged or not.
        if spared.contains(where: { objectPath($0) == target }) { return false }
        // A file that cannot be opened now proves nothing.
        if fault(.open, at: target) != nil { return false }
        let descriptor = open(target, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var opened = stat()
        guard case .damaged = SealedBlobReader.readHeader(descriptor, path: target, sealing: sealing),
              fstat(descriptor, &opened) == 0 else { return false }
        try BlobFiles.makeDirectory(temporaries)
        // Named as a writer's temporary file: one a crash leaves here is a leftover.
        let aside = "\(temporaries)/\(UUID.randomString()).part"
        liveTemporaries.withLock { _ = $0.insert(aside) }
        defer { liveTemporaries.withLock { _ = $0.remove(aside) } }
        guard rename(target, aside) == 0 else {
            if errno == ENOENT { return false }
            throw BlobFiles.failure("cannot remove \(target)")
        }
        var moved = stat()
        if stat(aside, &moved) == 0, moved.st_dev == opened.st_dev, moved.st_ino == opened.st_ino {
            // A failed unlink leaves a temporary file, which removeLeftovers() deletes.
            _ = unlink(aside)
            return true
        }
        // Another file took the name between the read and the move: it goes back, unless yet
        // another (a good copy too: only those are installed) took the name since.
        if link(aside, target) == 0 || errno == EEXIST {
            _ = unlink(aside)
        } else {
            _ = rename(aside, target)
        }
        return false
    }

    // MARK: Reads a test can make fail

    /// A system call of the reads ``inventory()``, ``size(of:)`` and
    /// ``removeDamaged(_:sparing:)`` make, or of ``remove(_:)``.
    package enum FaultPoint: Sendable, Hashable {
        /// Opening a file to read its header (`EMFILE`: a descriptor limit).
        case open
        /// Reading a file's status: its size and modification time.
        case status
        /// Listing a directory (`EACCES`: a directory made unreadable).
        case list
        /// Removing a stored file in ``remove(_:)`` (`EACCES`, `EBUSY`: a file the cache
        /// cannot evict).
        case remove
    }

    /// Makes every `point` call on `path` fail with `code` (`nil`: succeed again): how the
    /// package's tests give a sweep or an eviction a descriptor limit, an I/O error or a
    /// permission it cannot otherwise get in a parallel test process run as root. Never used by a store.
    package func injectFault(_ point: FaultPoint, at path: String, errno code: Int32?) {
        faults.withLock { $0[path, default: [:]][point] = code }
    }

    /// The errno an injected fault gives `point` on `path`, if any.
    private func fault(_ point: FaultPoint, at path: String) -> Int32? {
        faults.withLock { $0[path]?[point] }
    }

    /// Opens the file at `path` and reads its sealed header.
    func readHeader(at path: String, sealing: any BlobSealing) -> SealedHeaderRead {
        if let code = fault(.open, at: path) {
            return .unreadable(BlobFiles.failure("cannot open \(path)", errno: code))
        }
        // Non-blocking, so something other than a regular file put here cannot hang the read.
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard descriptor >= 0 else {
            let code = errno
            if code == ENOENT || code == ENOTDIR { return .absent }
            return .unreadable(BlobFiles.failure("cannot open \(path)", errno: code))
        }
        defer { close(descriptor) }
        return SealedBlobReader.readHeader(descriptor, path: path, sealing: sealing)
    }

    /// The status of the file at `path`; `nil` with `errno` set when it cannot be read.
    func status(_ path: String) -> stat? {
        if let code = fault(.status, at: path) {
            errno = code
            return nil
        }
        var info = stat()
        return stat(path, &info) == 0 ? info : nil
    }

    /// The names in the directory at `path`: none when there is none; throws when it cannot
    /// be listed.
    func names(in path: String) throws -> [String] {
        if let code = fault(.list, at: path) { throw BlobFiles.failure("cannot list \(path)", errno: code) }
        return try BlobFiles.names(in: path)
    }

    /// A failure as a `SyncError` (the helpers throw nothing else).
    private static func storageError(_ error: any Error) -> SyncError {
        error as? SyncError ?? SyncError(.storageFailure, "\(error)")
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

    /// Moves a finished temporary file of `size` plain bytes to its name and flushes the
    /// directory.
    ///
    /// A durable file (the app's own bytes, flushed to disk) always takes the name: a copy
    /// already there is the same bytes when it is good, and the one this repairs when it is
    /// damaged (a file waiting to upload whose bytes the app adds again). A cached download
    /// (`durable` false, not flushed) never replaces a good copy, which may be the only one
    /// flushed to disk: it is dropped when the copy there proves good (a plain file of that
    /// size; a sealed header that opens and names this hash and size), or when the copy
    /// cannot be read now, and the copy's modification time is set to now, so the sweep of
    /// another process does not take it for an old orphan. It takes the name of a copy that
    /// is damaged, or of none.
    func install(_ temporary: String, as sha256: String, size: Int64, durable: Bool = true) throws {
        let target = objectPath(sha256)
        let bucket = String(target[..<target.lastIndex(of: "/")!])
        try BlobFiles.makeDirectory(bucket)
        // Kept: its modification time is now; gone since it was read, this file takes its place.
        if !durable, keepsInstalled(target, sha256: sha256, size: size), utimes(target, nil) == 0 || errno != ENOENT {
            _ = unlink(temporary)
            return
        }
        guard rename(temporary, target) == 0 else { throw BlobFiles.failure("cannot rename \(temporary) to \(target)") }
        if durable { try BlobFiles.syncDirectory(bucket) }
    }

    /// Whether the copy at `target` stays rather than a new one of `sha256` and `size`: it
    /// proves good, or cannot be read now (which proves nothing against it). `false` when
    /// there is none, or its size or header proves it damaged.
    private func keepsInstalled(_ target: String, sha256: String, size: Int64) -> Bool {
        if let sealing {
            switch readHeader(at: target, sealing: sealing) {
            case .header(let header): return header.sha256 == sha256 && header.size == size
            case .unreadable: return true
            case .damaged, .absent: return false
            }
        }
        guard let info = status(target) else {
            let code = errno
            return !(code == ENOENT || code == ENOTDIR)
        }
        return (info.st_mode & S_IFMT) == S_IFREG && Int64(info.st_size) == size
    }
}

/// POSIX helpers of ``BlobDirectory``.
enum BlobFiles {
    /// `what` failed, for the reason `errno` gives now.
    static func failure(_ what: String) -> SyncError {
        failure(what, errno: errno)
    }

    /// `what` failed with `code`.
    static func failure(_ what: String, errno code: Int32) -> SyncError {
        SyncError(.storageFailure, "\(what): \(String(cString: strerror(code)))")
    }

    static func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }

    /// Whether there is a file at `path`: `false` only when the system says there is none;
    /// throws when it cannot tell (a permission, an I/O error).
    static func isPresent(_ path: String) throws -> Bool {
        if access(path, F_OK) == 0 { return true }
        let code = errno
        if code == ENOENT || code == ENOTDIR { return false }
        throw failure("cannot read \(path)", errno: code)
    }

    /// When the file was last written, from its status.
    static func modificationTime(_ info: stat) -> Timestamp {
        #if canImport(Darwin)
        let time = info.st_mtimespec
        #else
        let time = info.st_mtim
        #endif
        return Timestamp(millisecondsSince1970: Int64(time.tv_sec) * 1000 + Int64(time.tv_nsec) / 1_000_000)
    }

    /// The names in a directory, without `.` and `..`: none when it does not exist (or is not
    /// a directory); throws when it cannot be listed or read to its end.
    static func names(in path: String) throws -> [String] {
        guard let directory = opendir(path) else {
            let code = errno
            if code == ENOENT || code == ENOTDIR { return [] }
            throw failure("cannot list \(path)", errno: code)
        }
        defer { closedir(directory) }
        var names: [String] = []
        while true {
            errno = 0
            guard let entry = readdir(directory) else {
                let code = errno
                if code != 0 { throw failure("cannot list \(path)", errno: code) }
                return names
            }
            let name = withUnsafeBytes(of: entry.pointee.d_name) { bytes in
                String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
    }

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
        // ``finish(as:size:durable:last:)`` is what makes the file durable.
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
    /// disk and moves it to its name (`install(_:as:size:durable:)`; `size`
    /// is the plain bytes written).
    /// With `durable` false (a download, which can be fetched again and is checked against
    /// its hash when read), the file is renamed without waiting for the disk: a crash may
    /// leave it short or damaged, which the next read reports and fetches again.
    func finish(as sha256: String, size: Int64, durable: Bool = true, last: (Int32) throws -> Void = { _ in }) throws {
        guard isOpen else { throw SyncError(.storeClosed, "the attachment writer has finished") }
        try last(descriptor)
        if durable { guard fsync(descriptor) == 0 else { throw BlobFiles.failure("cannot flush \(path)") } }
        close(descriptor)
        descriptor = -1
        defer { release() }
        try directory.install(path, as: sha256, size: size, durable: durable)
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

    func commit(as sha256: String) throws { try file.finish(as: sha256, size: size) }

    func commitCached(as sha256: String) throws { try file.finish(as: sha256, size: size, durable: false) }

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
