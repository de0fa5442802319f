import Foundation
import OfflineSync

/// The service's limits on attachments.
public struct AttachmentLimits: Sendable, Hashable {
    /// The largest attachment, in bytes. Default 2 GiB.
    public var maximumSize: Int64
    /// The most bytes one identity may have stored by its own uploads (finished and under
    /// way). Default 20 GiB.
    public var quotaPerIdentity: Int64
    /// How long a finished upload no row references, or an upload that stopped, is kept
    /// before ``OfflineSyncService/pruneAttachments(now:)`` collects it. Default 24 hours.
    public var grace: Duration
    /// The most unfinished uploads one identity may have at once. An upload created without a
    /// length reserves no bytes of the quota, so without this bound one identity could create
    /// upload rows without end; past it a new upload is refused (``SyncError/Code/limitExceeded``)
    /// until one is finished, cancelled or collected. Default 256.
    public var maximumOpenUploads: Int

    /// Limits; every parameter has the documented default (``maximumOpenUploads`` 256).
    public init(maximumSize: Int64 = 2 << 30, quotaPerIdentity: Int64 = 20 << 30, grace: Duration = .seconds(86_400)) {
        self.init(maximumSize: maximumSize, quotaPerIdentity: quotaPerIdentity, grace: grace, maximumOpenUploads: 256)
    }

    /// Limits with a bound on unfinished uploads; the other parameters have the documented defaults.
    public init(maximumSize: Int64 = 2 << 30, quotaPerIdentity: Int64 = 20 << 30, grace: Duration = .seconds(86_400),
                maximumOpenUploads: Int) {
        self.maximumSize = maximumSize
        self.quotaPerIdentity = quotaPerIdentity
        self.grace = grace
        self.maximumOpenUploads = maximumOpenUploads
    }
}

/// An attachment a caller may read, as ``OfflineSyncService/readableAttachment(claims:hash:)``
/// found it.
public struct ReadableAttachment: Sendable {
    /// Its size in bytes.
    public let size: Int64
    /// The upload whose chunks hold the bytes.
    let holder: String
    /// The media type declared by the first reference to it, in key order, from a row the
    /// caller may read; `nil` when that declaration is no media type, or when the caller
    /// reads the file only as its uploader. Never a type from a row the caller may not read.
    package let contentType: AttachmentMediaType?
}

/// One identity's upload of one attachment (`__srv_att_uploads`), keyed by identity and
/// hash. A finished one is that identity's grant: it may reference the hash and read it.
struct AttachmentUploadRow: StoredRow {
    static let table = "__srv_att_uploads"
    enum CodingKeys: String, CodingKey { case id, identity, hash, received, length, complete, touchedAt, run, chunks }

    var id: String
    var identity: String
    var hash: String
    /// Bytes stored so far (the upload's offset).
    var received: Int64
    /// The declared length, or -1 while unknown.
    var length: Int64
    var complete: Bool
    var touchedAt: Timestamp
    /// A random name for this run of the upload, new each time the upload is created, so an
    /// instance's running hash (``UploadHashes``) can never be taken for another run's. Absent
    /// on rows written before runs were named.
    var run: String? = nil
    /// The name its pieces are stored under (``AttachmentChunkRow/upload``): the key and the
    /// run, so the pieces of two runs of one identity's upload of one hash never mix, and
    /// removing an old run's pieces cannot take a new run's. Absent on rows written before it
    /// was kept, whose pieces are under the row's id (``chunkOwner``).
    var chunks: String? = nil

    static let schema = TableSchema(table, fields: [
        column(.identity, .string, indexed: true), column(.hash, .string, indexed: true), column(.received, .int),
        column(.length, .int), column(.complete, .bool), column(.touchedAt, .date, indexed: true), column(.run, .string),
        column(.chunks, .string),
    ], undeclaredFields: .reject)

    static func key(identity: String, hash: String) -> String { CompositeKey.slashed(identity, last: hash) }

    /// A new run's row of the upload `key`: a fresh run name, and its pieces named after it.
    static func newRun(key: String, identity: String, hash: String, received: Int64, length: Int64, complete: Bool,
                       touchedAt: Timestamp) -> AttachmentUploadRow {
        let run = UUID.randomString()
        return AttachmentUploadRow(id: key, identity: identity, hash: hash, received: received, length: length, complete: complete,
                                   touchedAt: touchedAt, run: run, chunks: CompositeKey.slashed(key, last: run))
    }

    /// The name its pieces are stored under: ``chunks``, or the row's id on an older row.
    var chunkOwner: String { chunks ?? id }
}

/// A piece of an upload's bytes (`__srv_att_chunks`), at its offset.
struct AttachmentChunkRow: StoredRow {
    static let table = "__srv_att_chunks"
    enum CodingKeys: String, CodingKey { case id, upload, offset, bytes }

    var id: String
    /// The upload the piece belongs to: its ``AttachmentUploadRow/chunkOwner`` (a finished
    /// file's ``AttachmentFileRow/holder``).
    var upload: String
    var offset: Int64
    var bytes: [UInt8]

    static let schema = TableSchema(table, fields: [
        column(.upload, .string), column(.offset, .int), column(.bytes, .bytes),
    ], indexes: [IndexDefinition([CodingKeys.upload.rawValue, CodingKeys.offset.rawValue])], undeclaredFields: .reject)

    /// Ids sort by offset within an upload (20 digits hold any `Int64`).
    static func key(upload: String, offset: Int64) -> String {
        let digits = String(offset)
        return CompositeKey.slashed(upload, last: String(repeating: "0", count: max(0, 20 - digits.count)) + digits)
    }

    func record() throws -> Record {
        Record(id: id, nonNullFields: [Self.name(.upload): .string(upload), Self.name(.offset): .int(offset), Self.name(.bytes): .bytes(bytes)])
    }
}

/// An attachment the server holds whole (`__srv_att_files`), keyed by hash.
struct AttachmentFileRow: StoredRow {
    static let table = "__srv_att_files"
    enum CodingKeys: String, CodingKey { case id, size, holder, completedAt }

    var id: String
    var size: Int64
    /// The name the file's pieces are stored under (``AttachmentUploadRow/chunkOwner``).
    var holder: String
    var completedAt: Timestamp

    static let schema = TableSchema(table, fields: [
        column(.size, .int), column(.holder, .string), column(.completedAt, .date, indexed: true),
    ], undeclaredFields: .reject)
}

/// A stored row that references an attachment (`__srv_att_refs`): who may read the row may
/// read the file, and is served it with the media type the row declares.
struct AttachmentReferenceRow: StoredRow {
    static let table = "__srv_att_refs"
    enum CodingKeys: String, CodingKey { case id, hash, table, row, contentType }

    var id: String
    var hash: String
    var table: String
    /// The stored row's id (an owner-only row's includes its owner).
    var row: String
    /// The media type the row's reference declares (its `contentType`), as declared; it is
    /// judged when served (``AttachmentMediaType``). Empty when the declaration is longer than
    /// ``AttachmentMediaType/maximumLength`` bytes (never served). Absent on references
    /// recorded before types were kept: a download reads the type from the row itself.
    var contentType: String? = nil

    static let schema = TableSchema(table, fields: [
        column(.hash, .string, indexed: true), column(.table, .string), column(.row, .string), column(.contentType, .string),
    ], undeclaredFields: .reject)

    /// The reference from `row` of `table` to `hash`, declaring `contentType`.
    init(hash: String, table: String, row: String, contentType: String) {
        id = Self.key(hash: hash, table: table, row: row)
        self.hash = hash
        self.table = table
        self.row = row
        self.contentType = contentType.utf8.count <= AttachmentMediaType.maximumLength ? contentType : ""
    }

    /// The id of the reference from `row` of `table` to `hash`.
    static func key(hash: String, table: String, row: String) -> String { CompositeKey.slashed(hash, table, last: row) }
}

extension OfflineSyncService {
    /// Bytes stored per chunk row of an upload (1 MiB): the HTTP routes and the in-process
    /// remote both cut uploads into pieces of this size.
    public static let attachmentPiece = 1 << 20

    static let attachmentSchemas = [AttachmentUploadRow.schema, AttachmentChunkRow.schema, AttachmentFileRow.schema,
                                    AttachmentReferenceRow.schema, AttachmentUsageRow.schema]
}
