#ifndef OSYNC_SYSTEM_H
#define OSYNC_SYSTEM_H

#include <stdint.h>

/// Asks the kernel to start writing `length` bytes of `fd` from `offset` to the disk, without
/// waiting (Linux's sync_file_range with SYNC_FILE_RANGE_WRITE, which Swift's Glibc module does
/// not export). A hint only: it makes nothing durable, `fsync` does. Returns 0, or -1 with
/// errno set; 0 without doing anything where there is no such call.
int osync_write_behind(int fd, int64_t offset, int64_t length);

/// Limits glibc's malloc to `count` heaps (mallopt(M_ARENA_MAX)), which Swift's Glibc module
/// does not export. Returns 1 when set, 0 when not (or where there is no such call).
int osync_limit_malloc_arenas(int count);

#endif
