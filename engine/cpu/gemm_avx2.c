/*
 * gemm_avx2.c - K-quant GEMMs for CPUs with AVX2 but no AVX-512 (Zen 2/3, Intel client cores
 * before and without AVX-512): the products of prompt pieces and batched decode steps. Compiled
 * with AVX2/FMA/F16C flags; called only after kernels_dispatch.c checked the CPU.
 *
 * DESIGN
 * - Weights in lanes: a tile of 16 rows is unpacked once, per 256-block, into column groups of 4
 *   values, [64 groups][16 rows][4 bytes], with the sub-block scales and mins laid out one row per
 *   32-bit lane. A token's 4 activation bytes of a group are broadcast and vpmaddubsw multiplies
 *   them with 8 rows at once; no horizontal sums anywhere.
 * - The scales, mins and d of 8 rows are unpacked together: their 16-byte block heads
 *   transposed to one row per lane, then word operations and vpshufb (row by row in scalar code
 *   this was near half of the unpacking).
 * - AVX2 has no vpdpbusd. vpmaddubsw's 16-bit pair sums are added as 16-bit integers over as many
 *   groups as cannot overflow (|q y + q' y'| <= 2 qmax 128: Q4_K 8 groups = its whole 32-value
 *   sub-block, Q5_K 4, Q6_K 2), then one vpmaddwd applies the row's sub-block scale. Per 32
 *   multiply-adds of a row-token pair that is about one vpmaddubsw and one 16-bit add, against
 *   three instructions for the row-major dot.
 * - The block sums are exact integers S (scaled value sums) and M (min terms), folded per block
 *   as acc = fma(S, xd * d, acc), acc = fma(-M, xd * dmin, acc) (Q6_K: acc = fma(S - M, xd * d,
 *   acc)), which is exactly what the AVX2 one-row dots in kernels_avx2.c compute: a token's
 *   result is the same bits whichever kernel ran, so batch invariance holds.
 * - Loop order per tile: blocks outer, tokens inner, so a block's 5 KB of unpacked weights stay
 *   in L1 while every token passes over them; the tile's float accumulators live in the scratch.
 *   Each block is unpacked right before its tokens run, and the next block's rows are prefetched
 *   into L1 meanwhile: the unpacking's loads were a quarter of the time at 16 tokens, mostly
 *   waiting on L2.
 * - Tokens four at a time: each weight vector loaded serves four tokens (8 int16 accumulators;
 *   the int32 sums then live in L1), measured 3-7% faster than two at 16 tokens.
 *
 * Scratch (ws, eng_gemm_ws_avx2 bytes): one unpacked block and n_tok x 16 floats.
 */
#include <immintrin.h>
#include <stdalign.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "compiler.h"
#include "kernels.h"
#include "kernels_avx2.h"
#include "quant.h"

#define ROWS 16 /* weight rows per tile: two vectors of 8 lanes */

enum { KQ4, KQ5, KQ6 };

/* A tile block: q[64][16][4] (column group, row, 4 values), sc[nsub][16] (the scale twice, as
 * int16 pairs for vpmaddwd), mp[8][16] (int16 pairs: Q4_K/Q5_K the mins of sub-blocks 2i, 2i+1
 * in mp[0..3]; Q6_K 32 x the scales of sub-blocks 2j, 2j+1), d[16], dm[16]. */
#define TB_Q 4096
#define TB_BYTES(nsub) (TB_Q + (size_t)(nsub) * 64 + 8 * 64 + 2 * 64)

size_t eng_gemm_ws_avx2(int64_t k, int n_tok) {
    const size_t kq = 64 + TB_BYTES(16) + (size_t)n_tok * ROWS * sizeof(float), q32 = eng_gemm32_ws_avx2(k, n_tok);
    return kq > q32 ? kq : q32;
}

static inline int32_t load_i32(const void *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* 8 x 8 transpose of 32-bit elements: r[i] = row i in, column i out. */
static inline void transpose8(__m256i r[8]) {
    __m256i t[8], u[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 2; i++) { /* u[4i + k]: column k (low lane) and k + 4 (high) of rows 4i.. */
        u[4 * i] = _mm256_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 1] = _mm256_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 2] = _mm256_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        u[4 * i + 3] = _mm256_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    for (int k = 0; k < 4; k++) {
        r[k] = _mm256_permute2x128_si256(u[k], u[4 + k], 0x20);
        r[4 + k] = _mm256_permute2x128_si256(u[k], u[4 + k], 0x31);
    }
}

/* 32 bytes at offset off of 8 rows' blocks (rp[0..7]), transposed: v[i] = dword i of each row. */
static inline void load_t8(const uint8_t *const *rp, size_t off, __m256i v[8]) {
    for (int r = 0; r < 8; r++) v[r] = _mm256_loadu_si256((const __m256i *)(rp[r] + off));
    transpose8(v);
}

static inline void store_col(uint8_t *o, int col, int half, __m256i v) {
    _mm256_store_si256((__m256i *)(void *)(o + 64 * (size_t)col + 32 * (size_t)half), v);
}

/* The 16 bytes at offset off of 8 rows' blocks, transposed: v[i] = dword i of each row. */
static inline void load_heads(const uint8_t *const *rp, size_t off, __m256i v[4]) {
    __m256i r[4];
    for (int i = 0; i < 4; i++) /* rows i (low lane) and i + 4 (high) */
        r[i] = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(rp[i] + off))),
                                       _mm_loadu_si128((const __m128i *)(const void *)(rp[i + 4] + off)), 1);
    const __m256i t0 = _mm256_unpacklo_epi32(r[0], r[1]), t1 = _mm256_unpackhi_epi32(r[0], r[1]);
    const __m256i t2 = _mm256_unpacklo_epi32(r[2], r[3]), t3 = _mm256_unpackhi_epi32(r[2], r[3]);
    v[0] = _mm256_unpacklo_epi64(t0, t2);
    v[1] = _mm256_unpackhi_epi64(t0, t2);
    v[2] = _mm256_unpacklo_epi64(t1, t3);
    v[3] = _mm256_unpackhi_epi64(t1, t3);
}

/* A vpshufb control that fills each 32-bit lane with its own bytes b0..b3 (-1: zero). */
static inline __m256i lane_bytes(int b0, int b1, int b2, int b3) {
    const int b[4] = {b0, b1, b2, b3};
    uint32_t w = 0;
    for (int i = 0; i < 4; i++) w |= (uint32_t)(b[i] < 0 ? 0x80 : b[i]) << (8 * i);
    /* + 4 x the lane's index within its 128-bit half; a zeroing byte keeps its high bit */
    return _mm256_add_epi8(_mm256_set1_epi32((int32_t)w), _mm256_setr_epi32(0, 0x04040404, 0x08080808, 0x0c0c0c0c, 0,
                                                                            0x04040404, 0x08080808, 0x0c0c0c0c));
}

static inline void store_half(uint32_t *p, __m256i v) { _mm256_store_si256((__m256i *)(void *)p, v); }

/* Block b of rows [0, nr) (missing rows read as zero blocks) into o. */
static DP_ALWAYS_INLINE void unpack_block(int kind, const uint8_t *const rp[ROWS], uint8_t *o) {
    const int nsub = kind == KQ6 ? 16 : 8;
    const __m256i m4 = _mm256_set1_epi8(0xF);
    for (int half = 0; half < 2; half++) {
        const uint8_t *const *hp = rp + 8 * half;
        if (kind == KQ4 || kind == KQ5) {
            /* qs dword i of chunk j (bytes 32j + 4i..) holds values 64j + 4i.. (low nibbles) and
             * 64j + 32 + 4i.. (high): column groups 16j + i and 16j + 8 + i. Q5_K's fifth bits:
             * bit 2j of qh byte l for value 64j + l, bit 2j + 1 for 64j + 32 + l. */
            const size_t qs = kind == KQ4 ? offsetof(eng_block_q4_k, qs) : offsetof(eng_block_q5_k, qs);
            __m256i h[8];
            if (kind == KQ5) load_t8(hp, offsetof(eng_block_q5_k, qh), h);
            for (int j = 0; j < 4; j++) {
                __m256i v[8];
                load_t8(hp, qs + 32 * (size_t)j, v);
                for (int i = 0; i < 8; i++) {
                    __m256i lo = _mm256_and_si256(v[i], m4), hi = _mm256_and_si256(_mm256_srli_epi16(v[i], 4), m4);
                    if (kind == KQ5) {
                        const __m256i b = _mm256_set1_epi8(0x10);
                        lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(_mm256_srli_epi16(h[i], 2 * j), 4), b));
                        hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(_mm256_srli_epi16(h[i], 2 * j + 1), 4), b));
                    }
                    store_col(o, 16 * j + i, half, lo);
                    store_col(o, 16 * j + 8 + i, half, hi);
                }
            }
        } else {
            /* half hh of a block: ql bytes 64hh.. (A: first 32, B: next 32) and qh bytes 32hh..
             * (H); dword i gives column groups 32hh + i (+8, +16, +24): A's and B's low nibbles
             * with H's bits 0-1 and 2-3, their high nibbles with bits 4-5 and 6-7 */
            const __m256i m3 = _mm256_set1_epi8(3);
            for (int hh = 0; hh < 2; hh++) {
                __m256i A[8], B[8], H[8];
                load_t8(hp, offsetof(eng_block_q6_k, ql) + 64 * (size_t)hh, A);
                load_t8(hp, offsetof(eng_block_q6_k, ql) + 64 * (size_t)hh + 32, B);
                load_t8(hp, offsetof(eng_block_q6_k, qh) + 32 * (size_t)hh, H);
                for (int i = 0; i < 8; i++) {
                    const int g = 32 * hh + i;
                    store_col(o, g, half, _mm256_or_si256(_mm256_and_si256(A[i], m4), _mm256_slli_epi16(_mm256_and_si256(H[i], m3), 4)));
                    store_col(o, g + 8, half,
                              _mm256_or_si256(_mm256_and_si256(B[i], m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(H[i], 2), m3), 4)));
                    store_col(o, g + 16, half,
                              _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(A[i], 4), m4),
                                              _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(H[i], 4), m3), 4)));
                    store_col(o, g + 24, half,
                              _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(B[i], 4), m4),
                                              _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(H[i], 6), m3), 4)));
                }
            }
        }
    }
    uint32_t *sc = (uint32_t *)(void *)(o + TB_Q), *mp = sc + 16 * nsub;
    float *d = (float *)(void *)(mp + 16 * 8), *dm = d + 16;
    for (int half = 0; half < 2; half++) {
        const uint8_t *const *hp = rp + 8 * half;
        const int h8 = 8 * half;
        if (kind == KQ6) {
            /* int8 scales: the byte into each int16's high byte, then an arithmetic shift */
            __m256i v[4];
            load_heads(hp, offsetof(eng_block_q6_k, scales), v);
            for (int s = 0; s < 16; s++)
                store_half(sc + 16 * s + h8, _mm256_srai_epi16(_mm256_shuffle_epi8(v[s / 4], lane_bytes(-1, s & 3, -1, s & 3)), 8));
            for (int j = 0; j < 8; j++) { /* 32 x scales 2j, 2j + 1, as int16 pairs */
                const __m256i p = _mm256_shuffle_epi8(v[j / 2], lane_bytes(-1, 2 * j & 3, -1, (2 * j & 3) + 1));
                store_half(mp + 16 * j + h8, _mm256_slli_epi16(_mm256_srai_epi16(p, 8), 5));
            }
            for (int r = 0; r < 8; r++) d[h8 + r] = dm[h8 + r] = _cvtsh_ss(((const eng_block_q6_k *)(const void *)hp[r])->d);
        } else {
            /* d, dmin and the 12 scale bytes: the same word operations as eng_k4_unpack_scales,
             * one row per lane */
            __m256i v[4];
            load_heads(hp, 0, v);
            const __m256i m1 = _mm256_set1_epi32(0x3f3f3f3f), m2 = _mm256_set1_epi32(0x0f0f0f0f), m3 = _mm256_set1_epi32(0x03030303);
            const __m256i u[4] = {
                _mm256_and_si256(v[1], m1),
                _mm256_or_si256(_mm256_and_si256(v[3], m2), _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(v[1], 6), m3), 4)),
                _mm256_and_si256(v[2], m1),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(v[3], 4), m2),
                                _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(v[2], 6), m3), 4)),
            };
            for (int s = 0; s < 8; s++) /* u[0..1]: the scales, one per byte */
                store_half(sc + 16 * s + h8, _mm256_shuffle_epi8(u[s / 4], lane_bytes(s & 3, -1, s & 3, -1)));
            for (int i = 0; i < 4; i++) /* u[2..3]: the mins, pairs 2i, 2i + 1 */
                store_half(mp + 16 * i + h8, _mm256_shuffle_epi8(u[2 + i / 2], lane_bytes(2 * i & 3, -1, (2 * i & 3) + 1, -1)));
            /* the f16 d and dmin of rows 0-3 | 4-7 packed, then reordered to d 0-7, dmin 0-7 */
            const __m256i pk = _mm256_permute4x64_epi64(
                _mm256_packus_epi32(_mm256_and_si256(v[0], _mm256_set1_epi32(0xffff)), _mm256_srli_epi32(v[0], 16)), 0xD8);
            _mm256_store_ps(d + h8, _mm256_cvtph_ps(_mm256_castsi256_si128(pk)));
            _mm256_store_ps(dm + h8, _mm256_cvtph_ps(_mm256_extracti128_si256(pk, 1)));
        }
    }
}

/* Tokens t0 .. t0 + NT - 1 (NT = 1 .. 4) against block o: facc[t][16] += the block's terms. */
static DP_ALWAYS_INLINE void block_tokens(int kind, int NT, const uint8_t *o,
                                                               const eng_block_q8_k *const xb[4], float *facc) {
    const int nsub = kind == KQ6 ? 16 : 8, cps = 64 / nsub; /* column groups per sub-block */
    const int span = kind == KQ4 ? 8 : kind == KQ5 ? 4 : 2; /* groups summed as int16 */
    const uint32_t *sc = (const uint32_t *)(const void *)(o + TB_Q), *mp = sc + 16 * nsub;
    const float *d = (const float *)(const void *)(mp + 16 * 8), *dm = d + 16;
    __m256i S[4][2];
    for (int t = 0; t < NT; t++) S[t][0] = S[t][1] = _mm256_setzero_si256();
    for (int s = 0; s < nsub; s++) {
        const __m256i sc0 = _mm256_load_si256((const __m256i *)(const void *)(sc + 16 * s));
        const __m256i sc1 = _mm256_load_si256((const __m256i *)(const void *)(sc + 16 * s + 8));
        for (int g0 = 0; g0 < cps; g0 += span) {
            __m256i a[4][2];
            for (int t = 0; t < NT; t++) a[t][0] = a[t][1] = _mm256_setzero_si256();
            for (int g = g0; g < g0 + span; g++) {
                const int col = s * cps + g;
                const __m256i w0 = _mm256_load_si256((const __m256i *)(const void *)(o + 64 * col));
                const __m256i w1 = _mm256_load_si256((const __m256i *)(const void *)(o + 64 * col + 32));
                for (int t = 0; t < NT; t++) {
                    const __m256i yv = _mm256_set1_epi32(load_i32(xb[t]->qs + 4 * col));
                    a[t][0] = _mm256_add_epi16(a[t][0], _mm256_maddubs_epi16(w0, yv));
                    a[t][1] = _mm256_add_epi16(a[t][1], _mm256_maddubs_epi16(w1, yv));
                    /* keep the sums in chains: GCC otherwise reassociates them into trees whose
                     * many live products spill (measured 2x slower) */
#if defined(__GNUC__) || defined(__clang__)
                    __asm__("" : "+x"(a[t][0]), "+x"(a[t][1]));
#endif
                }
            }
            for (int t = 0; t < NT; t++) {
                S[t][0] = _mm256_add_epi32(S[t][0], _mm256_madd_epi16(a[t][0], sc0));
                S[t][1] = _mm256_add_epi32(S[t][1], _mm256_madd_epi16(a[t][1], sc1));
            }
        }
    }
    for (int t = 0; t < NT; t++) {
        __m256i M[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
        if (kind == KQ6) { /* 32 sum scale bsum, bsums in pairs */
            for (int j = 0; j < 8; j++) {
                const __m256i bp = _mm256_set1_epi32(load_i32(xb[t]->bsums + 2 * j));
                M[0] = _mm256_add_epi32(M[0], _mm256_madd_epi16(_mm256_load_si256((const __m256i *)(const void *)(mp + 16 * j)), bp));
                M[1] = _mm256_add_epi32(M[1], _mm256_madd_epi16(_mm256_load_si256((const __m256i *)(const void *)(mp + 16 * j + 8)), bp));
            }
        } else { /* the 32-value sums (pairs of 16-value bsums) against the mins */
            alignas(16) int32_t b32[4];
            _mm_store_si128((__m128i *)(void *)b32, _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)xb[t]->bsums),
                                                                   _mm_loadu_si128((const __m128i *)(xb[t]->bsums + 8))));
            for (int i = 0; i < 4; i++) {
                const __m256i bp = _mm256_set1_epi32(b32[i]);
                M[0] = _mm256_add_epi32(M[0], _mm256_madd_epi16(_mm256_load_si256((const __m256i *)(const void *)(mp + 16 * i)), bp));
                M[1] = _mm256_add_epi32(M[1], _mm256_madd_epi16(_mm256_load_si256((const __m256i *)(const void *)(mp + 16 * i + 8)), bp));
            }
        }
        const __m256 xd = _mm256_set1_ps(xb[t]->d);
        float *f = facc + (size_t)t * ROWS;
        for (int h = 0; h < 2; h++) {
            __m256 acc = _mm256_load_ps(f + 8 * h);
            const __m256 dv = _mm256_load_ps(d + 8 * h);
            if (kind == KQ6) {
                acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(S[t][h], M[h])), _mm256_mul_ps(xd, dv), acc);
            } else {
                acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(S[t][h]), _mm256_mul_ps(xd, dv), acc);
                acc = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(M[h]), _mm256_mul_ps(xd, _mm256_load_ps(dm + 8 * h)), acc);
            }
            _mm256_store_ps(f + 8 * h, acc);
        }
    }
}

/* Block b of token t's activation row. */
static inline const eng_block_q8_k *xrow(const void *x, size_t xs, int t, int64_t b) {
    return (const eng_block_q8_k *)(const void *)((const uint8_t *)x + (size_t)t * xs) + b;
}

static DP_ALWAYS_INLINE void gemm_k(int kind, int64_t k, const void *w, size_t rb, int64_t r0, int64_t r1,
                                                         const void *x, size_t xs, int n_tok, float *y, int ldy, void *ws) {
    static const alignas(64) uint8_t zero_block[256];
    const size_t bb = kind == KQ4 ? sizeof(eng_block_q4_k) : kind == KQ5 ? sizeof(eng_block_q5_k) : sizeof(eng_block_q6_k);
    const int nsub = kind == KQ6 ? 16 : 8;
    const int64_t nb = k / 256;
    uint8_t *tb = (uint8_t *)(((uintptr_t)ws + 63) & ~(uintptr_t)63);
    float *facc = (float *)(void *)(tb + TB_BYTES(nsub));
    for (int64_t r = r0; r < r1; r += ROWS) {
        const int nr = r1 - r < ROWS ? (int)(r1 - r) : ROWS;
        const uint8_t *wt = (const uint8_t *)w + (size_t)r * rb;
        /* the next tile into L2 a slice per block, so DRAM reads overlap the arithmetic */
        const int64_t nx = r1 - r - nr < ROWS ? r1 - r - nr : ROWS;
        const uint8_t *pf = wt + (size_t)nr * rb;
        const size_t pfb = nb ? ((size_t)nx * rb / (size_t)nb + 63) & ~(size_t)63 : 0;
        memset(facc, 0, (size_t)n_tok * ROWS * sizeof(float));
        for (int64_t b = 0; b < nb; b++) {
            eng_prefetch_l2(pf + (size_t)b * pfb, pfb);
            const uint8_t *rp[ROWS];
            for (int i = 0; i < ROWS; i++) rp[i] = i < nr ? wt + (size_t)i * rb + (size_t)b * bb : zero_block;
            const uint8_t *o = tb;
            unpack_block(kind, rp, tb);
            if (b + 1 < nb)
                for (int i = 0; i < nr; i++)
                    for (size_t l = 0; l < bb + 63; l += 64) _mm_prefetch((const char *)rp[i] + bb + l, _MM_HINT_T0);
            int t = 0;
            for (; t + 4 <= n_tok; t += 4) {
                const eng_block_q8_k *xb[4];
                for (int j = 0; j < 4; j++) xb[j] = xrow(x, xs, t + j, b);
                block_tokens(kind, 4, o, xb, facc + (size_t)t * ROWS);
            }
            if (t + 2 <= n_tok) {
                const eng_block_q8_k *xb[4] = {xrow(x, xs, t, b), xrow(x, xs, t + 1, b), NULL, NULL};
                block_tokens(kind, 2, o, xb, facc + (size_t)t * ROWS);
                t += 2;
            }
            if (t < n_tok) {
                const eng_block_q8_k *xb[4] = {xrow(x, xs, t, b), NULL, NULL, NULL};
                block_tokens(kind, 1, o, xb, facc + (size_t)t * ROWS);
            }
        }
        /* a whole tile's rows as two vector moves per token: a memcpy call per token's 64 bytes
         * was 2-3 % of a prompt's time */
        if (nr == ROWS)
            for (int t = 0; t < n_tok; t++) {
                const float *f = facc + (size_t)t * ROWS;
                float *yt = y + (size_t)t * ldy + r;
                _mm256_storeu_ps(yt, _mm256_load_ps(f));
                _mm256_storeu_ps(yt + 8, _mm256_load_ps(f + 8));
            }
        else
            for (int t = 0; t < n_tok; t++)
                memcpy(y + (size_t)t * ldy + r, facc + (size_t)t * ROWS, (size_t)nr * sizeof(float));
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

eng_gemm_fn eng_gemm_avx2(int wt) {
    switch (wt) {
    case ENG_TYPE_Q4_K: return gemm_q4_k;
    case ENG_TYPE_Q5_K: return gemm_q5_k;
    case ENG_TYPE_Q6_K: return gemm_q6_k;
    default: return eng_gemm32_avx2(wt);
    }
}
