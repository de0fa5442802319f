import AsyncHTTPClient
import Foundation
import HTTPTypes
import Logging
import NIOCore
import NIOHTTP1
import NIOWebSocket
import OfflineSyncTransport
import WSClient

/// ``OfflineSyncTransport/HTTPTransport`` on AsyncHTTPClient, with WebSockets from
/// swift-websocket's `WSClient` (both on SwiftNIO).
public struct AsyncHTTPClientTransport: HTTPTransport {
    /// The client requests go through.
    public let client: HTTPClient
    private let logger: Logger

    /// Creates the transport over `client`.
    public init(client: HTTPClient, logger: Logger = Logger(label: "offline-sync.http")) {
        self.client = client
        self.logger = logger
    }

    /// See ``OfflineSyncTransport/HTTPTransport/execute(_:timeout:)``. AsyncHTTPClient's
    /// deadline covers the response's head; the body is read afterwards, as it comes.
    public func execute(_ request: TransportRequest, timeout: Duration) async throws -> TransportResponse {
        var outgoing = HTTPClientRequest(url: request.url)
        outgoing.method = HTTPMethod(rawValue: request.method.rawValue)
        for (name, value) in request.headers { outgoing.headers.add(name: name, value: value) }
        if let body = request.body { outgoing.body = .bytes(ByteBuffer(bytes: body)) }
        if let stream = request.bodyStream { outgoing.body = .stream(StreamedBody(stream), length: .known(stream.length)) }
        let response = try await client.execute(outgoing, timeout: .nanoseconds(timeout.nanoseconds))
        return TransportResponse(status: Int(response.status.code), headers: response.headers.map { ($0.name, $0.value) },
                                 body: ResponseBodyReader(iterator: response.body.makeAsyncIterator()))
    }

    /// Request bodies are streamed, with AsyncHTTPClient's back-pressure.
    public var streamsRequestBodies: Bool { true }

    /// See ``OfflineSyncTransport/HTTPTransport/webSocket(url:headers:maxMessageBytes:receive:)``.
    public func webSocket(url: String, headers: [(name: String, value: String)], maxMessageBytes: Int,
                          receive: @escaping @Sendable (String) -> Void) async throws -> UInt16? {
        var socket = WebSocketClientConfiguration()
        var fields = HTTPFields()
        for (name, value) in headers {
            guard let field = HTTPField.Name(name) else { continue }
            fields.append(HTTPField(name: field, value: value))
        }
        socket.additionalHeaders = fields
        socket.maxFrameSize = maxMessageBytes
        let settings = socket
        do {
            let close = try await WebSocketClient.connect(url: url, configuration: settings, logger: logger) { inbound, _, _ in
                for try await message in inbound.messages(maxSize: maxMessageBytes) {
                    if case .text(let text) = message { receive(text) }
                }
            }
            return close.map { UInt16(webSocketErrorCode: $0.closeCode) }
        } catch let error as WebSocketClientError where error == .webSocketUpgradeFailed {
            throw WebSocketUpgradeRefused()
        }
    }

    /// See ``OfflineSyncTransport/HTTPTransport/describe(_:)``.
    public func describe(_ error: any Error) -> String? {
        if let error = error as? HTTPClientError {
            if error == .connectTimeout { return "the connection could not be established within 5 s" }
            if error == .deadlineExceeded || error == .readTimeout { return "no answer in time" }
            if error == .remoteConnectionClosed { return "the server closed the connection" }
            return error.description
        }
        if let error = error as? IOError {
            switch error.errnoCode {
            case ECONNREFUSED: return "the connection was refused (is the server running on that port?)"
            case ECONNRESET: return "the connection was reset"
            case EHOSTUNREACH, ENETUNREACH: return "the host cannot be reached"
            default: return "I/O error \(error.errnoCode)"
            }
        }
        if error is ChannelError { return "the connection failed (\(error))" }
        return nil
    }
}

/// Lends a response body's iterator to the one task that reads the next bytes.
///
/// AsyncHTTPClient streams a body with back-pressure (a `NIOThrowingAsyncSequenceProducer`
/// whose watermarks are one buffer): the connection reads only as fast as this is read, so a
/// download holds a buffer or so however slow its reader. A read whose task is cancelled
/// throws at once, and a body dropped unread cancels its request.
///
/// `@unchecked Sendable`: the iterator is touched by one task at a time — the task reading
/// the next chunk while its caller waits for the result; a read that was given up is never
/// followed by another (its response is dropped).
private final class ResponseBodyReader: TransportBody, @unchecked Sendable {
    private var iterator: HTTPClientResponse.Body.AsyncIterator

    init(iterator: HTTPClientResponse.Body.AsyncIterator) {
        self.iterator = iterator
    }

    func next() async throws -> [UInt8]? {
        guard let buffer = try await iterator.next() else { return nil }
        return Array(buffer.readableBytesView)
    }
}

/// A ``TransportBodyStream`` as AsyncHTTPClient reads a body: a MiB at a time, when the
/// connection can take more.
struct StreamedBody: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let stream: TransportBodyStream

    init(_ stream: TransportBodyStream) { self.stream = stream }

    struct AsyncIterator: AsyncIteratorProtocol {
        let stream: TransportBodyStream
        var offset: Int64 = 0

        mutating func next() async throws -> ByteBuffer? {
            guard offset < stream.length else { return nil }
            let piece = try await stream.read(offset, Int(Swift.min(1 << 20, stream.length - offset)))
            guard !piece.isEmpty else { throw StreamedBodyEnded(length: stream.length, offset: offset) }
            offset += Int64(piece.count)
            return ByteBuffer(bytes: piece)
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(stream: stream) }
}

/// A streamed body's source ended before its declared length.
struct StreamedBodyEnded: Error, CustomStringConvertible {
    let length: Int64
    let offset: Int64
    var description: String { "the request body ended at \(offset) of its \(length) bytes" }
}
