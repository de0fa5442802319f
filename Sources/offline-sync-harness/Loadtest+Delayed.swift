import Foundation
import OfflineSync
import OfflineSyncCommandSupport
import OfflineSyncServer

extension LoadtestCommand {
    /// Propagation across two instances with a network between the hosts: the instances
    /// reach PostgreSQL through a relay that delays every byte ``databaseDelayMs`` each way,
    /// and the devices reach the instances through relays that delay ``deviceDelayMs`` each
    /// way (``LoopbackBalancer``'s delay: loopback stands in for the hosts, since this kernel
    /// may have no `netem`). The writing device is on one instance, the receiving one on the
    /// other. Needs PostgreSQL on 127.0.0.1.
    func delayedPropagation(postgres: String, directory: URL, secret: String, tokens: TokenAuthority) async throws -> LoadOutcome {
        guard var url = URLComponents(string: postgres), url.host == "127.0.0.1" || url.host == "localhost", let port = url.port else {
            say("propagation-delayed: skipped, PostgreSQL is not on 127.0.0.1 (the relays are loopback ones)")
            return LoadOutcome(json: ["name": "propagation-delayed", "skipped": true], failures: [])
        }
        let database = try LoopbackBalancer(backends: [port], delay: .milliseconds(databaseDelayMs))
        defer { database.stop() }
        url.host = "127.0.0.1"
        url.port = database.port
        guard let delayed = url.string else { throw SyncError(.invalidStoreURL, "the PostgreSQL URL could not be rewritten for the relay") }
        return try await InstanceGroup.with(count: 2, postgres: delayed, directory: directory, secret: secret) { group in
            let devices = try group.current.map { try LoopbackBalancer(backends: [InstanceGroup.port($0)], delay: .milliseconds(deviceDelayMs)) }
            defer { devices.forEach { $0.stop() } }
            say("propagation-delayed: devices \(deviceDelayMs) ms each way from the instances, PostgreSQL \(databaseDelayMs) ms each way from them")
            var outcome = try await Propagation(name: "propagation-delayed", identity: "loadtest-delayed", base: "http://127.0.0.1:\(devices[0].port)",
                                                tokens: tokens, clients: 1, writes: delayedWrites, rate: rate, tableRows: 0,
                                                receiverBase: "http://127.0.0.1:\(devices[1].port)").run()
            outcome.json["deviceDelayMs"] = deviceDelayMs
            outcome.json["databaseDelayMs"] = databaseDelayMs
            return outcome
        }
    }
}
