/*
 * kernels_avx2.c - AVX2 + FMA + F16C vec-dot kernels (compiled with those target flags; called
 * only after kernels_dispatch.c checked the CPU). Same arithmetic as kernels_ref.c: integer
 * block sums are exact, only the float summation order differs.
 */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"
#include "quant.h"

static inline float hsum8(__m256 v) {
    __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
    return _mm_cvtss_f32(lo);
}

static inline int hsum_i32_8(__m256i v) {
    __m128i lo = _mm256_castsi256_si128(v), hi = _mm256_extracti128_si256(v, 1);
    lo = _mm_add_epi32(lo, hi);
    lo = _mm_add_epi32(lo, _mm_shuffle_epi32(lo, 0x4E));
    lo = _mm_add_epi32(lo, _mm_shuffle_epi32(lo, 0xB1));
    return _mm_cvtsi128_si32(lo);
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
    for (; i < k; i++) s += eng_f16_to_f32(a[i]) * eng_f16_to_f32(b[i]);
    return s;
}

static float dot_q8_0(int64_t k, const void *w, const void *x) {
    const eng_block_q8_0 *a = w, *b = x;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < k / 32; i++) {
        const __m256i qa = _mm256_loadu_si256((const __m256i *)a[i].qs);
        const __m256i qb = _mm256_loadu_si256((const __m256i *)b[i].qs);
        const __m256 d = _mm256_set1_ps(eng_f16_to_f32(a[i].d) * eng_f16_to_f32(b[i].d));
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
        const __m256 d = _mm256_set1_ps(eng_f16_to_f32(a[i].d) * eng_f16_to_f32(b[i].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(mul_i8_i8(q, qb)), acc);
    }
    return hsum8(acc);
}

static inline void scale_min_k4(int j, const uint8_t *s, int *sc, int *mn) {
    if (j < 4) {
        *sc = s[j] & 63;
        *mn = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
        *mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

static float dot_q4_k(int64_t k, const void *w, const void *x) {
    const eng_block_q4_k *a = w;
    const eng_block_q8_k *b = x;
    const __m256i m4 = _mm256_set1_epi8(0xF);
    float sum = 0;
    for (int64_t i = 0; i < k / 256; i++) {
        int sc[8], mn[8];
        for (int j = 0; j < 8; j++) scale_min_k4(j, a[i].scales, &sc[j], &mn[j]);
        __m256i sumi = _mm256_setzero_si256();
        const uint8_t *q = a[i].qs;
        const int8_t *y = b[i].qs;
        for (int c = 0; c < 4; c++, q += 32, y += 64) {
            const __m256i raw = _mm256_loadu_si256((const __m256i *)q);
            const __m256i lo = _mm256_and_si256(raw, m4);
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
            const __m256i p0 = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)y));
            const __m256i p1 = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(y + 32)));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p0, _mm256_set1_epi16((int16_t)sc[2 * c])));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p1, _mm256_set1_epi16((int16_t)sc[2 * c + 1])));
        }
        int summ = 0;
        for (int j = 0; j < 8; j++) summ += mn[j] * (b[i].bsums[2 * j] + b[i].bsums[2 * j + 1]);
        sum += b[i].d * (eng_f16_to_f32(a[i].d) * (float)hsum_i32_8(sumi) - eng_f16_to_f32(a[i].dmin) * (float)summ);
    }
    return sum;
}

static float dot_q5_k(int64_t k, const void *w, const void *x) {
    const eng_block_q5_k *a = w;
    const eng_block_q8_k *b = x;
    const __m256i m4 = _mm256_set1_epi8(0xF), one = _mm256_set1_epi8(1);
    float sum = 0;
    for (int64_t i = 0; i < k / 256; i++) {
        int sc[8], mn[8];
        for (int j = 0; j < 8; j++) scale_min_k4(j, a[i].scales, &sc[j], &mn[j]);
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
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p0, _mm256_set1_epi16((int16_t)sc[2 * c])));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p1, _mm256_set1_epi16((int16_t)sc[2 * c + 1])));
        }
        int summ = 0;
        for (int j = 0; j < 8; j++) summ += mn[j] * (b[i].bsums[2 * j] + b[i].bsums[2 * j + 1]);
        sum += b[i].d * (eng_f16_to_f32(a[i].d) * (float)hsum_i32_8(sumi) - eng_f16_to_f32(a[i].dmin) * (float)summ);
    }
    return sum;
}

/* Q6_K: q6 in [0, 63] times q8, minus 32 * sum(q8) per sub-block (from bsums), times scale. */
static float dot_q6_k(int64_t k, const void *w, const void *x) {
    const eng_block_q6_k *a = w;
    const eng_block_q8_k *b = x;
    const __m256i m4 = _mm256_set1_epi8(0xF), m3 = _mm256_set1_epi8(3);
    float sum = 0;
    for (int64_t i = 0; i < k / 256; i++) {
        const uint8_t *ql = a[i].ql, *qh = a[i].qh;
        const int8_t *sc = a[i].scales, *y = b[i].qs;
        __m256i sumi = _mm256_setzero_si256();
        for (int half = 0; half < 2; half++, ql += 64, qh += 32, sc += 8, y += 128) {
            const __m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
            const __m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
            const __m256i h = _mm256_loadu_si256((const __m256i *)qh);
            __m256i q[4];
            q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(h, m3), 4));
            q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), m3), 4));
            q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 4), m3), 4));
            q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 6), m3), 4));
            for (int part = 0; part < 4; part++) {
                const __m256i yv = _mm256_loadu_si256((const __m256i *)(y + 32 * part));
                const __m256i p = _mm256_maddubs_epi16(q[part], yv); /* 16 x i16, each two products */
                /* the first 8 i16 lanes cover elements 0..15 (scale is + 2 part), the next 8 elements 16..31 */
                const __m256i scales = _mm256_set_m128i(_mm_set1_epi16(sc[2 * part + 1]), _mm_set1_epi16(sc[2 * part]));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, scales));
            }
        }
        /* subtract 32 * sum(q8) * scale per 16-element sub-block */
        int corr = 0;
        for (int j = 0; j < 16; j++) corr += a[i].scales[j] * b[i].bsums[j];
        sum += b[i].d * eng_f16_to_f32(a[i].d) * (float)(hsum_i32_8(sumi) - 32 * corr);
    }
    return sum;
}

/* ---- one weight row x 4 activation rows ------------------------------------------------- */

static void dot4_q8_0(int64_t k, const void *w, const void *x, size_t xs, float out[4]) {
    const eng_block_q8_0 *a = w;
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t i = 0; i < k / 32; i++) {
        const __m256i qa = _mm256_loadu_si256((const __m256i *)a[i].qs);
        const __m256i ax = _mm256_sign_epi8(qa, qa);
        const float da = eng_f16_to_f32(a[i].d);
        for (int j = 0; j < 4; j++) {
            const eng_block_q8_0 *b = (const eng_block_q8_0 *)(const void *)((const uint8_t *)x + j * xs) + i;
            const __m256i sy = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)b->qs), qa);
            const __m256 d = _mm256_set1_ps(da * eng_f16_to_f32(b->d));
            acc[j] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(mul_u8_i8(ax, sy)), acc[j]);
        }
    }
    for (int j = 0; j < 4; j++) out[j] = hsum8(acc[j]);
}

static void dot4_q4_k(int64_t k, const void *w, const void *x, size_t xs, float out[4]) {
    const eng_block_q4_k *a = w;
    const __m256i m4 = _mm256_set1_epi8(0xF);
    float sum[4] = {0, 0, 0, 0};
    for (int64_t i = 0; i < k / 256; i++) {
        int sc[8], mn[8];
        for (int j = 0; j < 8; j++) scale_min_k4(j, a[i].scales, &sc[j], &mn[j]);
        __m256i sumi[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),
                           _mm256_setzero_si256()};
        const eng_block_q8_k *b[4];
        for (int j = 0; j < 4; j++) b[j] = (const eng_block_q8_k *)(const void *)((const uint8_t *)x + j * xs) + i;
        const uint8_t *q = a[i].qs;
        for (int c = 0; c < 4; c++, q += 32) {
            const __m256i raw = _mm256_loadu_si256((const __m256i *)q);
            const __m256i lo = _mm256_and_si256(raw, m4);
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
            const __m256i s0 = _mm256_set1_epi16((int16_t)sc[2 * c]), s1 = _mm256_set1_epi16((int16_t)sc[2 * c + 1]);
            for (int j = 0; j < 4; j++) {
                const int8_t *y = b[j]->qs + 64 * c;
                const __m256i p0 = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)y));
                const __m256i p1 = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(y + 32)));
                sumi[j] = _mm256_add_epi32(sumi[j], _mm256_add_epi32(_mm256_madd_epi16(p0, s0), _mm256_madd_epi16(p1, s1)));
            }
        }
        const float d = eng_f16_to_f32(a[i].d), dmin = eng_f16_to_f32(a[i].dmin);
        for (int j = 0; j < 4; j++) {
            int summ = 0;
            for (int s = 0; s < 8; s++) summ += mn[s] * (b[j]->bsums[2 * s] + b[j]->bsums[2 * s + 1]);
            sum[j] += b[j]->d * (d * (float)hsum_i32_8(sumi[j]) - dmin * (float)summ);
        }
    }
    for (int j = 0; j < 4; j++) out[j] = sum[j];
}

static void dot4_q6_k(int64_t k, const void *w, const void *x, size_t xs, float out[4]) {
    const eng_block_q6_k *a = w;
    const __m256i m4 = _mm256_set1_epi8(0xF), m3 = _mm256_set1_epi8(3);
    float sum[4] = {0, 0, 0, 0};
    for (int64_t i = 0; i < k / 256; i++) {
        const uint8_t *ql = a[i].ql, *qh = a[i].qh;
        const int8_t *sc = a[i].scales;
        const eng_block_q8_k *b[4];
        for (int j = 0; j < 4; j++) b[j] = (const eng_block_q8_k *)(const void *)((const uint8_t *)x + j * xs) + i;
        __m256i sumi[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),
                           _mm256_setzero_si256()};
        for (int half = 0; half < 2; half++, ql += 64, qh += 32, sc += 8) {
            const __m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
            const __m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
            const __m256i h = _mm256_loadu_si256((const __m256i *)qh);
            __m256i q[4];
            q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(h, m3), 4));
            q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), m3), 4));
            q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 4), m3), 4));
            q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 6), m3), 4));
            for (int part = 0; part < 4; part++) {
                const __m256i scales = _mm256_set_m128i(_mm_set1_epi16(sc[2 * part + 1]), _mm_set1_epi16(sc[2 * part]));
                for (int j = 0; j < 4; j++) {
                    const __m256i yv = _mm256_loadu_si256((const __m256i *)(b[j]->qs + 128 * half + 32 * part));
                    sumi[j] = _mm256_add_epi32(sumi[j], _mm256_madd_epi16(_mm256_maddubs_epi16(q[part], yv), scales));
                }
            }
        }
        const float d = eng_f16_to_f32(a[i].d);
        for (int j = 0; j < 4; j++) {
            int corr = 0;
            for (int s = 0; s < 16; s++) corr += a[i].scales[s] * b[j]->bsums[s];
            sum[j] += b[j]->d * d * (float)(hsum_i32_8(sumi[j]) - 32 * corr);
        }
    }
    for (int j = 0; j < 4; j++) out[j] = sum[j];
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
    case ENG_TYPE_Q8_0: return dot_q8_0;
    case ENG_TYPE_Q4_0: return dot_q4_0;
    case ENG_TYPE_Q4_K: return dot_q4_k;
    case ENG_TYPE_Q5_K: return dot_q5_k;
    case ENG_TYPE_Q6_K: return dot_q6_k;
    default: return NULL;
    }
}
