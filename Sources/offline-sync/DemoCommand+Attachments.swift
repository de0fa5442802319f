import Foundation
import OfflineSync
import OfflineSyncCommandSupport
import OfflineSyncHTTP
import OfflineSyncServer
import OfflineSyncSQLite

extension Demo {
    static let inspections = TableSchema("inspections", fields: [FieldDefinition("site", .string)])

    /// A photo's bytes: `size` bytes of a pattern seeded by `seed` (the demo has no camera).
    static func photo(_ size: Int, seed: UInt64) -> [UInt8] {
        var state = seed
        return (0..<size).map { _ in
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return UInt8(truncatingIfNeeded: state >> 56)
        }
    }

    /// Attachments: a photo added offline on D, uploaded on reconnect before its record, the
    /// record pulled by E, the photo downloaded on first access and checked, then evicted
    /// under E's 1 MB cache budget and fetched again. `true` when every step did what it says.
    func attachmentScenario(server: ServerProcess, secret: String) async throws -> Bool {
        let tokens = try await TokenAuthority(secret: Array(secret.utf8))
        let token = try await tokens.mint(identity: "demo-inspector")
        let network = DemoNetwork(HTTPRemoteStore(baseURL: server.baseURL, token: { token }))
        let storeD = try await SQLiteStore(path: root.appendingPathComponent("client-d.sqlite").path)
        let storeE = try await SQLiteStore(path: root.appendingPathComponent("client-e.sqlite").path)
        var budget = SyncOptions()
        budget.attachments.cacheBudget = 1_000_000
        let d = try await SyncContext(store: storeD, remote: network)
        let e = try await SyncContext(store: storeE, remote: HTTPRemoteStore(baseURL: server.baseURL, token: { token }), options: budget)
        for context in [d, e] { try await context.defineTable(Demo.inspections) }
        var ok = true
        func check(_ condition: Bool, _ what: String) {
            say("   \(what): \(condition ? "yes" : "NO")")
            ok = ok && condition
        }

        step("Attachments: device D is offline and adds a 600 KB photo to an inspection")
        network.setOnline(false)
        let front = Demo.photo(600_000, seed: 1)
        let photo = try await d.addAttachment(front, contentType: "image/jpeg", fileName: "front-door.jpg")
        try await d.table("inspections").insert(Record(id: "insp-1", fields: ["site": "12 Harbour Road", "photo": photo.value]))
        say("   the photo is \(photo.sha256.prefix(12))… (\(photo.size) bytes), stored on D beside its record")
        check(try await d.attachmentState(photo) == .pendingUpload, "waiting to upload")
        _ = try? await d.push()

        step("Attachments: D comes back online and pushes: the photo goes up first, then its record")
        network.setOnline(true)
        let pushed = try await d.push()
        say("   D pushed \(pushed.applied) record(s)")
        check(try await d.attachmentState(photo) == .local, "the photo is on the server and still on D")

        step("Attachments: device E pulls the inspection: it holds the reference, not the bytes")
        try await e.table("inspections").pull()
        check(try await e.attachmentState(photo) == .remote, "E has not downloaded the photo")

        step("Attachments: E opens the photo: downloaded on first access and checked against its hash")
        let opened = try await e.attachmentData(photo)
        check(opened == Data(front), "E's copy is byte for byte D's")
        check(try await e.attachmentState(photo) == .local, "E keeps it")

        step("Attachments: a second, 800 KB photo passes E's 1 MB cache budget: the first is evicted, then fetched again on use")
        let back = Demo.photo(800_000, seed: 2)
        let second = try await d.addAttachment(back, contentType: "image/jpeg", fileName: "back-door.jpg")
        try await d.table("inspections").insert(Record(id: "insp-2", fields: ["site": "12 Harbour Road", "photo": second.value]))
        _ = try await d.push()
        try await e.table("inspections").pull()
        _ = try await e.attachmentData(second)
        check(try await e.attachmentState(photo) == .remote, "the first photo was evicted from E")
        check(try await e.attachmentData(photo) == Data(front), "opening it again fetches it again, whole")
        try await d.close()
        try await e.close()
        return ok
    }
}
