import Foundation
import OfflineSync

/// A parsed Datasync/Azure Mobile Apps list query: the OData system query options a
/// `GET /tables/{table}` request carries (`$filter`, `$orderby`, `$skip`, `$top`, `$count`,
/// `$select`) and the Datasync `__includedeleted` flag.
///
/// `$filter` becomes a ``QueryPredicate`` (see ``parseFilter(_:)`` for the grammar and how
/// OData's null semantics map onto the core's three-valued logic), `$orderby` a list of
/// ``SortKey``s. Everything that is not understood is refused with
/// ``SyncError/Code/invalidQuery`` and a message naming the offending token and its position
/// (counted in Unicode scalars from 1); no input makes the parser trap.
public struct ODataQuery: Sendable, Hashable {
    /// The `$filter` condition; ``QueryPredicate/all`` when there is none.
    public var filter: QueryPredicate
    /// The `$orderby` keys, most significant first; empty when there are none.
    public var orderBy: [SortKey]
    /// How many matching items `$skip` skips; 0 by default.
    public var skip: Int
    /// The page size `$top` asks for, or `nil` when absent.
    public var top: Int?
    /// Whether `$count=true` (or the v2 `$inlinecount=allpages`) asks for the total count.
    public var count: Bool
    /// The fields `$select` names, or `nil` when absent (all fields).
    public var select: [String]?
    /// Whether `__includedeleted=true` asks for deleted items (tombstones) too.
    public var includeDeleted: Bool
    /// The `$skiptoken` a server's `nextLink` carried, opaque to the client and to this
    /// parser (the server that issued it decodes it), or `nil` when absent.
    public var skipToken: String?

    /// The longest `$filter`, `$orderby` or `$select` value accepted, in Unicode scalars.
    public static let maxLength = 32_768
    /// The deepest nesting of parentheses, `not`s and function calls a `$filter` may have.
    public static let maxDepth = 64
    /// The largest `$top` accepted (`Int32.max`, as Datasync servers do).
    public static let maxTop = Int(Int32.max)

    /// Creates a query; the defaults are those of a request without query options.
    public init(filter: QueryPredicate = .all, orderBy: [SortKey] = [], skip: Int = 0, top: Int? = nil,
                count: Bool = false, select: [String]? = nil, includeDeleted: Bool = false, skipToken: String? = nil) {
        self.filter = filter
        self.orderBy = orderBy
        self.skip = skip
        self.top = top
        self.count = count
        self.select = select
        self.includeDeleted = includeDeleted
        self.skipToken = skipToken
    }

    /// A URL's query string as name/value pairs, in order: split at `&` (empty pairs skipped)
    /// and at the first `=`, each side percent-decoded with `+` read as a space. A side that
    /// is not valid percent-encoding is kept as written, so ``parse(_:)`` reports it.
    public static func parameters(query: String) -> [(name: String, value: String)] {
        query.split(separator: "&", omittingEmptySubsequences: true).map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ text: Substring) -> String {
                // `+` is a space scalar by scalar: a `+` followed by a combining mark is one
                // Character, which a Character-wise replacement would leave.
                let spaced = String(String.UnicodeScalarView(text.unicodeScalars.map { $0 == "+" ? " " : $0 }))
                return spaced.removingPercentEncoding ?? spaced
            }
            return (decode(parts[0]), parts.count > 1 ? decode(parts[1]) : "")
        }
    }

    /// Parses the query parameters (names and values already percent-decoded, in order).
    /// Unknown parameters that start with `$` are an error; other parameters (e.g. ZUMO-API-VERSION) are ignored.
    ///
    /// Option names are matched without regard to case (`$Filter` is `$filter`), each may
    /// appear once, and the v2 `$inlinecount=allpages|none` is read as `$count=true|false`.
    /// `$skip` and `$top` are non-negative decimal integers (`$top` at most ``maxTop``);
    /// `$count` and `__includedeleted` are `true` or `false`; `$orderby` is a comma-separated
    /// list of `field [asc|desc]`; `$select` a comma-separated list of fields. Field names are
    /// OData identifiers (`[A-Za-z_][A-Za-z0-9_]*`) and are kept as written.
    ///
    /// Throws ``SyncError/Code/invalidQuery`` naming the option, the offending token and its position.
    public static func parse(_ parameters: [(name: String, value: String)]) throws -> ODataQuery {
        var query = ODataQuery()
        var seen: Set<String> = []
        func once(_ key: String, _ name: String) throws {
            guard seen.insert(key).inserted else {
                throw SyncError(.invalidQuery, "query option '\(ODataSyntax.clip(name))' is given more than once")
            }
        }
        for (name, value) in parameters {
            let key = name.lowercased()
            if name.hasPrefix("$") {
                switch key {
                case "$filter":
                    try once(key, name)
                    query.filter = try parseFilter(value)
                case "$orderby":
                    try once(key, name)
                    query.orderBy = try ODataSyntax.orderBy(value)
                case "$select":
                    try once(key, name)
                    query.select = try ODataSyntax.select(value)
                case "$skip":
                    try once(key, name)
                    query.skip = try ODataSyntax.nonNegative(value, option: "$skip", max: Int.max)
                case "$top":
                    try once(key, name)
                    query.top = try ODataSyntax.nonNegative(value, option: "$top", max: maxTop)
                case "$skiptoken":
                    try once(key, name)
                    guard !value.isEmpty else { throw SyncError(.invalidQuery, "$skiptoken is empty") }
                    query.skipToken = value
                case "$count":
                    try once("$count", name)
                    query.count = try ODataSyntax.boolean(value, option: "$count")
                case "$inlinecount":
                    try once("$count", name)
                    switch value {
                    case "allpages": query.count = true
                    case "none": query.count = false
                    default:
                        throw SyncError(.invalidQuery, "$inlinecount must be 'allpages' or 'none', not '\(ODataSyntax.clip(value))'")
                    }
                default:
                    throw SyncError(.invalidQuery, "unknown query option '\(ODataSyntax.clip(name))'")
                }
            } else if key == "__includedeleted" {
                try once(key, name)
                query.includeDeleted = try ODataSyntax.boolean(value, option: "__includedeleted")
            }
        }
        return query
    }

    /// Parses just a $filter expression.
    ///
    /// Supported (OData v4 as Datasync clients send it, and the v2 forms of Azure Mobile Apps
    /// clients):
    ///
    /// - comparisons `eq ne gt ge lt le` between a field and a literal, in either order
    ///   (`5 lt n` is `n gt 5`); `and`, `or`, `not` and parentheses, with `not` binding tighter
    ///   than comparisons, comparisons tighter than `and`, `and` tighter than `or`. Keywords
    ///   are lower case, as OData requires.
    /// - literals: `null`, `true`, `false`; integers (an ``Value/int(_:)``; beyond 64 bits a
    ///   double) and decimals or exponents (a ``Value/double(_:)``), with an optional `-` and
    ///   suffix `L` (integer), `m`, `d` or `f` (double); `INF`, `-INF`, `NaN`; strings in single
    ///   quotes with `''` for a quote; date-times `2024-01-02T03:04:05.678Z` (seconds and
    ///   fraction optional, `Z` or an offset such as `+01:00` required) and the v2
    ///   `datetime'…'` / `datetimeoffset'…'` (zone optional, UTC by default) as a
    ///   ``Value/date(_:)`` (digits below the millisecond are dropped); `binary'…'` (base64url)
    ///   as ``Value/bytes(_:)``.
    /// - fields: identifiers `[A-Za-z_][A-Za-z0-9_]*`, kept as written (`id`, `updatedAt`,
    ///   `version` and `deleted` are the system properties of ``SystemField``).
    /// - functions: `startswith(f,'s')` (``QueryPredicate/hasPrefix(_:_:)``),
    ///   `endswith(f,'s')` (``QueryPredicate/hasSuffix(_:_:)``), `contains(f,'s')` and the v2
    ///   `substringof('s',f)` (``QueryPredicate/contains(_:_:)``); a call may be compared with
    ///   `true` or `false` (`startswith(f,'a') eq false`).
    /// - computed values (``QueryExpression``): `tolower`, `toupper`, `trim`, `length`,
    ///   `indexof`, `substring`, `concat`, `year` … `second`, `floor`, `ceiling`, `round` and
    ///   the operators `add sub mul div mod`, compared with literals or with each other as
    ///   OData does (a null is a value to `eq`/`ne`, ordered comparisons with it are false);
    ///   `f in (literal, …)`. Other functions are refused.
    /// - a field alone (`deleted`, `not done`) is a boolean test: `done` holds when the field
    ///   is `true`, `not done` when it is `false`.
    ///
    /// Null semantics. OData's comparisons are two-valued: `f eq 5` is false and `f ne 5`
    /// true when `f` is null, and `f gt null` is always false; only a function of a null
    /// field and a null boolean field are null, and `not null` is null. The core's
    /// comparisons are unknown when the field is null, so the parser maps each comparison to a
    /// predicate that matches exactly the records OData's would, for where it stands (inside
    /// an odd number of `not`s or not):
    ///
    /// | OData | predicate |
    /// |---|---|
    /// | `f eq null`, `f ne null` | `isNull(f)`, `not(isNull(f))` |
    /// | `f eq v`, `f lt v` … | `compare(f, ==, v)`, `compare(f, <, v)` … |
    /// | `f ne v` | `or(isNull(f), compare(f, !=, v))` |
    /// | `not (f eq v)` | `or(isNull(f), compare(f, !=, v))` |
    /// | `not (f ne v)` | `compare(f, ==, v)` |
    /// | `not (f lt v)` … | `or(isNull(f), not(compare(f, <, v)))` … |
    /// | `f gt null` …, `not (f gt null)` | `or()` (false), `all` |
    /// | `startswith(f,'s')`, `not startswith(f,'s')` | `hasPrefix(f, "s")`, `not(hasPrefix(f, "s"))` |
    /// | `startswith(f,'s') eq false` | `not(hasPrefix(f, "s"))` |
    /// | `startswith(f,'s') ne true` | `or(isNull(f), not(hasPrefix(f, "s")))` |
    /// | `done`, `not done` | `compare(done, ==, true)`, `compare(done, ==, false)` |
    ///
    /// `not` over `and` / `or` is pushed inwards (De Morgan), so it never meets an unknown.
    ///
    /// Throws ``SyncError/Code/invalidQuery`` naming the offending token and its position
    /// (in Unicode scalars from 1): malformed syntax, comparisons without exactly one field
    /// and one literal ("comparisons need a field and a literal"), unsupported functions or
    /// literals, nesting deeper than ``maxDepth``, text longer than ``maxLength``.
    public static func parseFilter(_ text: String) throws -> QueryPredicate {
        var parser = try ODataFilterParser(text)
        return try parser.parse()
    }

    /// The query string (percent-encoded, `&`-joined, no leading `?`) that asks for the same
    /// query with another `$skip` and `$skiptoken` — for `nextLink`.
    ///
    /// Options are written in the order `$filter`, `$orderby`, `$select`, `$count`, `$skip`,
    /// `$skiptoken`, `$top`, `__includedeleted`, each only when it differs from its default;
    /// an empty `$select` is left out. Parsing the result gives this query with `skip` and
    /// `skipToken` replaced. The
    /// filter is written back in OData (so a filter ``parse(_:)`` produced reads back exactly
    /// the same); a predicate built in code is written as an equivalent OData filter, except
    /// that array and object literals, which OData cannot express, are written as text that
    /// ``parseFilter(_:)`` refuses.
    public func queryString(skip: Int, skipToken: String? = nil) -> String {
        var options: [(String, String)] = []
        if filter != .all { options.append(("$filter", ODataRenderer.filter(filter))) }
        if !orderBy.isEmpty {
            options.append(("$orderby", orderBy.map { $0.ascending ? $0.field : "\($0.field) desc" }.joined(separator: ",")))
        }
        if let select, !select.isEmpty { options.append(("$select", select.joined(separator: ","))) }
        if count { options.append(("$count", "true")) }
        if skip != 0 { options.append(("$skip", String(skip))) }
        if let skipToken { options.append(("$skiptoken", skipToken)) }
        if let top { options.append(("$top", String(top))) }
        if includeDeleted { options.append(("__includedeleted", "true")) }
        return options.map { ODataRenderer.percentEncode($0.0) + "=" + ODataRenderer.percentEncode($0.1) }.joined(separator: "&")
    }
}
