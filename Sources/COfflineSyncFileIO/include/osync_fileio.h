#ifndef OSYNC_FILEIO_H
#define OSYNC_FILEIO_H

#include <stdint.h>

/// Asks the kernel to start writing `length` bytes of `fd` from `offset` to the disk, without
/// waiting (Linux's sync_file_range with SYNC_FILE_RANGE_WRITE, which Swift's Glibc module does
/// not export). A hint only: it makes nothing durable, `fsync` does. Returns 0, or -1 with
/// errno set; 0 without doing anything where there is no such call.
int osync_write_behind(int fd, int64_t offset, int64_t length);

#endif
