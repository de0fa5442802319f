/// A value `field == literal` requires, keyed so values the query calls equal share a key:
/// an integer and an integral double are one number, strings are equal byte for byte
/// (``QueryEvaluator`` compares them so).
enum EqualityKey: Hashable {
    case int(Int64)
    case double(Double)
    case string(ExactString)
    case bool(Bool)

    /// The key of `value`; `nil` for kinds no indexed literal can equal (and for NaN, which
    /// equals nothing).
    init?(_ value: Value) {
        switch value {
        case .int(let i): self = .int(i)
        case .double(let d):
            if d.isNaN { return nil }
            if d.rounded(.down) == d, d >= -9_223_372_036_854_775_808.0, d < 9_223_372_036_854_775_808.0 {
                self = .int(Int64(d))
            } else {
                self = .double(d)
            }
        case .string(let s): self = .string(ExactString(s))
        case .bool(let b): self = .bool(b)
        default: return nil
        }
    }

    /// An equality every record matching `predicate` meets, if the predicate has one at its
    /// top (itself, or a part of an `and`).
    static func required(by predicate: QueryPredicate) -> (field: String, key: EqualityKey)? {
        switch predicate {
        case let .compare(field, .equal, literal): return EqualityKey(literal).map { (field, $0) }
        case let .and(parts): return parts.lazy.compactMap { required(by: $0) }.first
        default: return nil
        }
    }
}

/// The comparisons a predicate requires of one field (`n >= 10 && n < 20`): a row whose
/// value fails one cannot match, which one lookup of the field tells for every observation
/// bounded on it.
struct FieldBounds {
    let field: String
    let tests: [(ComparisonOperator, Value)]
    /// The integers that pass every test, when every literal is an integer (`nil` for none);
    /// an integer value is then tested with two comparisons.
    let integers: ClosedRange<Int64>??

    init(field: String, tests: [(ComparisonOperator, Value)]) {
        self.field = field
        self.tests = tests
        var low = Int64.min, high = Int64.max
        var integers: ClosedRange<Int64>?? = nil
        if tests.allSatisfy({ if case .int = $0.1 { true } else { false } }) {
            var empty = false
            for case let (op, .int(k)) in tests {
                switch op {
                case .greater: if k == .max { empty = true } else { low = max(low, k + 1) }
                case .greaterOrEqual: low = max(low, k)
                case .less: if k == .min { empty = true } else { high = min(high, k - 1) }
                case .lessOrEqual: high = min(high, k)
                default: break
                }
            }
            integers = .some(empty || low > high ? nil : low...high)
        }
        self.integers = integers
    }

    /// Whether `value` passes every test (unknown, for a null, fails).
    func admits(_ value: Value) -> Bool {
        if case .some(let range) = integers, case .int(let v) = value { return range?.contains(v) ?? false }
        return tests.allSatisfy { QueryEvaluator.compare(value, $0.0, $0.1) == .true }
    }

    /// The ordering comparisons at the top of `predicate` (itself, or parts of an `and`) on
    /// the field of the first of them.
    static func required(by predicate: QueryPredicate) -> FieldBounds? {
        let parts: [QueryPredicate]
        if case .and(let all) = predicate { parts = all } else { parts = [predicate] }
        var field: String?
        var tests: [(ComparisonOperator, Value)] = []
        for part in parts {
            guard case let .compare(name, op, literal) = part, [.less, .lessOrEqual, .greater, .greaterOrEqual].contains(op),
                  field == nil || field == name else { continue }
            field = name
            tests.append((op, literal))
        }
        return field.map { FieldBounds(field: $0, tests: tests) }
    }
}

/// The watchers of one table, indexed so that a committed change finds those it concerns
/// without looking at the others: by the record a record observation watches, by the
/// equality a query's predicate requires, and by the rows each query shows. A commit of one
/// row costs a few lookups whether ten observations are live or ten thousand. Queries bounded
/// on a field (`n >= 10 && n < 20`) are tested on that field's value, looked up once per
/// row; only queries with neither (and whole-table observations) are evaluated one by one.
struct WatcherIndex {
    private(set) var all: [UInt64: ObservationWatcher] = [:]
    /// Watchers due to look or looking (``ObservationWatcher/busy``).
    private var busy: [UInt64: ObservationWatcher] = [:]
    /// `.anyRow` watchers, and `.matching` ones without an equality or bounds.
    private var scanned: [ObservationWatcher] = []
    private var byBounds: [String: [ObservationWatcher]] = [:]
    private var byRecord: [ExactString: [ObservationWatcher]] = [:]
    private var byEquality: [String: [EqualityKey: [ObservationWatcher]]] = [:]
    /// The `.matching` watchers showing each row: one entry per row shown, most of them
    /// naming one watcher without an array.
    private var shownBy: [ExactString: Watchers] = [:]

    var isEmpty: Bool { all.isEmpty }

    mutating func add(_ watcher: ObservationWatcher) {
        all[watcher.id] = watcher
        if case .record(let id) = watcher.interest {
            byRecord[ExactString(id), default: []].append(watcher)
        } else if let (field, key) = watcher.equality {
            byEquality[field, default: [:]][key, default: []].append(watcher)
        } else if let bounds = watcher.bounds {
            byBounds[bounds.field, default: []].append(watcher)
        } else {
            scanned.append(watcher)
        }
        setBusy(watcher)
    }

    mutating func remove(_ watcher: ObservationWatcher) {
        all[watcher.id] = nil
        busy[watcher.id] = nil
        if case .record(let id) = watcher.interest {
            Self.drop(watcher, from: &byRecord, ExactString(id))
        } else if let (field, key) = watcher.equality {
            Self.drop(watcher, from: &byEquality[field, default: [:]], key)
            if byEquality[field]?.isEmpty == true { byEquality[field] = nil }
        } else if let bounds = watcher.bounds {
            Self.drop(watcher, from: &byBounds, bounds.field)
        } else {
            scanned.removeAll { $0 === watcher }
        }
        for id in watcher.shown { Self.unshow(watcher, id, &shownBy) }
    }

    /// Files the watcher among the busy ones, or takes it out, as its state says.
    mutating func setBusy(_ watcher: ObservationWatcher) {
        busy[watcher.id] = watcher.busy ? watcher : nil
    }

    /// Notes that rows `entered` the watcher's result and rows `left` it.
    mutating func show(_ watcher: ObservationWatcher, entered: some Sequence<ExactString>, left: some Sequence<ExactString>) {
        for id in left { Self.unshow(watcher, id, &shownBy) }
        for id in entered {
            if let others = shownBy[id] { shownBy[id] = others.adding(watcher) } else { shownBy[id] = .one(watcher) }
        }
    }

    /// Appends to `found` each watcher `change` concerns that is not in it yet (its `mark`
    /// is not `mark`): every busy watcher, and the others whose value the change can alter.
    func collect(_ change: TableChange, mark: UInt64, into found: inout [ObservationWatcher]) {
        func add(_ watcher: ObservationWatcher) {
            guard watcher.mark != mark else { return }
            watcher.mark = mark
            found.append(watcher)
        }
        guard let ids = change.ids else { return all.values.forEach(add) }
        guard !ids.isEmpty else { return }
        busy.values.forEach(add)
        for id in ids {
            byRecord[id]?.forEach(add)
            switch shownBy[id] {
            case .one(let watcher)?: add(watcher)
            case .many(let watchers)?: watchers.forEach(add)
            case nil: break
            }
        }
        for watcher in scanned where watcher.mark != mark {
            guard case .matching(let predicate) = watcher.interest, let written = change.written else { add(watcher); continue }
            if written.values.contains(where: { QueryEvaluator.matches($0, predicate) }) { add(watcher) }
        }
        guard let written = change.written else {
            // Rows unknown: any of them may match.
            for keys in byEquality.values { for watchers in keys.values { watchers.forEach(add) } }
            for watchers in byBounds.values { watchers.forEach(add) }
            return
        }
        // Each field's rows are looked at until every watcher filed under it is found.
        for (field, watchers) in byBounds {
            var unfound = watchers.count { $0.mark != mark }
            for record in written.values where unfound > 0 {
                let value = record[field]
                for watcher in watchers where watcher.mark != mark && watcher.bounds?.admits(value) == true {
                    if case .matching(let predicate) = watcher.interest, QueryEvaluator.matches(record, predicate) {
                        add(watcher)
                        unfound -= 1
                    }
                }
            }
        }
        for (field, keys) in byEquality {
            var unfound = keys.values.reduce(0) { $0 + $1.count { $0.mark != mark } }
            for record in written.values where unfound > 0 {
                guard let key = EqualityKey(record[field]), let watchers = keys[key] else { continue }
                for watcher in watchers where watcher.mark != mark {
                    if case .matching(let predicate) = watcher.interest, QueryEvaluator.matches(record, predicate) {
                        add(watcher)
                        unfound -= 1
                    }
                }
            }
        }
    }

    /// One watcher, or several.
    enum Watchers {
        case one(ObservationWatcher)
        case many([ObservationWatcher])

        func adding(_ watcher: ObservationWatcher) -> Watchers {
            switch self {
            case .one(let first): return .many([first, watcher])
            case .many(let watchers): return .many(watchers + [watcher])
            }
        }

        /// Without `watcher`; `nil` when none is left.
        func removing(_ watcher: ObservationWatcher) -> Watchers? {
            switch self {
            case .one(let only): return only === watcher ? nil : self
            case .many(var watchers):
                watchers.removeAll { $0 === watcher }
                return watchers.count > 1 ? .many(watchers) : watchers.first.map { .one($0) }
            }
        }
    }

    private static func unshow(_ watcher: ObservationWatcher, _ id: ExactString, _ shownBy: inout [ExactString: Watchers]) {
        if let watchers = shownBy[id] { shownBy[id] = watchers.removing(watcher) }
    }

    private static func drop<Key: Hashable>(_ watcher: ObservationWatcher, from index: inout [Key: [ObservationWatcher]], _ key: Key) {
        index[key]?.removeAll { $0 === watcher }
        if index[key]?.isEmpty == true { index[key] = nil }
    }
}
