/// What one committed write transaction changed in one table, as observations see it.
package struct TableChange: Sendable, Equatable {
    /// The table.
    package let table: String
    /// The ids of the records written or deleted, by their bytes (two ids that differ only in
    /// Unicode normalisation are two records to every store); `nil` when not known (a commit made
    /// outside this process's ``StoreObserver``, reported by the adapter, or one too large
    /// to list), which makes every observation of the table look again.
    package var ids: Set<ExactString>?
    /// The records as written, by id (a deleted id is absent), when the writer knows them:
    /// a query observation then looks again only for a row it shows or one that now matches.
    /// `nil` makes every listed id count.
    var written: [ExactString: Record]?
    /// No other write through the same ``StoreObserver`` ran between this one's start and its
    /// announcement, so announcements arrive in commit order and an observation may patch its
    /// last result with the rows (``ResultPatch``) instead of reading.
    var ordered = false

    /// A change to the records with these ids, or to unknown records (`nil`).
    package init(table: String, ids: Set<ExactString>?) {
        self.table = table
        self.ids = ids
    }

    init(table: String, written: [ExactString: Record], deleted: Set<ExactString>) {
        self.table = table
        self.ids = deleted.union(written.keys)
        self.written = written
    }
}
