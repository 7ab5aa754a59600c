/*
 * avx2_blocks.h - the AVX2 steps that the 32-value formats' one-row dots (kernels_avx2.c) and
 * their GEMM (gemm32_avx2.c) share: both must add the same integers in the same float order, so
 * they decode blocks and reduce lanes with these same functions. Include only from files built
 * with the AVX2, FMA and F16C flags.
 */
#ifndef ENG_CPU_AVX2_BLOCKS_H
#define ENG_CPU_AVX2_BLOCKS_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "quant.h"

static inline float f16(uint16_t h) { return _cvtsh_ss(h); }

static inline float hsum8(__m256 v) {
    __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
    return _mm_cvtss_f32(lo);
}

/* sum of u8 * i8 products as 8 x i32 (unsigned a, signed b) */
static inline __m256i mul_u8_i8(__m256i a, __m256i b) {
    const __m256i p16 = _mm256_maddubs_epi16(a, b);
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

/* sum of i8 * i8 products as 8 x i32 */
static inline __m256i mul_i8_i8(__m256i a, __m256i b) {
    const __m256i ax = _mm256_sign_epi8(a, a);
    const __m256i sy = _mm256_sign_epi8(b, a);
    return mul_u8_i8(ax, sy);
}

/* 32 bits of qh as 32 bytes: 0xFF where the bit is set. Each byte of qh is copied to 8 lanes;
 * OR with a mask that has every bit but the lane's own set leaves 0xFF only where it is set. */
static inline __m256i bits_to_bytes(const uint8_t qh[4]) {
    uint32_t h;
    memcpy(&h, qh, 4);
    const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32((int)h),
                                               _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                                                 0x0101010101010101, 0x0000000000000000));
    const __m256i others = _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe);
    return _mm256_cmpeq_epi8(_mm256_or_si256(spread, others), _mm256_set1_epi64x(-1));
}

/* The 32 nibbles of a block, low halves first (values 0-15), then the high halves (16-31). */
static inline __m256i nibbles(const uint8_t qs[16]) {
    const __m128i raw = _mm_loadu_si128((const __m128i *)qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), _mm256_set1_epi8(0xF));
}

/* Q5_0 values as signed bytes: nibble | 0xF0 where the fifth bit is clear is nibble - 16 */
static inline __m256i q5_0_values(const eng_block_q5_0 *a) {
    return _mm256_or_si256(nibbles(a->qs), _mm256_andnot_si256(bits_to_bytes(a->qh), _mm256_set1_epi8((char)0xF0)));
}

#endif /* ENG_CPU_AVX2_BLOCKS_H */
