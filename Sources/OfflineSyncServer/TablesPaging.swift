import Foundation
import HTTPTypes
import Hummingbird
import OfflineSync
import OfflineSyncWire

/// How the tables API pages a list: keyset cursors in `$skiptoken` where the order allows,
/// and a `nextLink` in the form the calling client reads.
///
/// **Keyset paging.** `$skip` paging loses rows when the data changes between pages: a row
/// updated while a client pages through `$orderby=updatedAt` moves to the end, and every row
/// behind it shifts one place forward, so the row at the page boundary is never sent. So
/// when every `$orderby` key is a system property or a declared scalar field, a page's
/// `nextLink` carries the last row's keys (and its id, the final key) in `$skiptoken`, and
/// the next page is the rows strictly after them in that order — whatever changed meanwhile.
/// Other orders (undeclared fields, whose values may mix types) page with `$skip`.
///
/// **nextLink forms.** The CommunityToolkit Datasync client appends `nextLink` as the query
/// of its next request (`PullOperationManager.cs`: `new UriBuilder(endpoint) { Query =
/// page.NextLink }`), as its server writes it (`TableController.Query.cs`,
/// `CreateNextLink`), so by default `nextLink` is the query string alone. The older
/// `Microsoft.Datasync.Client` parses it with `new Uri(nextLink)`, which needs an absolute
/// URL (`RemoteTable.cs`, `GetNextPageAsync`), as its server wrote it
/// (`HttpRequestExtensions.CreateNextLink`); that client sends `X-ZUMO-VERSION`
/// (`ServiceHttpClient.cs`) and the toolkit never does, so a request with that header gets
/// an absolute URL.
package enum TablesPaging {
    /// The header only the older Datasync / Azure Mobile Apps clients send.
    static let legacyClientHeader = HTTPField.Name("X-ZUMO-VERSION")!

    /// The order a list uses: the requested keys, then the id (unless already a key), so the
    /// order is total and a keyset cursor names one position.
    static func order(_ requested: [SortKey]) -> [SortKey] {
        requested.contains { $0.field == SystemField.id } ? requested : requested + [SortKey(SystemField.id)]
    }

    /// Whether every key of `order` has one type on every row, so comparisons with a row's
    /// values agree with the store's sort.
    static func supportsKeyset(_ order: [SortKey], schema: TableSchema?) -> Bool {
        order.allSatisfy { key in
            if SystemField.all.contains(key.field) { return true }
            guard let type = schema?.field(named: key.field)?.type else { return false }
            return type.isScalar && type != .any
        }
    }

    /// The cursor after `row` in `order`: its key values, then the stamp bound the page read
    /// below if any (``stampFloor(in:order:)``), base64url-encoded.
    package static func token(after row: Record, order: [SortKey], stampBound: Timestamp? = nil) -> String {
        var bytes: [UInt8] = []
        JSON.array(order.map { Wire.json(row[$0.field]) } + (stampBound.map { [Wire.json(.date($0))] } ?? [])).write(into: &bytes)
        return Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// The rows strictly after the position `token` names in `order` (ascending keys put
    /// nulls first, descending keys last, as every store sorts them). Throws
    /// ``SyncError/Code/invalidQuery`` for a token this server did not issue for this order.
    package static func predicate(after token: String, order: [SortKey]) throws -> QueryPredicate {
        let values = Array(try keys(of: token, order: order).prefix(order.count))
        var alternatives: [QueryPredicate] = []
        var equalSoFar: [QueryPredicate] = []
        for (key, value) in zip(order, values) {
            alternatives.append(.and(equalSoFar + [beyond(key, value)]))
            equalSoFar.append(value.isNull ? .isNull(key.field) : .compare(key.field, .equal, value))
        }
        return .or(alternatives)
    }

    /// The stamp bound the next page reads below at least (the service's `queryPage`, its
    /// `stampsBelow`): the bound the page that issued `token` read below, and just past the
    /// `updatedAt` of the row it names when that is a key. Every row stamped below either had
    /// committed when that page was read, whatever a later read's horizon says. A token a
    /// client made up only shows that client its own rows early. Throws as
    /// ``predicate(after:order:)`` does.
    package static func stampFloor(in token: String, order: [SortKey]) throws -> Timestamp? {
        let values = try keys(of: token, order: order)
        var floor = values.count > order.count ? values[order.count].dateValue : nil
        if let index = order.firstIndex(where: { $0.field == SystemField.updatedAt }), let sent = values[index].dateValue,
           sent.millisecondsSince1970 < .max {
            floor = max(floor ?? .init(millisecondsSince1970: .min), Timestamp(millisecondsSince1970: sent.millisecondsSince1970 + 1))
        }
        return floor
    }

    /// The values `token` carries: one per key of `order`, the last of them an id, and then
    /// possibly a stamp bound.
    private static func keys(of token: String, order: [SortKey]) throws -> [Value] {
        let invalid = SyncError(.invalidQuery, "$skiptoken is not one this server issued for this $orderby")
        var text = token.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        text += String(repeating: "=", count: (4 - text.count % 4) % 4)
        guard let data = Data(base64Encoded: text), case .array(let items)? = try? JSON.parse(Array(data)),
              items.count == order.count || items.count == order.count + 1 else { throw invalid }
        let values = try items.map { item in
            do { return try Wire.value(item, path: "$skiptoken") } catch { throw invalid }
        }
        guard case .string = values[order.count - 1] else { throw invalid }
        if values.count > order.count, values[order.count].dateValue == nil { throw invalid }
        return values
    }

    /// Rows whose `key` comes strictly after `value` in the key's direction.
    private static func beyond(_ key: SortKey, _ value: Value) -> QueryPredicate {
        switch (key.ascending, value.isNull) {
        case (true, true): return .not(.isNull(key.field))
        case (true, false): return .compare(key.field, .greater, value)
        case (false, true): return .or([])
        case (false, false): return .or([.compare(key.field, .less, value), .isNull(key.field)])
        }
    }

    /// `nextLink` for the query string `query`, in the form the caller's client reads.
    static func nextLink(_ query: String, request: Request) -> String {
        guard request.headers[legacyClientHeader] != nil else { return query }
        let host = request.headers[HTTPField.Name("X-Forwarded-Host")!] ?? request.head.authority
        guard let host, !host.isEmpty else { return "\(request.uri.path)?\(query)" }
        let scheme = request.headers[HTTPField.Name("X-Forwarded-Proto")!] ?? request.head.scheme ?? "http"
        return "\(scheme)://\(host)\(request.uri.path)?\(query)"
    }
}
