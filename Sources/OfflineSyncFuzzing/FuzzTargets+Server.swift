import Foundation
import OfflineSync
import OfflineSyncOData
import OfflineSyncServer
import OfflineSyncService
import OfflineSyncWire

extension FuzzTarget {
    /// What the server reads from a request's URL and headers, and from its configuration files.
    static let serverTargets: [FuzzTarget] = [
        FuzzTarget("odata-filter", "a tables API `$filter`, read by ODataQuery.parseFilter") { input throws(FuzzFinding) in
            let filter = text(input)
            guard let predicate = try refusing("ODataQuery.parseFilter", { try ODataQuery.parseFilter(filter) }) else { return }
            // The filter as the server writes it into a nextLink reads back the same, so paging
            // keeps it. A filter on computed values may read back in another form that means
            // the same (the rendering spells out OData's null rules), but the second page's
            // nextLink must equal the first's, or the filter would change (and grow) with every page.
            let link = ODataQuery(filter: predicate).queryString(skip: 0)
            guard let again = try refusing("ODataQuery.parse of its own nextLink", { try ODataQuery.parse(ODataQuery.parameters(query: link)) }) else {
                throw FuzzFinding("the filter \(filter) is refused when read back from its nextLink \(link)")
            }
            if !predicate.mentionsExpressions {
                try expect(again.filter == predicate, "the filter \(filter) does not read back from its nextLink \(link): \(predicate) became \(again.filter)")
            }
            let next = again.queryString(skip: 0)
            try expect(next == link, "the filter \(filter) changes from page to page: \(link) became \(next)")
        },
        FuzzTarget("odata-query", "a tables API query string ($filter, $orderby, $select, $skip, $top, …), percent-decoded and read by ODataQuery.parse") { input throws(FuzzFinding) in
            let queryString = text(input)
            guard var query = try refusing("ODataQuery.parse", { try ODataQuery.parse(ODataQuery.parameters(query: queryString)) }) else { return }
            let link = query.queryString(skip: query.skip, skipToken: query.skipToken)
            guard var again = try refusing("ODataQuery.parse of its own nextLink", { try ODataQuery.parse(ODataQuery.parameters(query: link)) }) else {
                throw FuzzFinding("the query \(queryString) is refused when read back from its nextLink \(link)")
            }
            // An empty `$select` is written as no `$select` (both mean every field), and a
            // filter on computed values may read back in another form that means the same (as
            // in the odata-filter target); the second page's nextLink must equal the first's.
            if query.select?.isEmpty == true { query.select = nil }
            if again.select?.isEmpty == true { again.select = nil }
            if query.filter.mentionsExpressions { again.filter = query.filter }
            try expect(again == query, "the query \(queryString) does not read back from its nextLink \(link)")
            let next = try refusing("ODataQuery.parse of its own nextLink", { try ODataQuery.parse(ODataQuery.parameters(query: link)) })?
                .queryString(skip: query.skip, skipToken: query.skipToken)
            try expect(next == link, "the query \(queryString) changes from page to page: \(link) became \(String(describing: next))")
        },
        FuzzTarget("tables-skip-token", "a tables API `$skiptoken` for `$orderby=updatedAt,id`, read by TablesPaging") { input throws(FuzzFinding) in
            let token = text(input)
            _ = try refusing("TablesPaging.predicate", { try TablesPaging.predicate(after: token, order: [SortKey("updatedAt"), SortKey("id")]) })
        },
        FuzzTarget("compact-token", "a bearer token, split and decoded by CompactToken (base64url, header and payload JSON)") { input throws(FuzzFinding) in
            let token = text(input)
            if let decoded = Base64URL.decode(input) {
                try expect(Base64URL.encode(decoded) == token, "base64url accepted a non-canonical spelling: \(token)")
            }
            let parsed: CompactToken
            do {
                parsed = try CompactToken(token)
            } catch {
                return
            }
            if let keyId = parsed.keyId {
                try expect(!keyId.isEmpty && keyId.utf8.count <= 256, "a token with a kid of \(keyId.utf8.count) bytes was accepted")
            }
        },
        FuzzTarget("jwks", "an identity provider's JSON Web Key Set, read by KeySet") { input throws(FuzzFinding) in
            guard let document = try refusing("JSON.parse", { try JSON.parse(input) }) else { return }
            let keys: KeySet
            do {
                keys = try KeySet(document: document)
            } catch {
                return
            }
            guard case .array(let entries)? = document["keys"] else { throw FuzzFinding("a key set without a keys array was accepted") }
            try expect(keys.usableCount + keys.skipped == entries.count, "a key set of \(entries.count) entries kept \(keys.usableCount) and skipped \(keys.skipped)")
        },
        FuzzTarget("rules-yaml", "a sync rules document (`serve --rules`), read by SyncRules(yaml:)") { input throws(FuzzFinding) in
            let yaml = text(input)
            _ = try refusing("SyncRules(yaml:)", { try SyncRules(yaml: yaml) })
        },
        FuzzTarget("issuers-yaml", "an identity providers document (`serve --issuers`), read by TokenIssuer.issuers(yaml:)") { input throws(FuzzFinding) in
            let yaml = text(input)
            _ = try refusing("TokenIssuer.issuers(yaml:)", { try TokenIssuer.issuers(yaml: yaml) })
        },
        FuzzTarget("sigv4", "a Cognito Sync request's SigV4 signature: method, path, query, headers and body, checked by SigV4Verifier") { input throws(FuzzFinding) in
            guard let request = SignedRequest(input) else { return }
            let signer = try refusing("SigV4Verifier.verify", {
                try sigV4.verify(method: request.method, path: request.path, query: request.query, headers: request.headers,
                                 body: request.body, now: sigV4Now)
            })
            if let signer { try expect(signer.accessKeyId == sigV4AccessKey, "a request signed by \(signer.accessKeyId) was accepted") }
        },
        FuzzTarget("pull-cursor", "a pull request's cursor, read by the service's PullCursor") { input throws(FuzzFinding) in
            guard let cursor = try refusing("PullCursor(parsing:)", { try OfflineSyncService.PullCursor(parsing: text(input)) }) else { return }
            let again = try refusing("PullCursor(parsing:) of its own text", { try OfflineSyncService.PullCursor(parsing: cursor.text) })
            try expect(again?.text == cursor.text, "a cursor does not read back as written: \(cursor.text) became \(String(describing: again?.text))")
        },
        FuzzTarget("change-notice", "a change notice between server instances (a PostgreSQL NOTIFY payload), read by ChangeNotice(encoded:)") { input throws(FuzzFinding) in
            guard let notice = ChangeNotice(encoded: text(input)) else { return }
            let again = ChangeNotice(encoded: notice.encoded)
            try expect(again == notice, "a change notice does not read back as written: \(notice) became \(String(describing: again))")
        },
        FuzzTarget("http-range", "a download's Range, If-Range, If-Match and If-None-Match fields and the file's size (one a line), decided by DownloadAnswer") { input throws(FuzzFinding) in
            let lines = text(input).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            func field(_ index: Int) -> String? { index < lines.count && !lines[index].isEmpty ? lines[index] : nil }
            let size = field(4).flatMap { Int64($0) }.map { max(0, $0) } ?? 1000
            let etag = "\"e\""
            let answer = DownloadAnswer.decide(range: field(0), ifRange: field(1), ifMatch: field(2), ifNoneMatch: field(3),
                                               etag: etag, size: size, rangeApplies: true)
            switch answer {
            case .partial(let first, let last):
                try expect(0 <= first && first <= last && last < size, "\(String(describing: field(0))) gave bytes \(first)-\(last) of \(size)")
                let spelled = "bytes=\(first)-\(last)"
                try expect(ByteRange(spelled)?.resolved(size: size).map { [$0.0, $0.1] } == [first, last], "\(spelled) does not read back")
            case .unsatisfiable:
                try expect(field(0).flatMap(ByteRange.init) != nil, "an unparsed Range \(String(describing: field(0))) was answered 416")
            case .whole, .notModified, .preconditionFailed:
                break
            }
            // Without Range handling (HEAD) the answer is never partial or unsatisfiable.
            let head = DownloadAnswer.decide(range: field(0), ifRange: field(1), ifMatch: field(2), ifNoneMatch: field(3),
                                             etag: etag, size: size, rangeApplies: false)
            try expect(head == .whole || head == .notModified || head == .preconditionFailed, "HEAD was answered \(head)")
        },
        FuzzTarget("upload-fields", "a resumable upload's Upload-Complete, Upload-Offset and Upload-Length values, read by UploadFields") { input throws(FuzzFinding) in
            let value = text(input)
            if let number = UploadFields.integer(value) {
                try expect(number >= 0 && UploadFields.integer(String(number)) == number, "\(value) read as \(number), which does not read back")
            }
            if let flag = UploadFields.boolean(value) {
                try expect(UploadFields.boolean(flag ? "?1" : "?0") == flag, "\(value) read as \(flag)")
            }
        },
    ]

    /// The one credential the SigV4 target's verifier knows; the seeds are signed with it.
    package static let sigV4AccessKey = "AKIDOFFLINESYNCFUZZ"
    package static let sigV4 = SigV4Verifier(credentials: [sigV4AccessKey: "offline-sync-fuzz-secret"])
    /// The verifier's clock: the seeds' `X-Amz-Date`, so a seed verifies.
    package static let sigV4Now = Date(timeIntervalSince1970: 1_795_824_000) // 2026-11-28T00:00:00Z
}

extension FuzzTarget {
    /// The SigV4 target's input read as a request, or `nil` when it is not one.
    package static func signedRequest(_ input: [UInt8]) -> SignedRequest? { SignedRequest(input) }
}

/// A request in the SigV4 target's input form: the method, the path and the query on the
/// first three lines, then `name: value` header lines up to an empty line, then the body.
package struct SignedRequest {
    package var method: String
    package var path: String
    package var query: String
    package var headers: [(name: String, value: String)] = []
    package var body: [UInt8]

    init?(_ input: [UInt8]) {
        var lines: [[UInt8]] = []
        var start = 0
        var bodyStart: Int?
        for index in input.indices where input[index] == UInt8(ascii: "\n") {
            let line = Array(input[start..<index])
            start = index + 1
            if lines.count >= 3 && line.isEmpty {
                bodyStart = start
                break
            }
            lines.append(line)
        }
        guard lines.count >= 3 else { return nil }
        method = text(lines[0])
        path = text(lines[1])
        query = text(lines[2])
        for line in lines.dropFirst(3) {
            let pair = text(line)
            guard let colon = pair.firstIndex(of: ":") else { return nil }
            headers.append((String(pair[..<colon]), String(pair[pair.index(after: colon)...].drop { $0 == " " })))
        }
        body = bodyStart.map { Array(input[$0...]) } ?? []
    }
}
