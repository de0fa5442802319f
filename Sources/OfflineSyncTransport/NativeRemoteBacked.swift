import OfflineSync

/// A remote that is a ``NativeRemote`` over one transport (`HTTPRemoteStore`,
/// `URLSessionRemoteStore`): it gets the whole native API from it — push, pull, the page
/// stream, the change channel, reachability — and differs only in how it is made.
public protocol NativeRemoteBacked: RemoteStore, RemoteChangeSource, AttachmentRemote {
    /// The remote over this type's transport.
    var native: NativeRemote { get }
}

extension NativeRemoteBacked {
    /// See ``OfflineSync/AttachmentRemote/attachmentUploadState(_:)``.
    public func attachmentUploadState(_ sha256: String) async throws -> AttachmentUploadState? {
        try await native.attachmentUploadState(sha256)
    }

    /// See ``OfflineSync/AttachmentRemote/appendAttachment(_:offset:bytes:complete:)``.
    public func appendAttachment(_ attachment: Attachment, offset: Int64, bytes: [UInt8], complete: Bool) async throws -> AttachmentUploadState {
        try await native.appendAttachment(attachment, offset: offset, bytes: bytes, complete: complete)
    }

    /// See ``OfflineSync/AttachmentRemote/appendAttachment(_:offset:length:complete:read:)``.
    public func appendAttachment(_ attachment: Attachment, offset: Int64, length: Int64, complete: Bool,
                                 read: @escaping @Sendable (_ offset: Int64, _ count: Int) async throws -> [UInt8]) async throws -> AttachmentUploadState {
        try await native.appendAttachment(attachment, offset: offset, length: length, complete: complete, read: read)
    }

    /// See ``OfflineSync/AttachmentRemote/attachmentRequestLimit``.
    public var attachmentRequestLimit: Int64 { native.attachmentRequestLimit }

    /// See ``OfflineSync/AttachmentRemote/readAttachment(_:from:_:)``.
    public func readAttachment(_ sha256: String, from offset: Int64, _ body: @Sendable ([UInt8]) async throws -> Void) async throws -> Bool {
        try await native.readAttachment(sha256, from: offset, body)
    }

    /// Reads `attachment` from `offset` on, checking its size on every answer; see ``NativeRemote/readAttachment(_:from:_:)``.
    public func readAttachment(_ attachment: Attachment, from offset: Int64, _ body: @Sendable ([UInt8]) async throws -> Void) async throws -> Bool {
        try await native.readAttachment(attachment, from: offset, body)
    }

    /// How requests are timed and retried.
    public typealias Configuration = NativeRemote.Configuration

    /// The server's base URL (`http://host:port`).
    public var baseURL: String { native.baseURL }
    /// The retry and timeout policy.
    public var configuration: Configuration { native.configuration }

    /// Pushes a batch; see ``NativeRemote/push(_:)``.
    public func push(_ operations: [PushOperation]) async throws -> [PushResult] { try await native.push(operations) }

    /// Pulls one page; see ``NativeRemote/pull(_:)``.
    public func pull(_ request: PullRequest) async throws -> PullPage { try await native.pull(request) }

    /// Opens a pull as the server's page stream; see ``NativeRemote/openPull(_:)``.
    public func openPull(_ request: PullRequest) -> any PullStream { native.openPull(request) }

    /// The change channel; see ``NativeRemote/changes(device:)``.
    public func changes(device: String?) -> AsyncStream<RemoteChangeEvent> { native.changes(device: device) }

    /// The change channel without push sync.
    public func changes() -> AsyncStream<RemoteChangeEvent> { native.changes(device: nil) }

    /// Whether the server answers `GET /health` with 200 within `timeout` (one attempt, no retries).
    public func isReachable(timeout: Duration = .seconds(5)) async -> Bool { await native.isReachable(timeout: timeout) }

    /// The default ``OfflineSync/NetworkMonitor`` for this server; see ``NativeRemote/networkMonitor(interval:maxBackoff:)``.
    public func networkMonitor(interval: Duration = .seconds(30), maxBackoff: Duration = .seconds(30)) -> ProbingNetworkMonitor {
        native.networkMonitor(interval: interval, maxBackoff: maxBackoff)
    }
}

extension HTTPDatasetRemote {
    /// Creates the remote for `identityId` of `identityPoolId`, over `remote`'s native API.
    public init(_ remote: some NativeRemoteBacked, identityPoolId: String, identityId: String) {
        self.init(remote.native, identityPoolId: identityPoolId, identityId: identityId)
    }
}
