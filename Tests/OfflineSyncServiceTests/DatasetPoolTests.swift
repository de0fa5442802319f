import Foundation
import OfflineSync
import OfflineSyncDatasets
import OfflineSyncService
import OfflineSyncSQLite
import OfflineSyncTestSupport
import Synchronization
import Testing

/// A stream destination that keeps what was published, by stream name.
final class CollectingStreamSink: DatasetStreamSink {
    private let published = Mutex<[String: [DatasetStreamRecord]]>([:])
    func publish(stream: String, records: [DatasetStreamRecord]) async throws {
        published.withLock { $0[stream, default: []] += records }
    }
    func records(of stream: String) -> [DatasetStreamRecord] { published.withLock { $0[stream] ?? [] } }
}

/// The pool-level operations of ``DatasetService`` (configuration, events, bulk publish),
/// over a SQLite file.
@Suite("DatasetService: pool configuration, events and bulk publish")
struct DatasetPoolTests {
    static let pool = "us-east-1:00000000-0000-0000-0000-0000000000cc"
    static let alice = "us-east-1:aaaaaaaa-0000-0000-0000-00000000000a"
    static let bob = "us-east-1:bbbbbbbb-0000-0000-0000-00000000000b"

    /// Runs `body` with a service over a SQLite file in a temporary directory.
    static func withService<T>(sink: (any DatasetStreamSink)? = nil, _ body: (DatasetService) async throws -> T) async throws -> T {
        try await withTemporaryDirectory { directory in
            let store = try await SQLiteStore(path: directory.appendingPathComponent("datasets.sqlite").path)
            return try await withClosing(store) { store in
                try await body(try await DatasetService(store: store, streamSink: sink))
            }
        }
    }

    /// Writes `values` into `identity`'s dataset through the service, as a client would.
    static func put(_ service: DatasetService, identity: String, dataset: String, _ values: [String: String]) async throws {
        let page = try await service.listRecords(pool: pool, identity: identity, dataset: dataset, lastSyncCount: 0,
                                                 nextToken: nil, maxResults: nil, syncSessionToken: nil)
        let patches = values.map { RecordPatch(op: .replace, key: $0.key, value: $0.value, syncCount: 0) }
        _ = try await service.updateRecords(pool: pool, identity: identity, dataset: dataset, patches: patches,
                                            syncSessionToken: page.syncSessionToken, deviceId: nil, caller: identity)
    }

    @Test("configuration: unknown pool is notFound; set parts are kept, unset parts stay; bad ARNs change nothing")
    func configuration() async throws {
        try await Self.withService { service in
            #expect(await syncErrorCode { _ = try await service.configuration(pool: Self.pool) } == .notFound)
            let push = PushSyncConfiguration(applicationArns: ["arn:aws:sns:us-east-1:123456789012:app/GCM/notes"],
                                             roleArn: "arn:aws:iam::123456789012:role/push")
            let first = try await service.setConfiguration(pool: Self.pool, pushSync: push, streams: nil)
            #expect(first.pushSync == push && first.streams == nil)
            let streams = StreamsConfiguration(streamName: "changes", roleArn: nil, enabled: true)
            let second = try await service.setConfiguration(pool: Self.pool, pushSync: nil, streams: streams)
            #expect(second.identityPoolId == Self.pool && second.pushSync == push && second.streams == streams)
            #expect(try await service.configuration(pool: Self.pool) == second)

            let badArn = PushSyncConfiguration(applicationArns: ["arn:aws:sqs:us-east-1:1:queue"], roleArn: nil)
            #expect(await syncErrorCode { _ = try await service.setConfiguration(pool: Self.pool, pushSync: badArn, streams: nil) }
                    == .invalidValue)
            let badRole = StreamsConfiguration(streamName: "changes", roleArn: "not-a-role", enabled: false)
            #expect(await syncErrorCode { _ = try await service.setConfiguration(pool: Self.pool, pushSync: nil, streams: badRole) }
                    == .invalidValue)
            #expect(try await service.configuration(pool: Self.pool) == second, "a refused change changed nothing")
            #expect(await syncErrorCode { _ = try await service.configuration(pool: "not a pool id") } == .invalidValue)
        }
    }

    @Test("events: at most one entry, replaced or cleared as a whole")
    func events() async throws {
        try await Self.withService { service in
            #expect(await syncErrorCode { _ = try await service.events(pool: Self.pool) } == .notFound)
            try await service.setEvents(pool: Self.pool, ["SyncTrigger": "arn:aws:lambda:us-east-1:1:function:f"])
            #expect(try await service.events(pool: Self.pool) == ["SyncTrigger": "arn:aws:lambda:us-east-1:1:function:f"])
            #expect(await syncErrorCode { try await service.setEvents(pool: Self.pool, ["a": "1", "b": "2"]) } == .invalidValue)
            #expect(await syncErrorCode { try await service.setEvents(pool: Self.pool, ["SyncTrigger": ""]) } == .invalidValue)
            #expect(try await service.events(pool: Self.pool).count == 1, "a refused change changed nothing")
            try await service.setEvents(pool: Self.pool, [:])
            #expect(try await service.events(pool: Self.pool).isEmpty)
        }
    }

    @Test("bulk publish: needs enabled streams, streams every record of every identity once, then refuses a second run within a day")
    func bulkPublish() async throws {
        let sink = CollectingStreamSink()
        try await Self.withService(sink: sink) { service in
            try await Self.put(service, identity: Self.alice, dataset: "prefs", ["theme": "dark", "lang": "fr"])
            try await Self.put(service, identity: Self.bob, dataset: "prefs", ["theme": "light"])
            #expect(try await service.bulkPublishDetails(pool: Self.pool).status == "NOT_STARTED")

            let disabled = StreamsConfiguration(streamName: "changes", roleArn: nil, enabled: false)
            _ = try await service.setConfiguration(pool: Self.pool, pushSync: nil, streams: disabled)
            #expect(await syncErrorCode { try await service.bulkPublish(pool: Self.pool) } == .invalidValue)
            #expect(sink.records(of: "changes").isEmpty)

            let enabled = StreamsConfiguration(streamName: "changes", roleArn: nil, enabled: true)
            _ = try await service.setConfiguration(pool: Self.pool, pushSync: nil, streams: enabled)
            try await service.bulkPublish(pool: Self.pool)
            let published = sink.records(of: "changes").map { "\($0.identityId) \($0.datasetName) \($0.record.key)=\($0.record.value ?? "-")" }
            #expect(published.sorted() == [
                "\(Self.alice) prefs lang=fr", "\(Self.alice) prefs theme=dark", "\(Self.bob) prefs theme=light",
            ])
            let details = try await service.bulkPublishDetails(pool: Self.pool)
            #expect(details.status == "SUCCEEDED" && details.startTime != nil && details.completeTime != nil && details.failureMessage == nil)

            #expect(await syncErrorCode { try await service.bulkPublish(pool: Self.pool) } == .rejected)
            #expect(sink.records(of: "changes").count == 3, "the refused run published nothing")
        }
    }

    @Test("bulk publish without a stream destination fails, and says so in its details")
    func bulkPublishWithoutSink() async throws {
        try await Self.withService { service in
            try await Self.put(service, identity: Self.alice, dataset: "prefs", ["theme": "dark"])
            _ = try await service.setConfiguration(pool: Self.pool, pushSync: nil,
                                                   streams: StreamsConfiguration(streamName: "changes", roleArn: nil, enabled: true))
            try await service.bulkPublish(pool: Self.pool)
            let details = try await service.bulkPublishDetails(pool: Self.pool)
            #expect(details.status == "FAILED")
            #expect(details.failureMessage?.contains("no stream destination") == true)
        }
    }
}
