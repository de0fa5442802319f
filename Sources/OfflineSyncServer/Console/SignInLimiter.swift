import Synchronization

/// How many wrong admin keys (and metrics keys) a server takes before it stops checking keys
/// for a while. Every door that compares one counts: the console's sign-in form, `X-Admin-Key`
/// on the operator routes and the console, a session cookie whose HMAC (keyed by the admin key)
/// does not match, and the metrics key. Past a limit, a request that offers a key is answered
/// 429 with `Retry-After`, whatever key it carries; one that offers none is not a guess, and is
/// neither counted nor held back. Each instance counts its own.
public struct ConsoleSignInLimits: Sendable, Hashable {
    /// Wrong keys one client address may send per ``addressWindow`` (an IPv6 client is
    /// counted by its /64, which one subscriber usually holds whole). Default 10.
    public var perAddress: Int
    /// How long an address's count runs from its first failure; default 5 minutes.
    public var addressWindow: Duration
    /// Wrong keys from all addresses together per ``overallWindow``: what bounds a guesser
    /// with many addresses. Past it, only addresses that sent a wrong key themselves within
    /// their ``addressWindow`` are held back: an address that has not (the operator's) stays
    /// subject to its own limit alone, so a flood from elsewhere never locks the operator out.
    /// A guesser with many addresses then gets one guess per fresh address. Default 100.
    public var overall: Int
    /// How long the overall count runs from the first failure it holds; default 1 minute.
    public var overallWindow: Duration
    /// The most client addresses remembered at once; a new one past it makes the server forget
    /// those whose window ended, then the oldest. Default 10,000.
    public var addressesRemembered: Int

    /// Limits; every parameter has the documented default. Values below 1 count as 1.
    public init(perAddress: Int = 10, addressWindow: Duration = .seconds(300), overall: Int = 100,
                overallWindow: Duration = .seconds(60), addressesRemembered: Int = 10_000) {
        self.perAddress = perAddress
        self.addressWindow = addressWindow
        self.overall = overall
        self.overallWindow = overallWindow
        self.addressesRemembered = addressesRemembered
    }
}

/// Why a key was refused: the `reason` label of `offline_sync_console_signin_refused_total`
/// (every door that takes the admin key or the metrics key counts there).
enum ConsoleSignInRefusal: String, Sendable, CaseIterable {
    /// Too many wrong lately (from its address, or from all while its address failed too): its
    /// key was not checked.
    case rateLimited = "rate_limited"
    /// It was not the key.
    case wrongKey = "wrong_key"
}

/// Counts wrong keys in fixed windows, per client address and overall
/// (``ConsoleSignInLimits``). A window opens at an address's first failure and counts until
/// it ends; a successful console sign-in forgets the address.
///
/// Memory is bounded: at most ``ConsoleSignInLimits/addressesRemembered`` addresses. Only a
/// key that was checked adds one. When the map is full of windows that have not ended, the
/// oldest eighth is forgotten at once, so a flood from fresh addresses pays for one scan per
/// eighth of the map rather than one per request.
final class SignInLimiter: Sendable {
    private struct Window {
        var start: ContinuousClock.Instant
        var failures: Int
    }

    private struct State {
        var addresses: [[UInt8]: Window] = [:]
        var overall: Window?
    }

    private let state = Mutex(State())

    /// How long a key from `address` must wait before it is checked; `nil` when it may be
    /// checked now. The overall limit holds back only an address whose own window is open (it
    /// sent a wrong key lately): others' failures never lock out an address that sent none.
    func wait(for address: [UInt8], limits: ConsoleSignInLimits, now: ContinuousClock.Instant = .now) -> Duration? {
        let key = Self.key(address)
        return state.withLock { state -> Duration? in
            guard let window = state.addresses[key], window.start + limits.addressWindow > now else { return nil }
            let own = Self.remaining(window, limit: limits.perAddress, length: limits.addressWindow, now: now)
            let overall = state.overall.flatMap { Self.remaining($0, limit: limits.overall, length: limits.overallWindow, now: now) }
            return [overall, own].compactMap { $0 }.max()
        }
    }

    /// Counts a wrong key from `address`.
    func failed(_ address: [UInt8], limits: ConsoleSignInLimits, now: ContinuousClock.Instant = .now) {
        let key = Self.key(address)
        state.withLock { state in
            state.overall = Self.counted(state.overall, length: limits.overallWindow, now: now)
            if state.addresses[key] == nil {
                Self.makeRoom(&state.addresses, capacity: max(1, limits.addressesRemembered), length: limits.addressWindow, now: now)
            }
            state.addresses[key] = Self.counted(state.addresses[key], length: limits.addressWindow, now: now)
        }
    }

    /// A console sign-in from `address` succeeded: its failures are forgotten (the overall
    /// count stays). Only the sign-in form forgets: a scraper's or a script's right key on
    /// every request would otherwise reset the count of a guesser sharing its address.
    func succeeded(_ address: [UInt8]) {
        let key = Self.key(address)
        state.withLock { state in _ = state.addresses.removeValue(forKey: key) }
    }

    /// How many addresses are remembered now.
    var addressCount: Int { state.withLock { $0.addresses.count } }

    /// What an address is counted as: an IPv4 address whole, an IPv6 address by its /64.
    static func key(_ address: [UInt8]) -> [UInt8] {
        address.count == 16 ? Array(address.prefix(8)) : address
    }

    private static func remaining(_ window: Window, limit: Int, length: Duration, now: ContinuousClock.Instant) -> Duration? {
        let end = window.start + length
        guard window.failures >= max(1, limit), end > now else { return nil }
        return end - now
    }

    private static func counted(_ window: Window?, length: Duration, now: ContinuousClock.Instant) -> Window {
        guard let window, window.start + length > now else { return Window(start: now, failures: 1) }
        return Window(start: window.start, failures: window.failures + 1)
    }

    /// Leaves room for one more address: forgets the windows that ended, then, when that is
    /// not enough, the oldest eighth of the map (at least one).
    private static func makeRoom(_ addresses: inout [[UInt8]: Window], capacity: Int, length: Duration,
                                 now: ContinuousClock.Instant) {
        guard addresses.count >= capacity else { return }
        addresses = addresses.filter { $0.value.start + length > now }
        guard addresses.count >= capacity else { return }
        let excess = addresses.count - capacity + max(1, capacity / 8)
        for (key, _) in addresses.sorted(by: { $0.value.start < $1.value.start }).prefix(excess) {
            addresses.removeValue(forKey: key)
        }
    }
}
