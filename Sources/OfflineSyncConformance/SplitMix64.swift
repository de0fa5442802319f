/// A small, fast, seeded pseudo-random generator (Steele, Lea and Flood's SplitMix64), so
/// generated data and queries are the same on every run and every platform. Public so an
/// adapter's own tests can generate reproducible data the same way.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    /// A generator whose sequence is fixed by `seed`.
    public init(seed: UInt64) { state = seed }

    /// The next 64 random bits.
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A value in `0..<bound` (bound > 0), by multiply-shift; deterministic everywhere,
    /// unlike the standard library's unspecified `random(in:using:)` algorithm.
    public mutating func below(_ bound: Int) -> Int {
        precondition(bound > 0)
        return Int((UInt64(bound).multipliedFullWidth(by: next())).high)
    }

    /// `true` with probability `percent`/100.
    public mutating func chance(_ percent: Int) -> Bool { below(100) < percent }

    /// One element of a non-empty array.
    public mutating func pick<T>(_ items: [T]) -> T { items[below(items.count)] }
}
