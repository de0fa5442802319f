import Foundation

/// Where a local store keeps the bytes of attachments: the part of the adapter contract
/// that ``LocalStore/attachmentFiles`` returns.
///
/// The store keeps opaque files named by their SHA-256; the core computes and checks every
/// hash, decides which files are referenced and when a file may go. What the store must
/// promise:
/// - A file is either absent or whole under its name: ``AttachmentFileWriter/commit(as:)``
///   makes the bytes durable (written under a temporary name, flushed to disk, renamed) before
///   it returns, and a writer that is cancelled or whose process dies leaves no file under
///   any hash (its temporary file is removed by ``removeLeftovers()``).
/// - Reads at any offset return exactly the bytes written (an encrypting store decrypts and
///   authenticates them; a damaged file fails with ``SyncError/Code/attachmentDamaged``).
/// - It is safe to call from several threads and processes at once; two writers committing
///   the same hash leave one whole file.
/// - A failed read is not damage: ``SyncError/Code/attachmentDamaged`` only for bytes that
///   prove it; a read the system refused (too many open files, an I/O error, a permission)
///   throws that failure (``SyncError/Code/storageFailure``), and nothing is removed for it.
///
/// `OfflineSyncStoreKit.BlobDirectory` implements all of it over a directory, in plain or
/// sealed form; the conformance suite's `attachments` group checks it.
public protocol AttachmentFileStore: AnyObject, Sendable {
    /// Starts a new file under a temporary name.
    func makeWriter() throws -> any AttachmentFileWriter
    /// Starts the download of the file with this hash, or goes on with the one a writer left
    /// with ``AttachmentFileWriter/keep()`` — in this process or one that has since died —
    /// so a download cut off, or an app killed mid-way, resumes where its bytes end instead
    /// of from zero. The writer's ``AttachmentFileWriter/size`` is how many bytes it already
    /// holds; ``AttachmentFileWriter/readBack(at:count:)`` reads them (the core hashes them
    /// again, and a kept file whose bytes are wrong fails the hash and is fetched anew).
    /// While one writer has a hash's kept file, another gets a fresh file. The default,
    /// for a store that keeps no partial files, is ``makeWriter()``.
    func downloadWriter(for sha256: String) throws -> any AttachmentFileWriter
    /// The stored size of the file with this hash, or `nil` when there is none.
    func size(of sha256: String) throws -> Int64?
    /// Opens the file with this hash. Throws ``SyncError/Code/notFound`` when there is none.
    func reader(for sha256: String) throws -> any AttachmentFileReader
    /// Removes the file with this hash, and any download of it a writer kept; nothing when
    /// there is none.
    func remove(_ sha256: String) throws
    /// Every stored file whose hash, size and modification time can be read now (see
    /// ``inventory()`` for what cannot).
    func files() throws -> [AttachmentFileInfo]
    /// Every stored file as far as it can be read now, for the sweep when a context opens.
    /// Removes nothing. A file whose own bytes prove it damaged (a sealed header cut short,
    /// or one that does not open under the store's key) is in
    /// ``AttachmentInventory/damaged``; one that could not be read now (too many open files,
    /// an I/O error, a permission, a directory that cannot be listed) is in
    /// ``AttachmentInventory/unreadable`` and is never taken for damaged or old. The default
    /// lists ``files()``.
    func inventory() throws -> AttachmentInventory
    /// Removes a file ``inventory()`` found damaged, unless it is the file of one of the
    /// `spared` hashes (those waiting to upload, whose files exist nowhere else) or its bytes
    /// no longer prove it damaged (a good file put under its name since). Returns whether it
    /// removed it; throws when the removal failed. The default removes nothing.
    func removeDamaged(_ file: DamagedAttachmentFile, sparing spared: Set<String>) throws -> Bool
    /// Removes temporary files that no live writer of this process owns (left by a process
    /// that died mid-write), and kept downloads no writer has used for a week. Called when
    /// a context opens.
    func removeLeftovers() throws
    /// The file's location, when the store keeps it as plain bytes an app may hand to
    /// another API (`nil` for an encrypting store, or when there is no such file).
    func plainFileURL(for sha256: String) -> URL?
}

/// A file of an ``AttachmentFileStore``.
public struct AttachmentFileInfo: Sendable, Hashable {
    /// The file's hash (its name).
    public var sha256: String
    /// Its size in bytes (plain bytes, before any sealing).
    public var size: Int64
    /// When it was last written (committed).
    public var modified: Timestamp

    /// Describes a file.
    public init(sha256: String, size: Int64, modified: Timestamp) {
        self.sha256 = sha256
        self.size = size
        self.modified = modified
    }
}

/// What ``AttachmentFileStore/inventory()`` found.
public struct AttachmentInventory: Sendable {
    /// The files whose hash, size and modification time were read.
    public var files: [AttachmentFileInfo]
    /// The files whose own bytes prove them damaged: no record can use them.
    public var damaged: [DamagedAttachmentFile]
    /// Why files, or directories of them, could not be read now (each a
    /// ``SyncError/Code/storageFailure`` naming the path and the system's reason). What they
    /// hold is unknown, so they are kept.
    public var unreadable: [SyncError]

    /// An inventory.
    public init(files: [AttachmentFileInfo], damaged: [DamagedAttachmentFile] = [], unreadable: [SyncError] = []) {
        self.files = files
        self.damaged = damaged
        self.unreadable = unreadable
    }
}

/// A stored file whose own bytes prove it damaged, by the name the store keeps it under (an
/// encrypting store's names do not reveal the hash, and a damaged header no longer tells it).
public struct DamagedAttachmentFile: Sendable, Hashable {
    /// The file's path inside the store's attachment directory.
    public var name: String
    /// What proves the damage (``SyncError/Code/attachmentDamaged``).
    public var error: SyncError

    /// Describes a damaged file.
    public init(name: String, error: SyncError) {
        self.name = name
        self.error = error
    }
}

/// A file being written: bytes are appended, then committed under their hash or cancelled.
/// Used by one task at a time.
public protocol AttachmentFileWriter: AnyObject {
    /// The bytes appended so far.
    var size: Int64 { get }
    /// Appends bytes.
    func append(_ bytes: UnsafeRawBufferPointer) throws
    /// Flushes the file to disk and renames it to `sha256` (the caller computed the hash of
    /// what it appended). When the hash is already stored, the new copy may replace it (it is
    /// the same bytes, or the ones a damaged copy lacks: `BlobDirectory` always replaces, so
    /// adding the bytes again repairs a damaged file waiting to upload) or be dropped (a store
    /// whose copies cannot be damaged, as one in memory).
    func commit(as sha256: String) throws
    /// Removes the temporary file. Harmless after ``commit(as:)``.
    func cancel()
    /// As ``commit(as:)``, for a file the context can fetch again (a download): a store may
    /// give it its name without waiting for the disk, since every read of a stored file is
    /// checked against its hash and a damaged one is fetched again. Such a copy must not
    /// replace a stored one that proves good (which may be the only copy flushed to disk).
    /// The default is ``commit(as:)``.
    func commitCached(as sha256: String) throws
    /// Closes a download's file without naming it, keeping its bytes for the next
    /// ``AttachmentFileStore/downloadWriter(for:)`` of the same hash. A writer from
    /// ``AttachmentFileStore/makeWriter()`` removes its file instead, as ``cancel()`` does
    /// (the default).
    func keep()
    /// Up to `count` of the bytes this writer holds, from `offset`: what a resumed download
    /// kept, read so the core can hash it again. An encrypting store authenticates them
    /// (``SyncError/Code/attachmentDamaged`` when they do not open). The default throws.
    func readBack(at offset: Int64, count: Int) throws -> [UInt8]
}

extension AttachmentFileStore {
    /// A fresh file: this store keeps no partial downloads.
    public func downloadWriter(for sha256: String) throws -> any AttachmentFileWriter { try makeWriter() }

    /// Every file ``files()`` lists; none found damaged or unreadable.
    public func inventory() throws -> AttachmentInventory { AttachmentInventory(files: try files()) }

    /// Removes nothing: this store's ``inventory()`` finds no damaged file.
    public func removeDamaged(_ file: DamagedAttachmentFile, sparing spared: Set<String>) throws -> Bool { false }
}

extension AttachmentFileWriter {
    /// Commits durably.
    public func commitCached(as sha256: String) throws { try commit(as: sha256) }

    /// Removes the file: this writer keeps nothing.
    public func keep() { cancel() }

    /// Refused: this writer does not read back.
    public func readBack(at offset: Int64, count: Int) throws -> [UInt8] {
        throw SyncError(.unsupported, "this attachment writer does not read back what it holds")
    }

    /// Appends bytes.
    public func append(_ bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { try append($0) }
    }
}

/// A stored file opened for reading. Used by one task at a time; closed when released.
public protocol AttachmentFileReader: AnyObject {
    /// The file's size in bytes.
    var size: Int64 { get }
    /// Up to `count` bytes from `offset` (fewer only at the end of the file).
    func read(at offset: Int64, count: Int) throws -> [UInt8]
}
