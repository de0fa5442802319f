import OfflineSync

/// The ``SyncError`` `body` throws; `nil` when it returns, or throws an error of another type
/// (so a test expecting a typed error fails on an untyped one).
package func syncError(_ body: () async throws -> Void) async -> SyncError? {
    do {
        try await body()
        return nil
    } catch let error as SyncError {
        return error
    } catch {
        return nil
    }
}

/// The code of the ``SyncError`` `body` throws; `nil` as for ``syncError(_:)``.
package func syncErrorCode(_ body: () async throws -> Void) async -> SyncError.Code? {
    await syncError(body)?.code
}
