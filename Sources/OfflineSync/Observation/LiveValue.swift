import Observation
import Synchronization

/// The latest value of an ``ObservedValue``, for views that bind to it: an `@Observable`
/// object (the Observation module, so SwiftUI redraws a view that reads `value`) that
/// iterates the observation on the main actor and publishes each value it yields.
///
/// ```swift
/// @State var todos = LiveValue(todoTable.observe(Todo.filter(Todo.Columns.done == false)), initial: [])
/// // The user picks another list: the same object, a new observation.
/// todos.observe(todoTable.observe(Todo.filter(Todo.Columns.listId == picked)))
/// ```
///
/// It stops when it is deallocated or ``LiveValue/stop()`` is called. An error from the store
/// (it was closed) ends it and is kept in ``LiveValue/error``; ``LiveValue/value`` keeps the
/// last value read.
@Observable @MainActor
public final class LiveValue<Element: Sendable> {
    /// The latest value: `initial` until the first read completes.
    public private(set) var value: Element
    /// Whether ``LiveValue/value`` has been read from the store at least once.
    public private(set) var isLoaded = false
    /// The error that ended the observation, if one did.
    public private(set) var error: (any Error)?

    /// The task iterating the observation; a deinit cannot reach main-actor state, so it
    /// sits in a lock of its own.
    @ObservationIgnored private let task = Mutex<Task<Void, Never>?>(nil)
    /// Counts the observations started; a value from one that was replaced is not shown,
    /// even if its task had it in hand when it was cancelled.
    @ObservationIgnored private var generation = 0

    /// Starts observing: `value` is `initial` until the observation's first value arrives.
    public init(_ observed: ObservedValue<Element>, initial: Element) {
        value = initial
        observe(observed)
    }

    /// Observes something else (the query of another list, a new search text) without
    /// recreating the object a view holds: the current observation stops, ``value`` keeps
    /// its last value and ``isLoaded`` is `false` until the new observation's first value
    /// replaces it; ``error`` is cleared.
    public func observe(_ observed: ObservedValue<Element>) {
        generation += 1
        let current = generation
        isLoaded = false
        error = nil
        let task = Task { @MainActor [weak self] in
            do {
                for try await next in observed {
                    guard let self, self.generation == current else { return }
                    self.value = next
                    self.isLoaded = true
                }
            } catch {
                guard let self, self.generation == current else { return }
                self.error = error
            }
        }
        let previous = self.task.withLock { slot in
            defer { slot = task }
            return slot
        }
        previous?.cancel()
    }

    /// Stops observing; ``LiveValue/value`` keeps its last value.
    public func stop() {
        task.withLock { $0?.cancel() }
    }

    deinit {
        task.withLock { $0?.cancel() }
    }
}
