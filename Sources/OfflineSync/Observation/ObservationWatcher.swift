/// One observation iterator's state in its ``StoreObserver``: what it is interested in, the
/// rows it shows, and where it stands with the commits announced to it. A class, so a
/// commit's pass changes each watcher it finds in place; only touched under the observer's
/// lock.
final class ObservationWatcher {
    /// Where a watcher stands with the commits announced to it.
    enum Phase {
        /// Its last value reflects every change announced so far (or it has not looked yet:
        /// its first look reads whatever the phase).
        case current
        /// Changes were announced since it last looked; it looks when its iterator asks.
        case due(Backlog)
        /// It is reading or patching. A change announced meanwhile may or may not be in what
        /// it reads, so it is kept (`since`) and makes the watcher due once the look ends.
        case looking(since: Backlog?)
    }

    /// The changes a watcher has not looked at yet.
    enum Backlog {
        /// Changes that can patch the last result (``ResultPatch``), in commit order, and the
        /// number of row ids they list.
        case patch([TableChange], rows: Int)
        /// Changes that cannot: a commit whose rows are unknown, one that was not announced in
        /// commit order, too many rows, or a watcher whose value is not made of rows. It reads.
        case read

        /// Takes `change` in; gives patching up when the change cannot patch.
        mutating func add(_ change: TableChange) {
            guard case .patch(var changes, var rows) = self else { return }
            // Dropped from `self` first, so appending does not copy the array.
            self = .read
            rows += change.ids?.count ?? 0
            guard change.ordered, change.written != nil, rows <= StoreObserver.patchLimit else { return }
            changes.append(change)
            self = .patch(changes, rows: rows)
        }
    }

    let id: UInt64
    /// The tables it watches; a watcher that learns them from its reads changes them after
    /// each read (it is then not in any ``WatcherIndex``).
    var tables: Set<String>
    let interest: StoreObserver.Interest
    /// The equality every row the watcher can show meets (`.matching` interests only), by
    /// which ``WatcherIndex`` finds it.
    let equality: (field: String, key: EqualityKey)?
    /// Without an equality, the bounds every row the watcher can show meets on one field,
    /// which ``WatcherIndex`` tests before the whole predicate.
    let bounds: FieldBounds?
    /// The watcher's result can be patched (``ResultPatch``) rather than read.
    let patches: Bool
    /// Its tables are those of its last read, and it is in no ``WatcherIndex``.
    let learnsTables: Bool
    let wake: AsyncStream<Void>.Continuation
    private(set) var phase = Phase.current
    /// The ids of the rows the last read or patch showed (`.matching` interests only).
    var shown: Set<ExactString> = []
    /// The last change this watcher was found for (``WatcherIndex/collect(_:mark:into:)``).
    var mark: UInt64 = 0

    init(id: UInt64, tables: Set<String>, interest: StoreObserver.Interest, patches: Bool, learnsTables: Bool = false,
         wake: AsyncStream<Void>.Continuation) {
        self.id = id
        self.learnsTables = learnsTables
        self.tables = tables
        self.interest = interest
        if case .matching(let predicate) = interest {
            equality = EqualityKey.required(by: predicate)
            bounds = equality == nil ? FieldBounds.required(by: predicate) : nil
        } else {
            (equality, bounds) = (nil, nil)
        }
        self.patches = patches
        self.wake = wake
    }

    /// Due to look or looking: every change to its tables concerns it, since the rows it
    /// shows no longer tell which rows it will show.
    var busy: Bool {
        if case .current = phase { false } else { true }
    }

    /// A change was announced since the watcher last looked (during a look included).
    var isDue: Bool {
        switch phase {
        case .current, .looking(since: nil): false
        case .due, .looking(since: .some): true
        }
    }

    /// Takes in a change announced to the watcher; `true` when it had nothing to look at
    /// before, so its iterator must be woken.
    func keep(_ change: TableChange) -> Bool {
        switch phase {
        case .current:
            phase = .due(backlog(of: change))
            return true
        case .due(var backlog):
            phase = .current
            backlog.add(change)
            phase = .due(backlog)
            return false
        case .looking(since: nil):
            phase = .looking(since: backlog(of: change))
            return true
        case .looking(since: var backlog?):
            phase = .current
            backlog.add(change)
            phase = .looking(since: backlog)
            return false
        }
    }

    /// A read begins: every change announced before it is in what it reads.
    func beginRead() {
        phase = .looking(since: nil)
    }

    /// The changes to patch the last result with, when the watcher is due and every change
    /// since its last look can patch; the watcher is then looking.
    func beginPatch() -> [TableChange]? {
        guard case .due(.patch(let changes, _)) = phase, !changes.isEmpty else { return nil }
        phase = .looking(since: nil)
        return changes
    }

    /// A read or patch ended; the changes announced meanwhile make the watcher due.
    func endLook() {
        guard case .looking(let since) = phase else { return }
        phase = since.map { .due($0) } ?? .current
    }

    private func backlog(of change: TableChange) -> Backlog {
        var backlog = patches ? Backlog.patch([], rows: 0) : .read
        backlog.add(change)
        return backlog
    }
}
