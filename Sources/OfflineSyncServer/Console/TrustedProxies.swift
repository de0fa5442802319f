import Foundation
import HTTPTypes
import NIOCore
import OfflineSync

/// The proxies whose forwarding headers the server believes: a request whose connection comes
/// from one of them may say, in `X-Forwarded-Proto`, that its client used HTTPS (the console's
/// cookie is then `Secure`; the last value, the one that proxy wrote, is read) and, in
/// `X-Forwarded-For`, which address it came from (what the limit on wrong admin and metrics
/// keys counts). From any other peer those headers are ignored, since whoever connects can
/// write them. None by default.
///
/// Each entry is an address (`10.0.0.7`, `::1`) or a network as address and prefix length
/// (`10.0.0.0/8`, `fd00::/8`). An IPv4 address an IPv6 socket reports (`::ffff:10.0.0.7`) is
/// compared as the IPv4 address.
public struct TrustedProxies: Sendable, Hashable {
    /// One entry: the network's first address in network byte order, and how many of its
    /// leading bits an address must share.
    struct Network: Sendable, Hashable {
        var bytes: [UInt8]
        var prefixLength: Int

        func contains(_ address: [UInt8]) -> Bool {
            guard address.count == bytes.count else { return false }
            var remaining = prefixLength
            for index in bytes.indices where remaining > 0 {
                let bits = min(8, remaining)
                let mask = UInt8(0xFF) << (8 - bits)
                if (address[index] ^ bytes[index]) & mask != 0 { return false }
                remaining -= bits
            }
            return true
        }
    }

    let networks: [Network]

    /// No trusted proxy: forwarding headers are ignored.
    public init() { networks = [] }

    /// The proxies `entries` name. Throws ``SyncError/Code/invalidValue`` for an entry that is
    /// neither an IP address nor an address with a prefix length that fits it (a host name is
    /// refused: the peer's address is what is compared).
    public init(_ entries: [String]) throws {
        networks = try entries.map { entry -> Network in
            let text = entry.trimmingCharacters(in: .whitespaces)
            let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
            guard let first = parts.first, var bytes = Self.plainAddress(String(first)) else {
                throw SyncError(.invalidValue, "a trusted proxy is an IP address or ADDRESS/PREFIX, not '\(text)'")
            }
            var prefix = bytes.count * 8
            if parts.count == 2 {
                guard let given = Int(parts[1]), (0...prefix).contains(given) else {
                    throw SyncError(.invalidValue, "the prefix length of trusted proxy '\(text)' must be from 0 to \(prefix)")
                }
                prefix = given
            }
            // An IPv4-mapped network is compared as the IPv4 network it holds.
            if prefix >= 96, Self.isIPv4Mapped(bytes) {
                bytes = Array(bytes[12...])
                prefix -= 96
            }
            return Network(bytes: bytes, prefixLength: prefix)
        }
    }

    /// Whether no proxy is trusted.
    public var isEmpty: Bool { networks.isEmpty }

    /// Whether `peer`, a connection's remote address, is a trusted proxy.
    func trusts(_ peer: SocketAddress?) -> Bool {
        guard let address = peer.flatMap(Self.bytes(of:)) else { return false }
        return contains(address)
    }

    /// Whether `address` (as ``address(_:)`` gives it) is in a trusted network.
    package func contains(_ address: [UInt8]) -> Bool { networks.contains { $0.contains(address) } }

    /// The address a request came from, in network byte order (4 bytes, or 16 for IPv6): its
    /// connection's peer, unless that is a trusted proxy; then `X-Forwarded-For` read from the
    /// right (each proxy appends the address it received the request from), skipping trusted
    /// proxies, up to the first address that is not one. An entry that is not an address stops
    /// the walk at the proxy that wrote it, so a client cannot choose what it is counted as.
    /// Empty when the peer has no IP address.
    func client(peer: SocketAddress?, forwardedFor: [String]) -> [UInt8] {
        guard let address = peer.flatMap(Self.bytes(of:)) else { return [] }
        return client(peerAddress: address, forwardedFor: forwardedFor)
    }

    /// ``client(peer:forwardedFor:)`` for a peer's address as ``bytes(of:)`` gives it.
    package func client(peerAddress: [UInt8], forwardedFor: [String]) -> [UInt8] {
        var client = peerAddress
        guard contains(client) else { return client }
        let hops = forwardedFor.flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces) }
        for hop in hops.reversed() {
            guard let address = Self.forwardedAddress(hop) else { return client }
            client = address
            if !contains(address) { return address }
        }
        return client
    }

    /// The bytes of an IP address in text (no port, no brackets, no scope), an IPv4-mapped
    /// IPv6 address as its IPv4 address; `nil` for anything else.
    package static func address(_ text: String) -> [UInt8]? {
        guard let bytes = plainAddress(text) else { return nil }
        return isIPv4Mapped(bytes) ? Array(bytes[12...]) : bytes
    }

    /// The bytes of an IP address in text, as written (a mapped address stays 16 bytes).
    private static func plainAddress(_ text: String) -> [UInt8]? {
        guard !text.isEmpty, !text.contains("%"), let address = try? SocketAddress(ipAddress: text, port: 0) else { return nil }
        return rawBytes(of: address)
    }

    /// A connection's peer address as bytes (see ``address(_:)``); `nil` without an IP address.
    static func bytes(of peer: SocketAddress) -> [UInt8]? {
        guard let bytes = rawBytes(of: peer) else { return nil }
        return isIPv4Mapped(bytes) ? Array(bytes[12...]) : bytes
    }

    /// `in_addr` and `in6_addr` hold the address in network byte order on every platform.
    private static func rawBytes(of address: SocketAddress) -> [UInt8]? {
        var bytes: [UInt8] = []
        switch address {
        case .v4(let v4): withUnsafeBytes(of: v4.address.sin_addr) { bytes = Array($0) }
        case .v6(let v6): withUnsafeBytes(of: v6.address.sin6_addr) { bytes = Array($0) }
        case .unixDomainSocket: return nil
        }
        return bytes
    }

    private static func isIPv4Mapped(_ bytes: [UInt8]) -> Bool {
        bytes.count == 16 && bytes[0..<10].allSatisfy { $0 == 0 } && bytes[10] == 0xFF && bytes[11] == 0xFF
    }

    /// One `X-Forwarded-For` entry: an address, `[v6]` or `[v6]:port`, or `v4:port`.
    package static func forwardedAddress(_ hop: String) -> [UInt8]? {
        var text = Substring(hop)
        if text.hasPrefix("["), let close = text.firstIndex(of: "]") {
            text = text[text.index(after: text.startIndex)..<close]
        } else if text.utf8.filter({ $0 == UInt8(ascii: ":") }).count == 1, let colon = text.firstIndex(of: ":") {
            text = text[..<colon]
        }
        return address(String(text))
    }

    static let forwardedForHeader = HTTPField.Name("X-Forwarded-For")!
    static let forwardedProtoHeader = HTTPField.Name("X-Forwarded-Proto")!
}
