import Foundation
import OfflineSyncFuzzing
import OfflineSyncServer
import Testing

/// The fuzz targets' committed inputs, replayed through the same functions libFuzzer calls
/// (`make fuzz`): every seed, and every input a fixed finding came from.
@Suite("Fuzz corpora replay")
struct FuzzCorpusTests {
    static let fuzz = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fuzz")

    static func files(_ folder: String, _ target: String) -> [URL] {
        let directory = fuzz.appendingPathComponent(folder).appendingPathComponent(target)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.filter { !$0.hasPrefix(".") }.sorted().map { directory.appendingPathComponent($0) }
    }

    @Test("no committed input breaks a target's promises", arguments: FuzzTarget.all.map(\.name))
    func replay(_ name: String) async throws {
        let target = try #require(FuzzTarget.named(name))
        let seeds = Self.files("Corpus", name)
        #expect(!seeds.isEmpty, "\(name) has no seeds in Tests/Fuzz/Corpus/\(name)")
        for file in seeds + Self.files("Regressions", name) {
            let input = try [UInt8](Data(contentsOf: file))
            do {
                try await target.run(input)
            } catch {
                Issue.record("\(file.lastPathComponent): \(error)")
            }
        }
    }

    @Test func everyCorpusFolderNamesATarget() throws {
        for folder in ["Corpus", "Regressions"] {
            let path = Self.fuzz.appendingPathComponent(folder).path
            for name in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] where !name.hasPrefix(".") {
                #expect(FuzzTarget.named(name) != nil, "Tests/Fuzz/\(folder)/\(name) names no target")
            }
        }
    }

    /// The SigV4 seeds, signed by botocore (Scripts/fuzz-seeds.py), pass the verifier as they
    /// stand, so the fuzzer starts past the signature check rather than at it.
    @Test func botocoreSeedsVerify() throws {
        let seeds = Self.files("Corpus", "sigv4")
        #expect(seeds.count >= 3)
        for file in seeds {
            let request = try #require(FuzzTarget.signedRequest(try [UInt8](Data(contentsOf: file))), "\(file.lastPathComponent)")
            let signer = try FuzzTarget.sigV4.verify(method: request.method, path: request.path, query: request.query,
                                                     headers: request.headers, body: request.body, now: FuzzTarget.sigV4Now)
            #expect(signer.accessKeyId == FuzzTarget.sigV4AccessKey)
        }
    }
}
