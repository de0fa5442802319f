import Synchronization

/// How many failed console sign-ins a server takes before it stops checking keys for a while:
/// past either limit, a sign-in is answered 429 with `Retry-After`, whatever key it carries.
/// Each instance counts its own.
public struct ConsoleSignInLimits: Sendable, Hashable {
    /// Failed sign-ins one client address may make per ``addressWindow`` (an IPv6 client is
    /// counted by its /64, which one subscriber usually holds whole). Default 10.
    public var perAddress: Int
    /// How long an address's count runs from its first failure; default 5 minutes.
    public var addressWindow: Duration
    /// Failed sign-ins from all addresses together per ``overallWindow``: what bounds a guesser
    /// with many addresses. Default 100.
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

/// Why a console sign-in was refused: the `reason` label of
/// `offline_sync_console_signin_refused_total`.
enum ConsoleSignInRefusal: String, Sendable, CaseIterable {
    /// Too many failed lately (from its address, or from all): its key was not checked.
    case rateLimited = "rate_limited"
    /// Its key was not the admin key.
    case wrongKey = "wrong_key"
}

/// Counts failed console sign-ins in fixed windows, per client address and overall
/// (``ConsoleSignInLimits``). A window opens at an address's first failure and counts until
/// it ends; a success forgets the address.
///
/// Memory is bounded: at most ``ConsoleSignInLimits/addressesRemembered`` addresses. Only a
/// failure that was checked adds one, and those are bounded by the overall limit, so the scan
/// that makes room when the map is full runs at most that often.
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

    /// How long a sign-in from `address` must wait before its key is checked; `nil` when it
    /// may be checked now.
    func wait(for address: [UInt8], limits: ConsoleSignInLimits, now: ContinuousClock.Instant = .now) -> Duration? {
        let key = Self.key(address)
        return state.withLock { state -> Duration? in
            let overall = state.overall.flatMap { Self.remaining($0, limit: limits.overall, length: limits.overallWindow, now: now) }
            let own = state.addresses[key].flatMap { Self.remaining($0, limit: limits.perAddress, length: limits.addressWindow, now: now) }
            return [overall, own].compactMap { $0 }.max()
        }
    }

    /// Counts a failed sign-in from `address`.
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

    /// A sign-in from `address` succeeded: its failures are forgotten (the overall count stays).
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

    /// Leaves room for one more address: forgets the windows that ended, then the oldest.
    private static func makeRoom(_ addresses: inout [[UInt8]: Window], capacity: Int, length: Duration,
                                 now: ContinuousClock.Instant) {
        guard addresses.count >= capacity else { return }
        addresses = addresses.filter { $0.value.start + length > now }
        while addresses.count >= capacity, let oldest = addresses.min(by: { $0.value.start < $1.value.start })?.key {
            addresses.removeValue(forKey: oldest)
        }
    }
}
