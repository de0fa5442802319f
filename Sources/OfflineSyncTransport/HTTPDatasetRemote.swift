import Foundation
import OfflineSync
import OfflineSyncDatasets
import OfflineSyncWire

/// A ``DatasetRemote`` over HTTP: the Cognito Sync–compatible API of an OfflineSync server
/// (`/identitypools/…`), for one identity of one identity pool, authenticated with the
/// server's bearer token (whose identity must be `identityId`).
///
/// Requests time out and are retried as ``NativeRemote``'s are (it is the transport).
/// Every call is safe to repeat: reads are reads; an update replayed after a lost answer
/// finds its sync counts moved on and is answered ``SyncError/Code/conflict``, which makes
/// ``Dataset/synchronize(_:)`` fetch again and find its own values there (equal values are
/// never a conflict); deleting twice finds nothing; registering a token twice gives the same id.
///
/// ```swift
/// let http = HTTPRemoteStore(baseURL: url, token: { token })   // or URLSessionRemoteStore
/// let remote = HTTPDatasetRemote(http.native, identityPoolId: "us-east-1:…", identityId: "us-east-1:…")
/// let datasets = try await DatasetManager(store: local, identity: remote.identityId, remote: remote)
/// ```
public struct HTTPDatasetRemote: DatasetRemote {
    /// The remote it talks through (base URL, token, retries).
    public let http: NativeRemote
    /// The identity pool.
    public let identityPoolId: String
    /// The identity.
    public let identityId: String

    /// Creates the remote for `identityId` of `identityPoolId`, over `http`.
    public init(_ http: NativeRemote, identityPoolId: String, identityId: String) {
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
        let answer = try await http.send(method: .get, path: identityPath + "/datasets"
            + Self.query([("nextToken", nextToken), ("maxResults", maxResults.map(String.init))]), body: nil)
        return try Self.decoding { try CognitoJSON.datasetList(from: answer) }
    }

    /// See ``DatasetRemote/describeDataset(_:)``.
    public func describeDataset(_ name: String) async throws -> RemoteDataset? {
        do {
            let answer = try await http.send(method: .get, path: datasetPath(name), body: nil)
            return try Self.decoding { try CognitoJSON.dataset(from: answer["Dataset"] ?? .null) }
        } catch let error as SyncError where error.code == .notFound {
            return nil
        }
    }

    /// See ``DatasetRemote/listRecords(dataset:lastSyncCount:nextToken:maxResults:syncSessionToken:)``.
    public func listRecords(dataset: String, lastSyncCount: Int64, nextToken: String?, maxResults: Int?,
                            syncSessionToken: String?) async throws -> RemoteRecordsPage {
        let answer = try await http.send(method: .get, path: datasetPath(dataset) + "/records" + Self.query([
            ("lastSyncCount", String(lastSyncCount)), ("nextToken", nextToken), ("maxResults", maxResults.map(String.init)),
            ("syncSessionToken", syncSessionToken),
        ]), body: nil)
        return try Self.decoding { try CognitoJSON.recordsPage(from: answer) }
    }

    /// See ``DatasetRemote/updateRecords(dataset:patches:syncSessionToken:deviceId:)``.
    public func updateRecords(dataset: String, patches: [RecordPatch], syncSessionToken: String,
                              deviceId: String?) async throws -> [RemoteDatasetRecord] {
        let body = CognitoJSON.updateRequest(patches: patches, syncSessionToken: syncSessionToken, deviceId: deviceId)
        let answer = try await http.send(method: .post, path: datasetPath(dataset), body: body.encoded)
        return try Self.decoding { try CognitoJSON.updatedRecords(from: answer) }
    }

    /// See ``DatasetRemote/deleteDataset(_:)``.
    public func deleteDataset(_ name: String) async throws -> RemoteDataset? {
        do {
            let answer = try await http.send(method: .delete, path: datasetPath(name), body: nil)
            return try Self.decoding { try CognitoJSON.dataset(from: answer["Dataset"] ?? .null) }
        } catch let error as SyncError where error.code == .notFound {
            return nil
        }
    }

    /// See ``DatasetRemote/registerDevice(platform:token:)``.
    public func registerDevice(platform: PushPlatform, token: String) async throws -> String {
        let path = "/identitypools/\(Self.escape(identityPoolId))/identity/\(Self.escape(identityId))/device"
        let body = CognitoJSON.registerDevice(platform: platform, token: token).encoded
        let answer = try await http.send(method: .post, path: path, body: body)
        return try Self.decoding { try CognitoJSON.registeredDevice(from: answer) }
    }

    /// See ``DatasetRemote/subscribe(dataset:deviceId:)``.
    public func subscribe(dataset: String, deviceId: String) async throws {
        _ = try await http.send(method: .post, path: datasetPath(dataset) + "/subscriptions/\(Self.escape(deviceId))", body: nil)
    }

    /// See ``DatasetRemote/unsubscribe(dataset:deviceId:)``.
    public func unsubscribe(dataset: String, deviceId: String) async throws {
        _ = try await http.send(method: .delete, path: datasetPath(dataset) + "/subscriptions/\(Self.escape(deviceId))", body: nil)
    }

    // MARK: Decoding

    /// A malformed answer is the server's fault and worth retrying later: transient.
    static func decoding<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch let error as SyncError {
            throw SyncError(.transient, "the server's dataset answer is malformed: \(error.message)")
        }
    }
}
