import COfflineSyncPostgreSQL
import Foundation
import OfflineSync
import OfflineSyncStoreKit

extension StoreRegistry.Adapter {
    /// The `postgres` scheme: a libpq URL, `postgres://user:password@host:port/dbname`, plus
    /// the store's own parameters `schema=NAME` (``PostgreSQLStore/Options/schema``),
    /// `pool-size=N`, `statement-timeout-ms=N`, `attachments-dir=PATH`
    /// (``PostgreSQLStore/Options/attachmentsDirectory``, percent-encoded), `replica=URL`
    /// (``PostgreSQLStore/Options/replicas``: a hot standby's libpq URL, percent-encoded; once
    /// per replica) and `replica-wait-ms=N` (``PostgreSQLStore/Options/replicaWait``); every other
    /// parameter goes to libpq (`sslmode=…`, `connect_timeout=…`, …). Register it with
    /// `registry.register(.postgres)`; ``postgresql`` answers the `postgresql` spelling. A
    /// conformance run gives each case directory its own schema, named `<schema>_<hash>`, and
    /// keeps attachment files in that directory unless the URL names a directory.
    public static var postgres: StoreRegistry.Adapter { postgresAdapter(scheme: "postgres") }

    /// The same adapter as ``postgres`` for the `postgresql://` spelling of libpq URLs.
    public static var postgresql: StoreRegistry.Adapter { postgresAdapter(scheme: "postgresql") }

    private static func postgresAdapter(scheme: String) -> StoreRegistry.Adapter {
        StoreRegistry.Adapter(scheme: scheme, example: "\(scheme)://user@host:5432/dbname?schema=offlinesync",
                              isolate: { location, directory in
            let schema = PostgreSQLLocation.isolatedSchema(for: directory, base: location.parameter("schema") ?? "osync")
            var url = PostgreSQLLocation.replacingParameter("schema", with: schema, in: location.url)
            if location.parameter("attachments-dir") == nil {
                let files = directory.appendingPathComponent("attachments").path
                url = PostgreSQLLocation.replacingParameter("attachments-dir", with: files.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? files, in: url)
            }
            let isolated = try StoreLocation(parsing: url)
            return StoreRegistry.Isolated(location: isolated, persistent: true, storeFile: nil)
        }, open: { location, options in
            var parsed = try PostgreSQLLocation(location)
            parsed.options.createIfMissing = options.createIfMissing
            return try await PostgreSQLStore(connectionString: parsed.connectionString, options: parsed.options)
        })
    }
}

/// What a `postgres:` URL says: the libpq URL without the store's own parameters, and options.
struct PostgreSQLLocation {
    static let ownParameters: Set<String> = ["schema", "pool-size", "statement-timeout-ms", "attachments-dir", "replica", "replica-wait-ms"]

    var connectionString: String
    var options = PostgreSQLStore.Options()

    init(_ location: StoreLocation) throws {
        if location.isOpaque {
            throw SyncError(.invalidStoreURL, "a \(location.scheme) URL has a host part: \(location.scheme)://user@host:5432/dbname")
        }
        if let schema = location.parameter("schema") { options.schema = schema }
        if let directory = location.parameter("attachments-dir") {
            guard !directory.isEmpty else { throw SyncError(.invalidStoreURL, "\(location.scheme) URL parameter attachments-dir takes a directory path") }
            options.attachmentsDirectory = directory
        }
        if let text = location.parameter("pool-size") {
            guard let size = Int(text), size >= 1 else {
                throw SyncError(.invalidStoreURL, "\(location.scheme) URL parameter pool-size takes a positive integer")
            }
            options.poolSize = size
        }
        if let text = location.parameter("statement-timeout-ms") {
            guard let milliseconds = Int64(text), milliseconds >= 0 else {
                throw SyncError(.invalidStoreURL, "\(location.scheme) URL parameter statement-timeout-ms takes a non-negative integer")
            }
            options.statementTimeout = .milliseconds(milliseconds)
        }
        options.replicas = try location.parameters.filter { $0.name == "replica" }.map { parameter in
            guard parameter.value.hasPrefix("postgres://") || parameter.value.hasPrefix("postgresql://") || parameter.value.contains("=") else {
                throw SyncError(.invalidStoreURL, "\(location.scheme) URL parameter replica takes a hot standby's libpq URL (postgres://…, percent-encoded) or connection string")
            }
            return parameter.value
        }
        if let text = location.parameter("replica-wait-ms") {
            guard let milliseconds = Int64(text), milliseconds >= 0 else {
                throw SyncError(.invalidStoreURL, "\(location.scheme) URL parameter replica-wait-ms takes a non-negative integer")
            }
            options.replicaWait = .milliseconds(milliseconds)
        }
        connectionString = PostgreSQLLocation.removingParameters(PostgreSQLLocation.ownParameters, from: location.url)
    }

    /// The URL without the named query parameters.
    static func removingParameters(_ names: Set<String>, from url: String) -> String {
        guard let mark = url.firstIndex(of: "?") else { return url }
        let kept = url[url.index(after: mark)...].split(separator: "&").filter { pair in
            let name = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
            return !names.contains(name.removingPercentEncoding ?? name)
        }
        return String(url[..<mark]) + (kept.isEmpty ? "" : "?" + kept.joined(separator: "&"))
    }

    /// The URL with parameter `name` set to `value` (replacing any earlier value).
    static func replacingParameter(_ name: String, with value: String, in url: String) -> String {
        let base = removingParameters([name], from: url)
        return base + (base.contains("?") ? "&" : "?") + name + "=" + value
    }

    /// A schema name unique to a directory: `base` (the URL's `schema=`, cut to 40 bytes),
    /// `_` and 16 hex digits of an FNV-1a hash of the directory's path — so the schemas a
    /// conformance run leaves share the prefix it was given.
    static func isolatedSchema(for directory: URL, base: String) -> String {
        var prefix = ""
        for character in base {
            if prefix.utf8.count + character.utf8.count > 40 { break }
            prefix.append(character)
        }
        return prefix + "_" + FNV1a.hex64(directory.standardizedFileURL.path.utf8)
    }
}

extension PostgreSQLStore {
    /// The `postgres://` store URL equivalent to a libpq keyword/value connection string
    /// (`host=/var/run/postgresql dbname=app user=app`), so a connection string can pick the
    /// store at runtime through a ``StoreRegistry`` too: user and password go into the URL's
    /// user part (where ``StoreLocation`` redacts the password), every other keyword becomes a
    /// query parameter, which libpq reads back as the same keyword. The store's own
    /// `schema=`, `pool-size=` and `statement-timeout-ms=` are not libpq keywords: append
    /// them to the URL. Throws ``SyncError/Code/invalidStoreURL`` for a malformed string.
    public static func storeURL(connectionString: String) throws -> String {
        var errorMessage: UnsafeMutablePointer<CChar>?
        guard let parsed = PQconninfoParse(connectionString, &errorMessage) else {
            if let errorMessage { PQfreemem(errorMessage) }
            throw SyncError(.invalidStoreURL, "malformed PostgreSQL connection string")
        }
        defer { PQconninfoFree(parsed) }
        var user: String?, password: String?
        var parameters: [String] = []
        var option = parsed
        while let keyword = option.pointee.keyword {
            defer { option += 1 }
            guard let raw = option.pointee.val else { continue }
            let name = String(cString: keyword), value = String(cString: raw)
            switch name {
            case "user": user = value
            case "password": password = value
            default: parameters.append(encode(name) + "=" + encode(value))
            }
        }
        var userPart = ""
        if let user {
            userPart = encode(user) + (password.map { ":" + encode($0) } ?? "") + "@"
        } else if let password {
            userPart = ":" + encode(password) + "@"
        }
        return "postgres://" + userPart + (parameters.isEmpty ? "" : "?" + parameters.joined(separator: "&"))
    }

    /// Percent-encodes everything but ASCII letters, digits and `-._~`.
    private static func encode(_ text: String) -> String {
        let allowed = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }
}
