import Foundation

/// A local write transaction of a ``SyncContext``: every change is written to the local
/// store and queued for push in the same atomic transaction.
///
/// Lent to the closure of ``SyncContext/transaction(_:)``; never store it. Operations queued
/// in one transaction are pushed in the same batch.
public final class SyncTransaction {
    let txn: any LocalWriteTransaction
    let id = UUID.randomString()
    let now = Timestamp.now()
    private var nextSequence: Int64?
    var events: [SyncEvent] = []
    var isOpen = true
    /// The first error thrown after a change reached the store but before its queue entry
    /// did. ``SyncContext/transaction(_:)`` then rolls the transaction back even if the
    /// closure caught the error, so no record commits without its operation.
    private(set) var torn: (any Error)?

    /// Where the store keeps attachment bytes, to tell a staged file from a remote one.
    let files: (any AttachmentFileStore)?

    init(_ txn: any LocalWriteTransaction, files: (any AttachmentFileStore)? = nil) {
        self.txn = txn
        self.files = files
    }

    private func check(_ table: String) throws {
        guard isOpen else { throw SyncError(.storeClosed, "the sync transaction has ended") }
        try Names.validateAppTable(table)
    }

    /// The local record with this id, or `nil`.
    public func record(in table: String, id: String) throws -> Record? {
        try check(table)
        return try txn.record(in: table, id: id)
    }

    /// The local records matching the query.
    public func records(in table: String, matching query: Query = .all) throws -> [Record] {
        try check(table)
        return try txn.records(in: table, matching: query)
    }

    /// Inserts a new record and queues an insert. System properties of `record` are ignored.
    /// Throws ``SyncError/Code/duplicateId`` if the id exists locally.
    @discardableResult
    public func insert(_ record: Record, into table: String) throws -> Record {
        try check(table)
        let stored = record.withoutSystemProperties
        // A store that finds the id as it writes saves the look-up of the item; the queued
        // operations are read after the write, which they do not depend on.
        switch try txn.insert(stored, in: table) {
        case .inserted:
            return try completing { try queueInsert(of: stored, into: table, latest: try Outbox.latest(txn, table: table, itemId: stored.id)) }
        case .idExists:
            throw duplicateId(record.id, in: table)
        case .notChecked:
            let (existing, latest) = try Outbox.itemAndLatest(txn, table: table, itemId: record.id)
            return try insert(record, into: table, existing: existing, latest: latest)
        }
    }

    private func insert(_ record: Record, into table: String, existing: Record?, latest: QueuedOperation?) throws -> Record {
        if existing != nil { throw duplicateId(record.id, in: table) }
        let stored = record.withoutSystemProperties
        try txn.upsert(stored, in: table)
        return try completing { try queueInsert(of: stored, into: table, latest: latest) }
    }

    private func queueInsert(of stored: Record, into table: String, latest: QueuedOperation?) throws -> Record {
        try queue(table: table, itemId: stored.id, kind: .insert, item: stored, baseVersion: nil,
                  changedFields: Array(stored.fields.keys), latest: latest)
        return stored
    }

    private func duplicateId(_ id: String, in table: String) -> SyncError {
        SyncError(.duplicateId, "record '\(id)' already exists in table '\(table)'")
    }

    /// Replaces an existing record's fields and queues an update based on its version.
    /// Throws ``SyncError/Code/notFound`` if the record does not exist locally.
    @discardableResult
    public func update(_ record: Record, in table: String) throws -> Record {
        try check(table)
        let (existing, latest) = try Outbox.itemAndLatest(txn, table: table, itemId: record.id)
        return try update(record, in: table, existing: existing, latest: latest)
    }

    private func update(_ record: Record, in table: String, existing: Record?, latest: QueuedOperation?) throws -> Record {
        guard let existing else {
            throw SyncError(.notFound, "record '\(record.id)' does not exist in table '\(table)'")
        }
        let stored = Record(id: record.id, fields: record.fields, version: existing.version, updatedAt: existing.updatedAt)
        try txn.upsert(stored, in: table)
        try completing {
            let keys = Set(existing.fields.keys).union(stored.fields.keys)
            let changed = keys.filter { existing[$0] != stored[$0] }
            try queue(table: table, itemId: stored.id, kind: .update, item: stored, baseVersion: existing.version,
                      changedFields: Array(changed), latest: latest)
        }
        return stored
    }

    /// Inserts the record if it does not exist locally, updates it otherwise.
    @discardableResult
    public func save(_ record: Record, in table: String) throws -> Record {
        try check(table)
        let (existing, latest) = try Outbox.itemAndLatest(txn, table: table, itemId: record.id)
        if existing == nil { return try insert(record, into: table, existing: nil, latest: latest) }
        return try update(record, in: table, existing: existing, latest: latest)
    }

    /// Deletes a record and queues a delete based on its version.
    /// Throws ``SyncError/Code/notFound`` if the record does not exist locally.
    public func delete(id: String, from table: String) throws {
        try check(table)
        let (existing, latest) = try Outbox.itemAndLatest(txn, table: table, itemId: id)
        guard let existing else {
            throw SyncError(.notFound, "record '\(id)' does not exist in table '\(table)'")
        }
        try txn.delete(id: id, in: table)
        try completing {
            try queue(table: table, itemId: id, kind: .delete, item: existing, baseVersion: existing.version,
                      changedFields: [], latest: latest)
        }
    }

    /// Runs the step that queues a change the store has taken, noting in ``torn`` what it throws.
    private func completing<T>(_ step: () throws -> T) throws -> T {
        do {
            return try step()
        } catch {
            if torn == nil { torn = error }
            throw error
        }
    }

    private func queue(table: String, itemId: String, kind: OperationKind, item: Record, baseVersion: String?,
                       changedFields: [String], latest: QueuedOperation?) throws {
        if kind != .delete { try AttachmentRow.note(try Attachment.references(in: item), txn: txn, files: files, now: now) }
        try Outbox.enqueue(
            txn, table: table, itemId: itemId, kind: kind, item: item, baseVersion: baseVersion,
            changedFields: changedFields.sorted(by: Value.utf8Less), transaction: id, latest: latest,
            sequence: {
                let next = try nextSequence ?? Outbox.nextSequence(txn)
                nextSequence = next + 1
                return next
            }, now: now)
        events.append(.outboxMutationEnqueued(table: table, record: item, kind: kind))
    }
}
