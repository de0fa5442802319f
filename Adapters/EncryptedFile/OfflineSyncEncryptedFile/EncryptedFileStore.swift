import Crypto
import Foundation
import Synchronization
import OfflineSync
import OfflineSyncStoreKit

/// A ``LocalStore`` kept in one encrypted file: the whole store in memory (``MemoryTables``),
/// every committed transaction appended to the file as one authenticated, encrypted frame and
/// synced before the write returns, and the file rewritten compactly from time to time.
///
/// ```swift
/// let store = try await EncryptedFileStore(path: "/var/app/app.osync",
///                                          key: .passphrase(userPassphrase))
/// ```
///
/// - Confidentiality and integrity: every byte after the header is AES-256-GCM (or
///   ChaCha20-Poly1305) ciphertext under a key derived from yours; the header is checksummed
///   and carries a verifier sealed with the key, so a wrong key fails with
///   ``SyncError/Code/wrongKey`` and any damage with ``SyncError/Code/corrupted``, both
///   leaving the file untouched. A file of another kind fails with
///   ``SyncError/Code/notADatabase``.
/// - Crash safety: a transaction is durable once its frame is synced; a frame torn by a crash
///   mid-append is dropped when the store next opens, keeping every complete transaction.
/// - One store instance per file: the file is locked while open (``SyncError/Code/busy``).
///
/// The whole data set lives in memory, so this adapter suits stores of up to a few hundred
/// megabytes. Docs/EncryptedFileFormat.md describes the format.
public final class EncryptedFileStore: LocalStore, @unchecked Sendable {
    // @unchecked Sendable: `tables` is thread-safe; `log` is only touched on `queue`;
    // `closed` is atomic.

    /// The authenticated cipher that seals frames.
    public enum Cipher: UInt8, Sendable, Hashable {
        /// AES-256-GCM with random 96-bit nonces (the default).
        case aesGCM = 1
        /// ChaCha20-Poly1305 with random 96-bit nonces, faster where AES has no hardware support.
        case chaChaPoly = 2
    }

    /// How the store encrypts and when it compacts.
    public struct Options: Sendable {
        /// The cipher of a new file (an existing file keeps the one in its header).
        public var cipher: Cipher
        /// Compact when the file holds more than this many record versions (live records plus
        /// replaced and deleted ones still in the log) per live record, and at least
        /// ``minimumCompactionBytes`` were appended since the last compaction. A store that only
        /// inserts never compacts while writing.
        public var compactionRatio: Double
        /// Never compact during writes while the appended frames are smaller than this.
        public var minimumCompactionBytes: Int
        /// Rewrite the file compactly when the store is closed (if anything was appended).
        public var compactOnClose: Bool

        /// Creates options.
        /// - Parameters:
        ///   - cipher: the cipher of a new file.
        ///   - compactionRatio: record versions in the file per live record that trigger compaction.
        ///   - minimumCompactionBytes: appended bytes below which writes never compact.
        ///   - compactOnClose: whether `close()` compacts.
        public init(cipher: Cipher = .aesGCM, compactionRatio: Double = 2, minimumCompactionBytes: Int = 1 << 20,
                    compactOnClose: Bool = true) {
            self.cipher = cipher
            self.compactionRatio = compactionRatio
            self.minimumCompactionBytes = minimumCompactionBytes
            self.compactOnClose = compactOnClose
        }
    }

    /// The file's path.
    public let path: String
    private let options: Options
    private let tables = MemoryTables()
    private let queue: DispatchQueue
    private var log: EncryptedFileOpenLog?
    /// Attachment files, sealed under a key derived from the store's key, in the directory
    /// `<path>-attachments`.
    private let blobs: BlobDirectory
    /// Set once by ``close()``; checked before every operation.
    private let closed = Atomic(false)

    /// Reads run here: in memory, but off Swift's cooperative pool because they may wait for a
    /// committing writer for a moment.
    private static let readQueue = DispatchQueue(label: "OfflineSync.EncryptedFileStore.read", attributes: .concurrent)

    /// Opens the store at `path`, creating the file if it does not exist.
    ///
    /// - Parameters:
    ///   - path: the file. Its directory must exist. Files `<path>.compacting` may appear beside it.
    ///   - key: a raw 256-bit key or a passphrase. For a new file a passphrase is stretched with
    ///     its ``KeyDerivation``; an existing file uses the derivation in its header.
    ///   - options: cipher and compaction settings.
    /// - Throws: ``SyncError/Code/wrongKey`` when the key does not open the file,
    ///   ``SyncError/Code/corrupted`` when the file is damaged, ``SyncError/Code/notADatabase``
    ///   when it is not an encrypted-file store, ``SyncError/Code/unsupported`` for a newer
    ///   format — in all these cases the file is left byte for byte as it was —,
    ///   ``SyncError/Code/busy`` when another instance has it open, and
    ///   ``SyncError/Code/storageFailure`` for I/O errors.
    public init(path: String, key: Key, options: Options = .init()) async throws {
        self.path = path
        self.options = options
        queue = DispatchQueue(label: "OfflineSync.EncryptedFileStore")
        let tables = self.tables
        let log = try await Self.run(on: queue) { try EncryptedFileOpenLog.open(path: path, key: key, options: options, tables: tables) }
        self.log = log
        blobs = BlobDirectory(path: path + "-attachments", sealing: log.attachmentSealing())
    }

    deinit {
        log?.file.close()
    }

    /// See ``LocalStore/defineTable(_:)``.
    public func defineTable(_ schema: TableSchema) async throws {
        try schema.validate()
        try checkOpen()
        try await Self.run(on: queue) { [self] in
            let log = try openLog()
            try tables.define(schema) { changes in try log.append(changes) }
            compactIfDue(log)
        }
    }

    /// See ``LocalStore/read(_:)``.
    public func read<T: Sendable>(_ body: @escaping @Sendable (any LocalReadTransaction) throws -> T) async throws -> T {
        try checkOpen()
        return try await Self.run(on: Self.readQueue) { [tables] in try tables.read(body) }
    }

    /// See ``LocalStore/write(_:)``. Returns once the transaction's frame is synced to disk.
    public func write<T: Sendable>(_ body: @escaping @Sendable (any LocalWriteTransaction) throws -> T) async throws -> T {
        try checkOpen()
        return try await Self.run(on: queue) { [self] in
            let log = try openLog()
            let result = try tables.write(body, commit: { changes in try log.append(changes) })
            compactIfDue(log)
            return result
        }
    }

    /// Rewrites the file now: the current data as a fresh snapshot under a new file salt (so a
    /// new frame key), written beside the file, synced, and renamed over it. Throws
    /// ``SyncError/Code/storageFailure`` (the old file then stays as it was) or
    /// ``SyncError/Code/storeClosed``.
    public func compact() async throws {
        try checkOpen()
        try await Self.run(on: queue) { [self] in try openLog().compact(tables) }
    }

    /// See ``LocalStore/close()``. Compacts first if ``Options/compactOnClose`` is set and
    /// frames were appended (a failed compaction leaves the file as it was, still complete).
    /// Closing twice is harmless.
    public func close() async throws {
        closed.store(true, ordering: .releasing)
        try await Self.run(on: queue) { [self] in
            guard let log else { return }
            if options.compactOnClose && log.appendedBytes > 0 && log.failure == nil {
                try? log.compact(tables)
            }
            log.file.close()
            self.log = nil
        }
    }

    /// See ``LocalStore/attachmentFiles``: sealed files beside the store, in `<path>-attachments`.
    public var attachmentFiles: (any AttachmentFileStore)? { blobs }

    private func checkOpen() throws {
        if closed.load(ordering: .acquiring) { throw SyncError(.storeClosed, "the encrypted-file store \(path) is closed") }
    }

    /// The open log; on `queue` only.
    private func openLog() throws -> EncryptedFileOpenLog {
        guard let log else { throw SyncError(.storeClosed, "the encrypted-file store \(path) is closed") }
        if let failure = log.failure { throw failure }
        return log
    }

    /// Compacts when the file holds too many superseded record versions (see
    /// ``Options/compactionRatio``). A failure is not the transaction's: it is durable
    /// already, and the old file is intact.
    private func compactIfDue(_ log: EncryptedFileOpenLog) {
        guard log.appendedBytes >= UInt64(max(options.minimumCompactionBytes, 0)) else { return }
        let versions = Double(log.snapshotRecords + log.appendedRecords)
        if versions > options.compactionRatio * Double(max(tables.recordCount, 1)) { try? log.compact(tables) }
    }

    /// Runs blocking work on a dispatch queue and awaits it.
    private static func run<T: Sendable>(on queue: DispatchQueue, _ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            queue.async { continuation.resume(with: Result { try body() }) }
        }
    }
}

/// The open file and its keys. Used only on the store's queue.
final class EncryptedFileOpenLog: @unchecked Sendable {
    // @unchecked Sendable: created on the store's queue and then only used there.
    let path: String
    private(set) var file: EncryptedFileLog
    private(set) var header: EncryptedFileHeader
    let master: SecretBytes
    private var fileKey: SymmetricKey
    private var nextSequence: UInt64
    private var end: UInt64
    /// Bytes of frames appended since the last compaction.
    private(set) var appendedBytes: UInt64
    /// Records in the snapshot written by the last compaction.
    private(set) var snapshotRecords: Int
    /// Record upserts and deletes appended since.
    private(set) var appendedRecords: Int
    /// Set when the file may no longer match memory (a failed sync); every later write throws it.
    private(set) var failure: SyncError?

    private init(path: String, file: EncryptedFileLog, header: EncryptedFileHeader, master: SecretBytes, fileKey: SymmetricKey,
                 nextSequence: UInt64, end: UInt64, snapshotRecords: Int, appendedRecords: Int) {
        self.path = path
        self.file = file
        self.header = header
        self.master = master
        self.fileKey = fileKey
        self.nextSequence = nextSequence
        self.end = end
        appendedBytes = end - header.baseEnd
        self.snapshotRecords = snapshotRecords
        self.appendedRecords = appendedRecords
    }

    // MARK: Appending

    /// Appends one change set as a frame and syncs it.
    func append(_ changes: ChangeSet) throws {
        if let failure { throw failure }
        let frame = try makeFrame(changes.encode(), sequence: nextSequence, cipher: header.cipher, key: fileKey)
        do {
            try file.write(frame, at: end)
        } catch {
            // Cut off what part of the frame reached the file, so the next frame follows the
            // last complete one.
            do { try file.truncate(to: end) } catch let cut as SyncError { failure = cut }
            throw error
        }
        do {
            try file.sync()
        } catch let error as SyncError {
            failure = error
            throw error
        }
        end += UInt64(frame.count)
        appendedBytes += UInt64(frame.count)
        appendedRecords += changes.recordCount
        nextSequence += 1
    }

    // MARK: Compaction

    /// Writes `tables` as a fresh file beside this one and renames it over it.
    func compact(_ tables: MemoryTables) throws {
        if let failure { throw failure }
        let written = try EncryptedFileOpenLog.writeFile(path: path, cipher: header.cipher, derivation: header.derivation,
                                            kdfSalt: header.kdfSalt, master: master) { emit in
            try tables.snapshot(emit)
        }
        file.close()
        file = written.file
        header = written.header
        fileKey = written.fileKey
        nextSequence = written.header.baseFrames
        end = written.header.baseEnd
        appendedBytes = 0
        snapshotRecords = written.records
        appendedRecords = 0
    }

    /// Writes a complete file at `<path>.compacting` — snapshot frames, then the header that
    /// records where they end — syncs it, renames it to `path` and syncs the directory.
    private static func writeFile(path: String, cipher: EncryptedFileStore.Cipher,
                                  derivation: EncryptedFileStore.KeyDerivation?, kdfSalt: [UInt8], master: SecretBytes,
                                  content: ((ChangeSet) throws -> Void) throws -> Void) throws
        -> (file: EncryptedFileLog, header: EncryptedFileHeader, fileKey: SymmetricKey, records: Int) {
        let temporary = path + ".compacting"
        EncryptedFileLog.remove(temporary)
        let file = try EncryptedFileLog.create(temporary)
        do {
            var header = EncryptedFileHeader(cipher: cipher, derivation: derivation, kdfSalt: kdfSalt,
                                    fileSalt: EncryptedFileFormat.random(32), baseEnd: 0, baseFrames: 0)
            let fileKey = header.fileKey(master: master)
            var offset = UInt64(EncryptedFileFormat.headerSize)
            var sequence: UInt64 = 0
            var records = 0
            try content { changes in
                records += changes.recordCount
                let frame = try makeFrame(changes.encode(), sequence: sequence, cipher: cipher, key: fileKey)
                try file.write(frame, at: offset)
                offset += UInt64(frame.count)
                sequence += 1
            }
            header.baseEnd = offset
            header.baseFrames = sequence
            try file.write(try header.encode(fileKey: fileKey), at: 0)
            try file.sync()
            try EncryptedFileLog.replace(path, with: temporary)
            return (file, header, fileKey, records)
        } catch {
            file.close()
            EncryptedFileLog.remove(temporary)
            throw error
        }
    }

    // MARK: Opening

    /// Opens or creates the file and replays it into `tables`.
    static func open(path: String, key: EncryptedFileStore.Key, options: EncryptedFileStore.Options,
                     tables: MemoryTables) throws -> EncryptedFileOpenLog {
        if let file = try EncryptedFileLog.openExisting(path) {
            do {
                return try openExisting(file, key: key, tables: tables)
            } catch {
                file.close()
                throw error
            }
        }
        // A new file: derive the master key, then write an empty snapshot.
        let derivation: EncryptedFileStore.KeyDerivation?
        let kdfSalt: [UInt8]
        let master: SecretBytes
        switch key.material {
        case .raw:
            derivation = nil
            kdfSalt = [UInt8](repeating: 0, count: 32)
            master = key.bytes
        case .passphrase(let chosen):
            derivation = chosen
            kdfSalt = EncryptedFileFormat.random(32)
            master = try chosen.derive(key.bytes, salt: kdfSalt)
        }
        let written = try writeFile(path: path, cipher: options.cipher, derivation: derivation, kdfSalt: kdfSalt,
                                    master: master) { _ in }
        return EncryptedFileOpenLog(path: path, file: written.file, header: written.header, master: master,
                       fileKey: written.fileKey, nextSequence: 0, end: written.header.baseEnd,
                       snapshotRecords: 0, appendedRecords: 0)
    }

    private static func openExisting(_ file: EncryptedFileLog, key: EncryptedFileStore.Key, tables: MemoryTables) throws -> EncryptedFileOpenLog {
        let size = try file.size()
        let (header, headerBytes) = try readHeader(file, size: size)
        let (master, fileKey) = try unlock(header, headerBytes, with: key, path: file.path)
        guard header.baseEnd <= size else {
            throw SyncError(.corrupted, "\(file.path) ends inside its compacted data (truncated)")
        }
        let replay = try replayFrames(file, size: size, header: header, fileKey: fileKey, into: tables)
        if let tornAt = replay.tornAt {
            // A crash interrupted the last append: drop the incomplete frame.
            try file.truncate(to: tornAt)
            try file.sync()
        }
        return EncryptedFileOpenLog(path: file.path, file: file, header: header, master: master, fileKey: fileKey,
                                    nextSequence: replay.frames, end: replay.tornAt ?? replay.end,
                                    snapshotRecords: replay.snapshotRecords, appendedRecords: replay.appendedRecords)
    }

    /// Step 1 of opening: the magic bytes (``SyncError/Code/notADatabase`` without them) and
    /// the parsed header.
    private static func readHeader(_ file: EncryptedFileLog, size: UInt64) throws -> (EncryptedFileHeader, [UInt8]) {
        let magicLength = EncryptedFileFormat.magic.count
        guard size >= UInt64(magicLength), try file.read(magicLength, at: 0) == EncryptedFileFormat.magic else {
            throw SyncError(.notADatabase, "\(file.path) is not an OfflineSync encrypted-file store")
        }
        guard size >= UInt64(EncryptedFileFormat.headerSize) else {
            throw SyncError(.corrupted, "\(file.path) ends inside its header")
        }
        let headerBytes = try file.read(EncryptedFileFormat.headerSize, at: 0)
        return (try EncryptedFileHeader(parsing: headerBytes, path: file.path), headerBytes)
    }

    /// Step 2: the master and file keys, checked against the header's verifier before
    /// anything else is read (``SyncError/Code/wrongKey`` otherwise; the file is untouched).
    private static func unlock(_ header: EncryptedFileHeader, _ headerBytes: [UInt8], with key: EncryptedFileStore.Key,
                               path: String) throws -> (master: SecretBytes, fileKey: SymmetricKey) {
        let master: SecretBytes
        switch (key.material, header.derivation) {
        case (.raw, nil):
            master = key.bytes
        case (.passphrase, let recorded?):
            master = try recorded.derive(key.bytes, salt: header.kdfSalt)
        case (.raw, _?):
            throw SyncError(.wrongKey, "\(path) is protected by a passphrase, not a raw key; the file is unchanged")
        case (.passphrase, nil):
            throw SyncError(.wrongKey, "\(path) is protected by a raw key, not a passphrase; the file is unchanged")
        }
        let fileKey = header.fileKey(master: master)
        guard EncryptedFileHeader.verify(headerBytes, cipher: header.cipher, fileKey: fileKey) else {
            throw SyncError(.wrongKey, "the key or passphrase does not open \(path); the file is unchanged")
        }
        return (master, fileKey)
    }

    /// What replaying a file's frames found.
    private struct Replay {
        /// Frames applied; the next frame's sequence number.
        var frames: UInt64 = 0
        /// The end of the last whole frame.
        var end = UInt64(EncryptedFileFormat.headerSize)
        /// Where a torn last frame starts, to be cut off.
        var tornAt: UInt64?
        var snapshotRecords = 0
        var appendedRecords = 0
    }

    /// Step 3: applies every frame to `tables`. The snapshot (up to the header's `baseEnd`)
    /// must be complete; after it, only the last frame may be torn (cut short, or zeros a
    /// crash left). Anything else is ``SyncError/Code/corrupted``, naming the frame.
    private static func replayFrames(_ file: EncryptedFileLog, size: UInt64, header: EncryptedFileHeader,
                                     fileKey: SymmetricKey, into tables: MemoryTables) throws -> Replay {
        var replay = Replay()
        func damaged(_ what: String) -> SyncError {
            SyncError(.corrupted, "\(file.path): frame \(replay.frames) at offset \(replay.end) \(what)")
        }
        while replay.end < size {
            let offset = replay.end, inSnapshot = offset < header.baseEnd
            if size - offset < UInt64(EncryptedFileFormat.frameHeaderSize) {
                if inSnapshot { throw damaged("is cut short") }
                replay.tornAt = offset
                break
            }
            let head = try file.read(EncryptedFileFormat.frameHeaderSize, at: offset)
            let length = EncryptedFileFormat.readLE(UInt32.self, head, at: 0)
            let check = EncryptedFileFormat.readLE(UInt32.self, head, at: 4)
            guard check == EncryptedFileFormat.frameCheck(length: length, sequence: replay.frames) else {
                if !inSnapshot, try isZero(file, from: offset, to: size) {
                    replay.tornAt = offset
                    break
                }
                throw damaged("has a damaged length")
            }
            guard Int(length) >= EncryptedFileFormat.nonceSize + EncryptedFileFormat.tagSize, Int(length) <= EncryptedFileFormat.maxFrameBody else {
                throw damaged("has an impossible length")
            }
            let frameEnd = offset + UInt64(EncryptedFileFormat.frameHeaderSize) + UInt64(length)
            if frameEnd > size {
                if inSnapshot { throw damaged("is cut short") }
                replay.tornAt = offset
                break
            }
            if inSnapshot && frameEnd > header.baseEnd { throw damaged("overruns the compacted data") }
            let body = try file.read(Int(length), at: offset + UInt64(EncryptedFileFormat.frameHeaderSize))
            guard let plaintext = header.cipher.open(body, key: fileKey, aad: EncryptedFileFormat.frameAAD(sequence: replay.frames)) else {
                throw damaged("fails authentication (damaged, reordered or from another file)")
            }
            do {
                let changes = try ChangeSet(decoding: plaintext)
                try tables.apply(changes)
                if inSnapshot { replay.snapshotRecords += changes.recordCount } else { replay.appendedRecords += changes.recordCount }
            } catch {
                throw damaged("holds an invalid change set")
            }
            replay.end = frameEnd
            replay.frames += 1
            if replay.end == header.baseEnd && replay.frames != header.baseFrames {
                throw damaged("ends the compacted data with the wrong frame count")
            }
        }
        if header.baseFrames == 0 && header.baseEnd != UInt64(EncryptedFileFormat.headerSize) {
            throw SyncError(.corrupted, "\(file.path): the header describes an impossible snapshot")
        }
        return replay
    }

    /// Whether every byte from `start` to `end` is zero (what some file systems leave after a
    /// crash during an append).
    private static func isZero(_ file: EncryptedFileLog, from start: UInt64, to end: UInt64) throws -> Bool {
        var offset = start
        while offset < end {
            let count = Int(min(end - offset, 1 << 20))
            if try file.read(count, at: offset).contains(where: { $0 != 0 }) { return false }
            offset += UInt64(count)
        }
        return true
    }
}
