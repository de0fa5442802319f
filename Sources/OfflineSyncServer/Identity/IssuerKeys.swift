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
    /// provider one request per interval; a request naming a key the set lacks waits at most
    /// this long (plus the fetch) for a set fetched after it arrived.
    public var minimumRefetchInterval: Duration
    /// How long past its lifetime a key set stays in use while every refresh fails. Past it
    /// the set is dropped (logged as an error): a key the provider withdrew stays valid no
    /// longer than this however long its fetches can be made to fail, and the issuer's tokens
    /// are answered 503 until a fetch succeeds.
    public var maximumStaleness: Duration
    /// The most requests that may wait, per issuer, for a key set to be fetched. Past it a
    /// request naming a key the set lacks is answered 503 at once (with `Retry-After`), so
    /// made-up key ids cannot hold an unbounded number of requests.
    public var maximumWaitingRequests: Int

    /// 5 minutes to 24 hours, 1 hour by default; at most one fetch per 10 seconds; a set kept
    /// 12 hours past its lifetime while refreshes fail; 1,000 waiting requests.
    public init(minimumLifetime: Duration = .seconds(300), maximumLifetime: Duration = .seconds(86_400),
                defaultLifetime: Duration = .seconds(3600), minimumRefetchInterval: Duration = .seconds(10),
                maximumStaleness: Duration = .seconds(12 * 3600), maximumWaitingRequests: Int = 1000) {
        self.minimumLifetime = minimumLifetime
        self.maximumLifetime = maximumLifetime
        self.defaultLifetime = defaultLifetime
        self.minimumRefetchInterval = minimumRefetchInterval
        self.maximumStaleness = maximumStaleness
        self.maximumWaitingRequests = maximumWaitingRequests
    }

    /// How long a document with `maxAge` is kept.
    func lifetime(maxAge: Duration?) -> Duration {
        min(max(maxAge ?? defaultLifetime, minimumLifetime), maximumLifetime)
    }
}

/// What a key look-up found for one token.
enum KeyLookup {
    /// Keys that may verify it.
    case found([VerificationKey])
    /// A key set fetched after the request arrived lacks the token's key: it is refused.
    case unknown
    /// No key set fetched after the request arrived could be had (the provider is failing,
    /// the cached set passed its staleness bound, or too many requests wait already): the
    /// token can be neither accepted nor refused now, and a retry after `retryAfter` may pass.
    case unavailable(retryAfter: Duration)
}

/// One issuer's key set: fetched in the background at start, kept for its lifetime, fetched
/// again when it goes stale (while the old keys keep working) or when a token names a key it
/// lacks — one fetch at a time, however many requests wait on it, and at most one per
/// ``KeyRefreshPolicy/minimumRefetchInterval``.
///
/// A token naming a key the set lacks is answered by a set fetched after it arrived: it
/// joins the fetch under way, or begins one, or — inside the interval — waits for the one
/// the interval allows next. So the first token signed with a newly published key succeeds
/// whatever made-up key ids others send, and the provider still sees one fetch per interval.
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
        /// The fetch for a missing key that waits for the interval to pass.
        var scheduled: Task<Void, Never>?
        /// When the last completed fetch began (a request takes its answer only from a fetch
        /// that began after it arrived).
        var completedBegan: ContinuousClock.Instant?
        /// Requests waiting for a fetch.
        var waiting = 0
        /// Whether the last fetch failed (so a failure is logged once per outage).
        var failing = false
    }

    /// One step of a look-up, decided under the lock.
    private enum Step {
        case answer(KeyLookup)
        case wait(Task<Void, Never>)
    }

    let issuer: TokenIssuer
    private let policy: KeyRefreshPolicy
    private let logger: Logger
    private let loader = KeyDocumentLoader()
    private let state = Mutex(State())
    /// Told of each fetch's end: the issuer, and whether it brought keys (the server's metrics).
    private let fetched: @Sendable (_ issuer: String, _ ok: Bool) -> Void

    init(issuer: TokenIssuer, policy: KeyRefreshPolicy, logger: Logger,
         fetched: @escaping @Sendable (_ issuer: String, _ ok: Bool) -> Void = { _, _ in }) {
        self.issuer = issuer
        self.policy = policy
        self.logger = logger
        self.fetched = fetched
    }

    /// Starts the first fetch without waiting for it: the server starts even when the
    /// provider is down.
    func start() {
        state.withLock { state in
            if state.lastAttempt == nil { _ = beginFetch(&state, at: .now) }
        }
    }

    /// The keys that may verify a token with `keyId` and `algorithm`, or why there are none.
    func lookup(keyId: String?, algorithm: TokenIssuer.Algorithm) async -> KeyLookup {
        let arrived = ContinuousClock.now
        var waits = 0
        while true {
            let step = state.withLock { state -> Step in
                let now = ContinuousClock.now
                if waits > 0 { state.waiting -= 1 }
                dropIfPastStaleness(&state, now: now)
                let found = state.set?.candidates(keyId: keyId, algorithm: algorithm) ?? []
                if !found.isEmpty {
                    // Stale: refresh in the background and answer with the keys in hand.
                    if let refreshAt = state.refreshAt, now >= refreshAt,
                       state.lastAttempt.map({ now - $0 >= policy.minimumRefetchInterval }) ?? true {
                        _ = beginFetch(&state, at: now)
                    }
                    return .answer(.found(found))
                }
                if waits > 0, let began = state.completedBegan, began >= arrived {
                    return .answer(state.failing || state.set == nil ? .unavailable(retryAfter: retryAfter(state, now: now)) : .unknown)
                }
                // Three waits cover joining a fetch that began before the request arrived,
                // then the one the interval allows next.
                guard waits < 3, state.waiting < policy.maximumWaitingRequests else {
                    return .answer(.unavailable(retryAfter: retryAfter(state, now: now)))
                }
                state.waiting += 1
                return .wait(nextFetch(&state, now: now))
            }
            switch step {
            case .answer(let lookup): return lookup
            case .wait(let task):
                await task.value
                waits += 1
            }
        }
    }

    /// The fetch a request for a missing key awaits: the one under way, a new one when the
    /// interval allows, or the one scheduled for when it does.
    private func nextFetch(_ state: inout State, now: ContinuousClock.Instant) -> Task<Void, Never> {
        if let fetching = state.fetching { return fetching }
        guard let last = state.lastHunt, now - last < policy.minimumRefetchInterval else {
            state.lastHunt = now
            return beginFetch(&state, at: now)
        }
        if let scheduled = state.scheduled { return scheduled }
        let due = last + policy.minimumRefetchInterval
        let task = Task {
            try? await Task.sleep(until: due, clock: .continuous)
            let fetch = self.state.withLock { state in
                state.scheduled = nil
                state.lastHunt = .now
                return self.beginFetch(&state, at: .now)
            }
            await fetch.value
        }
        state.scheduled = task
        return task
    }

    /// When a refused request may try again: when the next fetch for a missing key is allowed,
    /// and at least a second from now.
    private func retryAfter(_ state: State, now: ContinuousClock.Instant) -> Duration {
        let due = state.lastHunt.map { $0 + policy.minimumRefetchInterval } ?? now
        return max(.seconds(1), due - now)
    }

    /// Drops a set past its lifetime by more than the staleness bound (its refreshes kept
    /// failing, or nothing asked for one), logging it once.
    private func dropIfPastStaleness(_ state: inout State, now: ContinuousClock.Instant) {
        guard state.set != nil, let refreshAt = state.refreshAt, now >= refreshAt + policy.maximumStaleness else { return }
        state.set = nil
        logger.error("identity provider keys dropped: not refreshed for \(policy.maximumStaleness) past their lifetime; the issuer's tokens are answered 503 until a fetch succeeds", metadata: ["issuer": "\(issuer.issuer)"])
    }

    /// Begins a fetch unless one is under way; returns the fetch under way. The callers
    /// decide whether one may begin.
    private func beginFetch(_ state: inout State, at now: ContinuousClock.Instant) -> Task<Void, Never> {
        if let fetching = state.fetching { return fetching }
        state.lastAttempt = now
        let task = Task { await self.fetch(began: now) }
        state.fetching = task
        return task
    }

    private func fetch(began: ContinuousClock.Instant) async {
        let result: Result<(KeySet, Duration), TokenRefusal>
        do throws(TokenRefusal) {
            result = .success(try await load())
        } catch {
            result = .failure(error)
        }
        let name = issuer.issuer
        let now = ContinuousClock.now
        if case .success = result { fetched(name, true) } else { fetched(name, false) }
        state.withLock { state in
            state.fetching = nil
            state.completedBegan = began
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
