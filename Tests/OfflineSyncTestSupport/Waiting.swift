/// Checks `condition` every 10 ms until it holds or `timeout` passes; returns whether it
/// held. For conditions that only polling can observe (another process, a database); where
/// the code under test can signal, wait on the signal instead.
package func eventually(timeout: Duration = .seconds(5), _ condition: () async throws -> Bool) async rethrows -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return try await condition()
}
