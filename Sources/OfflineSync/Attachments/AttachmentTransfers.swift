import Synchronization

/// The attachment transfers of one ``SyncContext``, each of which can be stopped: downloads,
/// one per hash however many callers wait for it, and the uploads of pushes.
///
/// A caller that is cancelled returns at once with `CancellationError`; a download no caller
/// waits for any more is cancelled (a later caller for the same hash starts another once that
/// one has ended: the two would write one download file). ``close()`` cancels every transfer,
/// answers the callers waiting, waits until each transfer has ended, and refuses new ones.
final class AttachmentTransfers: Sendable {
    /// One download and the callers waiting for it.
    private struct Download {
        /// Which download of the hash this is.
        let id: UInt64
        let task: Task<Void, Never>
        var waiters: [UInt64: CheckedContinuation<Void, any Error>]
        /// No caller waits any more (or the context closed): cancelled, and ending.
        var abandoned = false
    }

    /// A push's uploads under way.
    private struct Upload: Sendable {
        let cancel: @Sendable () -> Void
        let ended: @Sendable () async -> Void
    }

    private struct State {
        var downloads: [String: Download] = [:]
        var uploads: [UInt64: Upload] = [:]
        var lastId: UInt64 = 0
        var closed = false

        mutating func nextId() -> UInt64 {
            lastId += 1
            return lastId
        }
    }

    private let state = Mutex(State())

    /// What a transfer asked for after ``close()`` gets, and a caller whose download it ended.
    static var closedError: SyncError { SyncError(.storeClosed, "the sync context is closed") }

    /// Runs `body`, the download of `hash`, or joins the one under way; returns when it ends,
    /// with its outcome. A cancelled caller returns at once with `CancellationError`.
    func download(_ hash: String, _ body: @escaping @Sendable () async throws -> Void) async throws {
        let waiter = state.withLock { $0.nextId() }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let refusal = state.withLock { state -> (any Error)? in
                    if state.closed { return Self.closedError }
                    if Task.isCancelled { return CancellationError() }
                    if var download = state.downloads[hash], !download.abandoned {
                        download.waiters[waiter] = continuation
                        state.downloads[hash] = download
                        return nil
                    }
                    // A download of the hash that nobody waits for may still be ending: this
                    // one starts after it.
                    let previous = state.downloads[hash]?.task
                    let id = state.nextId()
                    let task = Task {
                        if let previous { await previous.value }
                        let outcome: Result<Void, any Error>
                        do {
                            try Task.checkCancellation()
                            try await body()
                            outcome = .success(())
                        } catch {
                            outcome = .failure(error)
                        }
                        self.finished(hash, id, outcome)
                    }
                    state.downloads[hash] = Download(id: id, task: task, waiters: [waiter: continuation])
                    return nil
                }
                if let refusal { continuation.resume(throwing: refusal) }
            }
        } onCancel: {
            leave(hash, waiter)
        }
    }

    /// How many callers wait for the download of `hash` now.
    func callers(of hash: String) -> Int {
        state.withLock { state -> Int in
            guard let download = state.downloads[hash], !download.abandoned else { return 0 }
            return download.waiters.count
        }
    }

    /// The download `id` of `hash` ended: its callers get `outcome`.
    private func finished(_ hash: String, _ id: UInt64, _ outcome: Result<Void, any Error>) {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, any Error>] in
            guard let download = state.downloads[hash], download.id == id else { return [] }
            state.downloads[hash] = nil
            return Array(download.waiters.values)
        }
        for waiter in waiters { waiter.resume(with: outcome) }
    }

    /// A caller was cancelled: it stops waiting at once, and a download nobody waits for any
    /// more is cancelled.
    private func leave(_ hash: String, _ waiter: UInt64) {
        let (continuation, abandoned) = state.withLock { state -> (CheckedContinuation<Void, any Error>?, Task<Void, Never>?) in
            guard var download = state.downloads[hash], let continuation = download.waiters.removeValue(forKey: waiter) else {
                return (nil, nil)
            }
            var abandoned: Task<Void, Never>?
            if download.waiters.isEmpty {
                download.abandoned = true
                abandoned = download.task
            }
            state.downloads[hash] = download
            return (continuation, abandoned)
        }
        continuation?.resume(throwing: CancellationError())
        abandoned?.cancel()
    }

    /// Runs `body`, a push's uploads, as a transfer ``close()`` can end; the caller's
    /// cancellation reaches it too. Returns once it has ended, with its outcome (one that
    /// ``close()`` ended is ``closedError``).
    func upload<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
        let (id, task) = try state.withLock { state -> (UInt64, Task<T, any Error>) in
            guard !state.closed else { throw Self.closedError }
            let id = state.nextId()
            let task = Task { try await body() }
            state.uploads[id] = Upload(cancel: { task.cancel() }, ended: { _ = await task.result })
            return (id, task)
        }
        defer { state.withLock { _ = $0.uploads.removeValue(forKey: id) } }
        do {
            return try await withTaskCancellationHandler {
                try await task.value
            } onCancel: {
                task.cancel()
            }
        } catch {
            let cancelled = error is CancellationError || (error as? SyncError)?.code == .cancelled
            if cancelled, !Task.isCancelled, state.withLock({ $0.closed }) { throw Self.closedError }
            throw error
        }
    }

    /// Cancels every transfer and returns once each has ended. Callers waiting for a download
    /// get ``closedError`` at once, as do transfers asked for afterwards.
    func close() async {
        typealias Ending = (waiters: [CheckedContinuation<Void, any Error>], downloads: [Task<Void, Never>], uploads: [Upload])
        let (waiters, downloads, uploads) = state.withLock { state -> Ending in
            state.closed = true
            var waiters: [CheckedContinuation<Void, any Error>] = []
            for hash in Array(state.downloads.keys) {
                waiters += state.downloads[hash]!.waiters.values
                state.downloads[hash]!.waiters = [:]
                state.downloads[hash]!.abandoned = true
            }
            return (waiters, state.downloads.values.map(\.task), Array(state.uploads.values))
        }
        for waiter in waiters { waiter.resume(throwing: Self.closedError) }
        for task in downloads { task.cancel() }
        for upload in uploads { upload.cancel() }
        for task in downloads { await task.value }
        for upload in uploads { await upload.ended() }
    }
}

extension SyncContext {
    /// How many callers wait for the download of `hash` now (none when none runs), for tests
    /// that need a second caller to have joined a download before they go on.
    package func callersWaitingForDownload(of hash: String) -> Int {
        attachmentTransfers.callers(of: hash)
    }
}
