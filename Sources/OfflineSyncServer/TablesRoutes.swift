import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import OfflineSync
import OfflineSyncOData
import OfflineSyncService
import OfflineSyncWire

/// The Datasync / Azure Mobile Apps–compatible tables API, `/tables/{table}[/{id}]`, over
/// the same service and the same rules as the native API: a caller lists, reads and writes the
/// rows the sync rules give it, and nothing else (see `Docs/Protocol.md`,
/// "Tables API").
extension Routes {
    func addTables(to router: Router<SyncRequestContext>) {
        router.get("tables/:table") { request, context in try await list(request, context) }
        router.post("tables/:table") { request, context in try await create(request, context) }
        router.get("tables/:table/:id") { request, context in try await read(request, context) }
        router.put("tables/:table/:id") { request, context in try await replace(request, context) }
        router.delete("tables/:table/:id") { request, context in try await remove(request, context) }
    }

    /// The API versions accepted in `ZUMO-API-VERSION` (header or query parameter).
    static let apiVersionHeader = HTTPField.Name("ZUMO-API-VERSION")!

    /// Checks the protocol version and the token; returns the caller's claims and the table.
    func tablesRequest(_ request: Request, _ context: SyncRequestContext) async throws -> (claims: Claims, table: String) {
        let claims = try context.requireClaims()
        let version = request.headers[Self.apiVersionHeader]
            ?? request.uri.queryParameters.first { $0.key.lowercased() == "zumo-api-version" }.map { String($0.value) }
        if let version, !(version.hasPrefix("2.") || version.hasPrefix("3.")) {
            throw APIError(.badRequest, .unsupportedVersion, "ZUMO-API-VERSION must be 2.x or 3.x")
        }
        // The segment arrives percent-encoded; one that does not decode to UTF-8, or names a
        // dot segment, is no table.
        let raw = try context.parameters.require("table")
        guard let table = raw.removingPercentEncoding, table != ".", table != ".." else {
            throw APIError(.badRequest, .invalidTable, "the table segment is not a table name")
        }
        do { try Names.validateAppTable(table) } catch let error as SyncError {
            throw APIError(.badRequest, .invalidTable, error.message)
        }
        return (claims, table)
    }

    func entityId(_ context: SyncRequestContext) throws -> String {
        let raw = try context.parameters.require("id")
        guard let id = raw.removingPercentEncoding, !id.isEmpty else {
            throw APIError(.badRequest, .invalidId, "the id in the path is not valid percent-encoding")
        }
        return id
    }

    // MARK: GET list

    func list(_ request: Request, _ context: SyncRequestContext) async throws -> Response {
        let (claims, table) = try await tablesRequest(request, context)
        let parameters = ODataQuery.parameters(query: request.uri.query ?? "")
        var query: ODataQuery
        do { query = try ODataQuery.parse(parameters) } catch let error as SyncError {
            throw APIError(.badRequest, .invalidQuery, error.message)
        }
        query.filter = DatasyncFormat.storedVersions(in: query.filter)
        let order = TablesPaging.order(query.orderBy)
        let keyset = TablesPaging.supportsKeyset(order, schema: service.schema(for: table))
        var predicate = query.filter
        var stampFloor: Timestamp?
        if let token = query.skipToken {
            guard keyset else {
                throw APIError(.badRequest, .invalidQuery, "$skiptoken is not one this server issued for this $orderby")
            }
            do {
                predicate = .and([predicate, try TablesPaging.predicate(after: token, order: order)])
                stampFloor = try TablesPaging.stampFloor(in: token, order: order)
            } catch let error as SyncError {
                throw APIError(.badRequest, .invalidQuery, error.message)
            }
        }
        let pageSize = min(query.top ?? configuration.tablesPageSize, configuration.tablesPageSize)
        var rows: [Record] = []
        var stampBound: Timestamp?
        if pageSize > 0 {
            (rows, stampBound) = try await call {
                try await service.queryPage(claims: claims, table: table, predicate: predicate, order: order,
                                            offset: query.skip, limit: pageSize + 1, includeDeleted: query.includeDeleted,
                                            stampsBelow: stampFloor)
            }
        }
        let more = rows.count > pageSize
        if more { rows.removeLast() }
        var members: [(key: String, value: JSON)] = [("items", .array(rows.map { DatasyncFormat.json($0, select: query.select) }))]
        if query.count {
            let count = try await call {
                try await service.count(claims: claims, table: table, predicate: query.filter, includeDeleted: query.includeDeleted)
            }
            members.append(("count", .number(String(count))))
        }
        var next = query
        if let top = query.top { next.top = top - rows.count }
        if more, (next.top ?? 1) > 0, let last = rows.last {
            let link = keyset
                ? next.queryString(skip: 0, skipToken: TablesPaging.token(after: last, order: order, stampBound: stampBound))
                : next.queryString(skip: query.skip + rows.count)
            members.append(("nextLink", .string(TablesPaging.nextLink(link, request: request))))
        } else {
            members.append(("nextLink", .null))
        }
        return Self.json(.object(members))
    }

    // MARK: GET one

    func read(_ request: Request, _ context: SyncRequestContext) async throws -> Response {
        let (claims, table) = try await tablesRequest(request, context)
        let id = try entityId(context)
        let includeDeleted = ODataQuery.parameters(query: request.uri.query ?? "").contains { $0.name == "__includedeleted" && $0.value == "true" }
        guard let record = try await call({ try await service.record(claims: claims, table: table, id: id) }) else {
            throw APIError(.notFound, .notFound, "no entity '\(id)' in table '\(table)'")
        }
        if record.deleted && !includeDeleted { return entityResponse(record, status: .gone) }
        if let header = request.headers[.ifNoneMatch], Self.matches(header, record) {
            return Response(status: .notModified, headers: entityHeaders(record))
        }
        if request.headers[.ifNoneMatch] == nil, let since = request.headers[.ifModifiedSince].flatMap(WireDate.parseHTTPDate),
           let updated = record.updatedAt, updated.millisecondsSince1970 / 1000 * 1000 <= since {
            return Response(status: .notModified, headers: entityHeaders(record))
        }
        return entityResponse(record, status: .ok)
    }

    // MARK: POST

    func create(_ request: Request, _ context: SyncRequestContext) async throws -> Response {
        let (claims, table) = try await tablesRequest(request, context)
        let body = try await entityBody(request)
        let item = try decodeEntity(body, table: table, fallbackId: nil)
        if let existing = try await call({ try await service.record(claims: claims, table: table, id: item.id) }) {
            return entityResponse(existing, status: .conflict)
        }
        let record = try await apply(claims: claims, PushOperation(id: Self.operationId(), table: table, itemId: item.id,
                                                                          kind: .insert, item: item, baseVersion: nil),
                                     conflict: .conflict)
        var response = entityResponse(record, status: .created)
        response.headers[.location] = "\(request.uri.path)/\(item.id.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(["/"])) ?? item.id)"
        return response
    }

    // MARK: PUT

    func replace(_ request: Request, _ context: SyncRequestContext) async throws -> Response {
        let (claims, table) = try await tablesRequest(request, context)
        let id = try entityId(context)
        let body = try await entityBody(request)
        let item = try decodeEntity(body, table: table, fallbackId: id)
        guard item.id == id else { throw APIError(.badRequest, .idMismatch, "the entity's id does not match the id in the path") }
        let current = try await existing(claims: claims, table: table, id: id)
        try checkPreconditions(request, current)
        let record = try await apply(claims: claims, PushOperation(id: Self.operationId(), table: table, itemId: id, kind: .update,
                                                                          item: item, baseVersion: current.version),
                                     conflict: .preconditionFailed)
        return entityResponse(record, status: .ok)
    }

    // MARK: DELETE

    func remove(_ request: Request, _ context: SyncRequestContext) async throws -> Response {
        let (claims, table) = try await tablesRequest(request, context)
        let id = try entityId(context)
        let current = try await existing(claims: claims, table: table, id: id)
        try checkPreconditions(request, current)
        _ = try await apply(claims: claims, PushOperation(id: Self.operationId(), table: table, itemId: id, kind: .delete,
                                                             item: nil, baseVersion: current.version),
                            conflict: .preconditionFailed)
        return Response(status: .noContent)
    }

    // MARK: Helpers

    /// The live record, or 404 / 410.
    func existing(claims: Claims, table: String, id: String) async throws -> Record {
        guard let current = try await call({ try await service.record(claims: claims, table: table, id: id) }) else {
            throw APIError(.notFound, .notFound, "no entity '\(id)' in table '\(table)'")
        }
        if current.deleted { throw EntityError(status: .gone, record: current, routes: self) }
        return current
    }

    /// If-Match and If-Unmodified-Since: 412 with the server's entity when they fail.
    func checkPreconditions(_ request: Request, _ current: Record) throws {
        if let header = request.headers[.ifMatch], !Self.matches(header, current) {
            throw EntityError(status: .preconditionFailed, record: current, routes: self)
        }
        if let since = request.headers[.ifUnmodifiedSince].flatMap(WireDate.parseHTTPDate),
           let updated = current.updatedAt, updated.millisecondsSince1970 / 1000 * 1000 > since {
            throw EntityError(status: .preconditionFailed, record: current, routes: self)
        }
    }

    /// Pushes one operation and returns the applied record; a conflict is answered with
    /// `conflict` and the server's entity, a write the sync rules refuse with 403 (no entity:
    /// the caller may not be allowed to read it), any other rejection with 400 (or 404).
    func apply(claims: Claims, _ operation: PushOperation, conflict: HTTPResponse.Status) async throws -> Record {
        let report = try await pushed(claims: claims, [operation])
        await announce(identity: claims.identity, operations: [operation], report: report)
        switch report.results[0].outcome {
        case .applied(let record):
            return record
        case .conflict(let server):
            throw EntityError(status: server.deleted && conflict != .conflict ? .gone : conflict, record: server, routes: self)
        case let .rejected(reason, status):
            // The message as the tables API always wrote it: a rejection's code leads it
            // ("attachmentMissing: …"), as in a push result's reason.
            let message = Wire.wireReason(reason, code: report.results[0].rejectionCode)
            switch status {
            case 403: throw APIError(.forbidden, .forbidden, message)
            case 404: throw APIError(.notFound, .rejected, message)
            default: throw APIError(.badRequest, .rejected, message)
            }
        }
    }

    func entityBody(_ request: Request) async throws -> JSON {
        let type = request.headers[.contentType]?.lowercased() ?? ""
        guard type.hasPrefix("application/json") || type.hasPrefix("text/json") || type.hasSuffix("+json")
                || type.contains("json;") else {
            throw APIError(.unsupportedMediaType, .unsupportedMediaType, "the body must be JSON (Content-Type: application/json)")
        }
        return try await readJSON(request)
    }

    func decodeEntity(_ body: JSON, table: String, fallbackId: String?) throws -> Record {
        do {
            let record = try DatasyncFormat.record(body, schema: service.schema(for: table), fallbackId: fallbackId)
            try Names.validateId(record.id)
            return record
        } catch let error as SyncError {
            throw APIError(.badRequest, .invalidEntity, error.message)
        }
    }

    /// Whether an If-Match / If-None-Match list names the record's version (`*` names any;
    /// a weak tag never matches).
    static func matches(_ header: String, _ record: Record) -> Bool {
        for tag in header.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) {
            if tag == "*" { return true }
            if tag.hasPrefix("W/") { continue }
            if let version = record.version,
               tag == "\"\(DatasyncFormat.version(version))\"" || tag == "\"\(version)\"" { return true }
        }
        return false
    }

    func entityHeaders(_ record: Record) -> HTTPFields {
        var headers: HTTPFields = [:]
        if let version = record.version { headers[.eTag] = "\"\(DatasyncFormat.version(version))\"" }
        if let updated = record.updatedAt { headers[.lastModified] = WireDate.httpDate(updated) }
        return headers
    }

    func entityResponse(_ record: Record, status: HTTPResponse.Status) -> Response {
        Self.json(DatasyncFormat.json(record), status: status, headers: entityHeaders(record))
    }

    static func operationId() -> String { "tables-" + UUID().uuidString.lowercased() }
}

/// An answer that carries the server's entity (409, 410, 412), with its ETag.
struct EntityError: HTTPResponseError {
    let status: HTTPResponse.Status
    let record: Record
    let routes: Routes

    func response(from request: Request, context: some RequestContext) throws -> Response {
        routes.entityResponse(record, status: status)
    }
}
