import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import OfflineSync
import OfflineSyncDatasets
import OfflineSyncService
import OfflineSyncWire

extension CognitoRoutes {
    // MARK: Identity operations

    func listDatasets(_ call: Call) async throws -> JSON {
        let list = try await datasets.listDatasets(pool: call.parameter("pool"), identity: call.parameter("identity"),
                                                   nextToken: call.query["nextToken"], maxResults: try call.integer("maxResults").map(Int.init))
        return CognitoJSON.datasetList(list)
    }

    func describeDataset(_ call: Call) async throws -> JSON {
        let dataset = try await datasets.describeDataset(pool: call.parameter("pool"), identity: call.parameter("identity"),
                                                         name: call.parameter("dataset"))
        return .object([("Dataset", CognitoJSON.dataset(dataset))])
    }

    func listRecords(_ call: Call) async throws -> JSON {
        let page = try await datasets.listRecords(
            pool: call.parameter("pool"), identity: call.parameter("identity"), dataset: call.parameter("dataset"),
            lastSyncCount: try call.integer("lastSyncCount") ?? 0, nextToken: call.query["nextToken"],
            maxResults: try call.integer("maxResults").map(Int.init), syncSessionToken: call.query["syncSessionToken"])
        return CognitoJSON.recordsPage(page)
    }

    func updateRecords(_ call: Call) async throws -> JSON {
        guard case .string(let token)? = call.body["SyncSessionToken"], !token.isEmpty else {
            throw CognitoError.invalidParameter("SyncSessionToken is required")
        }
        var patches: [RecordPatch] = []
        if let list = call.body["RecordPatches"] {
            guard case .array(let items) = list else { throw CognitoError.invalidParameter("RecordPatches must be a list") }
            patches = try items.map(CognitoJSON.patch(from:))
        }
        var device: String?
        if let value = call.body["DeviceId"] {
            guard case .string(let id) = value else { throw CognitoError.invalidParameter("DeviceId must be a string") }
            device = id
        }
        let pool = call.parameter("pool"), identity = call.parameter("identity"), name = call.parameter("dataset")
        let result = try await datasets.updateRecords(pool: pool, identity: identity, dataset: name, patches: patches,
                                                      syncSessionToken: token, deviceId: device, caller: call.caller.name)
        if !patches.isEmpty {
            await routes.server.feed.publish([ChangeNotice(dataset: DatasetNotification(
                identityPoolId: pool, identityId: identity, datasetName: name, syncCount: result.syncCount))])
        }
        return CognitoJSON.updatedRecords(result.records)
    }

    func deleteDataset(_ call: Call) async throws -> JSON {
        let pool = call.parameter("pool"), identity = call.parameter("identity"), name = call.parameter("dataset")
        let dataset = try await datasets.deleteDataset(pool: pool, identity: identity, name: name, caller: call.caller.name)
        await routes.server.feed.publish([ChangeNotice(dataset: DatasetNotification(
            identityPoolId: pool, identityId: identity, datasetName: name, syncCount: dataset.syncCount + 1))])
        return .object([("Dataset", CognitoJSON.dataset(dataset))])
    }

    func describeIdentityUsage(_ call: Call) async throws -> JSON {
        let usage = try await datasets.describeIdentityUsage(pool: call.parameter("pool"), identity: call.parameter("identity"))
        var members: [(key: String, value: JSON)] = [
            ("IdentityId", .string(usage.identityId)), ("IdentityPoolId", .string(usage.identityPoolId)),
            ("DatasetCount", .number(String(usage.datasetCount))), ("DataStorage", .number(String(usage.dataStorage))),
        ]
        if let date = usage.lastModifiedDate { members.append(("LastModifiedDate", CognitoJSON.date(date))) }
        return .object([("IdentityUsage", .object(members))])
    }

    func registerDevice(_ call: Call) async throws -> JSON {
        guard case .string(let platformName)? = call.body["Platform"], let platform = PushPlatform(rawValue: platformName) else {
            throw CognitoError.invalidParameter("Platform must be one of \(PushPlatform.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        guard case .string(let token)? = call.body["Token"] else { throw CognitoError.invalidParameter("Token is required") }
        let id = try await datasets.registerDevice(pool: call.parameter("pool"), identity: call.parameter("identity"),
                                                   platform: platform, token: token)
        return CognitoJSON.registeredDevice(id)
    }

    func subscribe(_ call: Call) async throws -> JSON {
        try await datasets.subscribe(pool: call.parameter("pool"), identity: call.parameter("identity"),
                                     dataset: call.parameter("dataset"), deviceId: call.parameter("device"))
        return .object([])
    }

    func unsubscribe(_ call: Call) async throws -> JSON {
        try await datasets.unsubscribe(pool: call.parameter("pool"), identity: call.parameter("identity"),
                                       dataset: call.parameter("dataset"), deviceId: call.parameter("device"))
        return .object([])
    }
}
