import OfflineSync

/// Runs `body` with `store` and closes the store afterwards, also when `body` throws (then
/// a failure to close is ignored, so the test reports `body`'s error).
package func withClosing<Store: LocalStore, T>(_ store: Store, _ body: (Store) async throws -> T) async throws -> T {
    do {
        let result = try await body(store)
        try await store.close()
        return result
    } catch {
        try? await store.close()
        throw error
    }
}
