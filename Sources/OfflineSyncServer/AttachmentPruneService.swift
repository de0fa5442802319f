import Logging
import OfflineSyncService
import ServiceLifecycle

/// Collects unreferenced attachments and abandoned uploads every ``interval`` while the
/// server runs (``SyncServer/Configuration/attachmentPruneInterval``); the shutdown ends the
/// wait, never a collection under way.
///
/// Its description names no more than the service kind: the service group logs it, and the
/// server's configuration holds secrets.
struct AttachmentPruneService: Service, CustomStringConvertible {
    let service: OfflineSyncService
    let interval: Duration
    let logger: Logger

    var description: String { "AttachmentPruneService" }

    func run() async throws {
        while true {
            do {
                try await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
            } catch {
                return   // the shutdown began
            }
            if Task.isShuttingDownGracefully { return }
            do {
                let removed = try await service.pruneAttachments()
                if removed > 0 { logger.info("collected unreferenced attachments and abandoned uploads", metadata: ["removed": "\(removed)"]) }
            } catch {
                // The store may be unreachable for a while: the next round tries again.
                logger.error("collecting attachments failed", metadata: ["error": "\(error)"])
            }
        }
    }
}
