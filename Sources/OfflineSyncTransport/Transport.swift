/// What ``NativeRemote`` needs of an HTTP library: send a request and read its answer as it
/// comes, and open a WebSocket. Everything above that — deadlines for silent bodies, retries
/// and backoff, the token provider, typed refusals, the page stream, the change channel and
/// its reconnection — lives once in ``NativeRemote``, whatever the library.
///
/// `OfflineSyncHTTP` implements it on AsyncHTTPClient and SwiftNIO, `OfflineSyncURLSession` on
/// Foundation's `URLSession`; an app with its own HTTP stack can implement it too.
public protocol HTTPTransport: Sendable {
    /// Sends `request` and returns once the response's head came, within `timeout` (a
    /// transport that cannot stop waiting at once throws when the deadline passes and leaves
    /// its request behind). The body is read afterwards, chunk by chunk: the caller watches
    /// each read for silence, so `timeout` need not cover it.
    ///
    /// Throws what went wrong below HTTP (a refused connection, a reset, a deadline);
    /// ``NativeRemote`` retries those, so a transport must not throw ``OfflineSync/SyncError``
    /// for them. A cancelled caller gets `CancellationError` (or the library's own).
    func execute(_ request: TransportRequest, timeout: Duration) async throws -> TransportResponse

    /// Opens a WebSocket to `url` (`ws://` or `wss://`) sending `headers` with the upgrade,
    /// passes each text message to `receive` (binary ones are ignored; a message over
    /// `maxMessageBytes` ends the socket) and returns when the socket closes: the close code
    /// the server sent (1001 "going away" makes the channel reconnect at once without
    /// reporting a disconnection), `nil` when it sent none.
    ///
    /// Throws ``WebSocketUpgradeRefused`` when the server answers the upgrade with anything
    /// but 101, and ``WebSocketUnavailable`` when this transport cannot open a WebSocket here
    /// at all (the change channel then uses the server's event stream, for good).
    func webSocket(url: String, headers: [(name: String, value: String)], maxMessageBytes: Int,
                   receive: @escaping @Sendable (String) -> Void) async throws -> UInt16?

    /// Words an operator can act on for an error this transport threw ("the connection was
    /// refused"), never anything the request carried; `nil` for an error it does not know.
    func describe(_ error: any Error) -> String?

    /// The most bytes one streamed response should carry, for a transport that holds what
    /// arrives until it is read and cannot pause a response: the server ends a page-stream
    /// response after the page that reaches it (the remote asks again from that page's
    /// cursor), and an attachment download asks for ranges of this size, one after the other
    /// (``NativeRemote/attachmentDownloadWindow``). `nil` (the default) for a transport that
    /// reads only as fast as it is asked.
    var streamedResponseLimit: Int? { get }

    /// Whether this transport sends a ``TransportRequest/bodyStream`` as it reads it (holding a
    /// piece at a time). `false` (the default): the remote hands it whole bodies only.
    var streamsRequestBodies: Bool { get }
}

extension HTTPTransport {
    /// No limit: the transport has back-pressure.
    public var streamedResponseLimit: Int? { nil }
    /// Whole bodies only.
    public var streamsRequestBodies: Bool { false }
}

/// A request body read a piece at a time while it is sent, of a length known beforehand
/// (an attachment's bytes, read from their file). Reading is by offset, so a transport may
/// send it again from the start.
public struct TransportBodyStream: Sendable {
    /// The body's length in bytes.
    public var length: Int64
    /// Reads up to `count` bytes at `offset` of the body (fewer only at its end).
    public var read: @Sendable (_ offset: Int64, _ count: Int) async throws -> [UInt8]

    /// A body of `length` bytes that `read` gives.
    public init(length: Int64, read: @escaping @Sendable (_ offset: Int64, _ count: Int) async throws -> [UInt8]) {
        self.length = length
        self.read = read
    }
}

/// One HTTP request, as ``HTTPTransport/execute(_:timeout:)`` sends it.
public struct TransportRequest: Sendable {
    /// The request's method.
    public enum Method: String, Sendable, Hashable {
        case get = "GET", post = "POST", put = "PUT", delete = "DELETE", head = "HEAD", patch = "PATCH"
    }

    /// The method.
    public var method: Method
    /// The whole URL, query included.
    public var url: String
    /// The headers, in order (a name may repeat).
    public var headers: [(name: String, value: String)]
    /// The body; `nil` for none.
    public var body: [UInt8]?
    /// A body read while it is sent, for a transport that ``HTTPTransport/streamsRequestBodies``
    /// (then ``body`` is `nil`).
    public var bodyStream: TransportBodyStream?
    /// The most bytes of the answer's body that may wait unread at once, for a transport that
    /// holds what arrives until it is read (one with a ``HTTPTransport/streamedResponseLimit``):
    /// past it such a transport ends the response, and the body's next read throws
    /// ``ResponseOverflow``. A caller that keeps the whole body anyway (it collects it up to a
    /// limit) gives that limit; `nil` leaves the bound to the transport (`URLSessionTransport`:
    /// twice its `streamedResponseLimit`). A transport with back-pressure ignores it.
    public var responseBufferLimit: Int?

    /// Creates a request.
    public init(method: Method, url: String, headers: [(name: String, value: String)] = [], body: [UInt8]? = nil) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }
}

/// A response's head, and its body to read.
public struct TransportResponse: Sendable {
    /// The status code.
    public var status: Int
    /// The headers, in order.
    public var headers: [(name: String, value: String)]
    /// The body, read a chunk at a time.
    public var body: any TransportBody

    /// Creates a response.
    public init(status: Int, headers: [(name: String, value: String)], body: any TransportBody) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The first header named `name` (any case).
    public func header(_ name: String) -> String? {
        headers.first { $0.name.caseInsensitiveEquals(name) }?.value
    }
}

/// A response body, read by one reader at a time.
///
/// A read that the caller gave up on (its deadline passed) is cancelled and never awaited;
/// the body is then dropped, so a transport must let go of the connection when its body is
/// released (or when the read is cancelled) and never block a thread in `next()`.
public protocol TransportBody: AnyObject, Sendable {
    /// The next bytes, in order; `nil` at the end. An empty chunk is allowed and means nothing.
    func next() async throws -> [UInt8]?
}

extension TransportBody {
    /// The whole body, or a failure once it passes `limit` bytes (the rest is not read).
    func collect(upTo limit: Int) async throws -> [UInt8] {
        var bytes: [UInt8] = []
        while let chunk = try await next() {
            guard bytes.count + chunk.count <= limit else {
                throw StreamBrokeOff(reason: "the answer is larger than \(limit) bytes")
            }
            bytes += chunk
        }
        return bytes
    }
}

/// A response's body sent more than its reader had read by ``limit`` bytes, over a transport
/// that cannot pause a response (``TransportRequest/responseBufferLimit``): the transport let
/// go of what waited and ended the response. A page stream goes on from its last page in a
/// new request; any other reader fails as if the connection had broken.
public struct ResponseOverflow: Error, Sendable, CustomStringConvertible {
    /// The most bytes the response could hold unread.
    public let limit: Int
    /// Creates the error.
    public init(limit: Int) { self.limit = limit }
    public var description: String { "the server sent more than the \(limit) bytes the transport holds unread" }
}

/// The server answered a WebSocket upgrade with something other than 101 (a proxy that does
/// not pass WebSockets, a refused token). The change channel reports it at once
/// (``OfflineSync/RemoteChangeEvent/unavailable(_:)``, rejected) and asks the server's event
/// stream instead, whose plain HTTP answer says why.
public struct WebSocketUpgradeRefused: Error, Sendable, CustomStringConvertible {
    /// Creates the error.
    public init() {}
    public var description: String { "the WebSocket upgrade was refused" }
}

/// The transport cannot open a WebSocket on this platform (Foundation on Linux, whose libcurl
/// is built without WebSockets). The change channel uses the server's event stream instead.
public struct WebSocketUnavailable: Error, Sendable, CustomStringConvertible {
    /// Why, in words.
    public let reason: String
    /// Creates the error.
    public init(reason: String) { self.reason = reason }
    public var description: String { reason }
}

extension String {
    /// ASCII case-insensitive equality (header names).
    func caseInsensitiveEquals(_ other: String) -> Bool {
        utf8.count == other.utf8.count && zip(utf8, other.utf8).allSatisfy { a, b in
            (a | 0x20) == (b | 0x20) && ((a | 0x20) >= 0x61 && (a | 0x20) <= 0x7A || a == b)
        }
    }
}
