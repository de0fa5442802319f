/// How a context treats attachments (``SyncOptions/attachments``).
public struct AttachmentOptions: Sendable {
    /// The largest attachment this device stores or uploads, in bytes. Default 2 GiB. A
    /// larger one is refused with ``SyncError/Code/limitExceeded`` before it is kept. The
    /// server has a limit of its own, which it enforces too.
    public var maximumSize: Int64 = 2 << 30
    /// How long a file no record references is kept before a context opening the store
    /// removes it: an attachment stored by another process that has not yet written its
    /// record. Default 10 minutes.
    public var orphanGrace: Duration = .seconds(600)
    /// The most bytes of attachment files this device keeps, or `nil` (the default) for no
    /// limit. Past it, downloaded files are evicted least recently used first (never one
    /// waiting to upload, never a pinned one, never one the app holds through
    /// ``SyncContext/withAttachmentFile(_:isolation:_:)``) after each download and upload; an
    /// evicted file is fetched again on its next use. An eviction that fails is logged and
    /// reported as ``SyncStatus/lastError``.
    public var cacheBudget: Int64?
    /// Which attachments a pull fetches before the app asks, by table name. A table not
    /// named here fetches on first access only. Prefetching runs after the table's pull, a
    /// few files at a time; a file that cannot be fetched then stays on the server and is
    /// fetched on its first access, or tried again at the table's next pull.
    public var prefetch: [String: AttachmentPrefetch] = [:]
    /// How many files a prefetch or an upload moves at once. Default 4.
    public var concurrentTransfers = 4

    /// The defaults.
    public init() {}

    /// Throws ``SyncError/Code/limitExceeded`` when `size` is over ``maximumSize``.
    func check(size: Int64) throws {
        guard size <= maximumSize else {
            throw SyncError(.limitExceeded, "an attachment of \(size) bytes is over the limit of \(maximumSize) bytes")
        }
    }
}

/// When a pull fetches a table's attachments (``AttachmentOptions/prefetch``).
public enum AttachmentPrefetch: Sendable, Hashable {
    /// Every attachment the records a pull brings reference.
    case all
    /// The attachments of the table's `n` most recently updated records (the server's
    /// `updatedAt`): a photo feed that shows the newest first.
    case newest(Int)
}
