import Observation
import Synchronization

/// The latest value of an ``ObservedValue``, for views that bind to it: an `@Observable`
/// object (the Observation module, so SwiftUI redraws a view that reads `value`) that
/// iterates the observation on the main actor and publishes each value it yields.
///
/// ```swift
/// @State var todos = LiveValue(todoTable.observe(Query(Todo.Columns.done == false)), initial: [])
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
    private let task = Mutex<Task<Void, Never>?>(nil)

    /// Starts observing: `value` is `initial` until the observation's first value arrives.
    public init(_ observed: ObservedValue<Element>, initial: Element) {
        value = initial
        let task = Task { @MainActor [weak self] in
            do {
                for try await next in observed {
                    guard let self else { return }
                    self.value = next
                    self.isLoaded = true
                }
            } catch {
                self?.error = error
            }
        }
        self.task.withLock { $0 = task }
    }

    /// Stops observing; ``LiveValue/value`` keeps its last value.
    public func stop() {
        task.withLock { $0?.cancel() }
    }

    deinit {
        task.withLock { $0?.cancel() }
    }
}
