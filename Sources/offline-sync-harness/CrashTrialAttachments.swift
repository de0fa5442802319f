import Crypto
import Foundation
import OfflineSync

/// The attachments of the crash trials (`crash-trial-client --attachments`): each step's
/// record carries a file whose bytes follow from its id, so the client can check every byte
/// it is given and the harness (Tests/Reliability/attachment_crash.py, which computes the
/// same bytes) every file the server holds.
enum TrialAttachments {
    /// The file of step `step` under `prefix`: block k is SHA-256 of `"<prefix>-<step>-<k>"`,
    /// cut to the step's size. Every tenth step's file spans three of the server's
    /// 1 MiB pieces; the others are 1 to 20 KB.
    static func bytes(prefix: String, step: Int) -> [UInt8] {
        let size = step % 10 == 9 ? 2_100_000 + (step &* 7919) % 900_000 : 1_000 + (step &* 131) % 19_000
        var bytes: [UInt8] = []
        bytes.reserveCapacity(size + 32)
        var block = 0
        while bytes.count < size {
            bytes += SHA256.hash(data: Array("\(prefix)-\(step)-\(block)".utf8))
            block += 1
        }
        return Array(bytes[..<size])
    }

    /// The expected bytes of the record `id` (`<prefix>-<step>`), or nil for an id of another form.
    static func bytes(forRecord id: String) -> [UInt8]? {
        guard let dash = id.lastIndex(of: "-"), let step = Int(id[id.index(after: dash)...]) else { return nil }
        return bytes(prefix: String(id[..<dash]), step: step)
    }

    /// Reads the attachment of each row in `rows` through the context (fetching it when it is
    /// not here) and compares every byte with what its id says. Returns how many were
    /// checked; a file that cannot be fetched now is skipped (`strict`: counted as a failure).
    /// Exits the process with status 3 at the first wrong byte: the app was handed a corrupt file.
    static func check(_ rows: [Record], context: SyncContext, strict: Bool, limit: Int = .max) async throws -> (checked: Int, unavailable: Int) {
        var checked = 0, unavailable = 0
        for row in rows where checked < limit {
            guard let expected = bytes(forRecord: row.id), let attachment = try Attachment(value: row["file"]) else { continue }
            let data: Data
            do {
                data = try await context.attachmentData(attachment)
            } catch let error as SyncError where [.attachmentUnavailable, .transient, .attachmentDamaged].contains(error.code) {
                unavailable += 1
                if strict { FileHandle.standardError.write(Data("unreadable \(row.id): \(error)\n".utf8)) }
                continue
            }
            guard data.elementsEqual(expected) else {
                FileHandle.standardError.write(Data("CORRUPT: the attachment of \(row.id) was handed over with wrong bytes (\(data.count) of \(expected.count))\n".utf8))
                exit(3)
            }
            checked += 1
        }
        return (checked, unavailable)
    }
}
