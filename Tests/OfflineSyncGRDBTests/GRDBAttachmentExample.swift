import Foundation
import GRDB
import OfflineSync
import OfflineSyncGRDB

/// The app's record: the photo is an `Attachment`, a reference to a file the sync engine
/// keeps and moves. GRDB stores it in a TEXT column, as JSON.
struct Inspection: Codable, FetchableRecord, PersistableRecord, Equatable {
    var id: String
    var site: String
    var photo: Attachment?
}

/// The app's migration: the photo's column is TEXT.
func registerInspections(in migrator: inout DatabaseMigrator) {
    migrator.registerMigration("inspections") { db in
        try db.create(table: "inspection") { t in
            t.primaryKey("id", .text)
            t.column("site", .text).notNull()
            t.column("photo", .text)
        }
    }
}

/// The table's schema: a reference is an object field.
let inspectionSchema = TableSchema("inspection", fields: [FieldDefinition("site", .string),
                                                           FieldDefinition("photo", .object)])

/// Takes a photo: `addAttachment` keeps the bytes beside the database, and the record the app
/// writes with GRDB holds the reference. The bytes go up before the record does.
func addInspection(site: String, jpeg: Data, context: SyncContext, database: some DatabaseWriter) async throws {
    let photo = try await context.addAttachment(jpeg, contentType: "image/jpeg", fileName: "\(site).jpg")
    try await database.write { db in
        try Inspection(id: UUID().uuidString, site: site, photo: photo).insert(db)
    }
}

/// Shows a photo: on another device it is fetched on first access, and always checked
/// against its hash.
func photoBytes(of inspection: Inspection, context: SyncContext) async throws -> Data? {
    guard let photo = inspection.photo else { return nil }
    return try await context.attachmentData(photo)
}
