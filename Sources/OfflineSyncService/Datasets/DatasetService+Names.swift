import Foundation
import OfflineSync
import OfflineSyncDatasets

extension DatasetService {
    /// Pool and identity ids: 1 to 128 characters of letters, digits, `_`, `-` and `:`
    /// (Cognito's are `region:uuid`), or ``SyncError/Code/invalidValue``.
    public static func validateId(_ id: String, what: String) throws {
        let ok = (1...128).contains(id.utf8.count) && id.utf8.allSatisfy { byte in
            (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ":")
        }
        guard ok else { throw SyncError(.invalidValue, "\(what) must be 1 to 128 characters of A-Z, a-z, 0-9, '_', '-' and ':'") }
    }

    static func validateDatasetName(_ name: String) throws {
        do { try DatasetManager.validateName(name) } catch let error as SyncError {
            throw SyncError(.invalidValue, error.message)
        }
    }

    static func scope(pool: String, identity: String) -> String { CompositeKey.packed(pool, identity) }
    static func datasetId(scope: String, name: String) -> String { "\(scope)\(name)" }
    static func recordId(scope: String, dataset: String, key: String) -> String { scope + CompositeKey.packed(dataset, last: key) }
    static func subscriptionId(scope: String, dataset: String, device: String) -> String {
        scope + CompositeKey.packed(dataset, last: device)
    }

    static func pageSize(_ maxResults: Int?) throws -> Int {
        guard let maxResults else { return defaultPageSize }
        guard maxResults >= 1 else { throw SyncError(.invalidValue, "maxResults must be at least 1") }
        return min(maxResults, maxPageSize)
    }

    static func encodeToken(_ parts: [String]) -> String {
        Data(parts.joined(separator: "\n").utf8).base64EncodedString()
    }

    static func decodeToken(_ token: String, parts count: Int) throws -> [String] {
        guard let data = Data(base64Encoded: token), let text = String(data: data, encoding: .utf8) else {
            throw SyncError(.invalidValue, "nextToken is not one this service issued")
        }
        let parts = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == count else { throw SyncError(.invalidValue, "nextToken is not one this service issued") }
        return parts
    }
}
