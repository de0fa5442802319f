/// The kind of a queued operation.
public enum OperationKind: String, Sendable, Hashable, Codable, CaseIterable {
    /// Creates the item.
    case insert
    /// Replaces the item's fields.
    case update
    /// Deletes the item.
    case delete
}

/// One operation of a push: what to do to which item, based on which version.
public struct PushOperation: Sendable, Hashable {
    /// A unique id. The remote remembers the outcome per id, so a replay gets the first outcome.
    public var id: String
    /// The table.
    public var table: String
    /// The item's id.
    public var itemId: String
    /// Insert, update or delete.
    public var kind: OperationKind
    /// The item's fields for an insert or update (system properties are ignored); `nil` for a delete.
    public var item: Record?
    /// The version the client last saw, or `nil` for an unconditional write.
    public var baseVersion: String?

    /// Creates an operation.
    public init(id: String, table: String, itemId: String, kind: OperationKind, item: Record?, baseVersion: String?) {
        self.id = id
        self.table = table
        self.itemId = itemId
        self.kind = kind
        self.item = item
        self.baseVersion = baseVersion
    }

    /// The record an applied insert or update stored, given what the remote added: its item's
    /// fields under its item id. `nil` for a delete or an operation without an item, whose
    /// applied record is the remote's copy, not one the operation carries. The server keeps
    /// and sends only the added properties of an outcome that equals this, and the receiver
    /// rebuilds it here.
    package func storedRecord(version: String?, updatedAt: Timestamp?, deleted: Bool) -> Record? {
        guard kind != .delete, let item else { return nil }
        return Record(id: itemId, fields: item.fields, version: version, updatedAt: updatedAt, deleted: deleted)
    }
}

/// What the remote did with one pushed operation.
///
/// New cases arrive in minor releases (Docs/Versioning.md): switch over it with an
/// `@unknown default:` case.
public enum PushOutcome: Sendable, Hashable {
    /// Applied; the record as the remote now stores it (a tombstone for a delete).
    case applied(Record)
    /// Not applied: the base version is stale or the item already exists. Carries the
    /// remote's current record (possibly a tombstone).
    case conflict(serverRecord: Record)
    /// Not applied and never will be as sent (invalid data, unknown table, forbidden…).
    /// `status` is an HTTP-like code when the remote has one; `reason` is a sentence for
    /// people. What kind of refusal it is, for a program to branch on, is the result's
    /// ``PushResult/rejectionCode``, never a part of `reason`.
    case rejected(reason: String, status: Int?)
}

/// The result of one pushed operation, by operation id.
public struct PushResult: Sendable, Hashable {
    /// The operation's id.
    public var operationId: String
    /// What happened to it.
    public var outcome: PushOutcome
    /// For a ``PushOutcome/rejected(reason:status:)`` outcome, what kind of refusal it is when
    /// the remote says: ``SyncError/Code/forbidden`` (the sync rules refuse the write, status
    /// 403), ``SyncError/Code/attachmentMissing`` (the record references a file the remote
    /// does not hold for this identity, status 409: upload it and send the record again).
    /// `nil` for other outcomes and for a rejection the remote names no code for; a
    /// ``SyncContext`` then goes by the status (``OperationError/code``).
    ///
    /// Kept beside the outcome rather than in the `rejected` case, so code that matches
    /// `.rejected(reason, status)` keeps compiling.
    public var rejectionCode: SyncError.Code?

    /// Creates a result whose rejection, if it is one, names no code.
    public init(operationId: String, outcome: PushOutcome) {
        self.init(operationId: operationId, outcome: outcome, rejectionCode: nil)
    }

    /// Creates a result. `rejectionCode` belongs to a rejected outcome only.
    public init(operationId: String, outcome: PushOutcome, rejectionCode: SyncError.Code?) {
        self.operationId = operationId
        self.outcome = outcome
        self.rejectionCode = rejectionCode
    }
}

/// A request for one page of changes to a table after a cursor.
public struct PullRequest: Sendable, Hashable {
    /// The table.
    public var table: String
    /// Only changes to records matching this predicate (tombstones always come through).
    public var predicate: QueryPredicate
    /// Where the previous page ended, or `nil` to start from the beginning.
    public var cursor: String?
    /// The largest page wanted; the remote may return fewer.
    public var limit: Int

    /// Creates a request.
    public init(table: String, predicate: QueryPredicate = .all, cursor: String? = nil, limit: Int = 500) {
        self.table = table
        self.predicate = predicate
        self.cursor = cursor
        self.limit = limit
    }
}

/// One page of changes, in the remote's commit order.
public struct PullPage: Sendable, Hashable {
    /// Changed records, tombstones (``Record/deleted``) included, each at most once per page.
    public var records: [Record]
    /// The cursor after this page's last change; pass it to get the next page.
    public var nextCursor: String
    /// How many matching changes remain after this page, exactly, at the time of the read.
    public var remaining: Int
    /// `true` when the cursor sent belonged to an earlier incarnation of the table (it was
    /// reset or restored), so this page restarts from the beginning: a full resync.
    public var cursorReset: Bool
    /// Ids of rows that left the identity's view (sync rules: a membership ended, a row moved
    /// to a group it is not in): the client deletes its copies, which were not deleted remotely.
    public var removed: [String]

    /// Creates a page.
    public init(records: [Record], nextCursor: String, remaining: Int, cursorReset: Bool = false, removed: [String] = []) {
        self.records = records
        self.nextCursor = nextCursor
        self.remaining = remaining
        self.cursorReset = cursorReset
        self.removed = removed
    }

    /// `true` when this page ends its pull: nothing remains after it, or it came back empty
    /// (a remote that reports changes remaining but returns none would otherwise be asked
    /// for the same page for ever).
    public var endsPull: Bool { remaining == 0 || (records.isEmpty && removed.isEmpty) }
}

/// The remote side of sync, as a client sees it: already scoped to one identity.
///
/// A thrown error means the call may not have happened (or its answer was lost): the client
/// keeps its queue and retries later, relying on operation ids for idempotency. Throw
/// ``SyncError`` with ``SyncError/Code/transient`` for failures worth retrying.
public protocol RemoteStore: Sendable {
    /// Applies a batch of operations in order and returns one result per operation.
    func push(_ operations: [PushOperation]) async throws -> [PushResult]
    /// Returns the next page of changes after the request's cursor.
    func pull(_ request: PullRequest) async throws -> PullPage
    /// Opens a pull from the request's cursor to the end, read page by page.
    ///
    /// A remote that can send many pages in one exchange (`HTTPRemoteStore`'s page stream)
    /// returns a stream that reads ahead; the default, ``PagedPullStream``, calls
    /// ``pull(_:)`` once per page. Either way each page carries its own cursor, so a pull cut
    /// short resumes from the last page stored.
    func openPull(_ request: PullRequest) -> any PullStream
}

extension RemoteStore {
    /// One ``pull(_:)`` per page.
    public func openPull(_ request: PullRequest) -> any PullStream {
        PagedPullStream(remote: self, request: request)
    }
}

/// The pages of one pull, in order.
///
/// One reader at a time: ``next()`` is not called again before the previous call returned.
public protocol PullStream: Sendable {
    /// The next page, or `nil` after the page that ended the pull (``PullPage/endsPull``).
    /// A thrown error leaves the pages already returned valid; the caller opens a new pull
    /// from the last cursor it stored.
    func next() async throws -> PullPage?
}

/// A pull read with one ``RemoteStore/pull(_:)`` call per page: each call asks for the page
/// after the previous page's cursor.
public actor PagedPullStream: PullStream {
    private let remote: any RemoteStore
    private var request: PullRequest
    private var finished = false

    /// A stream of `remote`'s pages from `request`'s cursor.
    public init(remote: any RemoteStore, request: PullRequest) {
        self.remote = remote
        self.request = request
    }

    /// The next page; see ``PullStream/next()``.
    public func next() async throws -> PullPage? {
        guard !finished else { return nil }
        let page = try await remote.pull(request)
        request.cursor = page.nextCursor
        finished = page.endsPull
        return page
    }
}
