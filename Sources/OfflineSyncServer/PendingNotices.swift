import OfflineSync
import Synchronization

/// The notices one change channel has not written yet, at most one per table and one per
/// dataset: a notice that arrives while another for the same table waits is merged into it
/// (both only say "pull this table"), so a client that reads slowly costs the server one
/// entry per table it hears, however many writes happen meanwhile, and never misses a table.
///
/// A channel that would need more than ``limit`` entries is over: ``next()`` reports it,
/// and the relay closes the channel (its client reconnects and pulls every table). So is one
/// that can no longer hear all it should (``fail()``: its groups could not be read).
///
/// Two ways to read, one per channel: a task awaits ``next()``, or a writer registers a
/// wake-up with ``wake(_:)`` and takes with ``take()`` (a WebSocket's notices, written from
/// its event loop with no task waiting per channel).
final class PendingNotices: Sendable {
    /// What a waiting notice is merged by: its table, or its dataset (whose newest sync count wins).
    private enum Key: Hashable {
        case table(ExactString)
        case dataset(pool: String, identity: ExactString, name: String)
        case other(ChangeNotice.Change)

        init(_ change: ChangeNotice.Change) {
            switch change {
            case .table(let table): self = .table(ExactString(table))
            case .dataset(let dataset):
                self = .dataset(pool: dataset.identityPoolId, identity: ExactString(dataset.identityId), name: dataset.datasetName)
            case .groups, .member: self = .other(change)
            }
        }
    }

    /// What ``next()`` hands the relay.
    enum Batch {
        /// The notices waiting, in the order their tables first arrived.
        case notices([ChangeNotice])
        /// More tables waited than ``limit``: the channel should be closed.
        case over
        /// The channel can no longer hear all it should (``fail()``): it should be closed,
        /// so that its client reconnects, subscribes afresh and catches up.
        case failed
        /// The channel closed.
        case finished
    }

    /// Why the notices ended; the first reason stays.
    private enum End {
        case over, failed, finished

        var batch: Batch {
            switch self {
            case .over: .over
            case .failed: .failed
            case .finished: .finished
            }
        }
    }

    private struct State {
        /// The waiting notices, in the order their keys first arrived.
        var waiting: [(key: Key, notice: ChangeNotice)] = []
        /// Each waiting key's position in ``waiting``, kept only past ``scanned`` entries: a
        /// channel mostly has one or two tables waiting, where comparing keys beats hashing
        /// them and the dictionary would be allocated and freed for every notice.
        var positions: [Key: Int]?
        /// Set once the notices ended: no notice is added from then on.
        var end: End?
        var reader: CheckedContinuation<Batch, Never>?
        /// Called when a notice arrives to an empty queue, or the channel ends.
        var waker: (@Sendable () -> Void)?
    }

    /// The most tables and datasets a channel may have waiting.
    let limit: Int
    /// Up to this many waiting notices, a new one's key is found by comparing.
    private static let scanned = 8
    /// Called for each notice merged into a waiting one (counted in the metrics).
    private let merged: @Sendable () -> Void
    private let state = Mutex(State())

    init(limit: Int = 4096, merged: @escaping @Sendable () -> Void = {}) {
        self.limit = limit
        self.merged = merged
    }

    /// Adds `notice`, or merges it into the waiting notice for its table (a merged notice
    /// whose origins differ keeps no origin: some other client's change is in it).
    func add(_ notice: ChangeNotice) {
        let key = Key(notice.change)
        var wasMerged = false
        var waker: (@Sendable () -> Void)?
        let resume = state.withLock { state -> (CheckedContinuation<Batch, Never>, Batch)? in
            guard state.end == nil else { return nil }
            let found = state.positions.map { $0[key] } ?? state.waiting.firstIndex { $0.key == key }
            if let found {
                let waiting = state.waiting[found].notice
                if waiting.origin.map(ExactString.init) != notice.origin.map(ExactString.init) {
                    state.waiting[found].notice.origin = nil
                }
                state.waiting[found].notice.change = notice.change
                wasMerged = true
                return nil
            }
            guard state.waiting.count < limit else {
                state.end = .over
                state.waiting = []
                state.positions = nil
                waker = state.waker
                return state.reader.take().map { ($0, .over) }
            }
            if state.waiting.isEmpty { waker = state.waker }
            state.waiting.append((key, notice))
            if state.positions != nil {
                state.positions?[key] = state.waiting.count - 1
            } else if state.waiting.count > Self.scanned {
                state.positions = Dictionary(uniqueKeysWithValues: state.waiting.enumerated().map { ($1.key, $0) })
            }
            return state.reader.take().map { ($0, Self.take(&state)) }
        }
        if let (reader, batch) = resume { reader.resume(returning: batch) }
        waker?()
        if wasMerged { merged() }
    }

    /// Ends the channel: a reader waiting in ``next()`` gets `.finished`; notices added later are ignored.
    func finish() {
        let (reader, waker) = state.withLock { state in
            if state.end == nil { state.end = .finished }
            // The writer's wake-up holds the writer, which holds these notices: let go of it.
            return (state.reader.take(), state.waker.take())
        }
        reader?.resume(returning: .finished)
        waker?()
    }

    /// Marks the channel as no longer hearing all it should: its reader gets `.failed` (at
    /// once if it waits) instead of the notices waiting, and closes the channel. Nothing
    /// once the channel ended or is over.
    func fail() {
        let (reader, waker) = state.withLock { state -> (CheckedContinuation<Batch, Never>?, (@Sendable () -> Void)?) in
            guard state.end == nil else { return (nil, nil) }
            state.end = .failed
            state.waiting = []
            state.positions = nil
            return (state.reader.take(), state.waker)
        }
        reader?.resume(returning: .failed)
        waker?()
    }

    /// Has `waker` called, from the task that adds the notice, each time a notice arrives
    /// while none waits, and when the channel ends, is over or failed (once at once, when notices
    /// are waiting already or it has ended). The writer then calls ``take()``; notices that
    /// arrive before it does join the ones waiting without another call.
    func wake(_ waker: @escaping @Sendable () -> Void) {
        let now = state.withLock { state -> Bool in
            precondition(state.reader == nil, "PendingNotices has one reader")
            state.waker = waker
            return !state.waiting.isEmpty || state.end != nil
        }
        if now { waker() }
    }

    /// Takes the notices waiting, without waiting: `nil` when none does. Once the channel
    /// ended, `.finished` even if notices wait: its carrier may have said its last word.
    func take() -> Batch? {
        state.withLock { state in
            if let end = state.end { return end.batch }
            if !state.waiting.isEmpty { return Self.take(&state) }
            return nil
        }
    }

    /// Waits for notices and takes all that are waiting. One reader at a time; a cancelled
    /// reader gets `.finished`.
    func next() async -> Batch {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Batch, Never>) in
                let ready = state.withLock { state -> Batch? in
                    if let end = state.end, end != .finished { return end.batch }
                    if !state.waiting.isEmpty { return Self.take(&state) }
                    if state.end == .finished || Task.isCancelled { return .finished }
                    precondition(state.reader == nil, "PendingNotices has one reader")
                    state.reader = continuation
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            let reader = state.withLock { $0.reader.take() }
            reader?.resume(returning: .finished)
        }
    }

    private static func take(_ state: inout State) -> Batch {
        let notices = state.waiting.map(\.notice)
        state.waiting.removeAll(keepingCapacity: false)
        state.positions = nil
        return .notices(notices)
    }
}
