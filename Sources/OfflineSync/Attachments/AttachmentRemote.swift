/// Where an identity's upload of an attachment stands on a remote.
public struct AttachmentUploadState: Sendable, Hashable {
    /// Bytes the remote has taken (the resumable upload's offset).
    public var offset: Int64
    /// Whether the remote holds the whole file and the identity may use it.
    public var complete: Bool

    /// A state.
    public init(offset: Int64, complete: Bool) {
        self.offset = offset
        self.complete = complete
    }
}

/// A remote that moves attachment bytes: the project's server, over HTTP (`HTTPRemoteStore`,
/// `URLSessionRemoteStore`) or in process. A ``SyncContext`` over a remote that is not one
/// keeps attachments on the device only, and the server refuses records that reference them.
///
/// Uploads are resumable: the remote keeps what it has taken, and ``attachmentUploadState(_:)``
/// says how much, so an upload cut off anywhere goes on from there, never from zero.
public protocol AttachmentRemote: Sendable {
    /// Where this identity's upload of the hash stands: `nil` when it has none and may not read
    /// a whole file of that hash (the remote never says whether another identity holds it).
    func attachmentUploadState(_ sha256: String) async throws -> AttachmentUploadState?

    /// Appends `bytes` at `offset` to this identity's upload of the attachment (offset 0
    /// starts it), completing it when `complete` (the remote then checks the hash). Throws
    /// ``SyncError/Code/conflict`` when `offset` is not the remote's (ask the state again),
    /// ``SyncError/Code/limitExceeded`` over a limit or quota, ``SyncError/Code/attachmentDamaged``
    /// when the bytes do not hash to the name.
    func appendAttachment(_ attachment: Attachment, offset: Int64, bytes: [UInt8], complete: Bool) async throws -> AttachmentUploadState

    /// Appends the `length` bytes from `offset` of the attachment, which `read(offset, count)`
    /// gives a piece at a time as the request goes: a remote that streams request bodies holds
    /// a piece, never the whole append. Otherwise as ``appendAttachment(_:offset:bytes:complete:)``.
    /// The default reads the bytes whole and calls that.
    func appendAttachment(_ attachment: Attachment, offset: Int64, length: Int64, complete: Bool,
                          read: @escaping @Sendable (_ offset: Int64, _ count: Int) async throws -> [UInt8]) async throws -> AttachmentUploadState

    /// The most bytes one append should carry: what one request may take before its answer.
    /// The default, 8 MiB, is what a remote that holds a request's body whole should hold.
    var attachmentRequestLimit: Int64 { get }

    /// Reads the attachment from `offset` on, handing each piece to `body` as it arrives.
    /// Returns `false` when the remote has no file of that hash this identity may read.
    func readAttachment(_ sha256: String, from offset: Int64, _ body: @Sendable ([UInt8]) async throws -> Void) async throws -> Bool

    /// Reads `attachment` from `offset` on, as the read by hash does, and checks that the
    /// remote's file has the reference's size before handing over its bytes
    /// (``SyncError/Code/attachmentDamaged`` when it does not). The default reads by hash and
    /// leaves the size to the caller, which checks the bytes it received anyway.
    func readAttachment(_ attachment: Attachment, from offset: Int64, _ body: @Sendable ([UInt8]) async throws -> Void) async throws -> Bool
}

extension AttachmentRemote {
    /// 8 MiB: the body is held whole.
    public var attachmentRequestLimit: Int64 { 8 << 20 }

    /// Reads by hash; the caller checks the size of what it received.
    public func readAttachment(_ attachment: Attachment, from offset: Int64, _ body: @Sendable ([UInt8]) async throws -> Void) async throws -> Bool {
        try await readAttachment(attachment.sha256, from: offset, body)
    }

    /// Reads the bytes whole, a MiB at a time, and appends them.
    public func appendAttachment(_ attachment: Attachment, offset: Int64, length: Int64, complete: Bool,
                                 read: @escaping @Sendable (_ offset: Int64, _ count: Int) async throws -> [UInt8]) async throws -> AttachmentUploadState {
        let bytes = try await AttachmentTransfer.collect(attachment, offset: offset, length: length, read: read)
        return try await appendAttachment(attachment, offset: offset, bytes: bytes, complete: complete)
    }
}

extension AttachmentTransfer {
    /// The `length` bytes from `offset` that `read` gives, a MiB at a time, whole: for a
    /// remote that sends a body whole. Throws ``SyncError/Code/attachmentMissing`` when
    /// `read` ends early (the file shrank under the upload).
    package static func collect(_ attachment: Attachment, offset: Int64, length: Int64,
                                read: @Sendable (_ offset: Int64, _ count: Int) async throws -> [UInt8]) async throws -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Int(length))
        while Int64(bytes.count) < length {
            let piece = try await read(offset + Int64(bytes.count), Int(min(Int64(chunkSize), length - Int64(bytes.count))))
            guard !piece.isEmpty else { throw SyncError(.attachmentMissing, "attachment \(attachment.sha256.prefix(12))… ended before its size") }
            bytes += piece
        }
        return bytes
    }
}

/// Which way an attachment's bytes move.
///
/// New cases arrive in minor releases (Docs/Versioning.md): switch over it with an
/// `@unknown default:` case.
public enum AttachmentTransferDirection: String, Sendable, Hashable {
    /// From this device to the remote.
    case upload
    /// From the remote to this device.
    case download
}
