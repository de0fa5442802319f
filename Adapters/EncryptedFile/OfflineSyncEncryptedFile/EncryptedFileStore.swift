import Crypto
import OfflineSync
import _CryptoExtras

// Placeholder: the encrypted-file adapter is being written.
enum EncryptedFilePlaceholder {}
