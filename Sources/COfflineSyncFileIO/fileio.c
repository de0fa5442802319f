#define _GNU_SOURCE
#include <fcntl.h>
#include "osync_fileio.h"

int osync_write_behind(int fd, int64_t offset, int64_t length) {
#if defined(__linux__)
    return sync_file_range(fd, (off_t)offset, (off_t)length, SYNC_FILE_RANGE_WRITE);
#else
    (void)fd; (void)offset; (void)length;
    return 0;
#endif
}
