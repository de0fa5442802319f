#ifndef OSYNC_SYSTEM_H
#define OSYNC_SYSTEM_H

#include <stdint.h>
#if defined(__linux__)
#include <spawn.h>
#endif

/// Asks the kernel to start writing `length` bytes of `fd` from `offset` to the disk, without
/// waiting (Linux's sync_file_range with SYNC_FILE_RANGE_WRITE, which Swift's Glibc module does
/// not export). A hint only: it makes nothing durable, `fsync` does. Returns 0, or -1 with
/// errno set; 0 without doing anything where there is no such call.
int osync_write_behind(int fd, int64_t offset, int64_t length);

/// Limits glibc's malloc to `count` heaps (mallopt(M_ARENA_MAX)), which Swift's Glibc module
/// does not export. Returns 1 when set, 0 when not (or where there is no such call).
int osync_limit_malloc_arenas(int count);

#if defined(__linux__)
/// Makes a spawned child close every descriptor from `lowest` up, after its other file
/// actions (glibc's posix_spawn_file_actions_addclosefrom_np, 2.34 and later, which Swift's
/// Glibc module does not export). Returns 0, or an error number; ENOSYS where there is no such
/// call (an older glibc, musl). Linux only: on Apple platforms the spawn attribute
/// POSIX_SPAWN_CLOEXEC_DEFAULT gives the child only the descriptors its file actions name.
int osync_spawn_close_from(posix_spawn_file_actions_t *actions, int lowest);
#endif

/// A pipe whose two ends are closed on exec (pipe2 with O_CLOEXEC, which Swift's Glibc module
/// does not export; pipe and two fcntl calls elsewhere). Returns 0, or -1 with errno set.
int osync_pipe_cloexec(int fds[2]);

#endif
