/*
 * kernels_avx2.c - AVX2 + FMA + F16C vec-dot kernels (compiled with those target flags; called
 * only after kernels_dispatch.c checked the CPU). Same arithmetic as kernels_ref.c: integer
 * block sums are exact, only the float summation order differs.
 */
#include <immintrin.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdalign.h>
#include <stdint.h>
#include <string.h>

#include "compiler.h"
#include "kernels.h"
#include "kernels_avx2.h"
#include "avx2_blocks.h"
#include "rows4.h"
#include "kscales.h"
#include "quant.h"

/* The largest of 8 lanes; where a comparison meets a NaN it keeps its second operand, as
 * max_ps does. */
static inline float hmax8(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

static inline int hsum8_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    return _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1)));
}

static float dot_f32(int64_t k, const void *w, const void *x) {
    const float *a = w, *b = x;
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= k; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    }
    float s = hsum8(_mm256_add_ps(s0, s1));
    for (; i < k; i++) s += a[i] * b[i];
    return s;
}

static float dot_f16(int64_t k, const void *w, const void *x) {
    const uint16_t *a = w, *b = x;
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= k; i += 16) {
        __m256 a0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i)));
        __m256 b0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b + i)));
        __m256 a1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i + 8)));
        __m256 b1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b + i + 8)));
        s0 = _mm256_fmadd_ps(a0, b0, s0);
        s1 = _mm256_fmadd_ps(a1, b1, s1);
    }
    float s = hsum8(_mm256_add_ps(s0, s1));
    for (; i < k; i++) s += f16(a[i]) * f16(b[i]);
    return s;
}

static inline __m256 bf16x8(const uint16_t *p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}

static float dot_bf16(int64_t k, const void *w, const void *x) {
    const uint16_t *a = w, *b = x;
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= k; i += 16) {
        s0 = _mm256_fmadd_ps(bf16x8(a + i), bf16x8(b + i), s0);
        s1 = _mm256_fmadd_ps(bf16x8(a + i + 8), bf16x8(b + i + 8), s1);
    }
    float s = hsum8(_mm256_add_ps(s0, s1));
    for (; i < k; i++) s += eng_bf16_to_f32(a[i]) * eng_bf16_to_f32(b[i]);
    return s;
}

static float dot_q8_0(int64_t k, const void *w, const void *x) {
    const eng_block_q8_0 *a = w, *b = x;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < k / 32; i++) {
        const __m256i qa = _mm256_loadu_si256((const __m256i *)a[i].qs);
        const __m256i qb = _mm256_loadu_si256((const __m256i *)b[i].qs);
        const __m256 d = _mm256_set1_ps(f16(a[i].d) * f16(b[i].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(mul_i8_i8(qa, qb)), acc);
    }
    return hsum8(acc);
}

static float dot_q4_0(int64_t k, const void *w, const void *x) {
    const eng_block_q4_0 *a = w;
    const eng_block_q8_0 *b = x;
    const __m256i lowmask = _mm256_set1_epi8(0xF), eight = _mm256_set1_epi8(8);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < k / 32; i++) {
        const __m128i raw = _mm_loadu_si128((const __m128i *)a[i].qs);
        __m256i q = _mm256_set_m128i(_mm_srli_epi16(raw, 4), raw);
        q = _mm256_sub_epi8(_mm256_and_si256(q, lowmask), eight);
        const __m256i qb = _mm256_loadu_si256((const __m256i *)b[i].qs);
        const __m256 d = _mm256_set1_ps(f16(a[i].d) * f16(b[i].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(mul_i8_i8(q, qb)), acc);
    }
    return hsum8(acc);
}

/* Q5_1 values as unsigned bytes 0-31 */
static inline __m256i q5_1_values(const eng_block_q5_1 *a) {
    return _mm256_or_si256(nibbles(a->qs), _mm256_and_si256(bits_to_bytes(a->qh), _mm256_set1_epi8(0x10)));
}

static float dot_q5_0(int64_t k, const void *w, const void *x) {
    const eng_block_q5_0 *a = w;
    const eng_block_q8_0 *b = x;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < k / 32; i++) {
        const __m256i qb = _mm256_loadu_si256((const __m256i *)b[i].qs);
        const __m256 d = _mm256_set1_ps(f16(a[i].d) * f16(b[i].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(mul_i8_i8(q5_0_values(&a[i]), qb)), acc);
    }
    return hsum8(acc);
}

/* Q4_1 / Q5_1: the quants are unsigned, so u8 x i8 directly; the min term m * s is scalar. */
static inline float dot_min_type(int64_t k, const void *w, const void *x, int wt) {
    const eng_block_q8_1 *b = x;
    __m256 acc = _mm256_setzero_ps();
    float mins = 0;
    for (int64_t i = 0; i < k / 32; i++) {
        float da, ma;
        __m256i q;
        if (wt == ENG_TYPE_Q5_1) {
            const eng_block_q5_1 *a = (const eng_block_q5_1 *)w + i;
            q = q5_1_values(a), da = f16(a->d), ma = f16(a->m);
        } else {
            const eng_block_q4_1 *a = (const eng_block_q4_1 *)w + i;
            q = nibbles(a->qs), da = f16(a->d), ma = f16(a->m);
        }
        const __m256i qb = _mm256_loadu_si256((const __m256i *)b[i].qs);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(da * f16(b[i].d)), _mm256_cvtepi32_ps(mul_u8_i8(q, qb)), acc);
        mins += ma * f16(b[i].s);
    }
    return hsum8(acc) + mins;
}
static float dot_q4_1(int64_t k, const void *w, const void *x) { return dot_min_type(k, w, x, ENG_TYPE_Q4_1); }
static float dot_q5_1(int64_t k, const void *w, const void *x) { return dot_min_type(k, w, x, ENG_TYPE_Q5_1); }

/* The K-quant dots compute, per 256-block, the exact integers S (scaled value sums) and M (min
 * terms) and fold them in block order as acc = fma(S, xd * d, acc), acc = fma(-M, xd * dmin, acc)
 * (Q6_K: acc = fma(S - M, xd * d, acc)): the order of the AVX2 GEMM (gemm_avx2.c), so a token
 * gets the same bits from either. Blocks go in pairs to share the lane reductions. */

/* (lane sum of a, of b, of c, of d) */
static inline __m128i reduce4(__m256i a, __m256i b, __m256i c, __m256i d) {
    const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(a, b), _mm256_hadd_epi32(c, d));
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

/* The 8 scales as int16 in both 128-bit lanes (a sub-block's scale is then one in-lane shuffle
 * away, with no trip through a general register), and the 8 mins as int16. */
static inline __m256i q4k_scales(const uint8_t *packed, __m128i *mins16) {
    uint32_t u[4];
    eng_k4_unpack_scales(packed, u);
    *mins16 = _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, (int)u[3], (int)u[2]));
    return _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_set_epi32(0, 0, (int)u[1], (int)u[0])));
}

/* scale j of q4k_scales' vector in every int16 lane */
static inline __m256i k4_scale(__m256i sc, int j) { return _mm256_shuffle_epi8(sc, _mm256_set1_epi16((short)(0x0100 + 0x0202 * j))); }

/* M as 4 lanes: the mins against the 32-value sums (pairs of 16-value bsums) */
static inline __m256i k4_min_lanes(__m128i mins16, const eng_block_q8_k *y) {
    const __m128i b32 = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)y->bsums), _mm_loadu_si128((const __m128i *)(y->bsums + 8)));
    return _mm256_set_m128i(_mm_setzero_si128(), _mm_madd_epi16(mins16, b32));
}

/* S of a Q4_K (qh NULL) or Q5_K block as 8 lanes, and its M */
static DP_ALWAYS_INLINE __m256i k4_block(const uint8_t *blk, const uint8_t *qs, const uint8_t *qh, const eng_block_q8_k *y, __m256i *M) {
    const __m256i m4 = _mm256_set1_epi8(0xF), one = _mm256_set1_epi8(1);
    __m128i mins16;
    const __m256i sc = q4k_scales(blk + 4, &mins16); /* scales follow d and dmin in both block types */
    const __m256i h = qh ? _mm256_loadu_si256((const __m256i *)qh) : _mm256_setzero_si256();
    __m256i sumi = _mm256_setzero_si256();
    for (int c = 0; c < 4; c++) {
        const __m256i raw = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
        __m256i lo = _mm256_and_si256(raw, m4), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
        if (qh) {
            lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2 * c), one), 4));
            hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2 * c + 1), one), 4));
        }
        const __m256i p0 = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)(y->qs + 64 * c)));
        const __m256i p1 = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(y->qs + 64 * c + 32)));
        sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(_mm256_madd_epi16(p0, k4_scale(sc, 2 * c)),
                                                       _mm256_madd_epi16(p1, k4_scale(sc, 2 * c + 1))));
    }
    *M = k4_min_lanes(mins16, y);
    return sumi;
}

static DP_ALWAYS_INLINE float k4_dot(int64_t k, const uint8_t *w, size_t bb, size_t qs_off, ptrdiff_t qh_off,
                                                          const eng_block_q8_k *y) {
    const int64_t nb = k / 256;
    float acc = 0;
    for (int64_t i = 0; i < nb; i += 2) {
        const bool two = i + 1 < nb;
        const uint8_t *b0 = w + (size_t)i * bb, *b1 = b0 + bb;
        __m256i M0, M1 = _mm256_setzero_si256(), S1 = _mm256_setzero_si256();
        const __m256i S0 = k4_block(b0, b0 + qs_off, qh_off < 0 ? NULL : b0 + qh_off, &y[i], &M0);
        if (two) S1 = k4_block(b1, b1 + qs_off, qh_off < 0 ? NULL : b1 + qh_off, &y[i + 1], &M1);
        /* the fold of the two blocks, acc = fma(S, xd * d, acc), acc = fma(-M, xd * dmin, acc), with
         * the conversions done once for both: (S0, M0, S1, M1) and (xd0 d0, xd0 dmin0, xd1 d1,
         * xd1 dmin1) as vectors, then the four fmas in order */
        const __m128 sm = _mm_permute_ps(_mm_cvtepi32_ps(reduce4(S0, S1, M0, M1)), _MM_SHUFFLE(3, 1, 2, 0));
        uint32_t dd0, dd1 = 0;
        memcpy(&dd0, b0, 4);
        if (two) memcpy(&dd1, b1, 4);
        const __m128 f = _mm_mul_ps(_mm_setr_ps(y[i].d, y[i].d, two ? y[i + 1].d : 0, two ? y[i + 1].d : 0),
                                    _mm_cvtph_ps(_mm_setr_epi32((int)dd0, (int)dd1, 0, 0)));
        acc = fmaf(_mm_cvtss_f32(sm), _mm_cvtss_f32(f), acc);
        acc = fmaf(-_mm_cvtss_f32(_mm_movehdup_ps(sm)), _mm_cvtss_f32(_mm_movehdup_ps(f)), acc);
        if (two) {
            acc = fmaf(_mm_cvtss_f32(_mm_movehl_ps(sm, sm)), _mm_cvtss_f32(_mm_movehl_ps(f, f)), acc);
            acc = fmaf(-_mm_cvtss_f32(_mm_permute_ps(sm, 3)), _mm_cvtss_f32(_mm_permute_ps(f, 3)), acc);
        }
    }
    return acc;
}

static float dot_q4_k(int64_t k, const void *w, const void *x) {
    return k4_dot(k, w, sizeof(eng_block_q4_k), offsetof(eng_block_q4_k, qs), -1, x);
}

static float dot_q5_k(int64_t k, const void *w, const void *x) {
    return k4_dot(k, w, sizeof(eng_block_q5_k), offsetof(eng_block_q5_k, qs), offsetof(eng_block_q5_k, qh), x);
}

/* From a half's 8 scales (int16) in both lanes: scale 2p in the low lane's words, 2p + 1 in the high
 * lane's */
static inline __m256i q6k_scale_pair(__m256i swh, int p) {
    const short lo = (short)(0x0100 + 0x0404 * p), hi = (short)(lo + 0x0202);
    return _mm256_shuffle_epi8(swh, _mm256_setr_epi16(lo, lo, lo, lo, lo, lo, lo, lo, hi, hi, hi, hi, hi, hi, hi, hi));
}

/* Q6_K: S - M as 8 lanes, S = sum over sub-blocks of sc * sum q6 * q8 (q6 unsigned, 0..63),
 * M = 32 * sum sc * bsum. */
static DP_ALWAYS_INLINE __m256i q6k_block(const eng_block_q6_k *a, const eng_block_q8_k *y) {
    const __m256i m4 = _mm256_set1_epi8(0xF), m3 = _mm256_set1_epi8(3);
    /* the 16 scales as int16; a half's 8 of them in both lanes, from which one in-lane shuffle puts
     * scale s in the low lane's words and s + 1 in the high lane's */
    const __m256i sw = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)a->scales));
    __m256i sumi = _mm256_setzero_si256();
    for (int half = 0; half < 2; half++) {
        const __m256i swh = half ? _mm256_permute2x128_si256(sw, sw, 0x11) : _mm256_permute2x128_si256(sw, sw, 0x00);
        const uint8_t *ql = a->ql + 64 * half, *qh = a->qh + 32 * half;
        const __m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
        const __m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
        const __m256i h = _mm256_loadu_si256((const __m256i *)qh);
        __m256i q[4];
        q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(h, m3), 4));
        q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), m3), 4));
        q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                               _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 4), m3), 4));
        q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                               _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 6), m3), 4));
        for (int p = 0; p < 4; p++) {
            /* the 32 values of q[p] span sub-blocks 8 half + 2p (low lane) and the next (high) */
            const __m256i sc16 = q6k_scale_pair(swh, p);
            const __m256i yv = _mm256_loadu_si256((const __m256i *)(y->qs + 128 * half + 32 * p));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(_mm256_maddubs_epi16(q[p], yv), sc16));
        }
    }
    const __m256i corr = _mm256_madd_epi16(sw, _mm256_loadu_si256((const __m256i *)y->bsums));
    return _mm256_sub_epi32(sumi, _mm256_slli_epi32(corr, 5));
}

static float dot_q6_k(int64_t k, const void *w, const void *x) {
    const eng_block_q6_k *a = w;
    const eng_block_q8_k *y = x;
    const int64_t nb = k / 256;
    float acc = 0;
    for (int64_t i = 0; i < nb; i += 2) {
        const bool two = i + 1 < nb;
        const __m256i S1 = two ? q6k_block(&a[i + 1], &y[i + 1]) : _mm256_setzero_si256();
        const __m128i r = reduce4(q6k_block(&a[i], &y[i]), S1, _mm256_setzero_si256(), _mm256_setzero_si256());
        acc = fmaf((float)_mm_cvtsi128_si32(r), y[i].d * f16(a[i].d), acc);
        if (two) acc = fmaf((float)_mm_extract_epi32(r, 1), y[i + 1].d * f16(a[i + 1].d), acc);
    }
    return acc;
}

/* ---- four weight rows x one activation row (one-sequence decode) ------------------------- */

/* Each row's S and M as k4_dot, reduced and folded once for the four rows (lane r = row r) in
 * k4_dot's float order, so a row gets its single-row dot's bits; the next four rows are fetched
 * a few lines a block (rows4.h), so four streams need no help from the hardware prefetcher. */
static DP_ALWAYS_INLINE void k4_dot4r(int64_t k, const uint8_t *w, size_t rb, size_t bb, size_t qs_off,
                                      ptrdiff_t qh_off, const eng_block_q8_k *y, const uint8_t *pf, float out[4]) {
    const int64_t nb = k / 256;
    __m128 acc = _mm_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *b = w + (size_t)i * bb;
        __m256i S[4], M[4];
        eng_fetch_span(pf, (size_t)(4 * i) * bb, (size_t)(4 * i + 4) * bb);
        for (int r = 0; r < 4; r++) {
            const uint8_t *br = b + (size_t)r * rb;
            S[r] = k4_block(br, br + qs_off, qh_off < 0 ? NULL : br + qh_off, &y[i], &M[r]);
        }
        acc = eng_k4_fold4(acc, eng_reduce4x2(S, M), b, rb, y[i].d);
    }
    _mm_storeu_ps(out, acc);
}

static void dot4r_q4_k(int64_t k, const void *w, size_t rb, const void *x, const void *pf, float out[4]) {
    k4_dot4r(k, w, rb, sizeof(eng_block_q4_k), offsetof(eng_block_q4_k, qs), -1, x, pf, out);
}
static void dot4r_q5_k(int64_t k, const void *w, size_t rb, const void *x, const void *pf, float out[4]) {
    k4_dot4r(k, w, rb, sizeof(eng_block_q5_k), offsetof(eng_block_q5_k, qs), offsetof(eng_block_q5_k, qh), x, pf, out);
}

static void dot4r_q6_k(int64_t k, const void *w, size_t rb, const void *x, const void *pf, float out[4]) {
    const uint8_t *wb = w;
    const eng_block_q8_k *y = x;
    const int64_t nb = k / 256;
    const __m256i z = _mm256_setzero_si256(), zs[4] = {z, z, z, z};
    const size_t bb = sizeof(eng_block_q6_k);
    __m128 acc = _mm_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *b = wb + (size_t)i * bb;
        eng_fetch_span(pf, (size_t)(4 * i) * bb, (size_t)(4 * i + 4) * bb);
        __m256i S[4];
        for (int r = 0; r < 4; r++) S[r] = q6k_block((const eng_block_q6_k *)(const void *)(b + (size_t)r * rb), &y[i]);
        const __m128i sv = _mm256_castsi256_si128(eng_reduce4x2(S, zs));
        acc = eng_q6_fold4(acc, sv, b, rb, offsetof(eng_block_q6_k, d), y[i].d);
    }
    _mm_storeu_ps(out, acc);
}

eng_vec_dot4r_fn eng_vec_dot4r_avx2(int wt) {
    switch (wt) {
    case ENG_TYPE_Q4_K: return dot4r_q4_k;
    case ENG_TYPE_Q5_K: return dot4r_q5_k;
    case ENG_TYPE_Q6_K: return dot4r_q6_k;
    default: return NULL;
    }
}

/* ---- one weight row x 4 activation rows ------------------------------------------------- */

/* One weight row against 4 tokens for the unsigned 32-value formats (Q4_1, Q5_1; the signed
 * ones have a GEMM, gemm32_avx2.c): the row's block is decoded once for the four, u8 x i8 with
 * the min term m * s added per token. */
#define XQ(T, j, i) ((const T *)(const void *)((const uint8_t *)x + (j)*xs) + (i))
static void dot4_unsigned(int64_t k, const void *w, const void *x, size_t xs, float out[4], int wt) {
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    float mins[4] = {0, 0, 0, 0};
    for (int64_t i = 0; i < k / 32; i++) {
        __m256i q;
        float da, ma;
        if (wt == ENG_TYPE_Q5_1) {
            const eng_block_q5_1 *a = (const eng_block_q5_1 *)w + i;
            q = q5_1_values(a);
            da = f16(a->d), ma = f16(a->m);
        } else {
            const eng_block_q4_1 *a = (const eng_block_q4_1 *)w + i;
            q = nibbles(a->qs);
            da = f16(a->d), ma = f16(a->m);
        }
        for (int j = 0; j < 4; j++) {
            const eng_block_q8_1 *b = XQ(eng_block_q8_1, j, i);
            const __m256i qb = _mm256_loadu_si256((const __m256i *)b->qs);
            acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(da * f16(b->d)), _mm256_cvtepi32_ps(mul_u8_i8(q, qb)), acc[j]);
            mins[j] += ma * f16(b->s);
        }
    }
    for (int j = 0; j < 4; j++) out[j] = hsum8(acc[j]) + mins[j];
}
#undef XQ

static void dot4_q4_1(int64_t k, const void *w, const void *x, size_t xs, float o[4]) { dot4_unsigned(k, w, x, xs, o, ENG_TYPE_Q4_1); }
static void dot4_q5_1(int64_t k, const void *w, const void *x, size_t xs, float o[4]) { dot4_unsigned(k, w, x, xs, o, ENG_TYPE_Q5_1); }

eng_vec_dot4_fn eng_vec_dot4_avx2(int wt) {
    switch (wt) {
    case ENG_TYPE_Q4_1: return dot4_q4_1;
    case ENG_TYPE_Q5_1: return dot4_q5_1;
    default: return NULL; /* the K-quants: gemm_avx2.c; Q8_0, Q4_0, Q5_0: gemm32_avx2.c */
    }
}

eng_vec_dot_fn eng_vec_dot_avx2(int wt) {
    switch (wt) {
    case ENG_TYPE_F32: return dot_f32;
    case ENG_TYPE_F16: return dot_f16;
    case ENG_TYPE_BF16: return dot_bf16;
    case ENG_TYPE_Q8_0: return dot_q8_0;
    case ENG_TYPE_Q4_0: return dot_q4_0;
    case ENG_TYPE_Q5_0: return dot_q5_0;
    case ENG_TYPE_Q4_1: return dot_q4_1;
    case ENG_TYPE_Q5_1: return dot_q5_1;
    case ENG_TYPE_Q4_K: return dot_q4_k;
    case ENG_TYPE_Q5_K: return dot_q5_k;
    case ENG_TYPE_Q6_K: return dot_q6_k;
    default: return NULL;
    }
}

/* ---- activations ------------------------------------------------------------------------- */

/* Q8_K exactly as the reference (quant_ref.c): the first element of largest magnitude sets
 * the scale, values round half to even (the default MXCSR mode, as lrintf), bsums per 16. */
void eng_quantize_q8_k_avx2(const float *x, void *y, int64_t n) {
    eng_block_q8_k *b = y;
    const __m256 sign = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int64_t i = 0; i < n / 256; i++, x += 256) {
        __m256 amax = _mm256_setzero_ps();
        for (int j = 0; j < 256; j += 8) amax = _mm256_max_ps(amax, _mm256_and_ps(_mm256_loadu_ps(x + j), sign));
        const float am = hmax8(amax);
        if (am == 0.0f) {
            memset(&b[i], 0, sizeof(b[i]));
            continue;
        }
        float max = 0.0f;
        for (int j = 0; j < 256; j += 8) {
            const int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_and_ps(_mm256_loadu_ps(x + j), sign), _mm256_set1_ps(am), _CMP_EQ_OQ));
            if (hit) {
                max = x[j + dp_ctz32((uint32_t)hit)];
                break;
            }
        }
        const float iscale = -127.0f / max;
        const __m256 is = _mm256_set1_ps(iscale);
        const __m256i top = _mm256_set1_epi32(127);
        for (int g = 0; g < 16; g++) {
            const __m256i v0 = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(is, _mm256_loadu_ps(x + 16 * g))), top);
            const __m256i v1 = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(is, _mm256_loadu_ps(x + 16 * g + 8))), top);
            const __m256i w = _mm256_permute4x64_epi64(_mm256_packs_epi32(v0, v1), 0xD8); /* 16 values in order */
            _mm_storeu_si128((__m128i *)(b[i].qs + 16 * g), _mm_packs_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1)));
            b[i].bsums[g] = (int16_t)hsum8_epi32(_mm256_add_epi32(v0, v1));
        }
        b[i].d = 1.0f / iscale;
    }
}

/* Q8_0 (Q8_1 when sums) exactly as eng_act_quantize_ref for finite x: amax over the block, q =
 * round half to even (x * 127 / amax), d and Q8_1's s = d * sum(q) rounded to F16. max_ps takes
 * its first operand only when neither is NaN, so a NaN is skipped as fmaxf skips it. */
void eng_quantize_q8_0_avx2(const float *x, void *y, int64_t n, bool sums) {
    const __m256 sign = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    uint8_t *out = y;
    const size_t bs = sums ? sizeof(eng_block_q8_1) : sizeof(eng_block_q8_0);
    for (int64_t i = 0; i < n / 32; i++, x += 32, out += bs) {
        __m256 v[4], amax = _mm256_setzero_ps();
        for (int j = 0; j < 4; j++) {
            v[j] = _mm256_loadu_ps(x + 8 * j);
            amax = _mm256_max_ps(_mm256_and_ps(v[j], sign), amax);
        }
        const float am = hmax8(amax);
        const float d = am / 127.0f;
        const __m256 id = _mm256_set1_ps(am != 0.0f ? 127.0f / am : 0.0f);
        __m256i q[4];
        for (int j = 0; j < 4; j++)
            q[j] = _mm256_cvtps_epi32(_mm256_mul_ps(v[j], id));
        /* packs interleave 128-bit halves: dwords 0-3 of q0, q1, q2, q3, then 4-7 of each */
        const __m256i w = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
        const __m256i qs = _mm256_permutevar8x32_epi32(w, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        const eng_f16 dh = (eng_f16)_cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
        if (sums) {
            eng_block_q8_1 *b = (eng_block_q8_1 *)(void *)out;
            const int sum = hsum8_epi32(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
            b->d = dh;
            b->s = (eng_f16)_cvtss_sh((float)sum * d, _MM_FROUND_TO_NEAREST_INT);
            _mm256_storeu_si256((__m256i *)(void *)b->qs, qs);
        } else {
            eng_block_q8_0 *b = (eng_block_q8_0 *)(void *)out;
            b->d = dh;
            _mm256_storeu_si256((__m256i *)(void *)b->qs, qs);
        }
    }
}

/* ---- exp-based elementwise ops ------------------------------------------------------------ */

/* e^x as kernels_avx512.c's exp512 computes it (Cephes' expf: x = n ln2 + r, degree-6
 * polynomial, within 2 ulp); 2^n applied as two exact powers of two, 2^(n/2) 2^(n - n/2), so the
 * result rounds once, into the subnormals as vscalefps would, and overflows to infinity. */
static inline __m256 exp256(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-104.0f)), _mm256_set1_ps(104.0f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i ni = _mm256_cvtps_epi32(n), n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
    const __m256i bias = _mm256_set1_epi32(127);
    const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

/* lanes < left (all from 8 on) */
static inline __m256i tail8(int64_t left) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(left > 8 ? 8 : (int)left), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* Whole vectors go through plain loads and stores; only a row's last, partial one is masked
 * (a masked store costs about ten times a plain one on Zen 2 and 3). The masked lanes are out
 * of the max and add zeros to the sum, so the split changes no bits. */
float eng_softmax_tile_avx2(float *s, int n, float scale, float *m, double *l) {
    const __m256 sv = _mm256_set1_ps(scale), ninf = _mm256_set1_ps(-INFINITY);
    const int nf = n & ~7;
    __m256 mx = ninf;
    for (int p = 0; p < nf; p += 8) {
        const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(s + p), sv);
        _mm256_storeu_ps(s + p, v);
        mx = _mm256_max_ps(mx, v);
    }
    if (nf < n) {
        const __m256i k = tail8(n - nf);
        const __m256 v = _mm256_mul_ps(_mm256_maskload_ps(s + nf, k), sv);
        _mm256_maskstore_ps(s + nf, k, v);
        mx = _mm256_max_ps(mx, _mm256_blendv_ps(ninf, v, _mm256_castsi256_ps(k)));
    }
    const float mo = *m, tm = hmax8(mx), M = tm > mo ? tm : mo;
    const __m256 mv = _mm256_set1_ps(M);
    __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
    for (int p = 0; p < nf; p += 8) {
        const __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(s + p), mv));
        _mm256_storeu_ps(s + p, e);
        a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
        a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
    }
    if (nf < n) {
        const __m256i k = tail8(n - nf);
        const __m256 e =
            _mm256_and_ps(exp256(_mm256_sub_ps(_mm256_maskload_ps(s + nf, k), mv)), _mm256_castsi256_ps(k));
        _mm256_maskstore_ps(s + nf, k, e);
        a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
        a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
    }
    const __m256d a = _mm256_add_pd(a0, a1);
    const __m128d a2 = _mm_add_pd(_mm256_castpd256_pd128(a), _mm256_extractf128_pd(a, 1));
    const float c = mo == -INFINITY ? 0.0f : expf(mo - M);
    *l = *l * c + _mm_cvtsd_f64(_mm_add_sd(a2, _mm_unpackhi_pd(a2, a2)));
    *m = M;
    return c;
}

/* x / (1 + e^-x) */
static inline __m256 silu8(__m256 x) {
    return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), exp256(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}

/* As in the softmax: whole vectors plain, the last partial one masked. */
void eng_swiglu_avx2(const float *g, const float *u, float *out, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_mul_ps(silu8(_mm256_loadu_ps(g + i)), _mm256_loadu_ps(u + i)));
    if (i < n) {
        const __m256i m = tail8(n - i);
        _mm256_maskstore_ps(out + i, m, _mm256_mul_ps(silu8(_mm256_maskload_ps(g + i, m)), _mm256_maskload_ps(u + i, m)));
    }
}

void eng_silu_avx2(const float *x, float *out, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, silu8(_mm256_loadu_ps(x + i)));
    if (i < n) {
        const __m256i m = tail8(n - i);
        _mm256_maskstore_ps(out + i, m, silu8(_mm256_maskload_ps(x + i, m)));
    }
}

static inline __m256 sigmoid8(__m256 g) {
    const __m256 one = _mm256_set1_ps(1.0f);
    return _mm256_div_ps(one, _mm256_add_ps(one, exp256(_mm256_sub_ps(_mm256_setzero_ps(), g))));
}

void eng_mul_sigmoid_avx2(float *x, const float *g, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), sigmoid8(_mm256_loadu_ps(g + i))));
    if (i < n) {
        const __m256i m = tail8(n - i);
        _mm256_maskstore_ps(x + i, m,
                            _mm256_mul_ps(_mm256_maskload_ps(x + i, m), sigmoid8(_mm256_maskload_ps(g + i, m))));
    }
}

/* ---- Gated DeltaNet step and conversions ------------------------------------------------- */

void eng_delta_step_avx2(float *S, const float *k, const float *v, const float *q, float decay, float beta, int dk,
                         int dv, float *o) {
    if (dk % 8) {
        eng_delta_step_ref(S, k, v, q, decay, beta, dk, dv, o);
        return;
    }
    const __m256 vd = _mm256_set1_ps(decay);
    for (int j = 0; j < dv; j++) {
        float *Sj = S + (size_t)j * dk;
        __m256 u = _mm256_setzero_ps();
        for (int i = 0; i < dk; i += 8) {
            const __m256 s = _mm256_mul_ps(_mm256_loadu_ps(Sj + i), vd);
            _mm256_storeu_ps(Sj + i, s);
            u = _mm256_fmadd_ps(s, _mm256_loadu_ps(k + i), u);
        }
        const __m256 delta = _mm256_set1_ps(beta * (v[j] - hsum8(u)));
        __m256 acc = _mm256_setzero_ps();
        for (int i = 0; i < dk; i += 8) {
            const __m256 s = _mm256_fmadd_ps(_mm256_loadu_ps(k + i), delta, _mm256_loadu_ps(Sj + i));
            _mm256_storeu_ps(Sj + i, s);
            acc = _mm256_fmadd_ps(s, _mm256_loadu_ps(q + i), acc);
        }
        o[j] = hsum8(acc);
    }
}

void eng_f16_to_f32_row_avx2(const uint16_t *x, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
    for (; i < n; i++) y[i] = f16(x[i]);
}

/* q * d, one rounding, as the scalar dequantization */
void eng_q8_0_to_f32_row_avx2(const void *x, float *y, int64_t n) {
    const eng_block_q8_0 *b = x;
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        const __m256 d = _mm256_set1_ps(f16(b[i].d));
        for (int j = 0; j < 4; j++) {
            const __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(b[i].qs + 8 * j)));
            _mm256_storeu_ps(y + 8 * j, _mm256_mul_ps(_mm256_cvtepi32_ps(q), d));
        }
    }
}

/* Round to nearest even, as eng_f32_to_f16; a NaN becomes the sign and 0x7E00 as there (F16C keeps
 * payload bits), so the bits are the scalar ones for every input. */
void eng_f32_to_f16_row_avx2(const float *x, uint16_t *y, int64_t n) {
    int64_t i = 0;
    const __m256i abs = _mm256_set1_epi32(0x7FFFFFFF), inf = _mm256_set1_epi32(0x7F800000);
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        const __m256i b = _mm256_castps_si256(v);
        const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(b, abs), inf);
        /* the halves of NaN lanes: sign | 0x7E00 */
        const __m256i qn = _mm256_or_si256(_mm256_srli_epi32(_mm256_andnot_si256(abs, b), 16), _mm256_set1_epi32(0x7E00));
        __m256i h = _mm256_cvtepu16_epi32(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        h = _mm256_blendv_epi8(h, qn, nan);
        const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
        _mm_storeu_si128((__m128i *)(void *)(y + i), packed);
    }
    for (; i < n; i++) y[i] = eng_f32_to_f16(x[i]);
}

/* ---- the delta rule, a chunk of tokens --------------------------------------------------- */

/* d[j][dofs + i] = s[i][so + j] for i, j < 8: an 8 x 8 block transposed in registers. */
static DP_ALWAYS_INLINE void dc_tr8(const float *const *s, int so, float *const *d, int dofs) {
    __m256 r[8], t[8];
    for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(s[i] + so);
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 2; i++) {
        r[4 * i + 0] = _mm256_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0x44);
        r[4 * i + 1] = _mm256_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0xEE);
        r[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        r[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    for (int j = 0; j < 4; j++) {
        t[j] = _mm256_permute2f128_ps(r[j], r[j + 4], 0x20);
        t[j + 4] = _mm256_permute2f128_ps(r[j], r[j + 4], 0x31);
    }
    for (int i = 0; i < 8; i++) _mm256_storeu_ps(d[i] + dofs, t[i]);
}

/* dst[j][i] = src[i][j] for i < R, j < N (row pointers; R and N multiples of 8). */
static void dc_transpose8(int R, int N, const float *const *src, float *const *dst) {
    for (int i0 = 0; i0 < R; i0 += 8)
        for (int j0 = 0; j0 < N; j0 += 8) dc_tr8(src + i0, j0, dst + j0, i0);
}

#define DCT_NAME eng_delta_chunk_avx2
#define DCT_FALLBACK eng_delta_chunk_ref
#define DCT_V __m256
#define DCT_W 8
#define DCT_LOAD(p) _mm256_loadu_ps(p)
#define DCT_STORE(p, x) _mm256_storeu_ps(p, x)
#define DCT_SET1(f) _mm256_set1_ps(f)
#define DCT_ZERO() _mm256_setzero_ps()
#define DCT_MUL(a, b) _mm256_mul_ps(a, b)
#define DCT_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define DCT_FNMA(a, b, c) _mm256_fnmadd_ps(a, b, c)
#define DCT_MR 6 /* 12 accumulators, 2 of B and a broadcast: 15 of the 16 registers */
#define DCT_NR 2
#define DCT_TRANSPOSE dc_transpose8
#include "delta_chunk_tiled.h"

/* ---- attention rows ---------------------------------------------------------------------- */

float eng_kv_dot_f16_avx2(const float *q, const void *k, int n) {
    const uint16_t *h = k;
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i))), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i + 8))), s1);
    }
    float s = hsum8(_mm256_add_ps(s0, s1));
    for (; i < n; i++) s += q[i] * f16(h[i]);
    return s;
}

float eng_kv_dot_f32_avx2(const float *q, const void *k, int n) { return dot_f32(n, k, q); }

void eng_kv_axpy_f16_avx2(float *acc, float w, const void *v, int n) {
    const uint16_t *h = v;
    const __m256 vw = _mm256_set1_ps(w);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(vw, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i))),
                                                  _mm256_loadu_ps(acc + i)));
    for (; i < n; i++) acc[i] += w * f16(h[i]);
}

/* acc += sum over rows p < n of w[p] * row p (rows stride bytes apart), 64 dims at a time in
 * registers: per element the same fmas in the same order as n calls of the 1-row axpy. */
#define KV_AXPY_ROWS(name, load8)                                                                           \
    void name(float *acc, const float *w, const void *v, size_t stride, int n, int hd);                     \
    void name(float *acc, const float *w, const void *v, size_t stride, int n, int hd) {                    \
        int c = 0;                                                                                          \
        for (; c + 64 <= hd; c += 64) {                                                                     \
            __m256 a[8];                                                                                    \
            for (int i = 0; i < 8; i++) a[i] = _mm256_loadu_ps(acc + c + 8 * i);                            \
            for (int p = 0; p < n; p++) {                                                                   \
                const __m256 vw = _mm256_set1_ps(w[p]);                                                     \
                const uint8_t *row = (const uint8_t *)v + (size_t)p * stride;                               \
                for (int i = 0; i < 8; i++) a[i] = _mm256_fmadd_ps(vw, load8(row, c + 8 * i), a[i]);        \
            }                                                                                               \
            for (int i = 0; i < 8; i++) _mm256_storeu_ps(acc + c + 8 * i, a[i]);                            \
        }                                                                                                   \
        if (c < hd)                                                                                         \
            for (int p = 0; p < n; p++) {                                                                   \
                const uint8_t *row = (const uint8_t *)v + (size_t)p * stride;                               \
                for (int j = c; j < hd; j++) acc[j] = fmaf(w[p], load1(row, j), acc[j]);                    \
            }                                                                                               \
    }
static inline __m256 ld8_f16(const uint8_t *row, int i) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(row + 2 * (size_t)i)));
}
static inline __m256 ld8_f32(const uint8_t *row, int i) { return _mm256_loadu_ps((const float *)(const void *)row + i); }
#define load1 ld1_f16
static inline float ld1_f16(const uint8_t *row, int j) {
    uint16_t h;
    memcpy(&h, row + 2 * (size_t)j, 2);
    return f16(h);
}
KV_AXPY_ROWS(eng_kv_axpy_rows_f16_avx2, ld8_f16)
#undef load1
#define load1 ld1_f32
static inline float ld1_f32(const uint8_t *row, int j) { return ((const float *)(const void *)row)[j]; }
KV_AXPY_ROWS(eng_kv_axpy_rows_f32_avx2, ld8_f32)
#undef load1

void eng_kv_axpy_f32_avx2(float *acc, float w, const void *v, int n) {
    const float *x = v;
    const __m256 vw = _mm256_set1_ps(w);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(vw, _mm256_loadu_ps(x + i), _mm256_loadu_ps(acc + i)));
    for (; i < n; i++) acc[i] += w * x[i];
}

/* ---- attention over an F16 cache, F32 rows or a Q8_0 cache's rows (as stored or widened), query
 * heads grouped per KV head --------------------------------------------------------------------- */

/* Each cached row is converted once for up to 4 query heads (the group of a KV head in Qwen3 and
 * Qwen3.5). Per (head, row) the arithmetic does not depend on how many heads or rows a call gets:
 * scores are 8-lane fma sums over the head dimension reduced by one fixed tree, mixes add the
 * rows in order per element. A Q8_0 row's values are q * d, the product eng_q8_0_to_f32_row
 * stores, so a Q8_0 row scores and mixes to the same bits as stored or widened to floats. */
#define KV_CHUNK 32 /* rows per pass over the heads: 8 KB of F16 K or V, in L1 */

/* 8 values of a cached row from element d on (d a multiple of 8), by the row's type (kind):
 * halves converted, floats as they are, or a Q8_0 block's quants times its scale */
static inline __m256 kv_load8(const uint8_t *row, int d, int kind) {
    if (kind == ENG_TYPE_F32) return _mm256_loadu_ps((const float *)(const void *)row + d);
    if (kind == ENG_TYPE_F16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(row + 2 * (size_t)d)));
    const eng_block_q8_0 *b = (const eng_block_q8_0 *)(const void *)row + d / 32;
    const __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(b->qs + d % 32)));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(q), _mm256_set1_ps(f16(b->d)));
}

/* up to 4 heads (gn) against 2 rows (np 1: the second row's lanes are dropped) */
static DP_ALWAYS_INLINE void dots_4x2(const float *q, size_t lq, int gn, const uint8_t *k, size_t kst,
                                                           int np, int hd, float *s, size_t ls, int kind) {
    __m256 acc[4][2];
    for (int g = 0; g < 4; g++) acc[g][0] = acc[g][1] = _mm256_setzero_ps();
    const uint8_t *k1 = np > 1 ? k + kst : k;
    for (int d = 0; d < hd; d += 8) {
        const __m256 kv0 = kv_load8(k, d, kind), kv1 = kv_load8(k1, d, kind);
        for (int g = 0; g < gn; g++) {
            const __m256 qv = _mm256_loadu_ps(q + (size_t)g * lq + d);
            acc[g][0] = _mm256_fmadd_ps(qv, kv0, acc[g][0]);
            acc[g][1] = _mm256_fmadd_ps(qv, kv1, acc[g][1]);
        }
    }
    /* hadd pairs lanes of one accumulator only: [g0 r0, g0 r1, g1 r0, g1 r1] and the same for g2, g3 */
    const __m256 h01 = _mm256_hadd_ps(_mm256_hadd_ps(acc[0][0], acc[0][1]), _mm256_hadd_ps(acc[1][0], acc[1][1]));
    const __m256 h23 = _mm256_hadd_ps(_mm256_hadd_ps(acc[2][0], acc[2][1]), _mm256_hadd_ps(acc[3][0], acc[3][1]));
    alignas(16) float r[8];
    _mm_store_ps(r, _mm_add_ps(_mm256_castps256_ps128(h01), _mm256_extractf128_ps(h01, 1)));
    _mm_store_ps(r + 4, _mm_add_ps(_mm256_castps256_ps128(h23), _mm256_extractf128_ps(h23, 1)));
    for (int g = 0; g < gn; g++)
        for (int j = 0; j < np; j++) s[(size_t)g * ls + j] = r[2 * g + j];
}

static DP_ALWAYS_INLINE void kv_dots(const float *q, size_t lq, int G, const void *k, size_t kst,
                                                          int n, int hd, float *s, size_t ls, int kind) {
    const uint8_t *kb = k;
    const bool w32 = kind == ENG_TYPE_F32;
    if (hd % 8) { /* not a model shape seen so far (a Q8_0 cache's head size is a multiple of 32) */
        for (int g = 0; g < G; g++)
            for (int p = 0; p < n; p++)
                s[(size_t)g * ls + p] = (w32 ? eng_kv_dot_f32_avx2 : eng_kv_dot_f16_avx2)(q + (size_t)g * lq, kb + (size_t)p * kst, hd);
        return;
    }
    const size_t rb = eng_row_size(kind, hd);
    for (int p0 = 0; p0 < n; p0 += KV_CHUNK) {
        const int p1 = n - p0 < KV_CHUNK ? n : p0 + KV_CHUNK;
        eng_prefetch_kv(kb, kst, p0, KV_CHUNK, n, rb);
        for (int g0 = 0; g0 < G; g0 += 4) {
            const int gn = G - g0 < 4 ? G - g0 : 4;
            for (int p = p0; p < p1; p += 2) {
                const int np = p1 - p < 2 ? 1 : 2;
                const float *qg = q + (size_t)g0 * lq;
                float *sg = s + (size_t)g0 * ls + p;
                switch (gn) { /* specialized so the accumulators stay in registers */
                case 1: dots_4x2(qg, lq, 1, kb + (size_t)p * kst, kst, np, hd, sg, ls, kind); break;
                case 2: dots_4x2(qg, lq, 2, kb + (size_t)p * kst, kst, np, hd, sg, ls, kind); break;
                case 3: dots_4x2(qg, lq, 3, kb + (size_t)p * kst, kst, np, hd, sg, ls, kind); break;
                default: dots_4x2(qg, lq, 4, kb + (size_t)p * kst, kst, np, hd, sg, ls, kind); break;
                }
            }
        }
    }
}

void eng_kv_dots_f16_avx2(const float *q, size_t lq, int G, const void *k, size_t kst, int n, int hd, float *s, size_t ls) {
    kv_dots(q, lq, G, k, kst, n, hd, s, ls, ENG_TYPE_F16);
}

void eng_kv_dots_f32_avx2(const float *q, size_t lq, int G, const void *k, size_t kst, int n, int hd, float *s, size_t ls) {
    kv_dots(q, lq, G, k, kst, n, hd, s, ls, ENG_TYPE_F32);
}

void eng_kv_dots_q8_0_avx2(const float *q, size_t lq, int G, const void *k, size_t kst, int n, int hd, float *s, size_t ls) {
    kv_dots(q, lq, G, k, kst, n, hd, s, ls, ENG_TYPE_Q8_0);
}

/* Scores against K in panels (kernels.h; the F16 cache keeps K so where these kernels exist):
 * the positions across the lanes, each score one chain of fmas over d = 0 .. hd - 1 in order,
 * the AVX-512 kernels' order, so no lane sums are reduced and a query value is broadcast once
 * for 16 positions. Row-major dots over 4 heads load 6 vectors per 8 fmas and reduce each score
 * across lanes; here 6 query rows against 16 positions load 8 per 12 and reduce nothing. */

/* One dimension's 8 positions of a panel, from element i: halves converted, or floats. */
static DP_ALWAYS_INLINE __m256 kt8(bool half, const void *kt, size_t i) {
    return half ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)((const uint16_t *)kt + i)))
                : _mm256_loadu_ps((const float *)kt + i);
}

/* Scores of RT query rows (rows lq floats apart) against np <= 8 PV positions of a panel from
 * kt on ([hd][ENG_KT_PANEL]); lanes from position np on are not stored (their K values may be
 * anything). pf, when not NULL, is the next panel: fetched into L2 a dimension at a time, so a
 * decode step's cache reads overlap its fmas. */
static DP_ALWAYS_INLINE void ptile(bool half, const float *q, size_t lq, int RT, const void *kt, int PV, int np, int hd,
                                   float *s, size_t ls, const void *pf) {
    const int W = ENG_KT_PANEL, esz = half ? 2 : 4;
    __m256 acc[6][2];
    for (int r = 0; r < RT; r++)
        for (int v = 0; v < PV; v++)
            acc[r][v] = _mm256_setzero_ps();
    for (int d = 0; d < hd; d++) {
        if (pf) eng_prefetch_l2((const char *)pf + (size_t)d * W * esz, (size_t)W * esz);
        __m256 kv[2];
        for (int v = 0; v < PV; v++)
            kv[v] = kt8(half, kt, (size_t)d * W + 8 * (size_t)v);
        for (int r = 0; r < RT; r++) {
            const __m256 qb = _mm256_broadcast_ss(q + (size_t)r * lq + d);
            for (int v = 0; v < PV; v++)
                acc[r][v] = _mm256_fmadd_ps(qb, kv[v], acc[r][v]);
        }
    }
    const int tail = np - 8 * (PV - 1);
    const __m256i last = _mm256_cmpgt_epi32(_mm256_set1_epi32(tail), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    for (int r = 0; r < RT; r++)
        for (int v = 0; v < PV; v++) {
            float *o = s + (size_t)r * ls + 8 * v;
            if (v < PV - 1 || tail == 8)
                _mm256_storeu_ps(o, acc[r][v]);
            else
                _mm256_maskstore_ps(o, last, acc[r][v]);
        }
}

/* G rows in tiles of 6 (specialized per count, so the 12 accumulators stay in registers)
 * against np <= 16 positions from kt on. */
static DP_ALWAYS_INLINE void ptile_rows(bool half, const float *q, size_t lq, int G, const void *kt, int np, int hd,
                                        float *s, size_t ls, const void *pf) {
    const int PV = np > 8 ? 2 : 1;
    for (int r0 = 0; r0 < G; r0 += 6) {
        const float *qr = q + (size_t)r0 * lq;
        float *sr = s + (size_t)r0 * ls;
        const void *p = r0 ? NULL : pf;
#define PT(RT)                                                                                                         \
    PV == 2 ? ptile(half, qr, lq, RT, kt, 2, np, hd, sr, ls, p) : ptile(half, qr, lq, RT, kt, 1, np, hd, sr, ls, p)
        switch (G - r0 < 6 ? G - r0 : 6) {
        case 1: PT(1); break;
        case 2: PT(2); break;
        case 3: PT(3); break;
        case 4: PT(4); break;
        case 5: PT(5); break;
        default: PT(6); break;
        }
#undef PT
    }
}

/* Scores against n positions of K panels kst bytes apart, 16 positions of a panel at a time
 * (4 KB of halves for a 128-wide head, in L1 while every row tile passes over them). */
static DP_ALWAYS_INLINE void kv_dots_panels(bool half, const float *q, size_t lq, int G, const void *k, size_t kst,
                                            int n, int hd, float *s, size_t ls) {
    const int W = ENG_KT_PANEL;
    for (int p0 = 0; p0 < n; p0 += W) {
        const char *kp = (const char *)k + (size_t)(p0 / W) * kst;
        const void *pf = half && p0 + W < n ? kp + kst : NULL;
        for (int c = 0; c < W && p0 + c < n; c += 16) {
            const int np = n - p0 - c < 16 ? n - p0 - c : 16;
            ptile_rows(half, q, lq, G, kp + (size_t)c * (half ? 2 : 4), np, hd, s + p0 + c, ls, c ? NULL : pf);
        }
    }
}

void eng_kv_dots_f16p_avx2(const float *q, size_t lq, int G, const void *k, size_t kst, int n, int hd, float *s,
                           size_t ls) {
    kv_dots_panels(true, q, lq, G, k, kst, n, hd, s, ls);
}

void eng_kv_dots_f16w_avx2(const float *q, size_t lq, int G, const void *k, size_t kst, int n, int hd, float *s,
                           size_t ls) {
    kv_dots_panels(false, q, lq, G, k, kst, n, hd, s, ls);
}

/* acc_g[0..16) += sum_p w_g[p] v_p[d0..d0 + 16) for up to 6 heads, rows in order */
static DP_ALWAYS_INLINE void mix_x16(float *acc, size_t la, int gn, const float *w, size_t lw, const uint8_t *v,
                                     size_t vst, int d0, int n, int kind) {
    __m256 a[6][2];
    for (int g = 0; g < gn; g++) {
        a[g][0] = _mm256_loadu_ps(acc + (size_t)g * la);
        a[g][1] = _mm256_loadu_ps(acc + (size_t)g * la + 8);
    }
    for (int p = 0; p < n; p++) {
        const uint8_t *r = v + (size_t)p * vst;
        const __m256 v0 = kv_load8(r, d0, kind), v1 = kv_load8(r, d0 + 8, kind);
        for (int g = 0; g < gn; g++) {
            const __m256 wv = _mm256_broadcast_ss(w + (size_t)g * lw + p);
            a[g][0] = _mm256_fmadd_ps(wv, v0, a[g][0]);
            a[g][1] = _mm256_fmadd_ps(wv, v1, a[g][1]);
        }
    }
    for (int g = 0; g < gn; g++) {
        _mm256_storeu_ps(acc + (size_t)g * la, a[g][0]);
        _mm256_storeu_ps(acc + (size_t)g * la + 8, a[g][1]);
    }
}

static DP_ALWAYS_INLINE void kv_mix(float *acc, size_t la, int G, const float *w, size_t lw,
                                                         const void *v, size_t vst, int n, int hd, int kind) {
    const uint8_t *vb = v;
    const bool w32 = kind == ENG_TYPE_F32;
    if (hd % 16) {
        for (int g = 0; g < G; g++)
            for (int p = 0; p < n; p++)
                (w32 ? eng_kv_axpy_f32_avx2 : eng_kv_axpy_f16_avx2)(acc + (size_t)g * la, w[(size_t)g * lw + p], vb + (size_t)p * vst, hd);
        return;
    }
    const size_t rb = eng_row_size(kind, hd);
    /* rows as floats (widened) are loaded as they are, and six heads' 12 accumulators then fit
     * beside them; rows that are converted as they are loaded keep to four */
    const int GM = kind == ENG_TYPE_F32 ? 6 : 4;
    for (int p0 = 0; p0 < n; p0 += KV_CHUNK) {
        const int np = n - p0 < KV_CHUNK ? n - p0 : KV_CHUNK;
        eng_prefetch_kv(vb, vst, p0, KV_CHUNK, n, rb);
        for (int g0 = 0; g0 < G; g0 += GM) {
            const int gn = G - g0 < GM ? G - g0 : GM;
            for (int d0 = 0; d0 < hd; d0 += 16) {
                float *ag = acc + (size_t)g0 * la + d0;
                const float *wg = w + (size_t)g0 * lw + p0;
                const uint8_t *vd = vb + (size_t)p0 * vst;
                /* (GM is a constant of each kind's instance: the 5- and 6-head forms exist for floats only) */
                if (GM > 4 && gn > 4) {
                    if (gn == 5)
                        mix_x16(ag, la, 5, wg, lw, vd, vst, d0, np, kind);
                    else
                        mix_x16(ag, la, 6, wg, lw, vd, vst, d0, np, kind);
                } else {
                    switch (gn) {
                    case 1: mix_x16(ag, la, 1, wg, lw, vd, vst, d0, np, kind); break;
                    case 2: mix_x16(ag, la, 2, wg, lw, vd, vst, d0, np, kind); break;
                    case 3: mix_x16(ag, la, 3, wg, lw, vd, vst, d0, np, kind); break;
                    default: mix_x16(ag, la, 4, wg, lw, vd, vst, d0, np, kind); break;
                    }
                }
            }
        }
    }
}

/* V widened into slabs (kernels.h): per slab and group of up to 6 heads, all n rows with the
 * 12 accumulators in registers. Each element's fmas come in row order, as kv_mix's. */
void eng_kv_mix_slabs_avx2(float *acc, size_t la, int G, const float *w, size_t lw, const void *v, size_t vst, int n,
                           int hd) {
    for (int d0 = 0; d0 < hd; d0 += ENG_KV_SLAB) {
        const uint8_t *vs = (const uint8_t *)v + (size_t)(d0 / ENG_KV_SLAB) * vst;
        for (int g0 = 0; g0 < G; g0 += 6) {
            float *ag = acc + (size_t)g0 * la + d0;
            const float *wg = w + (size_t)g0 * lw;
            const size_t rs = ENG_KV_SLAB * sizeof(float);
            switch (G - g0 < 6 ? G - g0 : 6) {
            case 1: mix_x16(ag, la, 1, wg, lw, vs, rs, 0, n, ENG_TYPE_F32); break;
            case 2: mix_x16(ag, la, 2, wg, lw, vs, rs, 0, n, ENG_TYPE_F32); break;
            case 3: mix_x16(ag, la, 3, wg, lw, vs, rs, 0, n, ENG_TYPE_F32); break;
            case 4: mix_x16(ag, la, 4, wg, lw, vs, rs, 0, n, ENG_TYPE_F32); break;
            case 5: mix_x16(ag, la, 5, wg, lw, vs, rs, 0, n, ENG_TYPE_F32); break;
            default: mix_x16(ag, la, 6, wg, lw, vs, rs, 0, n, ENG_TYPE_F32); break;
            }
        }
    }
}

void eng_kv_mix_f16_avx2(float *acc, size_t la, int G, const float *w, size_t lw, const void *v, size_t vst, int n, int hd) {
    kv_mix(acc, la, G, w, lw, v, vst, n, hd, ENG_TYPE_F16);
}

void eng_kv_mix_f32_avx2(float *acc, size_t la, int G, const float *w, size_t lw, const void *v, size_t vst, int n, int hd) {
    kv_mix(acc, la, G, w, lw, v, vst, n, hd, ENG_TYPE_F32);
}

void eng_kv_mix_q8_0_avx2(float *acc, size_t la, int G, const float *w, size_t lw, const void *v, size_t vst, int n, int hd) {
    kv_mix(acc, la, G, w, lw, v, vst, n, hd, ENG_TYPE_Q8_0);
}
