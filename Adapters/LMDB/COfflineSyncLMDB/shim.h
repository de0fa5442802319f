#ifndef COFFLINESYNC_LMDB_SHIM_H
#define COFFLINESYNC_LMDB_SHIM_H
#include <lmdb.h>
#endif
