import ArgumentParser
import COfflineSyncSystem
import Foundation
import Logging
import OfflineSync
import OfflineSyncCommandSupport
import OfflineSyncPostgreSQL
import OfflineSyncServer
import OfflineSyncService

/// Where the server keeps its data and its development token secret.
struct ServerDataArguments: ParsableArguments {
    @Option(help: ArgumentHelp("The server's data directory (environment: OFFLINE_SYNC_DATA).",
                               discussion: "Holds server.sqlite (unless --store names another store) and token-secret."))
    var data: String?

    var directory: URL {
        URL(fileURLWithPath: data ?? ProcessInfo.processInfo.environment["OFFLINE_SYNC_DATA"] ?? "offline-sync-data", isDirectory: true)
    }

    /// Opens the server's store: `store` (a store URL), else OFFLINE_SYNC_STORE, else the data
    /// directory's `server.sqlite` — created, with the directory, when `create`; otherwise a
    /// missing one is an error, not an empty store. `shown` names it for a log line: a
    /// PostgreSQL URL only by its scheme, since it may carry a password.
    /// `replicas` are hot standbys' URLs for a PostgreSQL store (its `replica=` parameters).
    func openStore(_ store: String?, create: Bool = true, replicas: [String] = []) async throws -> (store: any LocalStore, shown: String) {
        var text = store ?? ProcessInfo.processInfo.environment["OFFLINE_SYNC_STORE"] ?? ""
        if text.isEmpty {
            let file = directory.standardizedFileURL.appendingPathComponent("server.sqlite")
            if create {
                try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            } else if !FileManager.default.fileExists(atPath: file.path) {
                throw ValidationError("no server store at \(file.path): name the server's --data directory or --store")
            }
            text = "sqlite://" + file.path
        }
        let arguments = try StoreArguments.parse(["--store", text])
        var url = try arguments.url()
        if !replicas.isEmpty {
            guard url.hasPrefix("postgres://") || url.hasPrefix("postgresql://") else {
                throw ValidationError("--postgres-replica (or OFFLINE_SYNC_POSTGRES_REPLICAS) needs a PostgreSQL --store")
            }
            let encoded = replicas.map { "replica=" + ($0.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? $0) }
            url += (url.contains("?") ? "&" : "?") + encoded.joined(separator: "&")
        }
        let (location, adapter) = try StoreRegistry.builtIn.resolve(url)
        let shown = location.scheme.hasPrefix("postgres") ? "\(location.scheme) store" : text
        return (try await adapter.open(location, try arguments.options(for: location)), shown)
    }

    /// The sync rules in `path`, else in OFFLINE_SYNC_RULES's file; owner-only without either.
    func rules(_ path: String?) throws -> SyncRules {
        try (path ?? ProcessInfo.processInfo.environment["OFFLINE_SYNC_RULES"]).map(SyncRules.init(contentsOfFile:)) ?? .ownerOnly
    }

    /// The token secret: OFFLINE_SYNC_TOKEN_SECRET (at least 32 bytes) when set, otherwise the
    /// data directory's `token-secret` file, created with 32 random bytes (mode 0600) if
    /// `create` and missing.
    func tokenSecret(create: Bool) throws -> [UInt8] {
        if let value = ProcessInfo.processInfo.environment["OFFLINE_SYNC_TOKEN_SECRET"], !value.isEmpty {
            guard value.utf8.count >= TokenAuthority.minimumSecretLength else {
                throw ValidationError("OFFLINE_SYNC_TOKEN_SECRET must be at least \(TokenAuthority.minimumSecretLength) bytes")
            }
            return Array(value.utf8)
        }
        let file = directory.appendingPathComponent("token-secret")
        if let text = try? String(contentsOf: file, encoding: .utf8) {
            let hex = text.trimmingCharacters(in: .whitespacesAndNewlines)
            guard let bytes = Self.bytes(hex: hex), bytes.count >= TokenAuthority.minimumSecretLength else {
                throw ValidationError("\(file.path) is not a token secret (64 or more hex digits); fix or remove it")
            }
            return bytes
        }
        guard create else {
            throw ValidationError("no token secret: set OFFLINE_SYNC_TOKEN_SECRET or run `offline-sync serve` once to create \(file.path)")
        }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let secret = (0..<32).map { _ in UInt8.random(in: .min ... .max) }
        let hex = secret.map { String(format: "%02x", $0) }.joined()
        guard FileManager.default.createFile(atPath: file.path, contents: Data((hex + "\n").utf8),
                                             attributes: [.posixPermissions: 0o600]) else {
            throw ValidationError("cannot write \(file.path)")
        }
        return secret
    }

    static func bytes(hex: String) -> [UInt8]? {
        let digits = Array(hex.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let byte = UInt8(String(decoding: digits[index...index + 1], as: UTF8.self), radix: 16) else { return nil }
            bytes.append(byte)
        }
        return bytes
    }
}

/// `offline-sync serve`: the sync server.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run the sync server (native API, Datasync tables API, change notifications).",
        discussion: """
            Defaults: 127.0.0.1, port 8080, data in ./offline-sync-data/ on SQLite. Clients need a \
            token: mint one with `offline-sync token --identity NAME`. SIGTERM or SIGINT stops the \
            server gracefully: requests in flight finish first (within 10 seconds; then the rest is cancelled).
            """)

    @Option(help: "The address to bind (environment: OFFLINE_SYNC_HOST).")
    var host: String?

    @Option(help: "The port, 0 for any free port (environment: OFFLINE_SYNC_PORT).")
    var port: Int?

    @Option(help: ArgumentHelp("The store URL (environment: OFFLINE_SYNC_STORE).", discussion: """
        Default: sqlite://<data>/server.sqlite. PostgreSQL (postgres://… or a libpq connection string) \
        lets several server instances share one database; their change notifications cross \
        instances through LISTEN/NOTIFY.
        """))
    var store: String?

    @Option(name: .customLong("postgres-replica"), help: ArgumentHelp(
        "A hot standby of the PostgreSQL store's database that serves reads (repeatable; environment: OFFLINE_SYNC_POSTGRES_REPLICAS, URLs separated by spaces).", discussion: """
        A libpq URL or connection string. A read goes to a replica that has replayed every \
        write the primary had committed when the read began, else (after the store URL's \
        replica-wait-ms, 100 by default, or when the replica fails) to the primary: devices \
        always read their own acknowledged writes.
        """))
    var postgresReplicas: [String] = []

    @OptionGroup var dataArguments: ServerDataArguments

    @Option(help: "Log level: trace, debug, info, notice, warning, error or critical.")
    var logLevel: String = "info"

    @Option(help: "The most operations one push may carry.")
    var maxBatchSize: Int = 5000

    @Option(help: "The largest request body, in bytes.")
    var maxBodyBytes: Int = 32 << 20

    @Option(name: .customLong("cognito-key"), help: ArgumentHelp(
        "An access key of the Cognito Sync API, ACCESS_KEY_ID:SECRET (a developer key) or ACCESS_KEY_ID:SECRET:IDENTITY_ID.",
        discussion: """
            Repeatable; also OFFLINE_SYNC_COGNITO_KEYS (comma-separated). Requests are verified with AWS \
            Signature Version 4 (service cognito-sync). A key bound to an identity reaches only that \
            identity's datasets; a developer key reaches every identity and the pool-level operations. \
            Cognito streams are written as JSON lines to <data>/streams/<stream name>.jsonl.
            """))
    var cognitoKeys: [String] = []

    @Option(help: ArgumentHelp("A sync rules document (environment: OFFLINE_SYNC_RULES).", discussion: """
        YAML, as Docs/SyncRules.md describes: which rows each identity may read and write         (shared lists, teams, public tables, roles). Without one every table is owner-only. An         invalid document stops the server before it listens, naming the line and the problem.
        """))
    var rules: String?

    @Option(help: ArgumentHelp("The largest group whose writes fan out to each member's own log (environment: OFFLINE_SYNC_GROUP_FANOUT_LIMIT).",
                               discussion: """
        A group of the sync rules with more members is read by its members' pulls instead, so a write costs the         same whatever the group's size (Docs/SyncRules.md). Default: \(OfflineSyncService.defaultGroupFanoutLimit).
        """))
    var groupFanoutLimit: Int64?

    @Option(name: .customLong("attachment-max-bytes"), help: ArgumentHelp(
        "The largest attachment accepted, in bytes (environment: OFFLINE_SYNC_ATTACHMENT_MAX_BYTES).",
        discussion: "A larger upload is refused with 413 before any byte is stored. Default 2 GiB."))
    var attachmentMaxBytes: Int64?

    @Option(name: .customLong("attachment-quota-bytes"), help: ArgumentHelp(
        "The attachment bytes one identity may store, uploads under way included (environment: OFFLINE_SYNC_ATTACHMENT_QUOTA_BYTES).",
        discussion: "An upload past it is refused with 413 before any byte is stored. Default 20 GiB."))
    var attachmentQuotaBytes: Int64?

    @Option(name: .customLong("attachment-max-open-uploads"), help: ArgumentHelp(
        "The most unfinished uploads one identity may have at once (environment: OFFLINE_SYNC_ATTACHMENT_MAX_OPEN_UPLOADS).",
        discussion: "A new upload past it is refused with 413 until one is finished, cancelled or collected. Default 256."))
    var attachmentMaxOpenUploads: Int64?

    @Option(name: .customLong("attachment-grace-seconds"), help: ArgumentHelp(
        "How long an attachment no row references, or an upload left unfinished, is kept (environment: OFFLINE_SYNC_ATTACHMENT_GRACE_SECONDS).",
        discussion: "Default 86400 (a day): time for the record that references a new upload to be pushed."))
    var attachmentGraceSeconds: Int64?

    @Option(name: .customLong("attachment-prune-seconds"), help: ArgumentHelp(
        "How often unreferenced attachments and abandoned uploads are collected (environment: OFFLINE_SYNC_ATTACHMENT_PRUNE_SECONDS).",
        discussion: "Default 3600; 0 never (POST /v1/admin/prune-attachments then collects on demand)."))
    var attachmentPruneSeconds: Int64?

    @Option(name: .customLong("drain-seconds"), help: ArgumentHelp(
        "On SIGTERM, how long to keep serving while GET /ready answers 503 (environment: OFFLINE_SYNC_DRAIN_SECONDS).",
        discussion: "Time for a load balancer to send new requests elsewhere before the server stops accepting. Default 0."))
    var drainSeconds: Int64?

    @Option(name: .customLong("channel-write-seconds"), help: ArgumentHelp(
        "How long a change notice may wait to be written before its channel is closed (environment: OFFLINE_SYNC_CHANNEL_WRITE_SECONDS).",
        discussion: "A write waits when the client stopped reading its socket; the client reconnects when it reads again. Default 15."))
    var channelWriteSeconds: Int64?

    @Option(name: .customLong("channel-ping-seconds"), help: ArgumentHelp(
        "How often an idle WebSocket change channel is pinged (environment: OFFLINE_SYNC_CHANNEL_PING_SECONDS).",
        discussion: "A channel that has not answered a ping by the next is closed. Default 30."))
    var channelPingSeconds: Int64?

    @Option(name: .customLong("key-refetch-seconds"), help: ArgumentHelp(
        "The least time between two fetches of an issuer's keys for tokens naming a key its set lacks (environment: OFFLINE_SYNC_KEY_REFETCH_SECONDS).",
        discussion: """
            Such a request waits at most this long for a fresh set, and made-up key ids cost the provider one fetch \
            per interval; a provider that is down is asked again at this pace. Default 10; from 1 to 3600.
            """))
    var keyRefetchSeconds: Int64?

    @Option(name: .customLong("issuer"), help: ArgumentHelp("An identity provider's configuration, a YAML file with an 'issuers:' list (repeatable; environment: OFFLINE_SYNC_ISSUERS, paths separated by ':').",
                                                           discussion: """
        The server then accepts that provider's tokens (Auth0, Keycloak, Cognito user pools, Firebase Auth, Supabase Auth, any \
        OpenID Connect server publishing a JWKS) beside its own development tokens. Docs/Server.md shows each provider's file. \
        An invalid file stops the server before it listens, naming the line and the problem.
        """))
    var issuerFiles: [String] = []

    @Option(name: .customLong("development-tokens"), help: ArgumentHelp(
        "Whether the server's own development tokens are accepted: auto, on or off (environment: OFFLINE_SYNC_DEVELOPMENT_TOKENS).",
        discussion: """
            auto (the default) accepts them while no --issuer is given and refuses them once one is. on accepts them \
            beside the issuers' tokens, and then needs an identity_prefix on every issuer (a development token may \
            not carry an identity that starts with one). The start-up log names every token source that is on.
            """))
    var developmentTokens: String?

    @Option(name: .customLong("metrics-key"), help: ArgumentHelp(
        "A key that reads GET /metrics and nothing else, sent as 'Authorization: Bearer KEY' (environment: OFFLINE_SYNC_METRICS_KEY).",
        discussion: """
            For a scraper: it cannot mint tokens or open the console, as the admin key can (which reads the metrics \
            too). Prefer the environment variable: a command line is visible to other users of the machine. \
            It must differ from the admin key.
            """))
    var metricsKey: String?

    @Option(name: .customLong("console-secure-cookie"), help: ArgumentHelp(
        "When the console's session cookie is Secure: auto, always or never (environment: OFFLINE_SYNC_CONSOLE_SECURE_COOKIE).",
        discussion: """
            auto (the default) sets it when the sign-in came over TLS, or from a --trusted-proxy that says \
            X-Forwarded-Proto: https. This server terminates no TLS, so behind a TLS-terminating proxy auto \
            needs --trusted-proxy; always suits a deployment reached over HTTPS only.
            """))
    var consoleSecureCookie: String?

    @Option(name: .customLong("admin-attempts-per-address"), help: ArgumentHelp(
        "Wrong admin or metrics keys one client address may send in 5 minutes (environment: OFFLINE_SYNC_ADMIN_ATTEMPTS_PER_ADDRESS).",
        discussion: """
            Counted at every door that takes a key: the console's sign-in, X-Admin-Key, a console session cookie, \
            the metrics key. Past it a request with a key is answered 429 with Retry-After, its key unchecked. \
            Default 10.
            """))
    var adminAttemptsPerAddress: Int64?

    @Option(name: .customLong("admin-attempts-overall"), help: ArgumentHelp(
        "Wrong admin or metrics keys from all addresses together in a minute (environment: OFFLINE_SYNC_ADMIN_ATTEMPTS_OVERALL).",
        discussion: """
            Past it, an address that sent a wrong key itself in its last 5 minutes is answered 429; an address \
            that did not (the operator's) is held only to its own limit. Default 100.
            """))
    var adminAttemptsOverall: Int64?

    @Option(name: .customLong("trusted-proxy"), help: ArgumentHelp(
        "A proxy whose X-Forwarded-Proto and X-Forwarded-For are believed: an IP address or ADDRESS/PREFIX (repeatable; environment: OFFLINE_SYNC_TRUSTED_PROXIES, comma-separated).",
        discussion: """
            The console then takes the client's protocol (for its cookie's Secure flag) and address (for its \
            limit on wrong admin keys) from those headers when the connection comes from one of these. Default: none.
            """))
    var trustedProxies: [String] = []

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        // glibc gives each busy thread a heap of its own (up to 8 per core); megabyte pieces of
        // attachments passing through NIO's and the store's threads then leave the memory
        // spread over all of them. Two heaps kept a 256 MiB upload's and download's peak
        // resident memory about 10 MiB lower at the same speed. MALLOC_ARENA_MAX still decides
        // when it is set.
        if environment["MALLOC_ARENA_MAX"] == nil { _ = osync_limit_malloc_arenas(2) }
        guard let level = Logger.Level(rawValue: logLevel) else { throw ValidationError("unknown log level '\(logLevel)'") }
        var logger = Logger(label: "offline-sync.server")
        logger.logLevel = level
        let host = self.host ?? environment["OFFLINE_SYNC_HOST"] ?? "127.0.0.1"
        guard let port = self.port ?? environment["OFFLINE_SYNC_PORT"].flatMap(Int.init), (0...65535).contains(port) else {
            throw ValidationError("the port must be a number from 0 to 65535")
        }
        let directory = dataArguments.directory
        let secret = try dataArguments.tokenSecret(create: true)
        let syncRules = try dataArguments.rules(self.rules)
        // The environment keeps replicas' passwords off the command line (URLs, space-separated).
        let replicas = postgresReplicas.isEmpty
            ? (environment["OFFLINE_SYNC_POSTGRES_REPLICAS"] ?? "").split(whereSeparator: \.isWhitespace).map(String.init) : postgresReplicas
        let (store, shownStore) = try await dataArguments.openStore(self.store, replicas: replicas)
        func setting(_ flag: Int64?, _ variable: String, _ fallback: Int64, _ name: String) throws -> Int64 {
            let value = try flag ?? environment[variable].map { text in
                guard let number = Int64(text) else { throw ValidationError("\(variable) must be a whole number") }
                return number
            } ?? fallback
            guard value >= 0 else { throw ValidationError("\(name) must not be negative") }
            // A time of at most 100 years: a cutoff computed from it cannot overflow.
            guard !name.hasSuffix("-seconds") || value <= 3_155_760_000 else {
                throw ValidationError("\(name) must be at most 3155760000 seconds (100 years)")
            }
            return value
        }
        let defaults = AttachmentLimits()
        let attachmentLimits = AttachmentLimits(
            maximumSize: try setting(attachmentMaxBytes, "OFFLINE_SYNC_ATTACHMENT_MAX_BYTES", defaults.maximumSize, "--attachment-max-bytes"),
            quotaPerIdentity: try setting(attachmentQuotaBytes, "OFFLINE_SYNC_ATTACHMENT_QUOTA_BYTES", defaults.quotaPerIdentity,
                                          "--attachment-quota-bytes"),
            grace: .seconds(try setting(attachmentGraceSeconds, "OFFLINE_SYNC_ATTACHMENT_GRACE_SECONDS",
                                        defaults.grace.components.seconds, "--attachment-grace-seconds")),
            maximumOpenUploads: Int(try setting(attachmentMaxOpenUploads, "OFFLINE_SYNC_ATTACHMENT_MAX_OPEN_UPLOADS",
                                                Int64(defaults.maximumOpenUploads), "--attachment-max-open-uploads")))
        guard attachmentLimits.maximumOpenUploads >= 1 else { throw ValidationError("--attachment-max-open-uploads must be at least 1") }
        let pruneSeconds = try setting(attachmentPruneSeconds, "OFFLINE_SYNC_ATTACHMENT_PRUNE_SECONDS", 3600, "--attachment-prune-seconds")
        let fanout = try setting(groupFanoutLimit, "OFFLINE_SYNC_GROUP_FANOUT_LIMIT", Int64(OfflineSyncService.defaultGroupFanoutLimit),
                                 "--group-fanout-limit")
        let drain = try setting(drainSeconds, "OFFLINE_SYNC_DRAIN_SECONDS", 0, "--drain-seconds")
        let channelWrite = try setting(channelWriteSeconds, "OFFLINE_SYNC_CHANNEL_WRITE_SECONDS", 15, "--channel-write-seconds")
        let channelPing = try setting(channelPingSeconds, "OFFLINE_SYNC_CHANNEL_PING_SECONDS", 30, "--channel-ping-seconds")
        let keyRefetch = try setting(keyRefetchSeconds, "OFFLINE_SYNC_KEY_REFETCH_SECONDS", 10, "--key-refetch-seconds")
        guard (1...3600).contains(keyRefetch) else { throw ValidationError("--key-refetch-seconds must be from 1 to 3600") }
        guard fanout >= 1, fanout <= Int64(Int32.max) else { throw ValidationError("--group-fanout-limit must be from 1 to \(Int32.max)") }
        guard drain <= 3600 else { throw ValidationError("--drain-seconds must be at most 3600") }
        guard channelWrite >= 1, channelPing >= 1 else {
            throw ValidationError("--channel-write-seconds and --channel-ping-seconds must be at least 1")
        }
        // First: behind a pooler in transaction mode nothing should be written.
        let feed = try await Self.changeFeed(for: store)
        let service = try await OfflineSyncService(store: store, rules: syncRules, groupFanoutLimit: Int(fanout),
                                                   attachmentLimits: attachmentLimits)
        var configuration = SyncServer.Configuration(
            host: host, port: port, tokenSecret: secret,
            adminKey: environment["OFFLINE_SYNC_ADMIN_KEY"].flatMap { $0.isEmpty ? nil : $0 },
            maxBodyBytes: maxBodyBytes, maxBatchSize: maxBatchSize, logger: logger,
            cognitoKeys: try parseCognitoKeys(environment))
        configuration.drainPeriod = .seconds(drain)
        configuration.changeChannelWriteTimeout = .seconds(channelWrite)
        configuration.changeChannelPingInterval = .seconds(channelPing)
        configuration.attachmentPruneInterval = pruneSeconds > 0 ? .seconds(pruneSeconds) : nil
        try configureIdentity(&configuration, environment: environment, keyRefetch: .seconds(keyRefetch))
        try configureConsole(&configuration, environment: environment)
        let datasets = try await DatasetService(
            store: store, streamSink: JSONLinesStreamSink(directory: directory.appendingPathComponent("streams", isDirectory: true)))
        let server = try await SyncServer(service: service, configuration: configuration, feed: feed, datasets: datasets)
        if let postgres = store as? PostgreSQLStore, !postgres.options.replicas.isEmpty {
            server.metrics.countReplicaReads { let reads = postgres.replicaReads; return (reads.served, reads.leftToPrimary) }
        }
        try await server.run { port in
            let shownHost = host.contains(":") ? "[\(host)]" : host
            // Written in one call and unbuffered, so a supervising process sees the line at once.
            FileHandle.standardOutput.write(Data("offline-sync server listening on http://\(shownHost):\(port) (store: \(shownStore))\n".utf8))
        }
        (feed as? RelayedChangeFeed)?.stop()
        try await store.close()
        print("offline-sync server stopped")
    }
}

extension ServeCommand {
    /// How instances hear of each other's changes: PostgreSQL's `LISTEN`/`NOTIFY` on a
    /// channel of the store's schema, or nothing beyond this process.
    static func changeFeed(for store: any LocalStore) async throws -> any ChangeFeed {
        guard let postgres = store as? PostgreSQLStore else { return LocalChangeFeed() }
        // Behind a pooler in transaction mode, change notices between instances would be
        // lost without a word: refuse to start instead.
        try await postgres.checkSessionState()
        // Named after the store's schema: deployments on other schemas of the same
        // database must not hear each other's changes (their identities are not ours).
        let channel = try postgres.schemaChannel("offline_sync_changes")
        let relayed = RelayedChangeFeed(send: { try await postgres.notify(channel: channel, payload: $0) },
                                        receive: { try await postgres.notifications(channel: channel) })
        await relayed.waitUntilListening()
        return relayed
    }

    /// The token sources: the `--issuer` files, then those of OFFLINE_SYNC_ISSUERS; whether
    /// development tokens are accepted; how often a missing key may send for the keys again.
    func configureIdentity(_ configuration: inout SyncServer.Configuration, environment: [String: String],
                           keyRefetch: Duration) throws {
        configuration.keyRefresh.minimumRefetchInterval = keyRefetch
        let issuerPaths = issuerFiles + (environment["OFFLINE_SYNC_ISSUERS"] ?? "").split(separator: ":").map(String.init)
        configuration.issuers = try issuerPaths.flatMap(TokenIssuer.issuers(contentsOfFile:))
        let developmentText = developmentTokens ?? environment["OFFLINE_SYNC_DEVELOPMENT_TOKENS"] ?? "auto"
        guard let development = DevelopmentTokens(rawValue: developmentText) else {
            throw ValidationError("--development-tokens is auto, on or off, not '\(developmentText)'")
        }
        configuration.developmentTokens = development
    }

    /// The metrics key, the console cookie's `Secure` policy, the limits on wrong keys and the
    /// trusted proxies, from their options or else their environment variables.
    func configureConsole(_ configuration: inout SyncServer.Configuration, environment: [String: String]) throws {
        let key = metricsKey ?? environment["OFFLINE_SYNC_METRICS_KEY"] ?? ""
        if !key.isEmpty {
            guard key != configuration.adminKey else { throw ValidationError("the metrics key must differ from the admin key") }
            configuration.metricsKey = key
        }
        let secureText = consoleSecureCookie ?? environment["OFFLINE_SYNC_CONSOLE_SECURE_COOKIE"] ?? "auto"
        guard let secure = ConsoleSecureCookie(rawValue: secureText) else {
            throw ValidationError("--console-secure-cookie is auto, always or never, not '\(secureText)'")
        }
        configuration.consoleSecureCookie = secure
        func attempts(_ flag: Int64?, _ variable: String, _ fallback: Int, _ name: String) throws -> Int {
            let value = try flag ?? environment[variable].map { text in
                guard let number = Int64(text) else { throw ValidationError("\(variable) must be a whole number") }
                return number
            } ?? Int64(fallback)
            guard (1...1_000_000_000).contains(value) else { throw ValidationError("\(name) must be from 1 to 1000000000") }
            return Int(value)
        }
        configuration.consoleSignIns.perAddress = try attempts(adminAttemptsPerAddress, "OFFLINE_SYNC_ADMIN_ATTEMPTS_PER_ADDRESS",
                                                               configuration.consoleSignIns.perAddress, "--admin-attempts-per-address")
        configuration.consoleSignIns.overall = try attempts(adminAttemptsOverall, "OFFLINE_SYNC_ADMIN_ATTEMPTS_OVERALL",
                                                            configuration.consoleSignIns.overall, "--admin-attempts-overall")
        let proxies = trustedProxies + (environment["OFFLINE_SYNC_TRUSTED_PROXIES"] ?? "").split(separator: ",").map(String.init)
        do {
            configuration.trustedProxies = try TrustedProxies(proxies.filter { !$0.trimmingCharacters(in: .whitespaces).isEmpty })
        } catch let error as SyncError {
            throw ValidationError("--trusted-proxy: \(error.message)")
        }
    }

    /// The `--cognito-key` options, then the keys of OFFLINE_SYNC_COGNITO_KEYS.
    func parseCognitoKeys(_ environment: [String: String]) throws -> [CognitoAccessKey] {
        let texts = cognitoKeys + (environment["OFFLINE_SYNC_COGNITO_KEYS"] ?? "").split(separator: ",").map(String.init)
        return try texts.map { text in
            guard let key = CognitoAccessKey(parsing: text.trimmingCharacters(in: .whitespaces)) else {
                throw ValidationError("a Cognito key is ACCESS_KEY_ID:SECRET or ACCESS_KEY_ID:SECRET:IDENTITY_ID")
            }
            return key
        }
    }
}

/// `offline-sync token --identity NAME`: a development token for the server's secret.
struct TokenCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token",
        abstract: "Mint a bearer token for an identity, signed with the server's token secret.")

    @Option(help: "The identity the token carries.")
    var identity: String

    @Option(help: "How long the token is valid, in seconds.")
    var lifetime: Int = 24 * 3600

    @Option(name: .customLong("role"), help: "A role the token grants, for sync rules that require one (repeatable).")
    var roles: [String] = []

    @OptionGroup var dataArguments: ServerDataArguments

    func run() async throws {
        guard lifetime > 0 else { throw ValidationError("--lifetime must be positive") }
        let authority = try await TokenAuthority(secret: try dataArguments.tokenSecret(create: false))
        print(try await authority.mint(identity: identity, roles: Set(roles), lifetime: .seconds(lifetime)))
    }
}

/// `offline-sync explain --identity bob --table todos --id T1`: why the server's rules let an
/// identity read a row and make each change to it, or why not, read from the server's own store.
struct ExplainCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "explain",
        abstract: "Explain why the sync rules let an identity read and change a row, or why not.",
        discussion: """
            Reads the server's store (--data or --store, as `serve` does) with the rules `serve` uses, \
            and checks every grant of the table for read, insert, update and delete: which one \
            admits, or what each lacked (a membership, a role, a token claim, an owner). Safe \
            beside a running server on SQLite or PostgreSQL. The admin route POST /v1/admin/explain \
            answers the same question over HTTP.
            """)

    @Option(help: "The identity asked about.")
    var identity: String

    @Option(help: "The table.")
    var table: String

    @Option(help: "The row's id.")
    var id: String

    @Option(name: .customLong("role"), help: "A role the identity's token carries (repeatable).")
    var roles: [String] = []

    @Option(name: .customLong("claim"), help: "Another claim of its token, as name=value (repeatable).")
    var claims: [String] = []

    @Option(help: "The store URL (environment: OFFLINE_SYNC_STORE); default: sqlite://<data>/server.sqlite.")
    var store: String?

    @Option(help: "A sync rules document (environment: OFFLINE_SYNC_RULES); without one every table is owner-only.")
    var rules: String?

    @Flag(help: "Print the explanation as JSON.")
    var json = false

    @OptionGroup var dataArguments: ServerDataArguments

    func run() async throws {
        var values: [String: [String]] = [:]
        for claim in claims {
            guard let equals = claim.firstIndex(of: "="), equals != claim.startIndex else {
                throw ValidationError("--claim takes name=value, not '\(claim)'")
            }
            values[String(claim[..<equals]), default: []].append(String(claim[claim.index(after: equals)...]))
        }
        let syncRules = try dataArguments.rules(rules)
        let store = try await dataArguments.openStore(store, create: false).store
        let service = try await OfflineSyncService(store: store, rules: syncRules)
        let explanation = try await service.explain(claims: Claims(identity: try Identity(identity), roles: Set(roles), values: values),
                                                    table: table, id: id)
        try await store.close()
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            print(String(decoding: try encoder.encode(explanation), as: UTF8.self))
            return
        }
        print("\(explanation.identity) on \(explanation.table)/\(explanation.id): \(explanation.storage) table, "
            + (explanation.exists ? (explanation.deleted ? "the row is deleted" : "the row exists") : "no such row"))
        for decision in explanation.decisions {
            print("\(decision.operation): \(decision.allowed ? "allowed" : "refused")")
            if decision.grants.isEmpty { print("  no grant to check") }
            for check in decision.grants {
                print("  \(check.admits ? "+" : "-") \(check.grant): \(check.reason)")
            }
        }
    }
}
