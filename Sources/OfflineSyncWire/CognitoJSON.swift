import Foundation
import OfflineSync
import OfflineSyncDatasets

/// The Cognito Sync API's JSON (rest-json, `2014-06-30`), spelled once for the server's
/// routes and the client's ``DatasetRemote`` over HTTP: each shape's writer and reader sit
/// side by side, with the member names botocore's service model gives them.
///
/// Readers throw ``SyncError/Code/invalidValue`` naming what is wrong; the server answers
/// that as `InvalidParameterException`, the client as a malformed answer.
package enum CognitoJSON {
    // MARK: Dates

    /// A timestamp as rest-json sends it: seconds since 1970, with milliseconds (`1700000000.123`).
    package static func date(_ timestamp: Timestamp) -> JSON {
        let ms = timestamp.millisecondsSince1970
        let seconds = ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000)
        let fraction = ms - seconds * 1000
        return .number("\(seconds).\(String(fraction + 1000).dropFirst())")
    }

    /// Reads a timestamp in seconds; `nil` when absent or null.
    package static func date(from json: JSON?, _ name: String) throws -> Timestamp? {
        guard let json, json != .null else { return nil }
        guard case .number(let text) = json, let seconds = Double(text), seconds.isFinite else {
            throw SyncError(.invalidValue, "\(name) must be a date in seconds since 1970")
        }
        return Timestamp(Date(timeIntervalSince1970: seconds))
    }

    // MARK: Members

    /// Reads a string member; `nil` when absent or null.
    package static func string(_ json: JSON?, _ name: String) throws -> String? {
        guard let json, json != .null else { return nil }
        guard case .string(let text) = json else { throw SyncError(.invalidValue, "\(name) must be a string") }
        return text
    }

    /// Reads an integer member; `nil` when absent or null.
    package static func integer(_ json: JSON?, _ name: String) throws -> Int64? {
        guard let json, json != .null else { return nil }
        guard case .number(let text) = json, let value = Int64(text) else { throw SyncError(.invalidValue, "\(name) must be an integer") }
        return value
    }

    /// Reads a list member; empty when absent or null.
    package static func list(_ json: JSON?, _ name: String) throws -> [JSON] {
        guard let json, json != .null else { return [] }
        guard case .array(let items) = json else { throw SyncError(.invalidValue, "\(name) must be a list") }
        return items
    }

    /// Reads a list of strings; empty when absent or null.
    package static func strings(_ json: JSON?, _ name: String) throws -> [String] {
        try list(json, name).map { item in
            guard case .string(let text) = item else { throw SyncError(.invalidValue, "\(name) holds strings") }
            return text
        }
    }

    // MARK: Datasets

    /// A `Dataset`. The sync count is not part of the shape.
    package static func dataset(_ dataset: RemoteDataset) -> JSON {
        .object([
            ("IdentityId", .string(dataset.identityId)), ("DatasetName", .string(dataset.name)),
            ("CreationDate", date(dataset.creationDate)), ("LastModifiedDate", date(dataset.lastModifiedDate)),
            ("LastModifiedBy", .string(dataset.lastModifiedBy)), ("DataStorage", .number(String(dataset.dataStorage))),
            ("NumRecords", .number(String(dataset.numRecords))),
        ])
    }

    /// Reads a `Dataset`; absent members read as empty or zero, the sync count as zero.
    package static func dataset(from json: JSON) throws -> RemoteDataset {
        guard case .object = json else { throw SyncError(.invalidValue, "a Dataset must be an object") }
        let epoch = Timestamp(millisecondsSince1970: 0)
        return RemoteDataset(
            identityId: try string(json["IdentityId"], "IdentityId") ?? "", name: try string(json["DatasetName"], "DatasetName") ?? "",
            creationDate: try date(from: json["CreationDate"], "CreationDate") ?? epoch,
            lastModifiedDate: try date(from: json["LastModifiedDate"], "LastModifiedDate") ?? epoch,
            lastModifiedBy: try string(json["LastModifiedBy"], "LastModifiedBy") ?? "",
            dataStorage: try integer(json["DataStorage"], "DataStorage") ?? 0,
            numRecords: try integer(json["NumRecords"], "NumRecords") ?? 0, syncCount: 0)
    }

    /// The answer of `ListDatasets`.
    package static func datasetList(_ list: RemoteDatasetList) -> JSON {
        .object([("Datasets", .array(list.datasets.map(dataset))), ("Count", .number(String(list.datasets.count)))]
            + (list.nextToken.map { [("NextToken", JSON.string($0))] } ?? []))
    }

    /// Reads the answer of `ListDatasets`.
    package static func datasetList(from json: JSON) throws -> RemoteDatasetList {
        RemoteDatasetList(datasets: try list(json["Datasets"], "Datasets").map(dataset(from:)),
                          nextToken: try string(json["NextToken"], "NextToken"))
    }

    // MARK: Records

    /// A `Record`; `Value` is absent for a removed key.
    package static func record(_ record: RemoteDatasetRecord) -> JSON {
        var members: [(key: String, value: JSON)] = [("Key", .string(record.key))]
        if let value = record.value { members.append(("Value", .string(value))) }
        members += [("SyncCount", .number(String(record.syncCount))), ("LastModifiedDate", date(record.lastModifiedDate)),
                    ("LastModifiedBy", .string(record.lastModifiedBy))]
        if let device = record.deviceLastModifiedDate { members.append(("DeviceLastModifiedDate", date(device))) }
        return .object(members)
    }

    /// Reads a `Record`, which must have a `Key`.
    package static func record(from json: JSON) throws -> RemoteDatasetRecord {
        guard case .object = json, let key = try string(json["Key"], "Key") else {
            throw SyncError(.invalidValue, "a Record must be an object with a Key")
        }
        return RemoteDatasetRecord(
            key: key, value: try string(json["Value"], "Value"), syncCount: try integer(json["SyncCount"], "SyncCount") ?? 0,
            lastModifiedDate: try date(from: json["LastModifiedDate"], "LastModifiedDate") ?? Timestamp(millisecondsSince1970: 0),
            lastModifiedBy: try string(json["LastModifiedBy"], "LastModifiedBy") ?? "",
            deviceLastModifiedDate: try date(from: json["DeviceLastModifiedDate"], "DeviceLastModifiedDate"))
    }

    /// The answer of `ListRecords`.
    package static func recordsPage(_ page: RemoteRecordsPage) -> JSON {
        var members: [(key: String, value: JSON)] = [
            ("Records", .array(page.records.map(record))), ("Count", .number(String(page.records.count))),
            ("DatasetSyncCount", .number(String(page.datasetSyncCount))),
            ("MergedDatasetNames", .array(page.mergedDatasetNames.map(JSON.string))),
            ("DatasetExists", .bool(page.datasetExists)),
            ("DatasetDeletedAfterRequestedSyncCount", .bool(page.datasetDeletedAfterRequestedSyncCount)),
            ("SyncSessionToken", .string(page.syncSessionToken)),
        ]
        if let next = page.nextToken { members.append(("NextToken", .string(next))) }
        if let by = page.lastModifiedBy { members.append(("LastModifiedBy", .string(by))) }
        return .object(members)
    }

    /// Reads the answer of `ListRecords`.
    package static func recordsPage(from json: JSON) throws -> RemoteRecordsPage {
        RemoteRecordsPage(
            records: try list(json["Records"], "Records").map(record(from:)), nextToken: try string(json["NextToken"], "NextToken"),
            datasetSyncCount: try integer(json["DatasetSyncCount"], "DatasetSyncCount") ?? 0,
            lastModifiedBy: try string(json["LastModifiedBy"], "LastModifiedBy"),
            mergedDatasetNames: try strings(json["MergedDatasetNames"], "MergedDatasetNames"),
            datasetExists: json["DatasetExists"] == .bool(true),
            datasetDeletedAfterRequestedSyncCount: json["DatasetDeletedAfterRequestedSyncCount"] == .bool(true),
            syncSessionToken: try string(json["SyncSessionToken"], "SyncSessionToken") ?? "")
    }

    // MARK: Updates

    /// A `RecordPatch`.
    package static func patch(_ patch: RecordPatch) -> JSON {
        var members: [(key: String, value: JSON)] = [("Op", .string(patch.op.rawValue)), ("Key", .string(patch.key))]
        if let value = patch.value { members.append(("Value", .string(value))) }
        members.append(("SyncCount", .number(String(patch.syncCount))))
        if let device = patch.deviceLastModifiedDate { members.append(("DeviceLastModifiedDate", date(device))) }
        return .object(members)
    }

    /// Reads a `RecordPatch`: `Op` (`replace` or `remove`), `Key` and an integer `SyncCount`
    /// are required.
    package static func patch(from json: JSON) throws -> RecordPatch {
        guard case .object = json else { throw SyncError(.invalidValue, "a record patch is an object") }
        guard case .string(let opName)? = json["Op"], let op = RecordPatch.Operation(rawValue: opName) else {
            throw SyncError(.invalidValue, "a patch's Op is replace or remove")
        }
        guard case .string(let key)? = json["Key"] else { throw SyncError(.invalidValue, "a patch needs a Key") }
        guard case .number(let countText)? = json["SyncCount"], let count = Int64(countText) else {
            throw SyncError(.invalidValue, "a patch needs an integer SyncCount")
        }
        return RecordPatch(op: op, key: key, value: try string(json["Value"], "Value"), syncCount: count,
                           deviceLastModifiedDate: try date(from: json["DeviceLastModifiedDate"], "DeviceLastModifiedDate"))
    }

    /// The body of `UpdateRecords`.
    package static func updateRequest(patches: [RecordPatch], syncSessionToken: String, deviceId: String?) -> JSON {
        var members: [(key: String, value: JSON)] = [
            ("SyncSessionToken", .string(syncSessionToken)), ("RecordPatches", .array(patches.map(patch))),
        ]
        if let deviceId { members.append(("DeviceId", .string(deviceId))) }
        return .object(members)
    }

    /// The answer of `UpdateRecords`.
    package static func updatedRecords(_ records: [RemoteDatasetRecord]) -> JSON {
        .object([("Records", .array(records.map(record)))])
    }

    /// Reads the answer of `UpdateRecords`.
    package static func updatedRecords(from json: JSON) throws -> [RemoteDatasetRecord] {
        try list(json["Records"], "Records").map(record(from:))
    }

    // MARK: Devices

    /// The body of `RegisterDevice`.
    package static func registerDevice(platform: PushPlatform, token: String) -> JSON {
        .object([("Platform", .string(platform.rawValue)), ("Token", .string(token))])
    }

    /// The answer of `RegisterDevice`.
    package static func registeredDevice(_ id: String) -> JSON { .object([("DeviceId", .string(id))]) }

    /// Reads the answer of `RegisterDevice`.
    package static func registeredDevice(from json: JSON) throws -> String {
        guard let id = try string(json["DeviceId"], "DeviceId") else { throw SyncError(.invalidValue, "the answer has no DeviceId") }
        return id
    }
}
