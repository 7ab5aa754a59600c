/*
 * kernels_ref.c - scalar reference kernels (model-formats.md §2.5). These define what the SIMD
 * versions must compute; they are also the portable path for CPUs without AVX2.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "kernels_ref.h"
#include "quant.h"

#define F16(x) eng_f16_to_f32(x)

int eng_act_type(int wt) {
    switch (wt) {
    case ENG_TYPE_Q4_K: case ENG_TYPE_Q5_K: case ENG_TYPE_Q6_K: return ENG_TYPE_Q8_K;
    case ENG_TYPE_Q8_0: case ENG_TYPE_Q4_0: case ENG_TYPE_Q5_0: return ENG_TYPE_Q8_0;
    /* the types with a min: Q8_1 carries d * sum(q) so the min term costs one multiply */
    case ENG_TYPE_Q4_1: case ENG_TYPE_Q5_1: return ENG_TYPE_Q8_1;
    case ENG_TYPE_F16: return ENG_TYPE_F16;
    case ENG_TYPE_BF16: return ENG_TYPE_BF16;
    default: return ENG_TYPE_F32;
    }
}

size_t eng_act_row_size(int act_type, int64_t k) { return eng_row_size(act_type, k); }

/* One 32-value activation block: d = amax / 127, q = round(x * 127 / amax); returns d, and the
 * sum of the quants in *sum (Q8_1's s = d * sum). */
static float q8_block(const float *x, int8_t qs[32], int *sum) {
    float amax = 0.0f;
    for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    *sum = 0;
    for (int j = 0; j < 32; j++) *sum += qs[j] = (int8_t)lrintf(x[j] * id);
    return d;
}

void eng_act_quantize_ref(int act_type, const float *x, void *y, int64_t k) {
    int sum;
    if (act_type == ENG_TYPE_Q8_0) {
        eng_block_q8_0 *b = y;
        for (int64_t i = 0; i < k / 32; i++, x += 32) b[i].d = eng_f32_to_f16(q8_block(x, b[i].qs, &sum));
        return;
    }
    if (act_type == ENG_TYPE_Q8_1) {
        eng_block_q8_1 *b = y;
        for (int64_t i = 0; i < k / 32; i++, x += 32) {
            const float d = q8_block(x, b[i].qs, &sum);
            b[i].d = eng_f32_to_f16(d);
            b[i].s = eng_f32_to_f16((float)sum * d);
        }
        return;
    }
    eng_quantize_row(act_type, x, y, k); /* Q8_K, F16, BF16, F32: the reference rules */
}

/* How the 8-lane float dots here fold their lanes; eng_dot_f32_x4's bits depend on its being
 * eng_dot_f32's. */
static inline float sum8(const float s[8]) {
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

float eng_dot_f32(const float *a, const float *b, int64_t n) {
    float s[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) s[j] += a[i + j] * b[i + j];
    for (; i < n; i++) s[i & 7] += a[i] * b[i];
    return sum8(s);
}

/* The four rows' 32 partial sums are independent chains, where one row's 8 wait on each other's
 * adds; and b, which the exact matmul streams from L3 for every row, is read once per four rows.
 * Each partial sum adds the same products in the same order as eng_dot_f32's. */
void eng_dot_f32_x4(const float *a, size_t lda, const float *b, int64_t n, float out[4]) {
    float s[4][8] = {{0}};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int r = 0; r < 4; r++)
            for (int j = 0; j < 8; j++) s[r][j] += a[(size_t)r * lda + (size_t)i + (size_t)j] * b[i + j];
    for (; i < n; i++)
        for (int r = 0; r < 4; r++) s[r][i & 7] += a[(size_t)r * lda + (size_t)i] * b[i];
    for (int r = 0; r < 4; r++)
        out[r] = sum8(s[r]);
}

static float dot_f32(int64_t k, const void *w, const void *x) { return eng_dot_f32(w, x, k); }

static float dot_f16(int64_t k, const void *w, const void *x) {
    const eng_f16 *a = w, *b = x;
    float s[8] = {0};
    for (int64_t i = 0; i < k; i++) s[i & 7] += F16(a[i]) * F16(b[i]);
    return sum8(s);
}

static float dot_bf16(int64_t k, const void *w, const void *x) {
    const eng_bf16 *a = w, *b = x;
    float s[8] = {0};
    for (int64_t i = 0; i < k; i++) s[i & 7] += eng_bf16_to_f32(a[i]) * eng_bf16_to_f32(b[i]);
    return sum8(s);
}

static float dot_q8_0(int64_t k, const void *w, const void *x) {
    const eng_block_q8_0 *a = w, *b = x;
    float sum = 0;
    for (int64_t i = 0; i < k / 32; i++) {
        int s = 0;
        for (int j = 0; j < 32; j++) s += a[i].qs[j] * b[i].qs[j];
        sum += (float)s * (F16(a[i].d) * F16(b[i].d));
    }
    return sum;
}

static float dot_q4_0(int64_t k, const void *w, const void *x) {
    const eng_block_q4_0 *a = w;
    const eng_block_q8_0 *b = x;
    float sum = 0;
    for (int64_t i = 0; i < k / 32; i++) {
        int s = 0;
        for (int j = 0; j < 16; j++) {
            s += ((a[i].qs[j] & 0xF) - 8) * b[i].qs[j];
            s += ((a[i].qs[j] >> 4) - 8) * b[i].qs[j + 16];
        }
        sum += (float)s * (F16(a[i].d) * F16(b[i].d));
    }
    return sum;
}

/* Q4_K x Q8_K: per super-block d_a * (d * sum_j sc_j * dot_j - dmin * sum_j mn_j * bsum_j). */
static float dot_q4_k(int64_t k, const void *w, const void *x) {
    const eng_block_q4_k *a = w;
    const eng_block_q8_k *b = x;
    float sum = 0;
    for (int64_t i = 0; i < k / 256; i++) {
        int sumi = 0, summ = 0;
        const uint8_t *q = a[i].qs;
        const int8_t *y = b[i].qs;
        for (int c = 0; c < 4; c++, q += 32, y += 64) {
            int sc0, m0, sc1, m1;
            eng_k_scale_min(2 * c, a[i].scales, &sc0, &m0);
            eng_k_scale_min(2 * c + 1, a[i].scales, &sc1, &m1);
            int d0 = 0, d1 = 0;
            for (int l = 0; l < 32; l++) {
                d0 += (q[l] & 0xF) * y[l];
                d1 += (q[l] >> 4) * y[l + 32];
            }
            sumi += sc0 * d0 + sc1 * d1;
            summ += m0 * (b[i].bsums[4 * c] + b[i].bsums[4 * c + 1]) + m1 * (b[i].bsums[4 * c + 2] + b[i].bsums[4 * c + 3]);
        }
        sum += b[i].d * (F16(a[i].d) * (float)sumi - F16(a[i].dmin) * (float)summ);
    }
    return sum;
}

static float dot_q5_k(int64_t k, const void *w, const void *x) {
    const eng_block_q5_k *a = w;
    const eng_block_q8_k *b = x;
    float sum = 0;
    for (int64_t i = 0; i < k / 256; i++) {
        int sumi = 0, summ = 0;
        const uint8_t *q = a[i].qs, *qh = a[i].qh;
        const int8_t *y = b[i].qs;
        for (int c = 0; c < 4; c++, q += 32, y += 64) {
            int sc0, m0, sc1, m1;
            eng_k_scale_min(2 * c, a[i].scales, &sc0, &m0);
            eng_k_scale_min(2 * c + 1, a[i].scales, &sc1, &m1);
            int d0 = 0, d1 = 0;
            for (int l = 0; l < 32; l++) {
                d0 += ((q[l] & 0xF) | (((qh[l] >> (2 * c)) & 1) << 4)) * y[l];
                d1 += ((q[l] >> 4) | (((qh[l] >> (2 * c + 1)) & 1) << 4)) * y[l + 32];
            }
            sumi += sc0 * d0 + sc1 * d1;
            summ += m0 * (b[i].bsums[4 * c] + b[i].bsums[4 * c + 1]) + m1 * (b[i].bsums[4 * c + 2] + b[i].bsums[4 * c + 3]);
        }
        sum += b[i].d * (F16(a[i].d) * (float)sumi - F16(a[i].dmin) * (float)summ);
    }
    return sum;
}

/* Q6_K x Q8_K: d_a * d * sum over 16 sub-blocks of sc_k * sum (q6 - 32) * q8. */
static float dot_q6_k(int64_t k, const void *w, const void *x) {
    const eng_block_q6_k *a = w;
    const eng_block_q8_k *b = x;
    float sum = 0;
    for (int64_t i = 0; i < k / 256; i++) {
        int sumi = 0;
        const uint8_t *ql = a[i].ql, *qh = a[i].qh;
        const int8_t *sc = a[i].scales, *y = b[i].qs;
        for (int half = 0; half < 2; half++, ql += 64, qh += 32, sc += 8, y += 128) {
            int s[8] = {0};
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                s[is + 0] += ((int)((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32) * y[l];
                s[is + 2] += ((int)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32) * y[l + 32];
                s[is + 4] += ((int)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32) * y[l + 64];
                s[is + 6] += ((int)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32) * y[l + 96];
            }
            for (int j = 0; j < 8; j++) sumi += sc[j] * s[j];
        }
        sum += b[i].d * F16(a[i].d) * (float)sumi;
    }
    return sum;
}

/* Q5_0 x Q8_0: d_a * d_b * sum (q5 - 16) * q8, q5 = low nibble | bit of qh << 4. */
static float dot_q5_0(int64_t k, const void *w, const void *x) {
    const eng_block_q5_0 *a = w;
    const eng_block_q8_0 *b = x;
    float sum = 0;
    for (int64_t i = 0; i < k / 32; i++) {
        uint32_t h;
        memcpy(&h, a[i].qh, 4);
        int s = 0;
        for (int j = 0; j < 16; j++) {
            s += ((int)((a[i].qs[j] & 0xF) | (((h >> j) & 1) << 4)) - 16) * b[i].qs[j];
            s += ((int)((a[i].qs[j] >> 4) | (((h >> (j + 16)) & 1) << 4)) - 16) * b[i].qs[j + 16];
        }
        sum += (float)s * (F16(a[i].d) * F16(b[i].d));
    }
    return sum;
}

/* Q4_1 / Q5_1 x Q8_1: d_a * d_b * sum q * q8 + m_a * s_b (s_b = d_b * sum q8); Q5_1's fifth bit
 * of value j is bit j of qh. */
static float dot_min_type(int64_t k, const void *w, const void *x, bool five) {
    const eng_block_q8_1 *b = x;
    float sum = 0;
    for (int64_t i = 0; i < k / 32; i++) {
        const eng_block_q4_1 *a4 = (const eng_block_q4_1 *)w + i;
        const eng_block_q5_1 *a5 = (const eng_block_q5_1 *)w + i;
        const uint8_t *qs = five ? a5->qs : a4->qs;
        uint32_t h = 0;
        if (five) memcpy(&h, a5->qh, 4);
        int s = 0;
        for (int j = 0; j < 16; j++) {
            s += (int)((qs[j] & 0xF) | (((h >> j) & 1) << 4)) * b[i].qs[j];
            s += (int)((qs[j] >> 4) | (((h >> (j + 16)) & 1) << 4)) * b[i].qs[j + 16];
        }
        const float d = F16(five ? a5->d : a4->d), m = F16(five ? a5->m : a4->m);
        sum += (float)s * (d * F16(b[i].d)) + m * F16(b[i].s);
    }
    return sum;
}
static float dot_q4_1(int64_t k, const void *w, const void *x) { return dot_min_type(k, w, x, false); }
static float dot_q5_1(int64_t k, const void *w, const void *x) { return dot_min_type(k, w, x, true); }

/* Formats without an integer kernel: dequantize 256 weights at a time, f32 dot. */
#define DEQ_DOT(name, type)                                                       \
    static float name(int64_t k, const void *w, const void *x) {                  \
        const eng_type_traits *tr = eng_type_get(type);                           \
        const float *xf = x;                                                      \
        float tmp[256], sum = 0;                                                  \
        const int64_t step = tr->blck > 256 ? tr->blck : 256;                     \
        for (int64_t i = 0; i < k; i += step) {                                   \
            /* a row of 32-blocks may end inside the last 256 (width 896) */      \
            const int64_t n = k - i < step ? k - i : step;                        \
            tr->to_float((const uint8_t *)w + (size_t)(i / tr->blck) * tr->type_size, tmp, n); \
            sum += eng_dot_f32(tmp, xf + i, n);                                   \
        }                                                                         \
        return sum;                                                               \
    }
DEQ_DOT(dot_deq_q2_k, ENG_TYPE_Q2_K)
DEQ_DOT(dot_deq_q3_k, ENG_TYPE_Q3_K)

eng_vec_dot_fn eng_vec_dot_ref(int wt) {
    switch (wt) {
    case ENG_TYPE_F32: return dot_f32;
    case ENG_TYPE_F16: return dot_f16;
    case ENG_TYPE_BF16: return dot_bf16;
    case ENG_TYPE_Q8_0: return dot_q8_0;
    case ENG_TYPE_Q4_0: return dot_q4_0;
    case ENG_TYPE_Q4_K: return dot_q4_k;
    case ENG_TYPE_Q5_K: return dot_q5_k;
    case ENG_TYPE_Q6_K: return dot_q6_k;
    case ENG_TYPE_Q4_1: return dot_q4_1;
    case ENG_TYPE_Q5_0: return dot_q5_0;
    case ENG_TYPE_Q5_1: return dot_q5_1;
    case ENG_TYPE_Q2_K: return dot_deq_q2_k;
    case ENG_TYPE_Q3_K: return dot_deq_q3_k;
    default: return NULL;
    }
}

void eng_delta_step_ref(float *S, const float *k, const float *v, const float *q, float decay, float beta, int dk,
                        int dv, float *o) {
    for (int j = 0; j < dv; j++) {
        float *Sj = S + (size_t)j * dk;
        float u = 0;
        for (int i = 0; i < dk; i++) {
            Sj[i] *= decay;
            u += Sj[i] * k[i];
        }
        const float delta = beta * (v[j] - u);
        float oj = 0;
        for (int i = 0; i < dk; i++) {
            Sj[i] += k[i] * delta;
            oj += Sj[i] * q[i];
        }
        o[j] = oj;
    }
}

#define DELTA_CHUNK_NAME eng_delta_chunk_ref
#define DELTA_CHUNK_DOT dc_dot_ref
#include "delta_chunk.h"

float eng_kv_dot_f32_ref(const float *q, const void *k, int n) { return eng_dot_f32(q, k, n); }

float eng_kv_dot_f16_ref(const float *q, const void *k, int n) {
    const eng_f16 *h = k;
    float s[8] = {0};
    for (int i = 0; i < n; i++) s[i & 7] += q[i] * F16(h[i]);
    return sum8(s);
}

void eng_kv_axpy_f32_ref(float *acc, float w, const void *v, int n) {
    const float *x = v;
    for (int i = 0; i < n; i++) acc[i] += w * x[i];
}

void eng_kv_axpy_f16_ref(float *acc, float w, const void *v, int n) {
    const eng_f16 *x = v;
    for (int i = 0; i < n; i++) acc[i] += w * F16(x[i]);
}

float eng_softmax_tile_ref(float *s, int n, float scale, float *m, double *l) {
    const float mo = *m;
    float mx = mo;
    for (int p = 0; p < n; p++) {
        s[p] *= scale;
        if (s[p] > mx) mx = s[p];
    }
    double sum = 0;
    for (int p = 0; p < n; p++) {
        s[p] = expf(s[p] - mx);
        sum += s[p];
    }
    const float c = mo == -INFINITY ? 0.0f : expf(mo - mx);
    *l = *l * c + sum;
    *m = mx;
    return c;
}

void eng_swiglu_ref(const float *g, const float *u, float *out, int64_t n) {
    for (int64_t i = 0; i < n; i++) out[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

void eng_silu_ref(const float *x, float *out, int64_t n) {
    for (int64_t i = 0; i < n; i++) out[i] = x[i] / (1.0f + expf(-x[i]));
}

void eng_mul_sigmoid_ref(float *x, const float *g, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] *= 1.0f / (1.0f + expf(-g[i]));
}
