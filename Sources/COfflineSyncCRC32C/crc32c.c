#include "osync_crc32c.h"

#include <string.h>

// Per platform: the instruction's 8-byte and 1-byte steps, the attribute that compiles the
// loop for it (so the rest of the program runs on any CPU of the architecture), and whether
// this CPU has it.
#if defined(__x86_64__)
#include <nmmintrin.h>
#define OSYNC_CRC32C_TARGET __attribute__((target("sse4.2")))
OSYNC_CRC32C_TARGET static inline uint32_t step8(uint32_t crc, uint64_t word) { return (uint32_t)_mm_crc32_u64(crc, word); }
OSYNC_CRC32C_TARGET static inline uint32_t step1(uint32_t crc, unsigned char byte) { return _mm_crc32_u8(crc, byte); }

int osync_crc32c_hardware(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.2");
}

#elif defined(__aarch64__) && defined(__ARM_FEATURE_CRC32)
#include <arm_acle.h>
#define OSYNC_CRC32C_TARGET
static inline uint32_t step8(uint32_t crc, uint64_t word) { return __crc32cd(crc, word); }
static inline uint32_t step1(uint32_t crc, unsigned char byte) { return __crc32cb(crc, byte); }

int osync_crc32c_hardware(void) { return 1; }

#else

int osync_crc32c_hardware(void) { return 0; }

uint32_t osync_crc32c_update(uint32_t state, const void *bytes, size_t count) {
    (void)bytes;
    (void)count;
    return state;
}

#endif

#ifdef OSYNC_CRC32C_TARGET
OSYNC_CRC32C_TARGET
uint32_t osync_crc32c_update(uint32_t state, const void *bytes, size_t count) {
    const unsigned char *p = bytes;
    uint32_t crc = state;
    while (count >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        crc = step8(crc, word);
        p += 8;
        count -= 8;
    }
    while (count > 0) {
        crc = step1(crc, *p);
        p += 1;
        count -= 1;
    }
    return crc;
}
#endif
