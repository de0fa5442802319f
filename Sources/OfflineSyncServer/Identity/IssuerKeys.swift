import Foundation
import Logging
import OfflineSyncWire
import Synchronization

/// When an issuer's keys are fetched again.
public struct KeyRefreshPolicy: Sendable, Hashable {
    /// The shortest a fetched key set is kept before it is refreshed, whatever its
    /// `Cache-Control` says (`max-age=0` made Hasura refetch every second).
    public var minimumLifetime: Duration
    /// The longest a key set is kept, so a rotation is noticed within a day at worst even
    /// when no token names a new key.
    public var maximumLifetime: Duration
    /// The lifetime of a key set fetched without `Cache-Control` (and of a key file).
    public var defaultLifetime: Duration
    /// The least time between two fetches of one issuer's keys caused by tokens naming a key
    /// the set lacks, and between two attempts to refresh a stale set (a provider that is
    /// down is asked again at this pace). A flood of tokens with made-up key ids costs the
    /// provider one request per interval.
    public var minimumRefetchInterval: Duration

    /// 5 minutes to 24 hours, 1 hour by default, at most one fetch per 30 seconds.
    public init(minimumLifetime: Duration = .seconds(300), maximumLifetime: Duration = .seconds(86_400),
                defaultLifetime: Duration = .seconds(3600), minimumRefetchInterval: Duration = .seconds(30)) {
        self.minimumLifetime = minimumLifetime
        self.maximumLifetime = maximumLifetime
        self.defaultLifetime = defaultLifetime
        self.minimumRefetchInterval = minimumRefetchInterval
    }

    /// How long a document with `maxAge` is kept.
    func lifetime(maxAge: Duration?) -> Duration {
        min(max(maxAge ?? defaultLifetime, minimumLifetime), maximumLifetime)
    }
}

/// One issuer's key set: fetched in the background at start, kept for its lifetime, fetched
/// again when it goes stale (while the old keys keep working) or when a token names a key it
/// lacks — one fetch at a time, however many requests wait on it, and at most one per
/// ``KeyRefreshPolicy/minimumRefetchInterval``. A request that triggered a fetch waits for
/// it and is verified against the new set, so the first token signed with a rotated key
/// succeeds.
final class IssuerKeys: Sendable {
    private struct State {
        var set: KeySet?
        /// When the set goes stale.
        var refreshAt: ContinuousClock.Instant?
        /// When the last fetch began.
        var lastAttempt: ContinuousClock.Instant?
        /// When the last fetch for a key the set lacked began.
        var lastHunt: ContinuousClock.Instant?
        /// The fetch under way, which every request that needs it awaits.
        var fetching: Task<Void, Never>?
        /// Whether the last fetch failed (so a failure is logged once per outage).
        var failing = false
    }

    let issuer: TokenIssuer
    private let policy: KeyRefreshPolicy
    private let logger: Logger
    private let loader = KeyDocumentLoader()
    private let state = Mutex(State())

    init(issuer: TokenIssuer, policy: KeyRefreshPolicy, logger: Logger) {
        self.issuer = issuer
        self.policy = policy
        self.logger = logger
    }

    /// Starts the first fetch without waiting for it: the server starts even when the
    /// provider is down.
    func start() {
        state.withLock { state in
            if state.lastAttempt == nil { _ = beginFetch(&state, at: .now) }
        }
    }

    /// The keys that may verify a token with `keyId` and `algorithm`; empty when none may,
    /// even after the one fetch the rules allow.
    func candidates(keyId: String?, algorithm: TokenIssuer.Algorithm) async -> [VerificationKey] {
        let now = ContinuousClock.now
        let (found, wait) = state.withLock { state -> ([VerificationKey], Task<Void, Never>?) in
            let found = state.set?.candidates(keyId: keyId, algorithm: algorithm) ?? []
            if !found.isEmpty {
                // Stale: refresh in the background and answer with the keys in hand.
                if let refreshAt = state.refreshAt, now >= refreshAt,
                   state.lastAttempt.map({ now - $0 >= policy.minimumRefetchInterval }) ?? true {
                    _ = beginFetch(&state, at: now)
                }
                return (found, nil)
            }
            // An unknown key (or no keys yet): join the fetch under way, or begin one if allowed.
            if let fetching = state.fetching { return ([], fetching) }
            if let last = state.lastHunt, now - last < policy.minimumRefetchInterval { return ([], nil) }
            state.lastHunt = now
            return ([], beginFetch(&state, at: now))
        }
        guard let wait else { return found }
        await wait.value
        return state.withLock { $0.set?.candidates(keyId: keyId, algorithm: algorithm) ?? [] }
    }

    /// Begins a fetch unless one is under way; returns the fetch under way. The callers
    /// decide whether one may begin.
    private func beginFetch(_ state: inout State, at now: ContinuousClock.Instant) -> Task<Void, Never> {
        if let fetching = state.fetching { return fetching }
        state.lastAttempt = now
        let task = Task { await self.fetch() }
        state.fetching = task
        return task
    }

    private func fetch() async {
        let result: Result<(KeySet, Duration), TokenRefusal>
        do throws(TokenRefusal) {
            result = .success(try await load())
        } catch {
            result = .failure(error)
        }
        let name = issuer.issuer
        let now = ContinuousClock.now
        state.withLock { state in
            state.fetching = nil
            switch result {
            case .success(let (set, lifetime)):
                if state.failing { logger.notice("identity provider keys fetched again", metadata: ["issuer": "\(name)"]) }
                if state.set == nil || state.failing || set.keys.map(\.id) != state.set?.keys.map(\.id) {
                    logger.info("identity provider keys loaded", metadata: [
                        "issuer": "\(name)", "keys": "\(set.keys.count)", "skipped": "\(set.skipped)"])
                }
                state.set = set
                state.refreshAt = now + lifetime
                state.failing = false
            case .failure(let refusal):
                if !state.failing {
                    logger.warning("cannot fetch the identity provider's keys; cached keys stay in use, retried at most every \(policy.minimumRefetchInterval)",
                                   metadata: ["issuer": "\(name)", "reason": "\(refusal.reason)", "cached": "\(state.set?.keys.count ?? 0)"])
                }
                state.failing = true
            }
        }
    }

    /// Fetches the key set (through the discovery document when configured so).
    private func load() async throws(TokenRefusal) -> (KeySet, Duration) {
        let document: KeyDocumentLoader.Document
        switch issuer.keys {
        case .jwks(let url):
            document = try await loader.fetch(url)
        case .file(let path):
            document = try loader.read(file: path)
        case .discovery(let url):
            let discovery = try await loader.fetch(url)
            guard case .string(let stated)? = discovery.json["issuer"], stated == issuer.issuer else {
                throw TokenRefusal("the discovery document names another issuer")
            }
            guard case .string(let text)? = discovery.json["jwks_uri"], let jwks = URL(string: text) else {
                throw TokenRefusal("the discovery document has no 'jwks_uri'")
            }
            document = try await loader.fetch(jwks)
        }
        return (try KeySet(document: document.json), policy.lifetime(maxAge: document.maxAge))
    }
}
