@testable import OfflineSyncServer
import Testing

@Suite("Identity providers' key sets: lifetimes from Cache-Control")
struct KeyRefreshTests {
    @Test("max-age is read from Cache-Control; no-cache and no-store mean 0; anything else says nothing",
          arguments: [
              (["max-age=60"], 60), (["public, max-age=120, must-revalidate"], 120), (["MAX-AGE=7"], 7),
              (["no-cache"], 0), (["no-store, max-age=100"], 0), (["max-age=abc"], nil), (["s-maxage=5"], nil),
              ([], nil), (["private", "max-age=30"], 30), (["max-age=-1"], nil), (["max-age=\"45\""], 45),
          ] as [([String], Int64?)])
    func maxAge(values: [String], seconds: Int64?) {
        #expect(KeyDocumentLoader.maxAge(cacheControl: values) == seconds.map(Duration.seconds))
    }

    @Test("a lifetime is clamped to [5 min, 24 h], 1 h without a header")
    func lifetimeIsClamped() {
        let policy = KeyRefreshPolicy()
        #expect(policy.lifetime(maxAge: nil) == .seconds(3600))
        #expect(policy.lifetime(maxAge: .zero) == .seconds(300))
        #expect(policy.lifetime(maxAge: .seconds(600)) == .seconds(600))
        #expect(policy.lifetime(maxAge: .seconds(31_536_000)) == .seconds(86_400))
    }

    @Test("base64url decodes only the canonical spelling")
    func base64url() {
        #expect(Base64URL.decode("".utf8) == [])
        #expect(Base64URL.decode("QQ".utf8) == Array("A".utf8))
        #expect(Base64URL.decode("QUI".utf8) == Array("AB".utf8))
        #expect(Base64URL.decode("QUJD".utf8) == Array("ABC".utf8))
        #expect(Base64URL.decode("-_8".utf8) == [0xFB, 0xFF])
        for refused in ["QR", "QUJ", "QQ=", "Q", "+/8", "QQ\n", "QUJD=", "Q Q"] {
            #expect(Base64URL.decode(refused.utf8) == nil, "\(refused)")
        }
        for length in 0..<40 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
            #expect(Base64URL.decode(Base64URL.encode(bytes).utf8) == bytes)
        }
    }

    @Test("key URLs: https anywhere, http to loopback only")
    func keyURLs() {
        for allowed in ["https://id.example.com/jwks", "http://127.0.0.1:8080/jwks", "http://localhost/k", "http://[::1]:9/k", "http://127.1.2.3/k"] {
            #expect(TokenIssuer.isAllowedKeyURL(URL(string: allowed)!), "\(allowed)")
        }
        for refused in ["http://id.example.com/jwks", "http://10.0.0.1/k", "ftp://id.example.com/k", "file:///etc/keys.json",
                        "http://127.0.0.1.example.com/k", "https:///nohost"] {
            #expect(!TokenIssuer.isAllowedKeyURL(URL(string: refused)!), "\(refused)")
        }
    }
}

import Foundation
import OfflineSyncService

@Suite("Change notices between instances: the compact form round-trips")
struct ChangeNoticeEncodingTests {
    @Test("notices compare by bytes: identities, groups, tables and origins that differ only in normalisation differ")
    func exactEquality() {
        let composed = "jos\u{E9}", decomposed = "jose\u{301}"
        #expect(ChangeNotice(identity: composed, table: "t") != ChangeNotice(identity: decomposed, table: "t"))
        #expect(ChangeNotice(group: GroupKey(composed), table: "t") != ChangeNotice(group: GroupKey(decomposed), table: "t"))
        #expect(ChangeNotice(identity: "a", table: composed) != ChangeNotice(identity: "a", table: decomposed))
        #expect(ChangeNotice(group: GroupKey("g"), table: "t") != ChangeNotice(identity: "g", table: "t"))
        var first = ChangeNotice(identity: "a", table: "t")
        first.origin = composed
        var second = first
        second.origin = decomposed
        #expect(first != second)
        #expect(Set([first, second]).count == 2)
    }

    @Test("every kind of notice, with and without an origin, decodes to itself; malformed forms are refused")
    func roundTrip() {
        var withOrigin = ChangeNotice(identity: "alice", table: "todos")
        withOrigin.origin = "0F3A-client_1"
        var groupWithOrigin = ChangeNotice(group: GroupKey("list\u{0}7"), table: "todos")
        groupWithOrigin.origin = "c"
        let notices = [
            ChangeNotice(identity: "alice", table: "todos"), ChangeNotice(identity: "名前:with:colons", table: "t"),
            ChangeNotice(group: GroupKey("list-7"), table: "todos"), ChangeNotice(group: GroupKey("g"), member: "bob"),
            ChangeNotice(groupsChangedFor: "carol"), ChangeNotice(everyoneReading: "catalogue"),
            ChangeNotice(dataset: DatasetNotification(identityPoolId: "pool", identityId: "dave", datasetName: "settings", syncCount: 9)),
            withOrigin, groupWithOrigin,
        ]
        for notice in notices {
            #expect(ChangeNotice(encoded: notice.encoded) == notice, "\(notice.encoded)")
        }
        for malformed in ["", "o", "o5:abc", "o1:coo1:c5:alicetodos", "gzz:todos", "x", "p"] {
            #expect(ChangeNotice(encoded: malformed) == nil, "\(malformed)")
        }
    }
}

import OfflineSync
