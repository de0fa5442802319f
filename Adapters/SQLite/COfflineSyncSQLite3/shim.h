#ifndef COFFLINESYNC_SQLITE3_SHIM_H
#define COFFLINESYNC_SQLITE3_SHIM_H
#include <sqlite3.h>

/// Turns off SQLite's "double-quoted string literal" fallback on `db`, for statements and for
/// schema definitions. Without it, a double-quoted identifier that names no column is read as
/// a string, so a damaged schema (a column name with a flipped bit) would silently make a
/// query return the quoted name instead of failing. `sqlite3_db_config` is variadic, which
/// Swift cannot call, hence this wrapper. Returns SQLITE_OK or SQLite's error code.
static inline int osync_sqlite3_disable_double_quoted_strings(sqlite3 *db) {
    int rc = sqlite3_db_config(db, SQLITE_DBCONFIG_DQS_DML, 0, (int *)0);
    if (rc != SQLITE_OK) return rc;
    return sqlite3_db_config(db, SQLITE_DBCONFIG_DQS_DDL, 0, (int *)0);
}
#endif
