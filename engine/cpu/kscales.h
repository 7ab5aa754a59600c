/*
 * kscales.h - the packed 6-bit scales and mins of a Q4_K/Q5_K block (model-formats.md §2.4), unpacked
 * with 32-bit word operations: shared by the SIMD kernel files (the scalar reference decodes one
 * index at a time with eng_k_scale_min).
 */
#ifndef ENG_CPU_KSCALES_H
#define ENG_CPU_KSCALES_H

#include <stdint.h>
#include <string.h>

/* The 12 packed bytes -> u[0..1]: the 8 scales, u[2..3]: the 8 mins, one per byte. */
static inline void eng_k4_unpack_scales(const uint8_t *s, uint32_t u[4]) {
    const uint32_t m1 = 0x3f3f3f3f, m2 = 0x0f0f0f0f, m3 = 0x03030303;
    uint32_t a[3];
    memcpy(a, s, 12);
    u[0] = a[0] & m1;
    u[1] = (a[2] & m2) | (((a[0] >> 6) & m3) << 4);
    u[2] = a[1] & m1;
    u[3] = ((a[2] >> 4) & m2) | (((a[1] >> 6) & m3) << 4);
}

#endif /* ENG_CPU_KSCALES_H */
