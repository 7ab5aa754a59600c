/*
 * kernels_avx512.c - AVX-512 VNNI kernels for the K-quants (Q4_K, Q5_K, Q6_K x Q8_K): a
 * one-row dot for decode and a many-row GEMM for prompts and batches. Compiled with
 * AVX-512F/BW/VL/DQ/VNNI flags; called only after kernels_dispatch.c checked the CPU.
 *
 * DESIGN
 * - The GEMM unpacks 16 weight rows at a time (one "tile") into unsigned bytes, transposed so
 *   that one 64-byte vector holds 4 consecutive columns of all 16 rows; vpdpbusd then takes a
 *   token's 4 activation bytes broadcast to every lane and adds 4 products to each row's
 *   32-bit sum. The tile is unpacked once and multiplied with every token of the step, so the
 *   cost of decoding 4/5/6-bit weights is paid once per step, not once per token.
 * - Both kernels compute the same integers and combine them in the same float order, so a
 *   token's result is bit-identical whether it ran alone (dot) or in a batch (GEMM): per
 *   256-block, S = sum over sub-blocks of scale * (sum q * x) and M = sum of min * bsum,
 *   exact in int32; then acc = fma(S, xd * d, acc) and acc = fma(-M, xd * dmin, acc)
 *   (Q6_K: values stored unsigned as q + 32, so M = 32 * sum scale * bsum and one
 *   fma((S - M), xd * d, acc)). tests/unit/test_kernels.c checks the bit identity.
 * - Every integer fits: |S| <= 8 sub-blocks * 63 * 31 * 127 * 32 < 2^31 for Q5_K, and
 *   16 * 127 * 63 * 127 * 16 < 2^31 for Q6_K.
 */
#include <immintrin.h>
#include <math.h>
#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "compiler.h"
#include "kernels.h"
#include "kernels_avx2.h"
#include "kernels_avx512.h"
#include "kscales.h"
#include "quant.h"
#include "rows4.h"
#include "tile_avx512.h"

static inline float f16(uint16_t h) { return _cvtsh_ss(h); }

static inline int32_t load_i32(const void *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}


/* ---- one row (decode) --------------------------------------------------------------------- */

/* Decode reads each weight once, so it runs at memory speed only if the vector work per block
 * is small; on Zen 4 (512-bit ops issued as two 256-bit halves) the vector pipes are the limit,
 * so the scale unpacking stays in scalar registers. Per 64 values: one broadcast load of the
 * packed bytes, the nibbles shifted into place, vpmaddubsw with the activations (pairs of
 * products, within int16: 63 * 128 * 2 < 2^15), and vpdpwssd against the sub-block scales
 * spread over the words. The block's S and M come out as vectors whose lane sums are the exact
 * integers; two blocks are reduced together, then folded into the row sum in the GEMM's order. */

/* Words 0..15 = byte i of v, words 16..31 = byte j (zero-extended); v holds the scales. */
static inline __m512i spread2(__m512i v, int i, int j) {
    const __m512i ctl = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16((short)(0x8000 | i))),
                                           _mm256_set1_epi16((short)(0x8000 | j)), 1);
    return _mm512_shuffle_epi8(v, ctl);
}

/* The scales [sc0..7 | mn0..7] of a Q4_K/Q5_K block in every 128-bit lane. */
static inline __m512i k4_scale_lanes(const uint8_t *packed) {
    uint32_t u[4];
    eng_k4_unpack_scales(packed, u);
    const uint64_t sc = u[0] | (uint64_t)u[1] << 32, mn = u[2] | (uint64_t)u[3] << 32;
    return _mm512_broadcast_i32x4(_mm_insert_epi64(_mm_cvtsi64_si128((long long)sc), (long long)mn, 1));
}

/* M as 8 lanes: each min against its sub-block's two bsums. */
static inline __m256i k4_min_lanes(__m512i sl, const eng_block_q8_k *y) {
    const __m128i dup = _mm_shuffle_epi8(_mm512_castsi512_si128(sl), _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15));
    return _mm256_madd_epi16(_mm256_cvtepu8_epi16(dup), _mm256_loadu_si256((const __m256i *)y->bsums));
}

/* Values 64c .. 64c+63 of a Q4_K/Q5_K block (qs: its 128 nibble bytes; qh: Q5_K's high bits or
 * NULL), unsigned, in order: chunk c's low nibbles, then its high nibbles. */
static inline __m512i k4_quarter(const uint8_t *qs, const uint8_t *qh, int c) {
    const __m512i nib = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);
    const __m512i raw = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(qs + 32 * c)));
    const __m512i lo = _mm512_srlv_epi16(raw, nib);
    if (!qh) return _mm512_and_si512(lo, _mm512_set1_epi8(0xF));
    /* bit 2c of qh[l] belongs to value 64c + l, bit 2c+1 to 64c + 32 + l: both moved to bit 4 */
    const __m512i h = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)qh));
    const __m512i hb = c < 2 ? _mm512_sllv_epi16(h, _mm512_inserti64x4(_mm512_set1_epi16((short)(4 - 2 * c)), _mm256_set1_epi16((short)(3 - 2 * c)), 1))
                             : _mm512_srlv_epi16(h, _mm512_inserti64x4(_mm512_set1_epi16((short)(2 * c - 4)), _mm256_set1_epi16((short)(2 * c - 3)), 1));
    return _mm512_ternarylogic_epi32(lo, _mm512_set1_epi8(0xF), _mm512_and_si512(hb, _mm512_set1_epi8(0x10)), 0xEA);
}

/* One Q4_K/Q5_K block: lane sums S (scaled value sums) and M (min terms). */
static inline void k4_block(const uint8_t *qs, const uint8_t *qh, const uint8_t *packed, const eng_block_q8_k *y, __m512i *S,
                            __m256i *M) {
    const __m512i sl = k4_scale_lanes(packed);
    __m512i acc = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        const __m512i p = _mm512_maddubs_epi16(k4_quarter(qs, qh, c), _mm512_loadu_si512(y->qs + 64 * c));
        acc = _mm512_dpwssd_epi32(acc, p, spread2(sl, 2 * c, 2 * c + 1));
    }
    *S = acc;
    *M = k4_min_lanes(sl, y);
}

/* (lane sum of a0, of a1, of b0, of b1) */
static inline __m128i reduce4(__m512i a0, __m512i a1, __m256i b0, __m256i b1) {
    const __m256i s0 = _mm256_add_epi32(_mm512_castsi512_si256(a0), _mm512_extracti64x4_epi64(a0, 1));
    const __m256i s1 = _mm256_add_epi32(_mm512_castsi512_si256(a1), _mm512_extracti64x4_epi64(a1, 1));
    const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(s0, s1), _mm256_hadd_epi32(b0, b1));
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

/* acc = fma(S, xd * d, acc); acc = fma(-M, xd * dmin, acc): the GEMM's order. */
static inline float k4_fold(float acc, int32_t S, int32_t M, eng_f16 d, eng_f16 dmin, float xd) {
    acc = fmaf((float)S, xd * f16(d), acc);
    return fmaf(-(float)M, xd * f16(dmin), acc);
}

/* The fetching dots fetch two to five lines of the row ahead each block or group
 * (eng_fetch_span), where a burst of the whole row before the product (as mm_run issues for the
 * other kernels) would hold every fill buffer while the product's own L2 reads queue behind DRAM. */

static DP_ALWAYS_INLINE float k4_dot(int64_t k, const uint8_t *w, size_t bb, size_t qs_off, ptrdiff_t qh_off,
                                     const eng_block_q8_k *y, const uint8_t *pf) {
    /* d and dmin lead both block types; scales follow them. Blocks go in pairs; an odd last one
     * is paired with zero lanes. */
    const int64_t nb = k / 256;
    float acc = 0;
    for (int64_t i = 0; i < nb; i += 2) {
        const bool two = i + 1 < nb;
        const uint8_t *b0 = w + (size_t)i * bb, *b1 = b0 + bb;
        __m512i S0, S1 = _mm512_setzero_si512();
        __m256i M0, M1 = _mm256_setzero_si256();
        eng_fetch_span(pf, (size_t)i * bb, (size_t)(i + 1) * bb);
        k4_block(b0 + qs_off, qh_off < 0 ? NULL : b0 + qh_off, b0 + 4, &y[i], &S0, &M0);
        if (two) eng_fetch_span(pf, (size_t)(i + 1) * bb, (size_t)(i + 2) * bb);
        if (two) k4_block(b1 + qs_off, qh_off < 0 ? NULL : b1 + qh_off, b1 + 4, &y[i + 1], &S1, &M1);
        const __m128i r = reduce4(S0, S1, M0, M1);
        const eng_f16 *h0 = (const eng_f16 *)b0, *h1 = (const eng_f16 *)b1;
        acc = k4_fold(acc, _mm_cvtsi128_si32(r), _mm_extract_epi32(r, 2), h0[0], h0[1], y[i].d);
        if (two) acc = k4_fold(acc, _mm_extract_epi32(r, 1), _mm_extract_epi32(r, 3), h1[0], h1[1], y[i + 1].d);
    }
    return acc;
}

static float dot_q4_k(int64_t k, const void *w, const void *x) {
    return k4_dot(k, w, sizeof(eng_block_q4_k), offsetof(eng_block_q4_k, qs), -1, x, NULL);
}
static float dot_q4_k_pf(int64_t k, const void *w, const void *x, const void *pf) {
    return k4_dot(k, w, sizeof(eng_block_q4_k), offsetof(eng_block_q4_k, qs), -1, x, pf);
}

static float dot_q5_k(int64_t k, const void *w, const void *x) {
    return k4_dot(k, w, sizeof(eng_block_q5_k), offsetof(eng_block_q5_k, qs), offsetof(eng_block_q5_k, qh), x, NULL);
}
static float dot_q5_k_pf(int64_t k, const void *w, const void *x, const void *pf) {
    return k4_dot(k, w, sizeof(eng_block_q5_k), offsetof(eng_block_q5_k, qs), offsetof(eng_block_q5_k, qh), x, pf);
}

/* Four rows' lane sums to [a0 a1 a2 a3 | b0 b1 b2 b3] (a: 16 lanes each, b: 8 lanes each). */
static inline __m256i reduce4x2(const __m512i a[4], const __m256i b[4]) {
    __m256i h[4];
    for (int r = 0; r < 4; r++)
        h[r] = _mm256_add_epi32(_mm512_castsi512_si256(a[r]), _mm512_extracti64x4_epi64(a[r], 1));
    return eng_reduce4x2(h, b);
}

/* Four rows against one activation row: each row's S and M exactly as k4_dot, the reduction
 * and the fold done once for the four (lane r = row r), in the same float order as the GEMM:
 * a row's bits are those of its single-row dot. One block of the four rows at a time, so the
 * fetches at pf move through the next four rows as fast as the product through these. */
static DP_ALWAYS_INLINE void k4_dot4r(int64_t k, const uint8_t *w, size_t rb, size_t bb, size_t qs_off,
                                      ptrdiff_t qh_off, const eng_block_q8_k *y, const uint8_t *pf, float out[4]) {
    const int64_t nb = k / 256;
    __m128 acc = _mm_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        __m512i S[4];
        __m256i M[4];
        const uint8_t *b = w + (size_t)i * bb;
        eng_fetch_span(pf, (size_t)(4 * i) * bb, (size_t)(4 * i + 4) * bb);
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            const uint8_t *br = b + (size_t)r * rb;
            k4_block(br + qs_off, qh_off < 0 ? NULL : br + qh_off, br + 4, &y[i], &S[r], &M[r]);
        }
        acc = eng_k4_fold4(acc, reduce4x2(S, M), b, rb, y[i].d);
    }
    _mm_storeu_ps(out, acc);
}

static void dot4r_q4_k(int64_t k, const void *w, size_t rb, const void *x, const void *pf, float out[4]) {
    k4_dot4r(k, w, rb, sizeof(eng_block_q4_k), offsetof(eng_block_q4_k, qs), -1, x, pf, out);
}
static void dot4r_q5_k(int64_t k, const void *w, size_t rb, const void *x, const void *pf, float out[4]) {
    k4_dot4r(k, w, rb, sizeof(eng_block_q5_k), offsetof(eng_block_q5_k, qs), offsetof(eng_block_q5_k, qh), x, pf, out);
}

/* Q6_K: S - M, with M = 32 * sum scale * bsum, as lane sums. 16-value sub-blocks, so a 64-value
 * vector spans four scales. */
static inline __m512i q6_block(const eng_block_q6_k *a, const eng_block_q8_k *y) {
    const __m512i quad = _mm512_set_epi16(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i sw = _mm512_castsi256_si512(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)a->scales)));
    __m512i acc0 = _mm512_setzero_si512(), acc1 = _mm512_setzero_si512();
#pragma GCC unroll 2
    for (int half = 0; half < 2; half++) {
        __m512i q0, q1;
        eng_half_q6_k(a, half, &q0, &q1);
        const __m512i s0 = _mm512_permutexvar_epi16(_mm512_add_epi16(quad, _mm512_set1_epi16((short)(8 * half))), sw);
        const __m512i s1 = _mm512_permutexvar_epi16(_mm512_add_epi16(quad, _mm512_set1_epi16((short)(8 * half + 4))), sw);
        acc0 = _mm512_dpwssd_epi32(acc0, _mm512_maddubs_epi16(q0, _mm512_loadu_si512(y->qs + 128 * half)), s0);
        acc1 = _mm512_dpwssd_epi32(acc1, _mm512_maddubs_epi16(q1, _mm512_loadu_si512(y->qs + 128 * half + 64)), s1);
    }
    const __m256i mw = _mm256_madd_epi16(_mm512_castsi512_si256(sw), _mm256_loadu_si256((const __m256i *)y->bsums));
    return _mm512_sub_epi32(_mm512_add_epi32(acc0, acc1), _mm512_castsi256_si512(_mm256_slli_epi32(mw, 5)));
}

static DP_ALWAYS_INLINE float q6_dot(int64_t k, const eng_block_q6_k *a, const eng_block_q8_k *y, const uint8_t *pf) {
    const int64_t nb = k / 256;
    float acc = 0;
    for (int64_t i = 0; i < nb; i += 2) { /* in pairs, as k4_dot */
        const bool two = i + 1 < nb;
        eng_fetch_span(pf, (size_t)i * sizeof *a, (size_t)(i + 1) * sizeof *a);
        const __m512i S0 = q6_block(&a[i], &y[i]);
        if (two) eng_fetch_span(pf, (size_t)(i + 1) * sizeof *a, (size_t)(i + 2) * sizeof *a);
        const __m512i S1 = two ? q6_block(&a[i + 1], &y[i + 1]) : _mm512_setzero_si512();
        const __m128i r = reduce4(S0, S1, _mm256_setzero_si256(), _mm256_setzero_si256());
        acc = fmaf((float)_mm_cvtsi128_si32(r), y[i].d * f16(a[i].d), acc);
        if (two) acc = fmaf((float)_mm_extract_epi32(r, 1), y[i + 1].d * f16(a[i + 1].d), acc);
    }
    return acc;
}

static float dot_q6_k(int64_t k, const void *w, const void *x) { return q6_dot(k, w, x, NULL); }
static float dot_q6_k_pf(int64_t k, const void *w, const void *x, const void *pf) { return q6_dot(k, w, x, pf); }

/* Four Q6_K rows, as k4_dot4r: S - M of each row as q6_dot, reduced and folded for the four. */
static void dot4r_q6_k(int64_t k, const void *w, size_t rb, const void *x, const void *pf, float out[4]) {
    const uint8_t *wb = w;
    const eng_block_q8_k *y = x;
    const int64_t nb = k / 256;
    const __m256i z = _mm256_setzero_si256(), zs[4] = {z, z, z, z};
    __m128 acc = _mm_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *b = wb + (size_t)i * sizeof(eng_block_q6_k);
        eng_fetch_span(pf, (size_t)(4 * i) * sizeof(eng_block_q6_k), (size_t)(4 * i + 4) * sizeof(eng_block_q6_k));
        __m512i S[4];
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) S[r] = q6_block((const eng_block_q6_k *)(const void *)(b + (size_t)r * rb), &y[i]);
        acc = eng_q6_fold4(acc, _mm256_castsi256_si128(reduce4x2(S, zs)), b, rb, offsetof(eng_block_q6_k, d), y[i].d);
    }
    _mm_storeu_ps(out, acc);
}

/* r[j] = sum of the 8 lanes of p[j], j = 0..7 */
static inline __m256i reduce8x8(const __m256i p[8]) {
    const __m256i g0 = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
    const __m256i g1 = _mm256_hadd_epi32(_mm256_hadd_epi32(p[4], p[5]), _mm256_hadd_epi32(p[6], p[7]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(g0, g1, 0x20), _mm256_permute2x128_si256(g0, g1, 0x31));
}

/* Q8_0: S = sum q x per 32-block, exact; acc = fma(S, d_w * d_x, acc) block by block (the GEMM's
 * order). vpdpbusd needs one unsigned side: the weights biased by 128, less 128 * sum x. The lane
 * sums of 8 blocks are reduced together. */
static DP_ALWAYS_INLINE float q8_0_dot(int64_t k, const eng_block_q8_0 *a, const eng_block_q8_0 *b, const uint8_t *pf) {
    const __m256i flip = _mm256_set1_epi8((char)0x80), ones = _mm256_set1_epi8(1);
    const int64_t nb = k / 32;
    float acc = 0;
    for (int64_t g = 0; g < nb; g += 8) {
        const int n = nb - g < 8 ? (int)(nb - g) : 8;
        eng_fetch_span(pf, (size_t)g * sizeof *a, (size_t)(g + n) * sizeof *a);
        __m256i P[8], X[8];
        for (int i = 0; i < 8; i++) {
            if (i >= n) {
                P[i] = X[i] = _mm256_setzero_si256();
                continue;
            }
            const __m256i xv = _mm256_loadu_si256((const __m256i *)b[g + i].qs);
            P[i] = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)a[g + i].qs), flip), xv);
            X[i] = _mm256_dpbusd_epi32(_mm256_setzero_si256(), ones, xv);
        }
        alignas(32) int32_t S[8];
        _mm256_store_si256((__m256i *)S, _mm256_sub_epi32(reduce8x8(P), _mm256_slli_epi32(reduce8x8(X), 7)));
        for (int i = 0; i < n; i++) acc = fmaf((float)S[i], f16(a[g + i].d) * f16(b[g + i].d), acc);
    }
    return acc;
}

static float dot_q8_0(int64_t k, const void *w, const void *x) { return q8_0_dot(k, w, x, NULL); }
static float dot_q8_0_pf(int64_t k, const void *w, const void *x, const void *pf) { return q8_0_dot(k, w, x, pf); }

/* ---- activations ------------------------------------------------------------------------- */

/* Lane n of the result: the sum of a[n]'s 16 lanes, by one fixed tree for every accumulator
 * (chunk halves, then chunk pairs, then lanes within a chunk: each add joins lanes of the same
 * accumulator), so a score's bits do not depend on its neighbours. 46 shuffles and adds for 16
 * sums, where one horizontal sum per accumulator costs about 5-9 each. epi32: the lanes hold
 * int32s, added as integers (any order gives the same sums); the shuffles move bits either way. */
static DP_ALWAYS_INLINE __m512 sum16_tree(const __m512 *a, bool epi32) {
#define ADD(x, y) (epi32 ? _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(x), _mm512_castps_si512(y))) : _mm512_add_ps(x, y))
    __m512 s[8], u[4], w[2];
    for (int i = 0; i < 8; i++) /* [a2i c0+c2, a2i c1+c3, a2i+1 c0+c2, a2i+1 c1+c3] */
        s[i] = ADD(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0x44), _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0xEE));
    for (int i = 0; i < 4; i++) /* chunk k: a[4i + k]'s four partial sums */
        u[i] = ADD(_mm512_shuffle_f32x4(s[2 * i], s[2 * i + 1], 0x88), _mm512_shuffle_f32x4(s[2 * i], s[2 * i + 1], 0xDD));
    for (int i = 0; i < 2; i++) /* chunk k: a[8i + k] l0+l2, a[8i + 4 + k] l0+l2, then l1+l3 of both */
        w[i] = ADD(_mm512_unpacklo_ps(u[2 * i], u[2 * i + 1]), _mm512_unpackhi_ps(u[2 * i], u[2 * i + 1]));
    const __m512d w0 = _mm512_castps_pd(w[0]), w1 = _mm512_castps_pd(w[1]);
    /* lane 4k + m: a[4m + k] */
    const __m512 z = ADD(_mm512_castpd_ps(_mm512_unpacklo_pd(w0, w1)), _mm512_castpd_ps(_mm512_unpackhi_pd(w0, w1)));
#undef ADD
    return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), z);
}
static inline __m512 sum16(const __m512 *a) { return sum16_tree(a, false); }

/* Q8_K exactly as the reference (quant_ref.c): the first element of largest magnitude sets
 * the scale, values round half to even (the default MXCSR mode), bsums per 16. */
void eng_quantize_q8_k_avx512(const float *x, void *y, int64_t n) {
    eng_block_q8_k *b = y;
    const __m512 sign = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    for (int64_t i = 0; i < n / 256; i++, x += 256) {
        __m512 m4[4]; /* four chains: one would wait on vmaxps's latency 16 times */
        for (int c = 0; c < 4; c++) m4[c] = _mm512_and_ps(_mm512_loadu_ps(x + 16 * c), sign);
        for (int j = 64; j < 256; j += 64)
            for (int c = 0; c < 4; c++) m4[c] = _mm512_max_ps(m4[c], _mm512_and_ps(_mm512_loadu_ps(x + j + 16 * c), sign));
        const float am = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(m4[0], m4[1]), _mm512_max_ps(m4[2], m4[3])));
        if (am == 0.0f) {
            memset(&b[i], 0, sizeof(b[i]));
            continue;
        }
        float max = 0.0f;
        for (int j = 0; j < 256; j += 16) {
            const __mmask16 hit = _mm512_cmp_ps_mask(_mm512_and_ps(_mm512_loadu_ps(x + j), sign), _mm512_set1_ps(am), _CMP_EQ_OQ);
            if (hit) {
                max = x[j + dp_ctz32((uint32_t)hit)];
                break;
            }
        }
        const float iscale = -127.0f / max;
        const __m512 is = _mm512_set1_ps(iscale);
        __m512 v[16]; /* int32 lanes, kept for the block sums: one tree, not 16 horizontal sums */
        for (int g = 0; g < 16; g++) {
            const __m512i q = _mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(is, _mm512_loadu_ps(x + 16 * g))), _mm512_set1_epi32(127));
            _mm_storeu_si128((__m128i *)(b[i].qs + 16 * g), _mm512_cvtsepi32_epi8(q));
            v[g] = _mm512_castsi512_ps(q);
        }
        /* |a sum of 16| <= 2032: fits the int16 */
        _mm256_storeu_si256((__m256i *)(void *)b[i].bsums, _mm512_cvtepi32_epi16(_mm512_castps_si512(sum16_tree(v, true))));
        b[i].d = 1.0f / iscale;
    }
}

/* ---- exp-based elementwise ops ------------------------------------------------------------ */

/* e^x: Cephes' expf (x = n ln2 + r, |r| <= ln2 / 2, degree-6 polynomial), within 2 ulp; the
 * scaling by 2^n with vscalefps, which gives 0 below the float range. */
static inline __m512 exp512(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-104.0f)); /* keeps r finite for x = -inf */
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}

static inline __mmask16 tail_mask(int64_t left) { return left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1); }

float eng_softmax_tile_avx512(float *s, int n, float scale, float *m, double *l) {
    const __m512 sv = _mm512_set1_ps(scale);
    __m512 mx = _mm512_set1_ps(-INFINITY);
    for (int p = 0; p < n; p += 16) {
        const __mmask16 k = tail_mask(n - p);
        const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, s + p), sv);
        _mm512_mask_storeu_ps(s + p, k, v);
        mx = _mm512_mask_max_ps(mx, k, mx, v);
    }
    const float mo = *m, tm = _mm512_reduce_max_ps(mx), M = tm > mo ? tm : mo;
    const __m512 mv = _mm512_set1_ps(M);
    __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();
    for (int p = 0; p < n; p += 16) {
        const __mmask16 k = tail_mask(n - p);
        const __m512 e = _mm512_maskz_mov_ps(k, exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, s + p), mv)));
        _mm512_mask_storeu_ps(s + p, k, e);
        a0 = _mm512_add_pd(a0, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
        a1 = _mm512_add_pd(a1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
    }
    const float c = mo == -INFINITY ? 0.0f : expf(mo - M);
    *l = *l * c + _mm512_reduce_add_pd(_mm512_add_pd(a0, a1));
    *m = M;
    return c;
}

void eng_swiglu_avx512(const float *g, const float *u, float *out, int64_t n) {
    const __m512 one = _mm512_set1_ps(1.0f);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = tail_mask(n - i);
        const __m512 x = _mm512_maskz_loadu_ps(m, g + i);
        const __m512 silu = _mm512_div_ps(x, _mm512_add_ps(one, exp512(_mm512_sub_ps(_mm512_setzero_ps(), x))));
        _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(silu, _mm512_maskz_loadu_ps(m, u + i)));
    }
}

void eng_silu_avx512(const float *x, float *out, int64_t n) {
    const __m512 one = _mm512_set1_ps(1.0f);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = tail_mask(n - i);
        const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
        _mm512_mask_storeu_ps(out + i, m, _mm512_div_ps(v, _mm512_add_ps(one, exp512(_mm512_sub_ps(_mm512_setzero_ps(), v)))));
    }
}

void eng_mul_sigmoid_avx512(float *x, const float *g, int64_t n) {
    const __m512 one = _mm512_set1_ps(1.0f);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = tail_mask(n - i);
        const __m512 sg = _mm512_div_ps(one, _mm512_add_ps(one, exp512(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_maskz_loadu_ps(m, g + i)))));
        _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), sg));
    }
}

/* ---- the delta rule, one token ----------------------------------------------------------- */

/* eng_delta_step_ref's arithmetic per element (s = S decay, then s + k delta), with the sums over
 * 16 lanes and four state rows in flight at once, the decayed row recomputed in the second pass
 * rather than stored and reloaded, and each row fetched into L2 6 rows (3 KB at dk = 128) ahead:
 * the hardware prefetcher stops at page boundaries, and 16 sequences' states (800 MB in
 * Qwen3.5-4B) stream through once a step. The kernel alone over 24 layers x 16 sequences x 32
 * heads on two threads: 56 ms a step with the AVX2 kernel, 36.5 with this one (22 GB/s of state
 * read and as much written; in-place streaming peaks near 28 here). */
/* rows fetched ahead, into L2; in the measurement above 8 rows gave 39 ms, 16 42, none 52, and
 * 8 rows into L1 40 (L1's few fill buffers cannot hold 4 KB of misses) */
#define DS_AHEAD 6
/* NR (1..4) state rows from row j: the same arithmetic per row whatever NR, so the rows of a
 * remainder get the bits they would get in a group of four. */
static DP_ALWAYS_INLINE void delta_rows(int NR, float *S, int j, const float *k, const float *v,
                                                             const float *q, __m512 vd, float beta, int dk, int dv,
                                                             float *o) {
    const int nz = dk / 16;
    float *R = S + (size_t)j * dk;
    if (j + NR + DS_AHEAD <= dv)
        for (int i = 0; i < NR * dk; i += 16) _mm_prefetch((const char *)(R + (size_t)DS_AHEAD * dk + i), _MM_HINT_T1);
    __m512 u[4], d[4], a[4];
    for (int r = 0; r < NR; r++) u[r] = a[r] = _mm512_setzero_ps();
    for (int z = 0; z < nz; z++) {
        const __m512 kz = _mm512_loadu_ps(k + 16 * z);
        for (int r = 0; r < NR; r++) u[r] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_loadu_ps(R + (size_t)r * dk + 16 * z), vd), kz, u[r]);
    }
    for (int r = 0; r < NR; r++) d[r] = _mm512_set1_ps(beta * (v[j + r] - _mm512_reduce_add_ps(u[r])));
    for (int z = 0; z < nz; z++) {
        const __m512 kz = _mm512_loadu_ps(k + 16 * z), qz = _mm512_loadu_ps(q + 16 * z);
        for (int r = 0; r < NR; r++) {
            float *p = R + (size_t)r * dk + 16 * z;
            const __m512 s_ = _mm512_fmadd_ps(kz, d[r], _mm512_mul_ps(_mm512_loadu_ps(p), vd));
            _mm512_storeu_ps(p, s_);
            a[r] = _mm512_fmadd_ps(s_, qz, a[r]);
        }
    }
    for (int r = 0; r < NR; r++) o[j + r] = _mm512_reduce_add_ps(a[r]);
}

void eng_delta_step_avx512(float *S, const float *k, const float *v, const float *q, float decay, float beta, int dk,
                           int dv, float *o) {
    if (dk % 16) { /* not a model shape seen so far */
        eng_delta_step_ref(S, k, v, q, decay, beta, dk, dv, o);
        return;
    }
    const __m512 vd = _mm512_set1_ps(decay);
    int j = 0;
    for (; j + 4 <= dv; j += 4) delta_rows(4, S, j, k, v, q, vd, beta, dk, dv, o);
    for (; j < dv; j++) delta_rows(1, S, j, k, v, q, vd, beta, dk, dv, o);
}

/* ---- the delta rule, a chunk of tokens --------------------------------------------------- */

/* d[j][dofs + i] = s[i][so + j] for i, j < 16: a 16 x 16 block transposed in registers. */
static DP_ALWAYS_INLINE void dc_tr16(const float *const *s, int so, float *const *d, int dofs) {
    __m512 r[16], t[16];
    for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_ps(s[i] + so);
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) {
        r[4 * i + 0] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0x44);
        r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0xEE);
        r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    for (int h = 0; h < 2; h++)
        for (int j = 0; j < 4; j++) {
            t[8 * h + j] = _mm512_shuffle_f32x4(r[8 * h + j], r[8 * h + j + 4], 0x88);
            t[8 * h + j + 4] = _mm512_shuffle_f32x4(r[8 * h + j], r[8 * h + j + 4], 0xDD);
        }
    for (int j = 0; j < 8; j++) {
        r[j] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0x88);
        r[j + 8] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0xDD);
    }
    for (int i = 0; i < 16; i++) _mm512_storeu_ps(d[i] + dofs, r[i]);
}

/* dst[j][i] = src[i][j] for i < R, j < N (row pointers; R and N multiples of 16). */
static void dc_transpose(int R, int N, const float *const *src, float *const *dst) {
    for (int i0 = 0; i0 < R; i0 += 16)
        for (int j0 = 0; j0 < N; j0 += 16) dc_tr16(src + i0, j0, dst + j0, i0);
}

#define DCT_NAME eng_delta_chunk_avx512
#define DCT_FALLBACK eng_delta_chunk_avx2
#define DCT_V __m512
#define DCT_W 16
#define DCT_LOAD(p) _mm512_loadu_ps(p)
#define DCT_STORE(p, x) _mm512_storeu_ps(p, x)
#define DCT_SET1(f) _mm512_set1_ps(f)
#define DCT_ZERO() _mm512_setzero_ps()
#define DCT_MUL(a, b) _mm512_mul_ps(a, b)
#define DCT_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define DCT_FNMA(a, b, c) _mm512_fnmadd_ps(a, b, c)
#define DCT_MR 4
#define DCT_NR 4
#define DCT_TRANSPOSE dc_transpose
#include "delta_chunk_tiled.h"

/* ---- attention over an F16 or a Q8_0 cache, query heads grouped per KV head ----------------- */

#define KV_CHUNK 32 /* rows: 16 KB of widened V */

/* kind: how a cached row is held, ENG_TYPE_F16 (halves), ENG_TYPE_F32 (floats: a row widened from
 * either) or ENG_TYPE_Q8_0 (blocks). A row's 16 values from d on (d a multiple of 16): halves
 * converted, floats as they are, or a Q8_0 block's quants times its scale (one rounding, the
 * product eng_q8_0_to_f32_row stores). A row widened to floats gives the same values, so the
 * same bits downstream. */
static DP_ALWAYS_INLINE __m512 kv_row16(int kind, const uint8_t *r, int d) {
    if (kind == ENG_TYPE_F32) return _mm512_loadu_ps((const float *)(const void *)r + d);
    if (kind == ENG_TYPE_F16) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(r + 2 * (size_t)d)));
    const eng_block_q8_0 *b = (const eng_block_q8_0 *)(const void *)r + d / 32;
    const __m512i q = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(b->qs + d % 32)));
    return _mm512_mul_ps(_mm512_cvtepi32_ps(q), _mm512_set1_ps(_cvtsh_ss(b->d)));
}

/* One value of a row, as kv_row16 makes it. */
static DP_ALWAYS_INLINE float kv_val(int kind, const uint8_t *r, int d) {
    if (kind == ENG_TYPE_F32) return ((const float *)(const void *)r)[d];
    if (kind == ENG_TYPE_F16) return _cvtsh_ss(((const uint16_t *)(const void *)r)[d]);
    const eng_block_q8_0 *b = (const eng_block_q8_0 *)(const void *)r + d / 32;
    return (float)b->qs[d % 32] * _cvtsh_ss(b->d);
}


/* Scores are computed with the positions across the lanes: each score is one chain of fmas
 * over d = 0 .. hd - 1 in order, and K is read transposed, in panels of ENG_KT_PANEL positions,
 * [hd][ENG_KT_PANEL] per panel, so a vector holds one dimension of 16 positions. No lane sums
 * are reduced at the end (a 4 x 4 block of lane sums costs a quarter of its fmas again in
 * shuffles and adds), and a query value is broadcast once for up to 64 positions. The F16 cache
 * keeps K in that layout (kernels.h), so the panels are read as stored, halves converted in the
 * loop, or once widened to floats for a block that many tokens read: the same values, the same
 * chains, the same bits. */

/* One dimension's 16 positions of a panel, from element i: halves converted, or floats. */
static DP_ALWAYS_INLINE __m512 kt16(bool half, const void *kt, size_t i) {
    return half ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)kt + i)))
                : _mm512_loadu_ps((const float *)kt + i);
}

/* Scores of RT query rows (q, rows lq floats apart) against the positions of PV vectors of a
 * panel (kt, [hd][ENG_KT_PANEL]); the last vector's lanes from position np on are not stored
 * (their K values may be anything). pf, when not NULL, is the next panel: fetched into L2 line
 * by line as this one is read, so a decode step's cache reads overlap its fmas. */
static DP_ALWAYS_INLINE void dots_tile(bool half, const float *q, size_t lq, int RT, const void *kt, int PV, int np,
                                       int hd, float *s, size_t ls, const void *pf) {
    const int W = ENG_KT_PANEL, esz = half ? 2 : 4;
    __m512 acc[6][4];
    for (int r = 0; r < RT; r++)
        for (int v = 0; v < PV; v++) acc[r][v] = _mm512_setzero_ps();
    for (int d = 0; d < hd; d++) {
        if (pf) eng_prefetch_l2((const char *)pf + (size_t)d * W * esz, (size_t)W * esz);
        __m512 kv[4];
        for (int v = 0; v < PV; v++) kv[v] = kt16(half, kt, (size_t)d * W + 16 * v);
        for (int r = 0; r < RT; r++) {
            const __m512 qb = _mm512_set1_ps(q[(size_t)r * lq + d]);
            for (int v = 0; v < PV; v++) acc[r][v] = _mm512_fmadd_ps(qb, kv[v], acc[r][v]);
        }
    }
    const __mmask16 last = (__mmask16)(np - 16 * (PV - 1) >= 16 ? 0xFFFF : (1u << (np - 16 * (PV - 1))) - 1);
    for (int r = 0; r < RT; r++)
        for (int v = 0; v < PV; v++)
            _mm512_mask_storeu_ps(s + (size_t)r * ls + 16 * v, v == PV - 1 ? last : 0xFFFF, acc[r][v]);
}

/* Rows in tiles of 6 (specialized per count, so the 24 accumulators stay in registers) against
 * np <= 16 PV positions; the first tile fetches the next panel. */
static DP_ALWAYS_INLINE void dots_rows(bool half, const float *q, size_t lq, int G, const void *kt, int PV, int np,
                                       int hd, float *s, size_t ls, const void *pf) {
    for (int r0 = 0; r0 < G; r0 += 6) {
        const float *qr = q + (size_t)r0 * lq;
        float *sr = s + (size_t)r0 * ls;
        const void *p = r0 ? NULL : pf;
        switch (G - r0 < 6 ? G - r0 : 6) {
        case 1: dots_tile(half, qr, lq, 1, kt, PV, np, hd, sr, ls, p); break;
        case 2: dots_tile(half, qr, lq, 2, kt, PV, np, hd, sr, ls, p); break;
        case 3: dots_tile(half, qr, lq, 3, kt, PV, np, hd, sr, ls, p); break;
        case 4: dots_tile(half, qr, lq, 4, kt, PV, np, hd, sr, ls, p); break;
        case 5: dots_tile(half, qr, lq, 5, kt, PV, np, hd, sr, ls, p); break;
        default: dots_tile(half, qr, lq, 6, kt, PV, np, hd, sr, ls, p); break;
        }
    }
}

/* Scores against n positions of K panels kst bytes apart. A panel (16 KB of halves or 32 KB of
 * floats for a 128-wide head) is contiguous, so it stays in L1 while every row tile passes
 * over it. s rows ls apart. */
static DP_ALWAYS_INLINE void dots_panels(bool half, const float *q, size_t lq, int G, const void *k, size_t kst, int n,
                                         int hd, float *s, size_t ls) {
    const int W = ENG_KT_PANEL;
    if (hd % 16) { /* not a model shape seen so far: the same chains, one score at a time */
        for (int g = 0; g < G; g++)
            for (int p = 0; p < n; p++) {
                const char *kp = (const char *)k + (size_t)(p / W) * kst;
                float a = 0;
                for (int d = 0; d < hd; d++)
                    a = fmaf(q[(size_t)g * lq + d],
                             half ? _cvtsh_ss(((const uint16_t *)(const void *)kp)[d * W + p % W])
                                  : ((const float *)(const void *)kp)[d * W + p % W],
                             a);
                s[(size_t)g * ls + p] = a;
            }
        return;
    }
    for (int p0 = 0; p0 < n; p0 += W) {
        const int np = n - p0 < W ? n - p0 : W;
        const char *kp = (const char *)k + (size_t)(p0 / W) * kst;
        const void *pf = half && p0 + W < n ? kp + kst : NULL;
        switch ((np + 15) / 16) {
        case 1: dots_rows(half, q, lq, G, kp, 1, np, hd, s + p0, ls, pf); break;
        case 2: dots_rows(half, q, lq, G, kp, 2, np, hd, s + p0, ls, pf); break;
        case 3: dots_rows(half, q, lq, G, kp, 3, np, hd, s + p0, ls, pf); break;
        default: dots_rows(half, q, lq, G, kp, 4, np, hd, s + p0, ls, pf); break;
        }
    }
}

void eng_kv_dots_f16p_avx512(const float *q, size_t lq, int G, const void *k, size_t kst, int n, int hd, float *s,
                             size_t ls) {
    dots_panels(true, q, lq, G, k, kst, n, hd, s, ls);
}

void eng_kv_dots_f16w_avx512(const float *q, size_t lq, int G, const void *k, size_t kst, int n, int hd, float *s,
                             size_t ls) {
    dots_panels(false, q, lq, G, k, kst, n, hd, s, ls);
}

/* acc_g += sum_p w_g[p] v_p over 64 dims (nz vectors of 16) for up to 6 heads: per element the
 * fmas of the one-head kernel, in row order. Six heads keep 24 accumulators in registers, so a
 * row's 4 vectors are loaded once per 24 fmas. */
static DP_ALWAYS_INLINE void mix_4(int kind, float *acc, size_t la, int gn, const float *w, size_t lw,
                                                        const uint8_t *v, size_t vst, int d0, int n, int nz) {
    __m512 a[6][4];
    for (int g = 0; g < gn; g++)
        for (int z = 0; z < nz; z++) a[g][z] = _mm512_loadu_ps(acc + (size_t)g * la + 16 * z);
    for (int p = 0; p < n; p++) {
        __m512 vv[4];
        for (int z = 0; z < nz; z++) vv[z] = kv_row16(kind, v + (size_t)p * vst, d0 + 16 * z);
        for (int g = 0; g < gn; g++) {
            const __m512 wv = _mm512_set1_ps(w[(size_t)g * lw + p]);
            for (int z = 0; z < nz; z++) a[g][z] = _mm512_fmadd_ps(wv, vv[z], a[g][z]);
        }
    }
    for (int g = 0; g < gn; g++)
        for (int z = 0; z < nz; z++) _mm512_storeu_ps(acc + (size_t)g * la + 16 * z, a[g][z]);
}

static DP_ALWAYS_INLINE void kv_mix(int kind, float *acc, size_t la, int G, const float *w, size_t lw,
                                                         const void *v, size_t vst, int n, int hd) {
    const uint8_t *vb = v;
    if (hd % 16) { /* not a model shape seen so far (a Q8_0 cache's heads are multiples of 32) */
        for (int g = 0; g < G; g++)
            for (int p = 0; p < n; p++)
                for (int d = 0; d < hd; d++)
                    acc[(size_t)g * la + d] =
                        fmaf(w[(size_t)g * lw + p], kv_val(kind, vb + (size_t)p * vst, d), acc[(size_t)g * la + d]);
        return;
    }
    /* rows in L1-sized chunks; per element the fmas stay in row order. Rows that lie one after
     * another (a KV head's rows of a block, as the CPU cache keeps V) are left to the hardware
     * prefetcher: fetching them by hand as well cost a quarter of the kernel's time in
     * prefetch instructions waiting for fill buffers. */
    const size_t rb = eng_row_size(kind, hd);
    const bool fetch = kind != ENG_TYPE_F32 && vst != rb;
    for (int p0 = 0; p0 < n; p0 += KV_CHUNK) {
        const int np = n - p0 < KV_CHUNK ? n - p0 : KV_CHUNK;
        if (fetch) eng_prefetch_kv(vb, vst, p0, KV_CHUNK, n, rb);
        for (int g0 = 0; g0 < G; g0 += 6) {
            const int gn = G - g0 < 6 ? G - g0 : 6;
            for (int d0 = 0; d0 < hd; d0 += 64) {
                const int nz = (hd - d0) / 16 < 4 ? (hd - d0) / 16 : 4;
                float *ag = acc + (size_t)g0 * la + d0;
                const float *wg = w + (size_t)g0 * lw + p0;
                const uint8_t *vd = vb + (size_t)p0 * vst;
#define MIX(GN)                                                                                                        \
    (nz == 4 ? mix_4(kind, ag, la, GN, wg, lw, vd, vst, d0, np, 4) : mix_4(kind, ag, la, GN, wg, lw, vd, vst, d0, np, nz))
                switch (gn) {
                case 1: MIX(1); break;
                case 2: MIX(2); break;
                case 3: MIX(3); break;
                case 4: MIX(4); break;
                case 5: MIX(5); break;
                default: MIX(6); break;
                }
#undef MIX
            }
        }
    }
}

void eng_kv_mix_f16_avx512(float *acc, size_t la, int G, const float *w, size_t lw, const void *v, size_t vst, int n, int hd) {
    kv_mix(ENG_TYPE_F16, acc, la, G, w, lw, v, vst, n, hd);
}
void eng_kv_mix_f16w_avx512(float *acc, size_t la, int G, const float *w, size_t lw, const void *v, size_t vst, int n, int hd) {
    kv_mix(ENG_TYPE_F32, acc, la, G, w, lw, v, vst, n, hd);
}
void eng_kv_mix_q8_0_avx512(float *acc, size_t la, int G, const float *w, size_t lw, const void *v, size_t vst, int n,
                            int hd) {
    kv_mix(ENG_TYPE_Q8_0, acc, la, G, w, lw, v, vst, n, hd);
}

/* Scores over whole rows (a Q8_0 cache's, as stored or widened to floats), a row converted once
 * for up to 8 heads. Per (head, row): two chains of fmas over the row's 16-value pieces, the
 * even pieces and the odd ones, added, then the 16 lanes summed by one fixed tree; the lanes of
 * other heads only share the shuffles, so a score does not depend on its group. */
static DP_ALWAYS_INLINE void dots_row8(int kind, const float *q, size_t lq, int gn, const uint8_t *r, int hd,
                                       float *s, size_t ls) {
    __m512 a[8], b[8];
    for (int g = 0; g < 8; g++) a[g] = b[g] = _mm512_setzero_ps();
    for (int d = 0; d < hd; d += 32) {
        const __m512 k0 = kv_row16(kind, r, d), k1 = kv_row16(kind, r, d + 16);
        for (int g = 0; g < gn; g++) {
            a[g] = _mm512_fmadd_ps(_mm512_loadu_ps(q + (size_t)g * lq + d), k0, a[g]);
            b[g] = _mm512_fmadd_ps(_mm512_loadu_ps(q + (size_t)g * lq + d + 16), k1, b[g]);
        }
    }
    for (int g = 0; g < 8; g++) a[g] = _mm512_add_ps(a[g], b[g]);
    /* quarters 0 + 2 and 1 + 3 of two heads at a time, then those two sums, then the four
     * lanes of each quarter: pairs, then the pairs' sums */
    __m512 x[4], y[2];
    for (int i = 0; i < 4; i++)
        x[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0x44),
                             _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0xEE));
    for (int i = 0; i < 2; i++) {
        y[i] = _mm512_add_ps(_mm512_shuffle_f32x4(x[2 * i], x[2 * i + 1], 0x88),
                             _mm512_shuffle_f32x4(x[2 * i], x[2 * i + 1], 0xDD));
        y[i] = _mm512_add_ps(y[i], _mm512_permute_ps(y[i], 0xB1));
        y[i] = _mm512_add_ps(y[i], _mm512_permute_ps(y[i], 0x4E));
    }
    float t[32]; /* unaligned stores: a Windows stack keeps only 16-byte alignment */
    _mm512_storeu_ps(t, y[0]);
    _mm512_storeu_ps(t + 16, y[1]);
    for (int g = 0; g < gn; g++) s[(size_t)g * ls] = t[4 * g];
}

static DP_ALWAYS_INLINE void dots_rows8(int kind, const float *q, size_t lq, int G, const void *k, size_t kst,
                                        int n, int hd, float *s, size_t ls) {
    const uint8_t *kb = k;
    if (hd % 32) { /* not a Q8_0 cache's head size: one fma chain per score */
        for (int g = 0; g < G; g++)
            for (int p = 0; p < n; p++) {
                float a = 0;
                for (int d = 0; d < hd; d++) a = fmaf(q[(size_t)g * lq + d], kv_val(kind, kb + (size_t)p * kst, d), a);
                s[(size_t)g * ls + p] = a;
            }
        return;
    }
    const size_t rb = eng_row_size(kind, hd);
    for (int p0 = 0; p0 < n; p0 += KV_CHUNK) {
        if (kind != ENG_TYPE_F32) eng_prefetch_kv(kb, kst, p0, KV_CHUNK, n, rb);
        const int p1 = n - p0 < KV_CHUNK ? n : p0 + KV_CHUNK;
        for (int g0 = 0; g0 < G; g0 += 8) {
            const float *qg = q + (size_t)g0 * lq;
            float *sg = s + (size_t)g0 * ls;
            const int gn = G - g0 < 8 ? G - g0 : 8;
            for (int p = p0; p < p1; p++) {
                const uint8_t *r = kb + (size_t)p * kst;
                switch (gn) { /* specialized so the accumulators stay in registers */
                case 1: dots_row8(kind, qg, lq, 1, r, hd, sg + p, ls); break;
                case 2: dots_row8(kind, qg, lq, 2, r, hd, sg + p, ls); break;
                case 3: dots_row8(kind, qg, lq, 3, r, hd, sg + p, ls); break;
                case 4: dots_row8(kind, qg, lq, 4, r, hd, sg + p, ls); break;
                case 5: dots_row8(kind, qg, lq, 5, r, hd, sg + p, ls); break;
                case 6: dots_row8(kind, qg, lq, 6, r, hd, sg + p, ls); break;
                case 7: dots_row8(kind, qg, lq, 7, r, hd, sg + p, ls); break;
                default: dots_row8(kind, qg, lq, 8, r, hd, sg + p, ls); break;
                }
            }
        }
    }
}

void eng_kv_dots_q8_0_avx512(const float *q, size_t lq, int G, const void *k, size_t kst, int n, int hd, float *s,
                             size_t ls) {
    dots_rows8(ENG_TYPE_Q8_0, q, lq, G, k, kst, n, hd, s, ls);
}

void eng_kv_dots_f32r_avx512(const float *q, size_t lq, int G, const void *k, size_t kst, int n, int hd, float *s,
                             size_t ls) {
    dots_rows8(ENG_TYPE_F32, q, lq, G, k, kst, n, hd, s, ls);
}

/* ---- GEMM --------------------------------------------------------------------------------- */

#define TILE 16 /* weight rows per tile: one per 32-bit lane */
#define NT 8    /* tokens per pass: 3 accumulators each stay in the 32 vector registers */

/* A tile block in the scratch: q[64][16][4] (column group, row, 4 values), sc[nsub][16],
 * mp[8][16] (pairs of int16), d[16], dm[16]. */
#define TB_Q 4096
#define TB_SC(nsub) ((size_t)(nsub) * 64)
#define TB_BYTES(nsub) (TB_Q + TB_SC(nsub) + 8 * 64 + 2 * 64)

/* enough for a K-quant tile (k / 256 blocks) or a Q8_0 tile (k / 32 blocks, TB8 bytes each) */
size_t eng_gemm_ws_avx512(int64_t k) { return (size_t)(k / 256) * TB_BYTES(16) + (size_t)(k / 32 + 1) * (8 * 64 + 128) + 64; }

enum { KQ4, KQ5, KQ6 };

/* Unpacks rows [0, nr) (nr <= 16; missing rows read as zero blocks) of all nb blocks into tb. */
static DP_ALWAYS_INLINE void unpack_tile(int kind, const uint8_t *w, size_t row_bytes, int nr,
                                                              int64_t nb, uint8_t *tb) {
    static const alignas(64) uint8_t zero_block[256];
    const size_t bb = kind == KQ4 ? sizeof(eng_block_q4_k) : kind == KQ5 ? sizeof(eng_block_q5_k) : sizeof(eng_block_q6_k);
    const int nsub = kind == KQ6 ? 16 : 8;
    /* d and dmin as one dword per row (Q6_K: the dword ending with d) */
    const int d_off = kind == KQ6 ? (int)offsetof(eng_block_q6_k, d) - 2 : 0;
    int32_t offs[TILE];
    for (int r = 0; r < TILE; r++) offs[r] = (int32_t)((size_t)r * row_bytes) + d_off;
    const __m512i vidx = _mm512_loadu_si512(offs);
    const __mmask16 live = (__mmask16)((1u << nr) - 1);
    eng_read_through(w, (size_t)nr * row_bytes);
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *o = tb + (size_t)b * TB_BYTES(nsub);
        const uint8_t *rp[TILE];
        for (int r = 0; r < TILE; r++) rp[r] = r < nr ? w + (size_t)r * row_bytes + (size_t)b * bb : zero_block;
        if (kind == KQ4) {
            /* Transpose the packed bytes, then split the nibbles: packed dword i of half h (qs
             * bytes 64h + 4i ..) holds values 64c + 4(i % 8) .. (low nibbles) and 32 more (high),
             * c = 2h + i / 8: column groups 16c + i % 8 and 16c + 8 + i % 8. */
            const __m512i m4 = _mm512_set1_epi8(0xF);
            for (int h = 0; h < 2; h++) {
                __m512i v[16];
                for (int r = 0; r < TILE; r++) v[r] = _mm512_loadu_si512(rp[r] + offsetof(eng_block_q4_k, qs) + 64 * h);
                eng_transpose16(v);
                for (int i = 0; i < 16; i++) {
                    const int g = 16 * (2 * h + i / 8) + i % 8;
                    _mm512_store_si512(o + 64 * g, _mm512_and_si512(v[i], m4));
                    _mm512_store_si512(o + 64 * (g + 8), _mm512_and_si512(_mm512_srli_epi16(v[i], 4), m4));
                }
            }
        } else if (kind == KQ5) {
            for (int qi = 0; qi < 4; qi++) {
                __m512i v[16];
                for (int r = 0; r < TILE; r++) v[r] = kind == KQ4 ? eng_quarter_q4_k(rp[r], qi) : eng_quarter_q5_k(rp[r], qi);
                eng_transpose16(v);
                for (int i = 0; i < 16; i++) _mm512_store_si512(o + 64 * (16 * qi + i), v[i]);
            }
        } else {
            /* Transpose ql (2 x 64 bytes) and qh (64 bytes) as they are, then assemble: for half h
             * and k < 8, ql dwords 16h + k and 16h + 8 + k with qh dword 8h + k give the column
             * groups 32h + k (+8, +16, +24): low nibbles with qh bits 0-1 and 2-3, high nibbles
             * with bits 4-5 and 6-7. */
            const __m512i m4 = _mm512_set1_epi8(0xF), m3 = _mm512_set1_epi8(3);
            __m512i l[2][16], hv[16];
            for (int r = 0; r < TILE; r++) {
                l[0][r] = _mm512_loadu_si512(rp[r] + offsetof(eng_block_q6_k, ql));
                l[1][r] = _mm512_loadu_si512(rp[r] + offsetof(eng_block_q6_k, ql) + 64);
                hv[r] = _mm512_loadu_si512(rp[r] + offsetof(eng_block_q6_k, qh));
            }
            eng_transpose16(l[0]);
            eng_transpose16(l[1]);
            eng_transpose16(hv);
            for (int h = 0; h < 2; h++)
                for (int k = 0; k < 8; k++) {
                    const __m512i a = l[h][k], bq = l[h][8 + k], q = hv[8 * h + k];
                    const int g = 32 * h + k;
                    _mm512_store_si512(o + 64 * g, _mm512_or_si512(_mm512_and_si512(a, m4),
                                                                   _mm512_slli_epi16(_mm512_and_si512(q, m3), 4)));
                    _mm512_store_si512(o + 64 * (g + 8),
                                       _mm512_or_si512(_mm512_and_si512(bq, m4),
                                                       _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(q, 2), m3), 4)));
                    _mm512_store_si512(o + 64 * (g + 16),
                                       _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(a, 4), m4),
                                                       _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(q, 4), m3), 4)));
                    _mm512_store_si512(o + 64 * (g + 24),
                                       _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(bq, 4), m4),
                                                       _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(q, 6), m3), 4)));
                }
        }
        __m512i *sc = (__m512i *)(void *)(o + TB_Q), *mp = sc + nsub;
        /* scales transposed as bytes (one row per lane), then widened: sc[s] one dword per row;
         * mp[j] int16 pairs for vpdpwssd against bsums 2j, 2j+1 */
        if (kind == KQ6) {
            __m128i t[16];
            eng_tile_scale_bytes(rp, offsetof(eng_block_q6_k, scales), t);
            for (int s = 0; s < 16; s++) _mm512_store_si512(sc + s, _mm512_cvtepi8_epi32(t[s]));
            for (int j = 0; j < 8; j++) {
                const __m256i pr = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_unpacklo_epi8(t[2 * j], t[2 * j + 1])),
                                                           _mm_unpackhi_epi8(t[2 * j], t[2 * j + 1]), 1);
                _mm512_store_si512(mp + j, _mm512_slli_epi16(_mm512_cvtepi8_epi16(pr), 5)); /* M = 32 sum scale bsum */
            }
        } else {
            /* the 6-bit fields of model-formats.md §2.4, for 16 rows at once */
            __m128i scj[8], mnj[8];
            eng_k4_scales16(rp, kind == KQ4 ? offsetof(eng_block_q4_k, scales) : offsetof(eng_block_q5_k, scales), scj, mnj);
            for (int j = 0; j < 8; j++) {
                _mm512_store_si512(sc + j, _mm512_cvtepu8_epi32(scj[j]));
                const __m512i m32 = _mm512_cvtepu8_epi32(mnj[j]);
                _mm512_store_si512(mp + j, _mm512_or_si512(m32, _mm512_slli_epi32(m32, 16))); /* each min twice */
            }
        }
        const __m512i g = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, vidx, w + (size_t)b * bb, 1);
        float *d = (float *)(void *)(mp + 8), *dm = d + 16;
        if (kind == KQ6) {
            const __m512 dv = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(g, 16)));
            _mm512_store_ps(d, dv);
            _mm512_store_ps(dm, dv);
        } else {
            _mm512_store_ps(d, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(g)));
            _mm512_store_ps(dm, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(g, 16))));
        }
    }
}

/* y[t][0..15] for nt tokens against one unpacked tile. */
static DP_ALWAYS_INLINE void tile_tokens(const uint8_t *tb, int64_t nb, int nsub, bool int_mins,
                                                              const uint8_t *x, size_t xs, int nt, float *y, int ldy,
                                                              __mmask16 rmask, const uint8_t *pf, size_t pfb) {
    const int groups = 64 / nsub; /* column groups of 4 per sub-block */
    __m512 f[NT];
    for (int t = 0; t < NT; t++) f[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        for (size_t l = 0; l < pfb; l += 64) _mm_prefetch((const char *)pf + (size_t)b * pfb + l, _MM_HINT_T1);
        const uint8_t *o = tb + (size_t)b * TB_BYTES(nsub);
        const int32_t *sc = (const int32_t *)(const void *)(o + TB_Q), *mp = sc + 16 * nsub;
        const float *d = (const float *)(mp + 16 * 8), *dm = d + 16;
        const eng_block_q8_k *xb[NT];
        for (int t = 0; t < nt; t++) xb[t] = (const eng_block_q8_k *)(const void *)(x + (size_t)t * xs) + b;
        __m512i S[NT], a[NT];
        for (int t = 0; t < NT; t++) S[t] = _mm512_setzero_si512();
        for (int s = 0; s < nsub; s++) {
            for (int t = 0; t < NT; t++) a[t] = _mm512_setzero_si512();
            for (int g = 0; g < groups; g++) {
                const int col = s * groups + g;
                const __m512i wv = _mm512_load_si512(o + 64 * col);
                for (int t = 0; t < nt; t++) a[t] = _mm512_dpbusd_epi32(a[t], wv, _mm512_set1_epi32(load_i32(xb[t]->qs + 4 * col)));
            }
            const __m512i scv = _mm512_load_si512(sc + 16 * s);
            for (int t = 0; t < nt; t++) S[t] = _mm512_add_epi32(S[t], _mm512_mullo_epi32(a[t], scv));
        }
        for (int t = 0; t < NT; t++) a[t] = _mm512_setzero_si512();
        for (int j = 0; j < 8; j++) {
            const __m512i mv = _mm512_load_si512(mp + 16 * j);
            for (int t = 0; t < nt; t++) a[t] = _mm512_dpwssd_epi32(a[t], mv, _mm512_set1_epi32(load_i32(xb[t]->bsums + 2 * j)));
        }
        const __m512 dv = _mm512_load_ps(d), dmv = _mm512_load_ps(dm);
        for (int t = 0; t < nt; t++) {
            const __m512 xd = _mm512_set1_ps(xb[t]->d);
            if (int_mins) {
                f[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(S[t], a[t])), _mm512_mul_ps(xd, dv), f[t]);
            } else {
                f[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S[t]), _mm512_mul_ps(xd, dv), f[t]);
                f[t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(a[t]), _mm512_mul_ps(xd, dmv), f[t]);
            }
        }
    }
    for (int t = 0; t < nt; t++) _mm512_mask_storeu_ps(y + (size_t)t * ldy, rmask, f[t]);
}

/* pf, pf_bytes: the next tile's weights, fetched into L2 a slice per block during the first
 * pass so that DRAM reads overlap the arithmetic */
static void tile_all_tokens(const uint8_t *tb, int64_t nb, int nsub, bool int_mins, const uint8_t *x, size_t xs, int n_tok,
                            float *y, int ldy, __mmask16 rmask, const uint8_t *pf, size_t pf_bytes) {
    size_t pfb = nb ? (pf_bytes / (size_t)nb + 63) & ~(size_t)63 : 0;
    int t = 0;
    for (; t + NT <= n_tok; t += NT, pfb = 0)
        tile_tokens(tb, nb, nsub, int_mins, x + (size_t)t * xs, xs, NT, y + (size_t)t * ldy, ldy, rmask, pf, pfb);
    switch (n_tok - t) {
#define REST(n) \
    case n: tile_tokens(tb, nb, nsub, int_mins, x + (size_t)t * xs, xs, n, y + (size_t)t * ldy, ldy, rmask, pf, pfb); break;
        REST(1) REST(2) REST(3) REST(4) REST(5) REST(6) REST(7)
#undef REST
    default: break;
    }
}

/* ---- GEMM, Q8_0 ---------------------------------------------------------------------------- */

/* A Q8_0 tile block (32 columns): q[8][16][4] signed weights, ws[16] = 128 * sum of the row's
 * weights, d[16]. The activations come biased by 128 (eng_gemm_prep): sum (x + 128) w - 128 sum w
 * = sum x w, exact. */
#define TB8 (8 * 64 + 64 + 64)

static void unpack_tile_q8_0(const uint8_t *w, size_t row_bytes, int nr, int64_t nb, uint8_t *tb) {
    static const alignas(64) uint8_t zero_block[64];
    eng_read_through(w, (size_t)nr * row_bytes);
    int32_t offs[TILE];
    for (int r = 0; r < TILE; r++) offs[r] = (int32_t)((size_t)r * row_bytes);
    const __m512i vidx = _mm512_loadu_si512(offs), ones = _mm512_set1_epi8(1);
    const __mmask16 live = (__mmask16)((1u << nr) - 1);
    for (int64_t b = 0; b < nb; b += 2) {
        const bool two = b + 1 < nb;
        __m512i v[16];
        for (int r = 0; r < TILE; r++) {
            const uint8_t *p0 = r < nr ? w + (size_t)r * row_bytes + (size_t)b * sizeof(eng_block_q8_0) + 2 : zero_block;
            const uint8_t *p1 = r < nr && two ? p0 + sizeof(eng_block_q8_0) : zero_block;
            v[r] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)p0)),
                                      _mm256_loadu_si256((const __m256i *)p1), 1);
        }
        eng_transpose16(v);
        for (int h = 0; h < (two ? 2 : 1); h++) {
            uint8_t *o = tb + (size_t)(b + h) * TB8;
            __m512i sum = _mm512_setzero_si512();
            for (int i = 0; i < 8; i++) {
                _mm512_store_si512(o + 64 * i, v[8 * h + i]);
                sum = _mm512_dpbusd_epi32(sum, ones, v[8 * h + i]);
            }
            _mm512_store_si512(o + 512, _mm512_slli_epi32(sum, 7));
            const __m512i g = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, vidx,
                                                          w + (size_t)(b + h) * sizeof(eng_block_q8_0), 1);
            _mm512_store_ps(o + 576, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(g)));
        }
    }
}

static DP_ALWAYS_INLINE void tile_tokens_q8_0(const uint8_t *tb, int64_t nb, const uint8_t *x,
                                                                   size_t xs, int nt, float *y, int ldy,
                                                                   __mmask16 rmask, const uint8_t *pf, size_t pfb) {
    __m512 f[NT];
    for (int t = 0; t < NT; t++) f[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        for (size_t l = 0; l < pfb; l += 64) _mm_prefetch((const char *)pf + (size_t)b * pfb + l, _MM_HINT_T1);
        const uint8_t *o = tb + (size_t)b * TB8;
        const eng_block_q8_0 *xb[NT];
        for (int t = 0; t < nt; t++) xb[t] = (const eng_block_q8_0 *)(const void *)(x + (size_t)t * xs) + b;
        __m512i a[NT];
        for (int t = 0; t < NT; t++) a[t] = _mm512_setzero_si512();
        for (int g = 0; g < 8; g++) {
            const __m512i wv = _mm512_load_si512(o + 64 * g);
            for (int t = 0; t < nt; t++) a[t] = _mm512_dpbusd_epi32(a[t], _mm512_set1_epi32(load_i32(xb[t]->qs + 4 * g)), wv);
        }
        const __m512i ws = _mm512_load_si512(o + 512);
        const __m512 dw = _mm512_load_ps(o + 576);
        for (int t = 0; t < nt; t++)
            f[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(a[t], ws)), _mm512_mul_ps(dw, _mm512_set1_ps(f16(xb[t]->d))), f[t]);
    }
    for (int t = 0; t < nt; t++) _mm512_mask_storeu_ps(y + (size_t)t * ldy, rmask, f[t]);
}

static void gemm_q8_0(int64_t k, const void *w, size_t rb, int64_t r0, int64_t r1, const void *x, size_t xs, int n_tok,
                      float *y, int ldy, void *ws) {
    uint8_t *tb = (uint8_t *)(((uintptr_t)ws + 63) & ~(uintptr_t)63);
    const int64_t nb = k / 32;
    for (int64_t r = r0; r < r1; r += TILE) {
        const int nr = r1 - r < TILE ? (int)(r1 - r) : TILE;
        const __mmask16 rmask = (__mmask16)((1u << nr) - 1);
        unpack_tile_q8_0((const uint8_t *)w + (size_t)r * rb, rb, nr, nb, tb);
        /* the next tile into L2 during the first pass, as gemm_k does */
        const uint8_t *pf = (const uint8_t *)w + (size_t)(r + nr) * rb;
        const int64_t nx = r1 - r - nr < TILE ? r1 - r - nr : TILE;
        size_t pfb = ((size_t)nx * rb / (size_t)nb + 63) & ~(size_t)63;
        int t = 0;
        for (; t + NT <= n_tok; t += NT, pfb = 0)
            tile_tokens_q8_0(tb, nb, (const uint8_t *)x + (size_t)t * xs, xs, NT, y + r + (size_t)t * ldy, ldy, rmask, pf, pfb);
        switch (n_tok - t) {
#define REST8(n) \
    case n: tile_tokens_q8_0(tb, nb, (const uint8_t *)x + (size_t)t * xs, xs, n, y + r + (size_t)t * ldy, ldy, rmask, pf, pfb); break;
            REST8(1) REST8(2) REST8(3) REST8(4) REST8(5) REST8(6) REST8(7)
#undef REST8
        default: break;
        }
    }
}

/* Q8_0 activations biased by 128 for gemm_q8_0 (vpdpbusd's unsigned side). */
static void prep_q8_0(void *x, size_t xs, int n_tok, int64_t k) {
    for (int t = 0; t < n_tok; t++) {
        eng_block_q8_0 *b = (eng_block_q8_0 *)(void *)((uint8_t *)x + (size_t)t * xs);
        for (int64_t i = 0; i < k / 32; i++)
            _mm256_storeu_si256((__m256i *)b[i].qs, _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)b[i].qs),
                                                                     _mm256_set1_epi8((char)0x80)));
    }
}

eng_gemm_prep_fn eng_gemm_prep_avx512(int wt) { return wt == ENG_TYPE_Q8_0 ? prep_q8_0 : NULL; }

static DP_ALWAYS_INLINE void gemm_k(int kind, int64_t k, const void *w, size_t row_bytes,
                                                         int64_t r0, int64_t r1, const void *x, size_t xs, int n_tok,
                                                         float *y, int ldy, void *ws) {
    uint8_t *tb = (uint8_t *)(((uintptr_t)ws + 63) & ~(uintptr_t)63);
    const int64_t nb = k / 256;
    const int nsub = kind == KQ6 ? 16 : 8;
    for (int64_t r = r0; r < r1; r += TILE) {
        const int nr = r1 - r < TILE ? (int)(r1 - r) : TILE;
        unpack_tile(kind, (const uint8_t *)w + (size_t)r * row_bytes, row_bytes, nr, nb, tb);
        const int64_t nx = r1 - r - nr < TILE ? r1 - r - nr : TILE;
        tile_all_tokens(tb, nb, nsub, kind == KQ6, x, xs, n_tok, y + r, ldy, (__mmask16)((1u << nr) - 1),
                        (const uint8_t *)w + (size_t)(r + nr) * row_bytes, (size_t)nx * row_bytes);
    }
}

static void gemm_q4_k(int64_t k, const void *w, size_t rb, int64_t r0, int64_t r1, const void *x, size_t xs, int n,
                      float *y, int ldy, void *ws) {
    gemm_k(KQ4, k, w, rb, r0, r1, x, xs, n, y, ldy, ws);
}
static void gemm_q5_k(int64_t k, const void *w, size_t rb, int64_t r0, int64_t r1, const void *x, size_t xs, int n,
                      float *y, int ldy, void *ws) {
    gemm_k(KQ5, k, w, rb, r0, r1, x, xs, n, y, ldy, ws);
}
static void gemm_q6_k(int64_t k, const void *w, size_t rb, int64_t r0, int64_t r1, const void *x, size_t xs, int n,
                      float *y, int ldy, void *ws) {
    gemm_k(KQ6, k, w, rb, r0, r1, x, xs, n, y, ldy, ws);
}

eng_gemm_fn eng_gemm_avx512(int wt) {
    switch (wt) {
    case ENG_TYPE_Q4_K: return gemm_q4_k;
    case ENG_TYPE_Q5_K: return gemm_q5_k;
    case ENG_TYPE_Q6_K: return gemm_q6_k;
    case ENG_TYPE_Q8_0: return gemm_q8_0;
    default: return NULL;
    }
}

eng_vec_dot_fn eng_vec_dot_avx512(int wt) {
    switch (wt) {
    case ENG_TYPE_Q4_K: return dot_q4_k;
    case ENG_TYPE_Q5_K: return dot_q5_k;
    case ENG_TYPE_Q6_K: return dot_q6_k;
    case ENG_TYPE_Q8_0: return dot_q8_0;
    default: return NULL;
    }
}

eng_vec_dot4r_fn eng_vec_dot4r_avx512(int wt) {
    switch (wt) {
    case ENG_TYPE_Q4_K: return dot4r_q4_k;
    case ENG_TYPE_Q5_K: return dot4r_q5_k;
    case ENG_TYPE_Q6_K: return dot4r_q6_k;
    default: return NULL;
    }
}

eng_vec_dot_pf_fn eng_vec_dot_pf_avx512(int wt) {
    switch (wt) {
    case ENG_TYPE_Q4_K: return dot_q4_k_pf;
    case ENG_TYPE_Q5_K: return dot_q5_k_pf;
    case ENG_TYPE_Q6_K: return dot_q6_k_pf;
    case ENG_TYPE_Q8_0: return dot_q8_0_pf;
    default: return NULL;
    }
}
