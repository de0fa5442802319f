import Foundation
import Synchronization

extension SyncContext {
    // MARK: Prefetch

    /// Fetches the table's attachments its ``AttachmentOptions/prefetch`` policy names,
    /// after a pull: with ``AttachmentPrefetch/all``, those `pulled` (what this pull's records
    /// reference) and those an earlier prefetch of the table could not fetch; with
    /// ``AttachmentPrefetch/newest(_:)``, those of the table's newest records. A file that
    /// cannot be fetched now does not fail the pull: it stays on the server, fetched on
    /// first access or tried again at the table's next pull.
    func prefetchAttachments(_ table: String, _ policy: AttachmentPrefetch, pulled: [Attachment]) async {
        guard let files = store.attachmentFiles, remote is any AttachmentRemote else { return }
        var wanted: [Attachment]
        switch policy {
        case .all:
            wanted = pulled + prefetchMisses.take(table)
        case .newest(let count):
            guard count > 0, let newest = try? await store.read({ txn in
                try txn.records(in: table, matching: Query(order: [SortKey(SystemField.updatedAt, ascending: false), SortKey(SystemField.id)], limit: count))
            }) else { return }
            wanted = newest.flatMap { Attachment.scan($0.fields).references }
        }
        guard !wanted.isEmpty else { return }
        // Only files on the server and not here: one look-up of their rows.
        let hashes = Array(Set(wanted.map(\.sha256)))
        guard let remoteOnly = try? await store.read({ txn in
            Set(try AttachmentRow.all(txn, Query(Field(SystemField.id).isIn(hashes.map(Value.string)) && AttachmentRow.inState(.remote))).map(\.id))
        }) else { return }
        var seen = Set<String>()
        wanted = wanted.filter { remoteOnly.contains($0.sha256) && seen.insert($0.sha256).inserted }
        let missed = await fetchConcurrently(wanted, files: files)
        if case .all = policy, !missed.isEmpty { prefetchMisses.add(missed, for: table) }
    }

    /// Downloads `attachments`, ``AttachmentOptions/concurrentTransfers`` at a time; returns
    /// those that could not be fetched. Stops starting new ones when the task is cancelled.
    private func fetchConcurrently(_ attachments: [Attachment], files: any AttachmentFileStore) async -> [Attachment] {
        let width = max(1, options.attachments.concurrentTransfers)
        return await withTaskGroup(of: (Attachment, Bool).self) { group in
            var missed: [Attachment] = [], fetched: [Attachment] = []
            var next = attachments.makeIterator()
            func start() -> Bool {
                guard !Task.isCancelled, let attachment = next.next() else { return false }
                group.addTask {
                    do {
                        try await self.download(attachment, files: files, noting: false)
                        return (attachment, true)
                    } catch {
                        return (attachment, false)
                    }
                }
                return true
            }
            for _ in 0..<width where !start() { break }
            while let (attachment, done) = await group.next() {
                if done { fetched.append(attachment) } else { missed.append(attachment) }
                // Their rows are marked a batch at a time, one transaction each.
                if fetched.count >= 64 {
                    if (try? await markDownloaded(fetched)) == nil { missed += fetched }
                    fetched = []
                }
                _ = start()
            }
            if (try? await markDownloaded(fetched)) == nil { missed += fetched }
            // Prefetched files count against the budget like any download.
            _ = try? await evictAttachments()
            return missed
        }
    }
}

/// Attachments a prefetch of each table could not fetch, tried again at its next pull.
/// Kept in memory only (a context opened later fetches them on first access) and bounded.
final class PrefetchMisses: Sendable {
    /// The most kept per table; past it the oldest are dropped.
    static let limit = 10_000
    private let misses = Mutex<[String: [Attachment]]>([:])

    func add(_ attachments: [Attachment], for table: String) {
        misses.withLock { misses in
            var list = misses[table, default: []] + attachments
            if list.count > Self.limit { list.removeFirst(list.count - Self.limit) }
            misses[table] = list
        }
    }

    func take(_ table: String) -> [Attachment] {
        misses.withLock { $0.removeValue(forKey: table) ?? [] }
    }
}
