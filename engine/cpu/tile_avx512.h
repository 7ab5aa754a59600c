/*
 * tile_avx512.h - weight-decoding pieces shared by the AVX-512 kernels (kernels_avx512.c) and the
 * AMX kernels (kernels_amx.c): 64 values of a K-quant block as unsigned bytes, dword and byte
 * transposes, and the scale fields of 16 weight rows unpacked at once.
 *
 * Include only from files compiled with AVX-512 F/BW/VL/DQ flags; everything here is static
 * inline, so each kernel file keeps its own copy and its own target flags.
 */
#ifndef ENG_CPU_TILE_AVX512_H
#define ENG_CPU_TILE_AVX512_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#include "quant.h"

#define ENG_TILE_ROWS 16 /* weight rows decoded together: one per 32-bit lane */

/* Reads n bytes front to back (a tile's rows are one contiguous run): decoding that walks 16
 * rows block by block streams from DRAM at less than half the speed of a sequential read on the
 * machines measured (12.8 against 28 GB/s per core), so the tile is touched in order first. */
static inline void eng_read_through(const uint8_t *p, size_t n) {
    __m512i sink = _mm512_setzero_si512();
    for (const uint8_t *e = p + n; p + 64 <= e; p += 64)
        sink = _mm512_or_si512(sink, _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)p)));
#if defined(__GNUC__) || defined(__clang__)
    __asm__ volatile("" : : "v"(sink));
#else
    volatile __m512i keep = sink; /* the loads must happen: their result is used */
    (void)keep;
#endif
}

/* 16 x 16 transpose of 32-bit elements: r[i] = row i in, column i out. */
static inline void eng_transpose16(__m512i r[16]) {
    __m512i t[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    __m512i u[16];
    for (int i = 0; i < 4; i++) {
        u[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    /* u[4i+k], 128-bit lane L = column 4L+k of rows 4i..4i+3 */
    for (int k = 0; k < 4; k++) {
        const __m512i v0 = _mm512_shuffle_i32x4(u[k], u[4 + k], 0x88), v1 = _mm512_shuffle_i32x4(u[k], u[4 + k], 0xDD);
        const __m512i w0 = _mm512_shuffle_i32x4(u[8 + k], u[12 + k], 0x88), w1 = _mm512_shuffle_i32x4(u[8 + k], u[12 + k], 0xDD);
        r[k] = _mm512_shuffle_i32x4(v0, w0, 0x88);
        r[8 + k] = _mm512_shuffle_i32x4(v0, w0, 0xDD);
        r[4 + k] = _mm512_shuffle_i32x4(v1, w1, 0x88);
        r[12 + k] = _mm512_shuffle_i32x4(v1, w1, 0xDD);
    }
}

/* 16 x 16 byte transpose: r[i] = row i in, column i out. */
static inline void eng_transpose_bytes16(__m128i r[16]) {
    __m128i a[16], b[16];
    for (int i = 0; i < 8; i++) {
        a[i] = _mm_unpacklo_epi8(r[2 * i], r[2 * i + 1]); /* 16-bit unit c: column c of rows 2i, 2i+1 */
        a[8 + i] = _mm_unpackhi_epi8(r[2 * i], r[2 * i + 1]);
    }
    for (int h = 0; h < 2; h++)
        for (int i = 0; i < 4; i++) { /* 32-bit unit c: column 8h + 4q + c of rows 4i .. 4i+3 */
            b[8 * h + i] = _mm_unpacklo_epi16(a[8 * h + 2 * i], a[8 * h + 2 * i + 1]);
            b[8 * h + 4 + i] = _mm_unpackhi_epi16(a[8 * h + 2 * i], a[8 * h + 2 * i + 1]);
        }
    for (int g = 0; g < 4; g++)
        for (int i = 0; i < 2; i++) { /* 64-bit unit c: column 4g + 2p + c of rows 8i .. 8i+7 */
            a[4 * g + i] = _mm_unpacklo_epi32(b[4 * g + 2 * i], b[4 * g + 2 * i + 1]);
            a[4 * g + 2 + i] = _mm_unpackhi_epi32(b[4 * g + 2 * i], b[4 * g + 2 * i + 1]);
        }
    for (int k = 0; k < 8; k++) {
        r[2 * k] = _mm_unpacklo_epi64(a[2 * k], a[2 * k + 1]);
        r[2 * k + 1] = _mm_unpackhi_epi64(a[2 * k], a[2 * k + 1]);
    }
}

/* Byte j of every row's 16 bytes at rp[r] + off, one row per byte lane: t[j] byte r. */
static inline void eng_tile_scale_bytes(const uint8_t *const rp[ENG_TILE_ROWS], size_t off, __m128i t[16]) {
    for (int r = 0; r < ENG_TILE_ROWS; r++) t[r] = _mm_loadu_si128((const __m128i *)(rp[r] + off));
    eng_transpose_bytes16(t);
}

/* The 6-bit scales and mins of model-formats.md §2.4 for the Q4_K/Q5_K blocks of 16 rows at once (the
 * per-lane equivalent of eng_k4_unpack_scales): sc[j], mn[j] byte r = row r's scale and min of
 * sub-block j. t: byte j of the rows' 12-byte scale fields, one row per byte lane (as from
 * eng_tile_scale_bytes). */
static inline void eng_k4_scales16_t(const __m128i t[12], __m128i sc[8], __m128i mn[8]) {
    const __m128i m6 = _mm_set1_epi8(63), m4 = _mm_set1_epi8(0xF), top = _mm_set1_epi8((char)0xC0);
    for (int j = 0; j < 8; j++) {
        if (j < 4) {
            sc[j] = _mm_and_si128(t[j], m6);
            mn[j] = _mm_and_si128(t[j + 4], m6);
        } else {
            sc[j] = _mm_or_si128(_mm_and_si128(t[j + 4], m4), _mm_srli_epi16(_mm_and_si128(t[j - 4], top), 2));
            mn[j] = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(t[j + 4], 4), m4), _mm_srli_epi16(_mm_and_si128(t[j], top), 2));
        }
    }
}

/* The same from the rows rp: off is the scale field's offset in a block (read as 16 bytes, so 4
 * bytes past it must be readable, as they are inside a block). */
static inline void eng_k4_scales16(const uint8_t *const rp[ENG_TILE_ROWS], size_t off, __m128i sc[8], __m128i mn[8]) {
    __m128i t[16];
    eng_tile_scale_bytes(rp, off, t);
    eng_k4_scales16_t(t, sc, mn);
}

/* Values 64 qi .. 64 qi + 63 of a Q4_K block, unsigned bytes in order. */
static inline __m512i eng_quarter_q4_k(const uint8_t *blk, int qi) {
    const __m256i raw = _mm256_loadu_si256((const __m256i *)(blk + offsetof(eng_block_q4_k, qs) + 32 * qi));
    return _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(raw), _mm256_srli_epi16(raw, 4), 1), _mm512_set1_epi8(0xF));
}

/* Values 64 qi .. 64 qi + 63 of a Q5_K block, unsigned bytes in order. */
static inline __m512i eng_quarter_q5_k(const uint8_t *blk, int qi) {
    const __m256i raw = _mm256_loadu_si256((const __m256i *)(blk + offsetof(eng_block_q5_k, qs) + 32 * qi));
    const __m256i qh = _mm256_loadu_si256((const __m256i *)(blk + offsetof(eng_block_q5_k, qh)));
    const __m512i lo = _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(raw), _mm256_srli_epi16(raw, 4), 1), _mm512_set1_epi8(0xF));
    const __m512i hb = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * qi))),
                                          _mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * qi + 1)), 1);
    return _mm512_or_si512(lo, _mm512_slli_epi16(_mm512_and_si512(hb, _mm512_set1_epi8(1)), 4));
}

/* Values 128 h .. 128 h + 63 (*q0) and 128 h + 64 .. 128 h + 127 (*q1) of a Q6_K block as the
 * unsigned bytes q + 32 (0..63), in order. */
static inline void eng_half_q6_k(const eng_block_q6_k *a, int h, __m512i *q0, __m512i *q1) {
    const __m512i m4 = _mm512_set1_epi8(0xF), m30 = _mm512_set1_epi8(0x30);
    /* qh bits 0-1 / 2-3 (values 0..63 of a half) and 4-5 / 6-7 (values 64..127) to bits 4-5 */
    const __m512i shl = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
    const __m512i shr = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    /* two 32-byte loads: one 64-byte load splits a cache line in most 210-byte blocks, and
     * streaming from DRAM measured 10-25 % slower that way */
    const __m512i L = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(a->ql + 64 * h))),
                                         _mm256_loadu_si256((const __m256i *)(a->ql + 64 * h + 32)), 1);
    const __m512i H = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(a->qh + 32 * h)));
    *q0 = _mm512_ternarylogic_epi32(L, m4, _mm512_and_si512(_mm512_sllv_epi16(H, shl), m30), 0xEA);
    *q1 = _mm512_ternarylogic_epi32(_mm512_srli_epi16(L, 4), m4, _mm512_and_si512(_mm512_srlv_epi16(H, shr), m30), 0xEA);
}

#endif /* ENG_CPU_TILE_AVX512_H */
