import Foundation
import OfflineSync
import OfflineSyncCommandSupport
#if canImport(Glibc)
import Glibc
#endif

/// The one-shot scrape of `/metrics` beside the change channels that never read.
extension LoopbackSocket {
    /// The change channels the server has open now: its `offline_sync_websockets_connected`
    /// gauge, scraped with the admin key (`nil` when the scrape fails).
    static func openChannels(port: Int, adminKey: String) async -> Int? {
        guard let text = await get(port: port, path: "/metrics", headers: "X-Admin-Key: \(adminKey)\r\n")?.body,
              let line = text.split(separator: "\n").first(where: { $0.hasPrefix("offline_sync_websockets_connected ") }),
              let value = Double(line.split(separator: " ").last ?? "") else { return nil }
        return Int(value)
    }

    /// `GET path` on a fresh connection: the status and the body (`nil` when it fails).
    static func get(port: Int, path: String, headers: String = "") async -> (status: Int, body: String)? {
        try? await Task.detached {
            let socket = try LoopbackSocket(port: port)
            defer { socket.hangUp() }
            try socket.send("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n\(headers)\r\n")
            let text = String(decoding: socket.readToEnd(quiet: .seconds(10)).bytes, as: UTF8.self)
            guard let statusLine = text.split(separator: "\r\n").first, let status = Int(statusLine.split(separator: " ").dropFirst().first ?? ""),
                  let split = text.range(of: "\r\n\r\n") else { return nil as (Int, String)? }
            return (status, String(text[split.upperBound...]))
        }.value
    }
}

/// The server's resident memory, sampled until stopped: its peak over a phase.
final class MemorySampler: Sendable {
    private let task: Task<Int, Never>

    init(every period: Duration = .milliseconds(50), _ read: @escaping @Sendable () -> Int?) {
        task = Task {
            var peak = read() ?? 0
            while !Task.isCancelled {
                try? await Task.sleep(for: period)
                peak = max(peak, read() ?? 0)
            }
            return peak
        }
    }

    /// Stops sampling; the highest value read.
    func stop() async -> Int {
        task.cancel()
        return await task.value
    }
}
