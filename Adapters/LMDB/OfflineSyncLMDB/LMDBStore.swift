import COfflineSyncLMDB
import OfflineSync

// Placeholder: the LMDB adapter is being written.
enum LMDBPlaceholder {
    static let version = String(cString: mdb_version(nil, nil, nil))
}
