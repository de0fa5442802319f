import Foundation
import OfflineSync
import OfflineSyncServer

extension FuzzTarget {
    /// What the operator's console reads from a browser and from the server's own metrics, and
    /// how the server tells a request's client address behind trusted proxies.
    static let consoleTargets: [FuzzTarget] = [
        FuzzTarget("console-form", "the console's sign-in form body (application/x-www-form-urlencoded): its `key` field, read by ConsoleForm") { input throws(FuzzFinding) in
            // An empty key is refused by the route whatever the form held.
            guard let key = ConsoleForm.key(in: text(input)), !key.isEmpty else { return }
            // The key, spelled as a browser encodes it among other fields, reads back the same;
            // the first `key` field is the one read.
            let form = "user=admin&key=" + formEncoded(key) + "&key=other"
            try expect(ConsoleForm.key(in: form) == key, "a key read from a form does not read back from \(form)")
        },
        FuzzTarget("console-cookie", "the console's session cookie: `Cookie` field values (one a line), read by ConsoleSession and checked against the admin key") { input throws(FuzzFinding) in
            let cookies = text(input).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            for (session, signature) in ConsoleSession.offered(cookies: cookies, now: consoleNow) {
                try expect(session.expiry > consoleNow, "a session that ended at \(session.expiry) was offered at \(consoleNow)")
                try expect(session.id.utf8.count == 32 && session.id.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) },
                           "a session id \(session.id) was offered")
                // A cookie is signed exactly when it carries the HMAC under the admin key.
                let expected = session.signature(adminKey: consoleAdminKey)
                let signed = session.isSigned(signature, adminKey: consoleAdminKey)
                try expect(signed == signature.utf8.elementsEqual(expected.utf8),
                           "the signature \(signature) was \(signed ? "accepted" : "refused") where the HMAC is \(expected)")
                guard signed else { continue }
                try expect(!session.isSigned(signature, adminKey: consoleOtherKey), "a cookie signed under one admin key verifies under another")
                // The session's own cookie, as the server sets it, reads back as this session.
                let cookie = String(session.setCookie(adminKey: consoleAdminKey, secure: true).prefix { $0 != ";" })
                let again = ConsoleSession.offered(cookies: [cookie], now: consoleNow)
                try expect(again.count == 1 && again[0].session == session && again[0].session.isSigned(again[0].signature, adminKey: consoleAdminKey),
                           "a session's own cookie \(cookie) does not read back")
            }
        },
        FuzzTarget("metric-totals", "Prometheus text (format 0.0.4) as the console sums the server's /metrics: MetricTotals.parse and lines") { input throws(FuzzFinding) in
            let samples = MetricTotals.parse(text(input))
            let lines = MetricTotals.lines(input)
            // The format allows `+Inf` and `NaN` (and Double reads them), so only finite samples
            // promise finite totals.
            if samples.allSatisfy({ $0.value.isFinite && abs($0.value) <= 1e300 }) {
                for line in lines { try expect(line.value.isFinite, "\(line.label) totals \(line.value) from finite samples") }
            }
            // Outside ASCII a character the format gives a meaning to may join the one before it
            // into one grapheme cluster, as it does when the parser reads it, so a sample is
            // re-spelled and read again for ASCII input only.
            guard input.allSatisfy({ $0 < 0x80 }) else { return }
            for sample in samples {
                let line = spelledSample(name: sample.name, labels: sample.labels, value: sample.value)
                let again = MetricTotals.parse(line)
                let sameValue = again.first.map { $0.value == sample.value || ($0.value.isNaN && sample.value.isNaN) } ?? false
                try expect(again.count == 1 && again[0].name == sample.name && again[0].labels == sample.labels && sameValue,
                           "the sample \(line) does not read back as written")
            }
        },
        FuzzTarget("trusted-proxies", "trusted proxies (comma-separated) on the first line, a peer's address on the second, then X-Forwarded-For values: TrustedProxies and its client-address walk") { input throws(FuzzFinding) in
            let lines = text(input).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            let entries = lines[0].split(separator: ",").map(String.init)
            guard let proxies = try refusing("TrustedProxies(_:)", { try TrustedProxies(entries) }) else { return }
            for entry in entries { try checkNetwork(entry) }
            guard lines.count >= 2, let peer = TrustedProxies.address(lines[1]) else { return }
            let spelled = spelledAddress(peer)
            try expect(TrustedProxies.address(spelled) == peer, "the address \(lines[1]) does not read back from \(spelled)")
            let forwardedFor = Array(lines.dropFirst(2))
            let client = proxies.client(peerAddress: peer, forwardedFor: forwardedFor)
            // The answer is the peer, or an address some hop of the header names.
            let hops = forwardedFor.flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces) }
            try expect(client == peer || hops.contains { TrustedProxies.forwardedAddress($0) == client },
                       "the client \(spelledAddress(client)) is neither the peer nor in X-Forwarded-For")
            if !proxies.contains(peer) {
                try expect(client == peer, "an untrusted peer's X-Forwarded-For was believed: \(spelledAddress(client))")
            }
        },
    ]

    /// The admin key the cookie target checks signatures against (its seeds are signed with it).
    static let consoleAdminKey = "offline-sync-fuzz-admin-key"
    /// Another admin key, under which no cookie the first one signed may verify.
    static let consoleOtherKey = "offline-sync-fuzz-other-key"
    /// The cookie target's clock, in seconds since 1970: 2026-11-28T00:00:00Z.
    static let consoleNow: Int64 = 1_795_824_000

    /// `value` as a browser encodes a form field: unreserved bytes as they are, a space as
    /// `+`, any other byte as `%XX`.
    static func formEncoded(_ value: String) -> String {
        let digits = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        for byte in value.utf8 {
            let unreserved = (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "~")
            if unreserved {
                out.append(byte)
            } else if byte == UInt8(ascii: " ") {
                out.append(UInt8(ascii: "+"))
            } else {
                out += [UInt8(ascii: "%"), digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// One sample in the exposition format: `name{label="value",…} value`, with `\\`, `\"`
    /// and `\n` escaped in label values (no braces without labels).
    static func spelledSample(name: String, labels: [String: String], value: Double) -> String {
        guard !labels.isEmpty else { return "\(name) \(value)" }
        var pairs: [String] = []
        for (label, labelValue) in labels {
            var escaped = ""
            for character in labelValue {
                switch character {
                case "\\": escaped += "\\\\"
                case "\"": escaped += "\\\""
                case "\n": escaped += "\\n"
                default: escaped.append(character)
                }
            }
            pairs.append("\(label)=\"\(escaped)\"")
        }
        return "\(name){\(pairs.joined(separator: ","))} \(value)"
    }

    /// An address in text: dotted for 4 bytes, eight hexadecimal groups for 16.
    static func spelledAddress(_ bytes: [UInt8]) -> String {
        guard bytes.count == 16 else { return bytes.map { String($0) }.joined(separator: ".") }
        var groups: [String] = []
        for index in stride(from: 0, to: 16, by: 2) {
            let group = UInt16(bytes[index]) << 8 | UInt16(bytes[index + 1])
            groups.append(String(group, radix: 16))
        }
        return groups.joined(separator: ":")
    }

    /// Throws unless the trusted proxy `entry` (accepted) contains the address it is written
    /// with. An IPv4-mapped network shorter than 96 bits stays an IPv6 network, which an IPv4
    /// address (as a mapped peer is compared) is never in, and is left out.
    static func checkNetwork(_ entry: String) throws(FuzzFinding) {
        let trimmed = entry.trimmingCharacters(in: .whitespaces)
        let parts = trimmed.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let base = parts.first, let address = TrustedProxies.address(String(base)) else { return }
        if address.count == 4, base.contains(":"), parts.count == 2, let prefix = Int(parts[1]), prefix < 96 { return }
        guard let single = try refusing("TrustedProxies(_:)", { try TrustedProxies([entry]) }) else {
            throw FuzzFinding("the trusted proxy \(trimmed) is accepted in a list and refused alone")
        }
        try expect(single.contains(address), "the trusted proxy \(trimmed) does not contain its own address")
    }
}
