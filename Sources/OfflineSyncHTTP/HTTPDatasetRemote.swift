import AsyncHTTPClient
import Foundation
import NIOHTTP1
import OfflineSync
import OfflineSyncDatasets
import OfflineSyncWire

/// A ``DatasetRemote`` over HTTP: the Cognito Sync–compatible API of an OfflineSync server
/// (`/identitypools/…`), for one identity of one identity pool, authenticated with the
/// server's bearer token (whose identity must be `identityId`).
///
/// Requests time out and are retried as ``HTTPRemoteStore``'s are (it is the transport).
/// Every call is safe to repeat: reads are reads; an update replayed after a lost answer
/// finds its sync counts moved on and is answered ``SyncError/Code/conflict``, which makes
/// ``Dataset/synchronize(_:)`` fetch again and find its own values there (equal values are
/// never a conflict); deleting twice finds nothing; registering a token twice gives the same id.
///
/// ```swift
/// let http = HTTPRemoteStore(baseURL: url, token: { token })
/// let remote = HTTPDatasetRemote(http, identityPoolId: "us-east-1:…", identityId: "us-east-1:…")
/// let datasets = try await DatasetManager(store: local, identity: remote.identityId, remote: remote)
/// ```
public struct HTTPDatasetRemote: DatasetRemote {
    /// The transport (base URL, token, retries).
    public let http: HTTPRemoteStore
    /// The identity pool.
    public let identityPoolId: String
    /// The identity.
    public let identityId: String

    /// Creates the remote for `identityId` of `identityPoolId`, over `http`.
    public init(_ http: HTTPRemoteStore, identityPoolId: String, identityId: String) {
        self.http = http
        self.identityPoolId = identityPoolId
        self.identityId = identityId
    }

    private var identityPath: String { "/identitypools/\(Self.escape(identityPoolId))/identities/\(Self.escape(identityId))" }
    private func datasetPath(_ name: String) -> String { "\(identityPath)/datasets/\(Self.escape(name))" }

    static func escape(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }

    static func query(_ items: [(String, String?)]) -> String {
        let present = items.compactMap { name, value in value.map { "\(name)=\(escape($0))" } }
        return present.isEmpty ? "" : "?" + present.joined(separator: "&")
    }

    /// See ``DatasetRemote/listDatasets(nextToken:maxResults:)``.
    public func listDatasets(nextToken: String?, maxResults: Int?) async throws -> RemoteDatasetList {
        let answer = try await http.send(method: .GET, path: identityPath + "/datasets"
            + Self.query([("nextToken", nextToken), ("maxResults", maxResults.map(String.init))]), body: nil)
        return try Self.decoding {
            RemoteDatasetList(datasets: try Self.list(answer["Datasets"]).map(Self.dataset),
                              nextToken: try Self.string(answer["NextToken"]))
        }
    }

    /// See ``DatasetRemote/describeDataset(_:)``.
    public func describeDataset(_ name: String) async throws -> RemoteDataset? {
        do {
            let answer = try await http.send(method: .GET, path: datasetPath(name), body: nil)
            return try Self.decoding { try Self.dataset(answer["Dataset"] ?? .null) }
        } catch let error as SyncError where error.code == .notFound {
            return nil
        }
    }

    /// See ``DatasetRemote/listRecords(dataset:lastSyncCount:nextToken:maxResults:syncSessionToken:)``.
    public func listRecords(dataset: String, lastSyncCount: Int64, nextToken: String?, maxResults: Int?,
                            syncSessionToken: String?) async throws -> RemoteRecordsPage {
        let answer = try await http.send(method: .GET, path: datasetPath(dataset) + "/records" + Self.query([
            ("lastSyncCount", String(lastSyncCount)), ("nextToken", nextToken), ("maxResults", maxResults.map(String.init)),
            ("syncSessionToken", syncSessionToken),
        ]), body: nil)
        return try Self.decoding {
            RemoteRecordsPage(
                records: try Self.list(answer["Records"]).map(Self.record), nextToken: try Self.string(answer["NextToken"]),
                datasetSyncCount: try Self.integer(answer["DatasetSyncCount"]) ?? 0,
                lastModifiedBy: try Self.string(answer["LastModifiedBy"]),
                mergedDatasetNames: try Self.list(answer["MergedDatasetNames"]).map { try Self.string($0) ?? "" },
                datasetExists: answer["DatasetExists"] == .bool(true),
                datasetDeletedAfterRequestedSyncCount: answer["DatasetDeletedAfterRequestedSyncCount"] == .bool(true),
                syncSessionToken: try Self.string(answer["SyncSessionToken"]) ?? "")
        }
    }

    /// See ``DatasetRemote/updateRecords(dataset:patches:syncSessionToken:deviceId:)``.
    public func updateRecords(dataset: String, patches: [RecordPatch], syncSessionToken: String,
                              deviceId: String?) async throws -> [RemoteDatasetRecord] {
        var members: [(key: String, value: JSON)] = [
            ("SyncSessionToken", .string(syncSessionToken)),
            ("RecordPatches", .array(patches.map { patch in
                var fields: [(key: String, value: JSON)] = [("Op", .string(patch.op.rawValue)), ("Key", .string(patch.key))]
                if let value = patch.value { fields.append(("Value", .string(value))) }
                fields.append(("SyncCount", .number(String(patch.syncCount))))
                if let date = patch.deviceLastModifiedDate {
                    fields.append(("DeviceLastModifiedDate", .number(String(Double(date.millisecondsSince1970) / 1000))))
                }
                return .object(fields)
            })),
        ]
        if let deviceId { members.append(("DeviceId", .string(deviceId))) }
        let answer = try await http.send(method: .POST, path: datasetPath(dataset), body: JSON.object(members).encoded)
        return try Self.decoding { try Self.list(answer["Records"]).map(Self.record) }
    }

    /// See ``DatasetRemote/deleteDataset(_:)``.
    public func deleteDataset(_ name: String) async throws -> RemoteDataset? {
        do {
            let answer = try await http.send(method: .DELETE, path: datasetPath(name), body: nil)
            return try Self.decoding { try Self.dataset(answer["Dataset"] ?? .null) }
        } catch let error as SyncError where error.code == .notFound {
            return nil
        }
    }

    /// See ``DatasetRemote/registerDevice(platform:token:)``.
    public func registerDevice(platform: PushPlatform, token: String) async throws -> String {
        let path = "/identitypools/\(Self.escape(identityPoolId))/identity/\(Self.escape(identityId))/device"
        let body = JSON.object([("Platform", .string(platform.rawValue)), ("Token", .string(token))]).encoded
        let answer = try await http.send(method: .POST, path: path, body: body)
        return try Self.decoding {
            guard let id = try Self.string(answer["DeviceId"]) else { throw SyncError(.transient, "no DeviceId") }
            return id
        }
    }

    /// See ``DatasetRemote/subscribe(dataset:deviceId:)``.
    public func subscribe(dataset: String, deviceId: String) async throws {
        _ = try await http.send(method: .POST, path: datasetPath(dataset) + "/subscriptions/\(Self.escape(deviceId))", body: nil)
    }

    /// See ``DatasetRemote/unsubscribe(dataset:deviceId:)``.
    public func unsubscribe(dataset: String, deviceId: String) async throws {
        _ = try await http.send(method: .DELETE, path: datasetPath(dataset) + "/subscriptions/\(Self.escape(deviceId))", body: nil)
    }

    // MARK: Decoding

    /// A malformed answer is the server's fault and worth retrying later: transient.
    static func decoding<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch let error as SyncError {
            throw SyncError(.transient, "the server's dataset answer is malformed: \(error.message)")
        }
    }

    static func list(_ json: JSON?) throws -> [JSON] {
        guard let json, json != .null else { return [] }
        guard case .array(let items) = json else { throw SyncError(.invalidValue, "expected a list") }
        return items
    }

    static func string(_ json: JSON?) throws -> String? {
        guard let json, json != .null else { return nil }
        guard case .string(let text) = json else { throw SyncError(.invalidValue, "expected a string") }
        return text
    }

    static func integer(_ json: JSON?) throws -> Int64? {
        guard let json, json != .null else { return nil }
        guard case .number(let text) = json, let value = Int64(text) else { throw SyncError(.invalidValue, "expected an integer") }
        return value
    }

    static func date(_ json: JSON?) throws -> Timestamp? {
        guard let json, json != .null else { return nil }
        guard case .number(let text) = json, let seconds = Double(text), seconds.isFinite else {
            throw SyncError(.invalidValue, "expected a date in seconds")
        }
        return Timestamp(Date(timeIntervalSince1970: seconds))
    }

    static func dataset(_ json: JSON) throws -> RemoteDataset {
        guard case .object = json else { throw SyncError(.invalidValue, "expected a dataset") }
        return RemoteDataset(
            identityId: try string(json["IdentityId"]) ?? "", name: try string(json["DatasetName"]) ?? "",
            creationDate: try date(json["CreationDate"]) ?? Timestamp(millisecondsSince1970: 0),
            lastModifiedDate: try date(json["LastModifiedDate"]) ?? Timestamp(millisecondsSince1970: 0),
            lastModifiedBy: try string(json["LastModifiedBy"]) ?? "", dataStorage: try integer(json["DataStorage"]) ?? 0,
            numRecords: try integer(json["NumRecords"]) ?? 0, syncCount: 0)
    }

    static func record(_ json: JSON) throws -> RemoteDatasetRecord {
        guard case .object = json, let key = try string(json["Key"]) else { throw SyncError(.invalidValue, "expected a record") }
        return RemoteDatasetRecord(
            key: key, value: try string(json["Value"]), syncCount: try integer(json["SyncCount"]) ?? 0,
            lastModifiedDate: try date(json["LastModifiedDate"]) ?? Timestamp(millisecondsSince1970: 0),
            lastModifiedBy: try string(json["LastModifiedBy"]) ?? "", deviceLastModifiedDate: try date(json["DeviceLastModifiedDate"]))
    }
}
