#ifndef COFFLINESYNC_SQLITE3_SHIM_H
#define COFFLINESYNC_SQLITE3_SHIM_H
#include <sqlite3.h>
#endif
