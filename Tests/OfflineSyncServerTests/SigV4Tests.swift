import Foundation
import OfflineSync
import OfflineSyncServer
import Testing

/// Requests signed by botocore 1.43 (`botocore.auth.SigV4Auth`, service `cognito-sync`) with
/// the access key `AKIDEXAMPLE` / `wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY`, as sent.
struct SignedRequest {
    var method: String
    var path: String
    var query: String
    var headers: [(name: String, value: String)]
    var body: String

    static let signedAt = Date(timeIntervalSince1970: 1_795_449_079)   // 2026-11-23T15:51:19Z

    static let post = SignedRequest(
        method: "POST", path: "/identitypools/us-east-1%3Apool/identities/us-east-1%3Aabc/datasets/settings", query: "",
        headers: [("Host", "127.0.0.1:8080"), ("Content-Type", "application/json"), ("X-Amz-Date", "20261123T155119Z"),
                  ("Authorization", "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261123/us-east-1/cognito-sync/aws4_request, SignedHeaders=content-type;host;x-amz-date, Signature=31f2f72ebfa21239e9f50e7c5ebd45b3bdf55038defe56750ecb77fd9570bacc"),
                  ("Content-Length", "43")],
        body: #"{"SyncSessionToken":"t","RecordPatches":[]}"#)

    static let getWithQuery = SignedRequest(
        method: "GET", path: "/identitypools/us-east-1%3Apool/identities/us-east-1%3Aabc/datasets", query: "maxResults=5&nextToken=a%20b",
        headers: [("Host", "127.0.0.1:8080"), ("X-Amz-Date", "20261123T155119Z"),
                  ("Authorization", "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261123/us-east-1/cognito-sync/aws4_request, SignedHeaders=host;x-amz-date, Signature=13a1b9d5304574984e9850264c90d5b50097caa3410868a41e42c33e51626b13")],
        body: "")

    static let otherRegion = SignedRequest(
        method: "GET", path: "/identitypools/p/identities/i/datasets/d/records", query: "lastSyncCount=3&syncSessionToken=x&maxResults=10",
        headers: [("Host", "localhost:9000"), ("X-Amz-Custom", "  a   b  "), ("X-Amz-Date", "20261123T155119Z"),
                  ("Authorization", "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261123/eu-west-1/cognito-sync/aws4_request, SignedHeaders=host;x-amz-custom;x-amz-date, Signature=96e708e03f04b1646c48fe5e78c131d25249aebe65cb63050e3643d56e5a2154")],
        body: "")

    func verify(_ verifier: SigV4Verifier, now: Date = SignedRequest.signedAt) throws -> SigV4Verifier.Signer {
        try verifier.verify(method: method, path: path, query: query, headers: headers, body: Array(body.utf8), now: now)
    }

    func replacing(_ name: String, with value: String) -> SignedRequest {
        var copy = self
        copy.headers = headers.map { $0.name == name ? ($0.name, value) : $0 }
        return copy
    }
}

@Suite("SigV4: AWS Signature Version 4 verification")
struct SigV4Tests {
    let verifier = SigV4Verifier(credentials: ["AKIDEXAMPLE": "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"])

    @Test("requests signed by botocore verify: a body, a query with an encoded space, another region, a padded header")
    func botocoreSignatures() throws {
        #expect(try SignedRequest.post.verify(verifier) == .init(
            accessKeyId: "AKIDEXAMPLE", region: "us-east-1",
            signature: "31f2f72ebfa21239e9f50e7c5ebd45b3bdf55038defe56750ecb77fd9570bacc"))
        #expect(try SignedRequest.getWithQuery.verify(verifier).region == "us-east-1")
        #expect(try SignedRequest.otherRegion.verify(verifier).region == "eu-west-1")
        // Query parameters may arrive in any order.
        var reordered = SignedRequest.getWithQuery
        reordered.query = "nextToken=a%20b&maxResults=5"
        #expect(try reordered.verify(verifier).accessKeyId == "AKIDEXAMPLE")
    }

    @Test("a changed body, path, query, method, signed header, signature, key or service is refused")
    func tampering() throws {
        var body = SignedRequest.post
        body.body = #"{"SyncSessionToken":"t","RecordPatches":[{}]}"#
        var path = SignedRequest.post
        path.path = "/identitypools/us-east-1%3Apool/identities/us-east-1%3Aother/datasets/settings"
        var query = SignedRequest.getWithQuery
        query.query = "maxResults=6&nextToken=a%20b"
        var method = SignedRequest.post
        method.method = "PUT"
        let cases: [SignedRequest] = [
            body, path, query, method,
            SignedRequest.post.replacing("Content-Type", with: "text/plain"),
            SignedRequest.post.replacing("Host", with: "evil.example:8080"),
            SignedRequest.post.replacing("Authorization", with: "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261123/us-east-1/cognito-sync/aws4_request, SignedHeaders=content-type;host;x-amz-date, Signature=0000000000000000000000000000000000000000000000000000000000000000"),
            SignedRequest.post.replacing("Authorization", with: "AWS4-HMAC-SHA256 Credential=AKIDOTHER/20261123/us-east-1/cognito-sync/aws4_request, SignedHeaders=content-type;host;x-amz-date, Signature=31f2f72ebfa21239e9f50e7c5ebd45b3bdf55038defe56750ecb77fd9570bacc"),
            SignedRequest.post.replacing("Authorization", with: "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261123/us-east-1/s3/aws4_request, SignedHeaders=content-type;host;x-amz-date, Signature=31f2f72ebfa21239e9f50e7c5ebd45b3bdf55038defe56750ecb77fd9570bacc"),
            SignedRequest.post.replacing("Authorization", with: "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261122/us-east-1/cognito-sync/aws4_request, SignedHeaders=content-type;host;x-amz-date, Signature=31f2f72ebfa21239e9f50e7c5ebd45b3bdf55038defe56750ecb77fd9570bacc"),
            SignedRequest.post.replacing("Authorization", with: "Bearer something"),
            SignedRequest.post.replacing("Authorization", with: "AWS4-HMAC-SHA256 garbage"),
            SignedRequest.post.replacing("X-Amz-Date", with: "20261123T155120Z"),
            SignedRequest.post.replacing("X-Amz-Date", with: "not a date"),
        ]
        for (index, request) in cases.enumerated() {
            do {
                _ = try request.verify(verifier)
                Issue.record("case \(index) was accepted")
            } catch let error as SyncError {
                #expect(error.code == .authenticationFailed, "case \(index)")
            }
        }
        let otherSecret = SigV4Verifier(credentials: ["AKIDEXAMPLE": "another secret"])
        #expect(throws: SyncError.self) { _ = try SignedRequest.post.verify(otherSecret) }
    }

    @Test("a stale or future date is refused beyond the clock skew (replays of old requests)")
    func clockSkew() throws {
        #expect(throws: Never.self) { _ = try SignedRequest.post.verify(verifier, now: SignedRequest.signedAt.addingTimeInterval(299)) }
        #expect(throws: SyncError.self) { _ = try SignedRequest.post.verify(verifier, now: SignedRequest.signedAt.addingTimeInterval(301)) }
        #expect(throws: SyncError.self) { _ = try SignedRequest.post.verify(verifier, now: SignedRequest.signedAt.addingTimeInterval(-301)) }
        #expect(throws: SyncError.self) { _ = try SignedRequest.post.verify(verifier, now: SignedRequest.signedAt.addingTimeInterval(86_400)) }
    }
}
