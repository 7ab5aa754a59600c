/*
 * kernels_avx2.c - AVX2 + FMA + F16C vec-dot kernels (compiled with those target flags; called
 * only after kernels_dispatch.c checked the CPU). Same arithmetic as kernels_ref.c: integer
 * block sums are exact, only the float summation order differs.
 */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"
#include "kscales.h"
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

/* Per super-block state shared by the 1-row and 4-row kernels, so both compute bit-identical
 * results: acc += (d_a * d) * sumi (8 lanes), accm += (-d_a * dmin) * (mins . bsums) (4 lanes). */
typedef struct k_acc {
    __m256 acc;
    __m128 accm;
} k_acc;

static inline void k4_finish(k_acc *a, const eng_block_q8_k *y, float d, float dmin, __m256i sumi, __m128i mins16) {
    const __m128i bs = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)y->bsums),
                                      _mm_loadu_si128((const __m128i *)(y->bsums + 8)));
    const __m128i pm = _mm_madd_epi16(mins16, bs);
    a->acc = _mm256_fmadd_ps(_mm256_set1_ps(y->d * d), _mm256_cvtepi32_ps(sumi), a->acc);
    a->accm = _mm_fmadd_ps(_mm_set1_ps(-y->d * dmin), _mm_cvtepi32_ps(pm), a->accm);
}

static inline float k_result(const k_acc *a) {
    __m128 m = a->accm;
    m = _mm_add_ps(m, _mm_movehl_ps(m, m));
    m = _mm_add_ss(m, _mm_movehdup_ps(m));
    return hsum8(a->acc) + _mm_cvtss_f32(m);
}

static inline __m256i q4k_sumi(const uint8_t *q, const int8_t *y, const int16_t sc[8], const __m256i m4) {
    __m256i sumi = _mm256_setzero_si256();
    for (int c = 0; c < 4; c++, q += 32, y += 64) {
        const __m256i raw = _mm256_loadu_si256((const __m256i *)q);
        const __m256i lo = _mm256_and_si256(raw, m4), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
        const __m256i p0 = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)y));
        const __m256i p1 = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(y + 32)));
        sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(_mm256_madd_epi16(p0, _mm256_set1_epi16(sc[2 * c])),
                                                       _mm256_madd_epi16(p1, _mm256_set1_epi16(sc[2 * c + 1]))));
    }
    return sumi;
}

static inline void q4k_scales(const uint8_t *packed, int16_t sc[8], __m128i *mins16) {
    uint32_t u[4];
    eng_k4_unpack_scales(packed, u);
    const __m128i v = _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, (int)u[1], (int)u[0]));
    _mm_storeu_si128((__m128i *)sc, v);
    *mins16 = _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, (int)u[3], (int)u[2]));
}

static float dot_q4_k(int64_t k, const void *w, const void *x) {
    const eng_block_q4_k *a = w;
    const eng_block_q8_k *b = x;
    const __m256i m4 = _mm256_set1_epi8(0xF);
    k_acc acc = {_mm256_setzero_ps(), _mm_setzero_ps()};
    for (int64_t i = 0; i < k / 256; i++) {
        int16_t sc[8];
        __m128i mins16;
        q4k_scales(a[i].scales, sc, &mins16);
        k4_finish(&acc, &b[i], f16(a[i].d), f16(a[i].dmin), q4k_sumi(a[i].qs, b[i].qs, sc, m4), mins16);
    }
    return k_result(&acc);
}

static void dot4_q4_k(int64_t k, const void *w, const void *x, size_t xs, float out[4]) {
    const eng_block_q4_k *a = w;
    const __m256i m4 = _mm256_set1_epi8(0xF);
    k_acc acc[4];
    for (int j = 0; j < 4; j++) acc[j] = (k_acc){_mm256_setzero_ps(), _mm_setzero_ps()};
    for (int64_t i = 0; i < k / 256; i++) {
        int16_t sc[8];
        __m128i mins16;
        q4k_scales(a[i].scales, sc, &mins16);
        const float d = f16(a[i].d), dmin = f16(a[i].dmin);
        /* decode the 4-bit weights once, then four activation rows */
        __m256i lo[4], hi[4];
        for (int c = 0; c < 4; c++) {
            const __m256i raw = _mm256_loadu_si256((const __m256i *)(a[i].qs + 32 * c));
            lo[c] = _mm256_and_si256(raw, m4);
            hi[c] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
        }
        for (int j = 0; j < 4; j++) {
            const eng_block_q8_k *y = (const eng_block_q8_k *)(const void *)((const uint8_t *)x + j * xs) + i;
            __m256i sumi = _mm256_setzero_si256();
            for (int c = 0; c < 4; c++) {
                const __m256i p0 = _mm256_maddubs_epi16(lo[c], _mm256_loadu_si256((const __m256i *)(y->qs + 64 * c)));
                const __m256i p1 = _mm256_maddubs_epi16(hi[c], _mm256_loadu_si256((const __m256i *)(y->qs + 64 * c + 32)));
                sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(_mm256_madd_epi16(p0, _mm256_set1_epi16(sc[2 * c])),
                                                               _mm256_madd_epi16(p1, _mm256_set1_epi16(sc[2 * c + 1]))));
            }
            k4_finish(&acc[j], y, d, dmin, sumi, mins16);
        }
    }
    for (int j = 0; j < 4; j++) out[j] = k_result(&acc[j]);
}

static float dot_q5_k(int64_t k, const void *w, const void *x) {
    const eng_block_q5_k *a = w;
    const eng_block_q8_k *b = x;
    const __m256i m4 = _mm256_set1_epi8(0xF), one = _mm256_set1_epi8(1);
    k_acc acc = {_mm256_setzero_ps(), _mm_setzero_ps()};
    for (int64_t i = 0; i < k / 256; i++) {
        int16_t sc[8];
        __m128i mins16;
        q4k_scales(a[i].scales, sc, &mins16);
        __m256i sumi = _mm256_setzero_si256();
        const uint8_t *q = a[i].qs;
        const int8_t *y = b[i].qs;
        const __m256i qh = _mm256_loadu_si256((const __m256i *)a[i].qh);
        for (int c = 0; c < 4; c++, q += 32, y += 64) {
            const __m256i raw = _mm256_loadu_si256((const __m256i *)q);
            const __m256i h0 = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * c), one);
            const __m256i h1 = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * c + 1), one);
            const __m256i lo = _mm256_or_si256(_mm256_and_si256(raw, m4), _mm256_slli_epi16(h0, 4));
            const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(raw, 4), m4), _mm256_slli_epi16(h1, 4));
            const __m256i p0 = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)y));
            const __m256i p1 = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(y + 32)));
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(_mm256_madd_epi16(p0, _mm256_set1_epi16(sc[2 * c])),
                                                           _mm256_madd_epi16(p1, _mm256_set1_epi16(sc[2 * c + 1]))));
        }
        k4_finish(&acc, &b[i], f16(a[i].d), f16(a[i].dmin), sumi, mins16);
    }
    return k_result(&acc);
}

/* Q6_K: sum over sub-blocks of sc * sum (q6 - 32) * q8 = sc * (sum q6 * q8) - 32 * sc * bsum. */
static inline void q6k_decode(const eng_block_q6_k *a, __m256i q[8]) {
    const __m256i m4 = _mm256_set1_epi8(0xF), m3 = _mm256_set1_epi8(3);
    for (int half = 0; half < 2; half++) {
        const uint8_t *ql = a->ql + 64 * half, *qh = a->qh + 32 * half;
        const __m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
        const __m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
        const __m256i h = _mm256_loadu_si256((const __m256i *)qh);
        __m256i *o = q + 4 * half;
        o[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(h, m3), 4));
        o[1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), m3), 4));
        o[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                               _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 4), m3), 4));
        o[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                               _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 6), m3), 4));
    }
}

static inline void q6k_block(k_acc *acc, const eng_block_q6_k *a, const __m256i q[8], const __m256i sc16[8],
                             const __m256i scales_all, const eng_block_q8_k *y) {
    __m256i sumi = _mm256_setzero_si256();
    for (int p = 0; p < 8; p++) {
        const __m256i yv = _mm256_loadu_si256((const __m256i *)(y->qs + 32 * p));
        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(_mm256_maddubs_epi16(q[p], yv), sc16[p]));
    }
    /* 32 * sum_s sc_s * bsum_s, as 8 lanes */
    const __m256i corr = _mm256_madd_epi16(scales_all, _mm256_loadu_si256((const __m256i *)y->bsums));
    sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(corr, 5));
    acc->acc = _mm256_fmadd_ps(_mm256_set1_ps(y->d * f16(a->d)), _mm256_cvtepi32_ps(sumi), acc->acc);
}

static inline void q6k_scales(const eng_block_q6_k *a, __m256i sc16[8], __m256i *all) {
    for (int p = 0; p < 8; p++)
        sc16[p] = _mm256_set_m128i(_mm_set1_epi16(a->scales[2 * p + 1]), _mm_set1_epi16(a->scales[2 * p]));
    *all = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)a->scales));
}

static float dot_q6_k(int64_t k, const void *w, const void *x) {
    const eng_block_q6_k *a = w;
    const eng_block_q8_k *b = x;
    k_acc acc = {_mm256_setzero_ps(), _mm_setzero_ps()};
    for (int64_t i = 0; i < k / 256; i++) {
        __m256i q[8], sc16[8], all;
        q6k_decode(&a[i], q);
        q6k_scales(&a[i], sc16, &all);
        q6k_block(&acc, &a[i], q, sc16, all, &b[i]);
    }
    return k_result(&acc);
}

static void dot4_q6_k(int64_t k, const void *w, const void *x, size_t xs, float out[4]) {
    const eng_block_q6_k *a = w;
    k_acc acc[4];
    for (int j = 0; j < 4; j++) acc[j] = (k_acc){_mm256_setzero_ps(), _mm_setzero_ps()};
    for (int64_t i = 0; i < k / 256; i++) {
        __m256i q[8], sc16[8], all;
        q6k_decode(&a[i], q);
        q6k_scales(&a[i], sc16, &all);
        for (int j = 0; j < 4; j++)
            q6k_block(&acc[j], &a[i], q, sc16, all, (const eng_block_q8_k *)(const void *)((const uint8_t *)x + j * xs) + i);
    }
    for (int j = 0; j < 4; j++) out[j] = k_result(&acc[j]);
}

/* ---- one weight row x 4 activation rows ------------------------------------------------- */

static void dot4_q8_0(int64_t k, const void *w, const void *x, size_t xs, float out[4]) {
    const eng_block_q8_0 *a = w;
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t i = 0; i < k / 32; i++) {
        const __m256i qa = _mm256_loadu_si256((const __m256i *)a[i].qs);
        const __m256i ax = _mm256_sign_epi8(qa, qa);
        const float da = f16(a[i].d);
        for (int j = 0; j < 4; j++) {
            const eng_block_q8_0 *b = (const eng_block_q8_0 *)(const void *)((const uint8_t *)x + j * xs) + i;
            const __m256i sy = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)b->qs), qa);
            const __m256 d = _mm256_set1_ps(da * f16(b->d));
            acc[j] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(mul_u8_i8(ax, sy)), acc[j]);
        }
    }
    for (int j = 0; j < 4; j++) out[j] = hsum8(acc[j]);
}

eng_vec_dot4_fn eng_vec_dot4_avx2(int wt);
eng_vec_dot4_fn eng_vec_dot4_avx2(int wt) {
    switch (wt) {
    case ENG_TYPE_Q8_0: return dot4_q8_0;
    case ENG_TYPE_Q4_K: return dot4_q4_k;
    case ENG_TYPE_Q6_K: return dot4_q6_k;
    default: return NULL;
    }
}

eng_vec_dot_fn eng_vec_dot_avx2(int wt);
eng_vec_dot_fn eng_vec_dot_avx2(int wt) {
    switch (wt) {
    case ENG_TYPE_F32: return dot_f32;
    case ENG_TYPE_F16: return dot_f16;
    case ENG_TYPE_BF16: return dot_bf16;
    case ENG_TYPE_Q8_0: return dot_q8_0;
    case ENG_TYPE_Q4_0: return dot_q4_0;
    case ENG_TYPE_Q4_K: return dot_q4_k;
    case ENG_TYPE_Q5_K: return dot_q5_k;
    case ENG_TYPE_Q6_K: return dot_q6_k;
    default: return NULL;
    }
}

/* ---- Gated DeltaNet step and conversions ------------------------------------------------- */

void eng_delta_step_avx2(float *S, const float *k, const float *v, const float *q, float decay, float beta, int dk,
                         int dv, float *o);
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

void eng_f16_to_f32_row_avx2(const uint16_t *x, float *y, int64_t n);
void eng_f16_to_f32_row_avx2(const uint16_t *x, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
    for (; i < n; i++) y[i] = f16(x[i]);
}

#include <math.h>
#define DELTA_CHUNK_NAME eng_delta_chunk_avx2
#define DELTA_CHUNK_DOT dc_dot_avx2
#include "delta_chunk.h"

/* ---- attention rows ---------------------------------------------------------------------- */

float eng_kv_dot_f16_avx2(const float *q, const void *k, int n);
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

float eng_kv_dot_f32_avx2(const float *q, const void *k, int n);
float eng_kv_dot_f32_avx2(const float *q, const void *k, int n) { return dot_f32(n, k, q); }

void eng_kv_axpy_f16_avx2(float *acc, float w, const void *v, int n);
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

void eng_kv_axpy_f32_avx2(float *acc, float w, const void *v, int n);
void eng_kv_axpy_f32_avx2(float *acc, float w, const void *v, int n) {
    const float *x = v;
    const __m256 vw = _mm256_set1_ps(w);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(vw, _mm256_loadu_ps(x + i), _mm256_loadu_ps(acc + i)));
    for (; i < n; i++) acc[i] += w * x[i];
}
