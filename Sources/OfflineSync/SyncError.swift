/// The one error type of OfflineSync: a stable ``Code`` plus a human-readable message.
///
/// Messages name tables, fields, ids and files, but never record contents, keys or
/// passphrases. Codes are a struct over a private enum (as in swift-nio), so new codes can
/// be added without breaking a caller's `switch`.
public struct SyncError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of failure this is.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case invalidName, invalidValue, typeMismatch, schemaMismatch, invalidQuery
            case notFound, duplicateId, tableNotDefined, invalidOperationSequence
            case pendingOperations, corrupted, notADatabase, foreignDatabase, storeClosed
            case storageFailure, busy, transient, rejected, limitExceeded, invalidCursor
            case unsupported, cancelled, unknownScheme, invalidStoreURL, missingKey, wrongKey, authenticationFailed
            case conflict, forbidden, invalidConfiguration
            case attachmentUnavailable, attachmentMissing, attachmentDamaged
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The code named `name` (its ``description``, byte for byte), or `nil` for a name no
        /// code has: how a code stored as text (`__operation_errors`, a server's stored push
        /// outcome) is read back.
        package init?(name: String) {
            guard name.utf8.allSatisfy({ $0 < 0x80 }), let base = Base(rawValue: name) else { return nil }
            self.base = base
        }

        /// A table or field name the store cannot hold (empty, too long, reserved, or colliding).
        public static let invalidName = Code(.invalidName)
        /// A value no store can keep exactly (for example `Double.nan`).
        public static let invalidValue = Code(.invalidValue)
        /// A value of another kind than its declared field type.
        public static let typeMismatch = Code(.typeMismatch)
        /// A schema that cannot be applied to the data already stored.
        public static let schemaMismatch = Code(.schemaMismatch)
        /// A query that is malformed or does not fit the table's schema.
        public static let invalidQuery = Code(.invalidQuery)
        /// The record does not exist.
        public static let notFound = Code(.notFound)
        /// A record with this id already exists.
        public static let duplicateId = Code(.duplicateId)
        /// The table was not defined in this store.
        public static let tableNotDefined = Code(.tableNotDefined)
        /// Two queued operations on one item cannot be combined (for example update after delete).
        public static let invalidOperationSequence = Code(.invalidOperationSequence)
        /// The operation is refused while operations are pending (for example a purge without `force`).
        public static let pendingOperations = Code(.pendingOperations)
        /// The store's file is damaged or truncated. It has not been modified.
        public static let corrupted = Code(.corrupted)
        /// The file is not a database of this adapter's format. It has not been modified.
        public static let notADatabase = Code(.notADatabase)
        /// The file is a valid database of another application. It has not been modified.
        public static let foreignDatabase = Code(.foreignDatabase)
        /// The store has been closed.
        public static let storeClosed = Code(.storeClosed)
        /// The underlying storage engine failed (I/O error, disk full…).
        public static let storageFailure = Code(.storageFailure)
        /// The storage engine stayed locked by another process longer than the busy timeout.
        public static let busy = Code(.busy)
        /// A remote call failed in a way worth retrying (network down, server unavailable).
        public static let transient = Code(.transient)
        /// The remote permanently rejected the request.
        public static let rejected = Code(.rejected)
        /// A size or count limit was exceeded.
        public static let limitExceeded = Code(.limitExceeded)
        /// A pull cursor that the remote does not recognise.
        public static let invalidCursor = Code(.invalidCursor)
        /// The store or remote does not support the requested feature.
        public static let unsupported = Code(.unsupported)
        /// The work was cancelled.
        public static let cancelled = Code(.cancelled)
        /// A store URL names a scheme no adapter is registered for (the message lists those that are).
        public static let unknownScheme = Code(.unknownScheme)
        /// A store URL is malformed, or carries a parameter its adapter does not accept (a
        /// secret written in the URL among them).
        public static let invalidStoreURL = Code(.invalidStoreURL)
        /// The store needs a key or passphrase that was not given, or the environment variable
        /// that should hold it is unset or malformed. The message names the variable, never a value.
        public static let missingKey = Code(.missingKey)
        /// The key or passphrase does not open this store; the file is unchanged. The message
        /// never contains the key or the passphrase.
        public static let wrongKey = Code(.wrongKey)
        /// A database server refused the credentials (user name or password) a store was
        /// opened with. The message names the server and user, never the password.
        public static let authenticationFailed = Code(.authenticationFailed)
        /// The change was based on state the remote no longer has (for example a dataset
        /// record's sync count that has moved on); nothing was applied.
        public static let conflict = Code(.conflict)
        /// The caller is known but may not do this (another identity's data, an operator call).
        public static let forbidden = Code(.forbidden)
        /// The remote is not configured for the request (for example push sync for a platform
        /// with no application configured).
        public static let invalidConfiguration = Code(.invalidConfiguration)
        /// An attachment's bytes are not on this device and cannot be fetched now (offline, or
        /// the remote does not answer): show "not downloaded" and try again later.
        public static let attachmentUnavailable = Code(.attachmentUnavailable)
        /// A record references an attachment whose bytes are nowhere the caller may read them:
        /// the remote holds no such file for this identity, or the device lost a file it had
        /// not uploaded. Nothing was applied.
        public static let attachmentMissing = Code(.attachmentMissing)
        /// An attachment's stored or received bytes do not match its hash. The bad copy is never
        /// served; it has been removed, and fetching again brings a good one, unless it waits to
        /// upload: that file exists nowhere else, so it is kept.
        public static let attachmentDamaged = Code(.attachmentDamaged)

        /// The code's name, for example `corrupted`.
        public var description: String { base.rawValue }
    }

    /// What kind of failure this is.
    public let code: Code
    /// What happened, without record contents or secrets.
    public let message: String
    /// The error this one stands for, when another library's error is wrapped (the
    /// `DecodingError` of a stored record that does not fit its model), kept for diagnosis.
    /// Not part of equality or hashing.
    public let underlying: (any Error)?

    /// Creates an error.
    public init(_ code: Code, _ message: String, underlying: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.underlying = underlying
    }

    /// Errors are equal when their codes and messages are.
    public static func == (lhs: SyncError, rhs: SyncError) -> Bool { lhs.code == rhs.code && lhs.message == rhs.message }

    /// Hashes the code and the message.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(message)
    }

    /// `code: message`.
    public var description: String { "\(code): \(message)" }
}
