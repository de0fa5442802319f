import GRDB
import OfflineSyncGRDB

/// The app's second version: its todos' `title` is now `name`.
func registerVersionTwo(in migrator: inout DatabaseMigrator) {
    migrator.registerMigration("v2") { db in
        try db.renameSyncedColumn("title", to: "name", inTable: "todo")
    }
}
