#include "osync_crc32c.h"

#include <string.h>

#if defined(__x86_64__)
#include <nmmintrin.h>

int osync_crc32c_hardware(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.2");
}

// Compiled for SSE 4.2 on its own, so the rest of the program runs on any x86-64.
__attribute__((target("sse4.2")))
uint32_t osync_crc32c_update(uint32_t state, const void *bytes, size_t count) {
    const unsigned char *p = bytes;
    uint64_t crc = state;
    while (count >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        crc = _mm_crc32_u64(crc, word);
        p += 8;
        count -= 8;
    }
    uint32_t small = (uint32_t)crc;
    while (count > 0) {
        small = _mm_crc32_u8(small, *p);
        p += 1;
        count -= 1;
    }
    return small;
}

#elif defined(__aarch64__) && defined(__ARM_FEATURE_CRC32)
#include <arm_acle.h>

int osync_crc32c_hardware(void) { return 1; }

uint32_t osync_crc32c_update(uint32_t state, const void *bytes, size_t count) {
    const unsigned char *p = bytes;
    uint32_t crc = state;
    while (count >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        crc = __crc32cd(crc, word);
        p += 8;
        count -= 8;
    }
    while (count > 0) {
        crc = __crc32cb(crc, *p);
        p += 1;
        count -= 1;
    }
    return crc;
}

#else

int osync_crc32c_hardware(void) { return 0; }

uint32_t osync_crc32c_update(uint32_t state, const void *bytes, size_t count) {
    (void)bytes;
    (void)count;
    return state;
}

#endif
