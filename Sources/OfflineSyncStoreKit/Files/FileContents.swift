#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A whole file's bytes, read with POSIX calls; `nil` when it cannot be opened or read.
///
/// For tools and tests that check a file byte for byte (a store that refused a file must
/// leave it as it was): Foundation's `FileManager.contents(atPath:)` and `Data(contentsOf:)`
/// leak a buffer per call on this toolchain's Linux Foundation, which the address sanitizer's
/// leak check and the fuzzers' report.
package func fileContents(_ path: String) -> [UInt8]? {
    let descriptor = open(path, O_RDONLY)
    guard descriptor >= 0 else { return nil }
    defer { close(descriptor) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 1 << 16)
    while true {
        let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        if count < 0 { return nil }
        if count == 0 { return bytes }
        bytes += chunk[..<count]
    }
}
