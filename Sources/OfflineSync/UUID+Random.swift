import Foundation
import Synchronization

extension UUID {
    /// A new random UUID (RFC 4122 version 4, variant 1: the format `UUID()` makes), its 122
    /// random bits drawn from the system's generator (`getrandom(2)` on Linux).
    ///
    /// The core makes one per queued operation. On Linux `UUID()` opens, reads and closes
    /// `/dev/urandom` for every call, and `SystemRandomNumberGenerator` makes one `getrandom`
    /// call per 8 bytes (two per UUID: 3% of a local insert's time in `perf`); the bytes are
    /// drawn 4 KiB at a time instead, from one pool per process.
    public static func random() -> UUID {
        var bytes = RandomPool.shared.next16()
        return withUnsafeMutableBytes(of: &bytes) { raw in
            raw[6] = raw[6] & 0x0F | 0x40 // version 4
            raw[8] = raw[8] & 0x3F | 0x80 // variant 1 (RFC 4122)
            return UUID(uuid: (raw[0], raw[1], raw[2], raw[3], raw[4], raw[5], raw[6], raw[7],
                               raw[8], raw[9], raw[10], raw[11], raw[12], raw[13], raw[14], raw[15]))
        }
    }
}

/// Random bytes from the standard library's source (the one `SystemRandomNumberGenerator` uses),
/// fetched 4 KiB per refill and handed out once each.
///
/// The bytes are as unpredictable as that source's (the pool only changes how many one system
/// call fetches), and none is handed out twice within a process. A child made by `fork()`
/// without `exec` would inherit the rest of the parent's pool: nothing in this package forks
/// that way (its child processes are new executables).
extension UUID {
    /// ``random()``'s `uuidString`: the local id of a queued operation or a push's send id.
    package static func randomString() -> String { random().hexString }

    /// `uuidString`'s text (upper-case hex, grouped 8-4-4-4-12), written without Foundation's
    /// `snprintf`, which cost 2.4% of a local insert's time in `perf` (local-writes-sqlite).
    package var hexString: String {
        withUnsafeBytes(of: uuid) { bytes in
            String(unsafeUninitializedCapacity: 36) { text in
                let digits: StaticString = "0123456789ABCDEF"
                var at = 0
                for (index, byte) in bytes.enumerated() {
                    if index == 4 || index == 6 || index == 8 || index == 10 {
                        text[at] = UInt8(ascii: "-")
                        at += 1
                    }
                    text[at] = digits.utf8Start[Int(byte >> 4)]
                    text[at + 1] = digits.utf8Start[Int(byte & 0x0F)]
                    at += 2
                }
                return at
            }
        }
    }
}

final class RandomPool: Sendable {
    static let shared = RandomPool()

    private struct State {
        var words = [UInt64](repeating: 0, count: 512)
        var used = 512
    }
    private let state = Mutex(State())

    /// 16 fresh random bytes.
    func next16() -> (UInt64, UInt64) {
        state.withLock { state in
            if state.used + 2 > state.words.count {
                state.words.withUnsafeMutableBytes { swiftStdlibRandom($0.baseAddress!, $0.count) }
                state.used = 0
            }
            defer { state.used += 2 }
            return (state.words[state.used], state.words[state.used + 1])
        }
    }
}

/// The standard library's own source of random bytes (what `SystemRandomNumberGenerator.next()`
/// calls with 8 bytes): `getrandom(2)` on Linux, looped until `count` bytes are filled, with
/// `/dev/urandom` where that call is missing. Exported by the Swift runtime on every platform;
/// the core reaches it by name because it imports no C module.
@_silgen_name("swift_stdlib_random")
private func swiftStdlibRandom(_ buffer: UnsafeMutableRawPointer, _ count: Int)
