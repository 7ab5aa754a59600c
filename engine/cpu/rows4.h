/*
 * rows4.h - the steps the four-row decode dots of kernels_avx2.c and kernels_avx512.c share
 * (AVX2, F16C and FMA only, so both files can include it): fetching the rows ahead, reducing four
 * rows' lane sums at once and folding a block of the four rows into the sums (lane r = row r) in
 * the one-row dots' float order, which is the GEMMs'.
 */
#ifndef ENG_CPU_ROWS4_H
#define ENG_CPU_ROWS4_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "compiler.h"

/* Before the bytes [lo, hi) of a row span, the lines of the span at pf that start within
 * [pf + lo, pf + hi) (at lo = 0 also the line pf starts in), into L2: a few lines per block
 * rather than a burst, which would hold every fill buffer while the product's own reads wait. */
static DP_ALWAYS_INLINE void eng_fetch_span(const uint8_t *pf, size_t lo, size_t hi) {
    if (!pf) return;
    uintptr_t a = (uintptr_t)(pf + lo);
    a = lo ? (a + 63) & ~(uintptr_t)63 : a & ~(uintptr_t)63;
    for (const uintptr_t e = (uintptr_t)(pf + hi); a < e; a += 64) _mm_prefetch((const char *)a, _MM_HINT_T1);
}

/* [a0 a1 a2 a3 | b0 b1 b2 b3]: the lane sums of four rows' a and b (int32, exact in any order). */
static DP_ALWAYS_INLINE __m256i eng_reduce4x2(const __m256i a[4], const __m256i b[4]) {
    const __m256i ha = _mm256_hadd_epi32(_mm256_hadd_epi32(a[0], a[1]), _mm256_hadd_epi32(a[2], a[3]));
    const __m256i hb = _mm256_hadd_epi32(_mm256_hadd_epi32(b[0], b[1]), _mm256_hadd_epi32(b[2], b[3]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(ha, hb, 0x20), _mm256_permute2x128_si256(ha, hb, 0x31));
}

/* A Q4_K/Q5_K block of four rows rb apart (b: row 0's block, d and dmin leading it), its sums
 * sm = [S0..S3 | M0..M3], into acc: acc = fma(S, xd * d, acc), then fma(-M, xd * dmin, acc). */
static DP_ALWAYS_INLINE __m128 eng_k4_fold4(__m128 acc, __m256i sm, const uint8_t *b, size_t rb, float xd) {
    int32_t h[4]; /* (into registers one by one: four stores read back as one vector stall the load) */
    for (int r = 0; r < 4; r++) memcpy(&h[r], b + (size_t)r * rb, 4);
    const __m128i dd = _mm_shuffle_epi8(_mm_setr_epi32(h[0], h[1], h[2], h[3]),
                                        _mm_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15));
    const __m256 f = _mm256_cvtepi32_ps(sm), xdd = _mm256_mul_ps(_mm256_set1_ps(xd), _mm256_cvtph_ps(dd));
    acc = _mm_fmadd_ps(_mm256_castps256_ps128(f), _mm256_castps256_ps128(xdd), acc);
    return _mm_fnmadd_ps(_mm256_extractf128_ps(f, 1), _mm256_extractf128_ps(xdd, 1), acc);
}

/* A Q6_K block of four rows (d at d_off in each), its sums s = [S0 - M0 .. S3 - M3], into acc:
 * acc = fma(S - M, xd * d, acc). */
static DP_ALWAYS_INLINE __m128 eng_q6_fold4(__m128 acc, __m128i s, const uint8_t *b, size_t rb, size_t d_off,
                                            float xd) {
    uint16_t d[4];
    for (int r = 0; r < 4; r++) memcpy(&d[r], b + (size_t)r * rb + d_off, 2);
    const __m128i h = _mm_setr_epi16((short)d[0], (short)d[1], (short)d[2], (short)d[3], 0, 0, 0, 0);
    const __m128 xdv = _mm_mul_ps(_mm_set1_ps(xd), _mm_cvtph_ps(h));
    return _mm_fmadd_ps(_mm_cvtepi32_ps(s), xdv, acc);
}

#endif /* ENG_CPU_ROWS4_H */
