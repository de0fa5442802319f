#ifndef OSYNC_CRC32C_H
#define OSYNC_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/// Nonzero when this CPU has the CRC-32C instruction osync_crc32c_update uses: SSE 4.2 on
/// x86-64 (checked at run time), the CRC32 extension on ARM64 (when the compiler targets it).
int osync_crc32c_hardware(void);

/// Feeds `count` bytes at `bytes` (any alignment) into `state`, the running CRC-32C register
/// (start at 0xFFFFFFFF, invert at the end), with the CPU's instruction. Call it only when
/// osync_crc32c_hardware() is nonzero; otherwise it returns `state` unchanged.
uint32_t osync_crc32c_update(uint32_t state, const void *bytes, size_t count);

#endif
