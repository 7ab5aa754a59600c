/*
 * quant_ref.c - reference quantizers: f32 rows into the block formats of quant.h.
 *
 * DESIGN: scalar and deterministic (same input, same bytes, on every CPU), so quantized files
 * and activation blocks are reproducible. Q8_0 and Q8_K follow the exact rounding rules of
 * model-formats.md §2.3/2.4 because they quantize activations and must match the integer kernels'
 * expectations. The weight formats (Q4_K, Q5_K, Q6_K) use our own search: for each sub-block a
 * few candidate scales around the min/max fit, each refined by weighted least squares, keeping
 * the one with the smallest weighted error; the weights |x| + rms favour large values, which
 * dominate a dot product. Output is not byte-identical to llama-quantize (not a goal), but the
 * error is of the same size (tests/unit/test_quant.c pins the bounds).
 */
#include <math.h>
#include <string.h>

#include "quant.h"

#define H(x) eng_f32_to_f16(x)
#define F(x) eng_f16_to_f32(x)

static inline int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }
/* Round half to even, as the hardware does in its default mode. */
static inline int nearest_int(float x) { return (int)lrintf(x); }

void eng_quantize_row_f32(const float *x, void *y, int64_t n) { memcpy(y, x, (size_t)n * 4); }

void eng_quantize_row_f16(const float *x, void *y, int64_t n) {
    eng_f16 *o = y;
    for (int64_t i = 0; i < n; i++) o[i] = H(x[i]);
}

void eng_quantize_row_bf16(const float *x, void *y, int64_t n) {
    eng_bf16 *o = y;
    for (int64_t i = 0; i < n; i++) o[i] = eng_f32_to_bf16(x[i]);
}

/* ---- 32-element formats ----------------------------------------------------------------- */

void eng_quantize_row_q8_0(const float *x, void *y, int64_t n) {
    eng_block_q8_0 *b = y;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = H(d);
        for (int j = 0; j < 32; j++) b[i].qs[j] = (int8_t)roundf(x[j] * id);
    }
}

/* The signed value of largest magnitude (first one on ties). */
static float signed_absmax(const float *x, int n) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++) {
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    return max;
}

void eng_quantize_row_q4_0(const float *x, void *y, int64_t n) {
    eng_block_q4_0 *b = y;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        const float d = signed_absmax(x, 32) / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = H(d);
        for (int j = 0; j < 16; j++) {
            int q0 = clampi((int)floorf(x[j] * id + 8.5f), 0, 15);
            int q1 = clampi((int)floorf(x[j + 16] * id + 8.5f), 0, 15);
            b[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

void eng_quantize_row_q4_1(const float *x, void *y, int64_t n) {
    eng_block_q4_1 *b = y;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float mn = x[0], mx = x[0];
        for (int j = 1; j < 32; j++) {
            mn = fminf(mn, x[j]);
            mx = fmaxf(mx, x[j]);
        }
        const float d = (mx - mn) / 15.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = H(d);
        b[i].m = H(mn);
        for (int j = 0; j < 16; j++) {
            int q0 = clampi((int)floorf((x[j] - mn) * id + 0.5f), 0, 15);
            int q1 = clampi((int)floorf((x[j + 16] - mn) * id + 0.5f), 0, 15);
            b[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

void eng_quantize_row_q5_0(const float *x, void *y, int64_t n) {
    eng_block_q5_0 *b = y;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        const float d = signed_absmax(x, 32) / -16.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        uint32_t qh = 0;
        b[i].d = H(d);
        for (int j = 0; j < 16; j++) {
            int q0 = clampi((int)floorf(x[j] * id + 16.5f), 0, 31);
            int q1 = clampi((int)floorf(x[j + 16] * id + 16.5f), 0, 31);
            b[i].qs[j] = (uint8_t)((q0 & 0xF) | ((q1 & 0xF) << 4));
            qh |= (uint32_t)(q0 >> 4) << j;
            qh |= (uint32_t)(q1 >> 4) << (j + 16);
        }
        memcpy(b[i].qh, &qh, 4);
    }
}

void eng_quantize_row_q5_1(const float *x, void *y, int64_t n) {
    eng_block_q5_1 *b = y;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float mn = x[0], mx = x[0];
        for (int j = 1; j < 32; j++) {
            mn = fminf(mn, x[j]);
            mx = fmaxf(mx, x[j]);
        }
        const float d = (mx - mn) / 31.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        uint32_t qh = 0;
        b[i].d = H(d);
        b[i].m = H(mn);
        for (int j = 0; j < 16; j++) {
            int q0 = clampi((int)floorf((x[j] - mn) * id + 0.5f), 0, 31);
            int q1 = clampi((int)floorf((x[j + 16] - mn) * id + 0.5f), 0, 31);
            b[i].qs[j] = (uint8_t)((q0 & 0xF) | ((q1 & 0xF) << 4));
            qh |= (uint32_t)(q0 >> 4) << j;
            qh |= (uint32_t)(q1 >> 4) << (j + 16);
        }
        memcpy(b[i].qh, &qh, 4);
    }
}

/* ---- K-quants --------------------------------------------------------------------------- */

/* Fits x ~= scale * L - offset with L in [0, nmax] and offset >= 0 (the format's min is
 * subtracted). Returns scale (>= 0) and offset. */
static void fit_scale_min(const float *x, const float *w, int n, int nmax, float *scale, float *offset) {
    float xmin = x[0], xmax = x[0];
    for (int i = 1; i < n; i++) {
        xmin = fminf(xmin, x[i]);
        xmax = fmaxf(xmax, x[i]);
    }
    if (xmin > 0.0f) xmin = 0.0f;
    if (xmax <= xmin) {
        *scale = 0.0f;
        *offset = -xmin;
        return;
    }
    float best_err = INFINITY, best_s = (xmax - xmin) / (float)nmax, best_m = xmin;
    for (int step = -10; step <= 10; step++) {
        const float iscale = ((float)nmax + 0.1f * (float)step) / (xmax - xmin);
        if (iscale <= 0.0f) continue;
        double sw = 0, swl = 0, swll = 0, swx = 0, swlx = 0;
        int L[256];
        for (int i = 0; i < n; i++) {
            L[i] = clampi(nearest_int(iscale * (x[i] - xmin)), 0, nmax);
            sw += w[i];
            swl += w[i] * L[i];
            swll += w[i] * (double)L[i] * L[i];
            swx += w[i] * x[i];
            swlx += w[i] * L[i] * (double)x[i];
        }
        double det = sw * swll - swl * swl;
        double s, m;
        if (det > 0) {
            s = (sw * swlx - swl * swx) / det;
            m = (swll * swx - swl * swlx) / det;
        } else {
            s = 1.0 / iscale;
            m = xmin;
        }
        if (m > 0) { /* the offset must be a subtraction */
            m = 0;
            s = swll > 0 ? swlx / swll : 0;
        }
        if (s < 0) continue;
        double err = 0;
        for (int i = 0; i < n; i++) {
            double e = s * L[i] + m - x[i];
            err += w[i] * e * e;
        }
        if (err < best_err) {
            best_err = (float)err;
            best_s = (float)s;
            best_m = (float)m;
        }
    }
    *scale = best_s;
    *offset = -best_m;
}

static void k_weights(const float *x, int n, float *w) {
    float sum2 = 0;
    for (int i = 0; i < n; i++) sum2 += x[i] * x[i];
    const float rms = sqrtf(sum2 / (float)n);
    for (int i = 0; i < n; i++) w[i] = rms + fabsf(x[i]);
}

/* Packs 6-bit scales sc[8] and mins mn[8] the way eng_k_scale_min() (quant.h) unpacks them. */
static void pack_scales_k(const uint8_t sc[8], const uint8_t mn[8], uint8_t out[12]) {
    for (int j = 0; j < 4; j++) {
        out[j] = (uint8_t)((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
        out[j + 4] = (uint8_t)((mn[j] & 63) | ((mn[j + 4] >> 4) << 6));
        out[j + 8] = (uint8_t)((sc[j + 4] & 0xF) | ((mn[j + 4] & 0xF) << 4));
    }
}

/* Shared by Q4_K (nmax 15) and Q5_K (nmax 31): fills d, dmin, packed scales and L[256]. */
static void quantize_k_superblock(const float *x, int nmax, eng_f16 *d_out, eng_f16 *dmin_out,
                                  uint8_t scales[12], uint8_t L[256]) {
    float w[256], sc[8], mn[8], max_sc = 0, max_mn = 0;
    k_weights(x, 256, w);
    for (int j = 0; j < 8; j++) {
        fit_scale_min(x + 32 * j, w + 32 * j, 32, nmax, &sc[j], &mn[j]);
        max_sc = fmaxf(max_sc, sc[j]);
        max_mn = fmaxf(max_mn, mn[j]);
    }
    *d_out = H(max_sc / 63.0f);
    *dmin_out = H(max_mn / 63.0f);
    const float d = F(*d_out), dmin = F(*dmin_out);
    uint8_t ls[8], lm[8];
    for (int j = 0; j < 8; j++) {
        ls[j] = (uint8_t)(d > 0 ? clampi(nearest_int(sc[j] / d), 0, 63) : 0);
        lm[j] = (uint8_t)(dmin > 0 ? clampi(nearest_int(mn[j] / dmin), 0, 63) : 0);
    }
    pack_scales_k(ls, lm, scales);
    for (int j = 0; j < 8; j++) {
        const float ds = d * ls[j], dm = dmin * lm[j];
        for (int i = 0; i < 32; i++) {
            int q = ds > 0 ? nearest_int((x[32 * j + i] + dm) / ds) : 0;
            L[32 * j + i] = (uint8_t)clampi(q, 0, nmax);
        }
    }
}

void eng_quantize_row_q4_k(const float *x, void *y, int64_t n) {
    eng_block_q4_k *b = y;
    for (int64_t i = 0; i < n / 256; i++, x += 256) {
        uint8_t L[256];
        quantize_k_superblock(x, 15, &b[i].d, &b[i].dmin, b[i].scales, L);
        /* byte 32c + l: low nibble = element 64c + l, high nibble = element 64c + 32 + l */
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++)
                b[i].qs[32 * c + l] = (uint8_t)(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
    }
}

void eng_quantize_row_q5_k(const float *x, void *y, int64_t n) {
    eng_block_q5_k *b = y;
    for (int64_t i = 0; i < n / 256; i++, x += 256) {
        uint8_t L[256];
        quantize_k_superblock(x, 31, &b[i].d, &b[i].dmin, b[i].scales, L);
        memset(b[i].qh, 0, 32);
        for (int c = 0; c < 4; c++) {
            for (int l = 0; l < 32; l++) {
                int lo = L[64 * c + l], hi = L[64 * c + 32 + l];
                b[i].qs[32 * c + l] = (uint8_t)((lo & 0xF) | ((hi & 0xF) << 4));
                b[i].qh[l] |= (uint8_t)(((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
            }
        }
    }
}

/* Symmetric fit x ~= scale * L, L in [-nmax, nmax - 1]. */
static float fit_scale_sym(const float *x, const float *w, int n, int nmax) {
    const float max = signed_absmax(x, n);
    if (max == 0.0f) return 0.0f;
    float best_err = INFINITY, best_s = max / (float)-nmax;
    for (int step = -9; step <= 9; step++) {
        const float iscale = -((float)nmax + 0.1f * (float)step) / max;
        double swlx = 0, swll = 0;
        int L[16];
        for (int i = 0; i < n; i++) {
            L[i] = clampi(nearest_int(iscale * x[i]), -nmax, nmax - 1);
            swlx += w[i] * L[i] * (double)x[i];
            swll += w[i] * (double)L[i] * L[i];
        }
        if (swll <= 0) continue;
        const double s = swlx / swll;
        double err = 0;
        for (int i = 0; i < n; i++) {
            double e = s * L[i] - x[i];
            err += w[i] * e * e;
        }
        if (err < best_err) {
            best_err = (float)err;
            best_s = (float)s;
        }
    }
    return best_s;
}

void eng_quantize_row_q6_k(const float *x, void *y, int64_t n) {
    eng_block_q6_k *b = y;
    for (int64_t i = 0; i < n / 256; i++, x += 256) {
        float w[256], sc[16];
        k_weights(x, 256, w);
        float max_abs = 0, max_sc = 0;
        for (int k = 0; k < 16; k++) {
            sc[k] = fit_scale_sym(x + 16 * k, w + 16 * k, 16, 32);
            if (fabsf(sc[k]) > max_abs) {
                max_abs = fabsf(sc[k]);
                max_sc = sc[k];
            }
        }
        if (max_abs == 0.0f) {
            memset(&b[i], 0, sizeof(b[i]));
            /* all-zero block: q = 32 (zero) everywhere */
            memset(b[i].ql, 0, 128);
            for (int k = 0; k < 64; k++) b[i].qh[k] = 0xAA; /* high bits 2 -> q = 32 */
            continue;
        }
        b[i].d = H(max_sc / -128.0f);
        const float d = F(b[i].d);
        uint8_t L[256];
        for (int k = 0; k < 16; k++) {
            int s = d != 0.0f ? clampi(nearest_int(sc[k] / d), -128, 127) : 0;
            b[i].scales[k] = (int8_t)s;
            const float ds = d * (float)s;
            for (int j = 0; j < 16; j++) {
                int q = ds != 0.0f ? nearest_int(x[16 * k + j] / ds) : 0;
                L[16 * k + j] = (uint8_t)(clampi(q, -32, 31) + 32);
            }
        }
        for (int half = 0; half < 2; half++) {
            const uint8_t *Lh = L + 128 * half;
            uint8_t *ql = b[i].ql + 64 * half, *qh = b[i].qh + 32 * half;
            for (int l = 0; l < 32; l++) {
                int q1 = Lh[l], q2 = Lh[l + 32], q3 = Lh[l + 64], q4 = Lh[l + 96];
                ql[l] = (uint8_t)((q1 & 0xF) | ((q3 & 0xF) << 4));
                ql[l + 32] = (uint8_t)((q2 & 0xF) | ((q4 & 0xF) << 4));
                qh[l] = (uint8_t)((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
            }
        }
    }
}

/* Q2_K and Q3_K: a plain min/max (Q2_K) or max-magnitude (Q3_K) fit per 16-value sub-block, no
 * search. docpipe's quantize never writes these types; they exist so that test models can carry
 * them (tests/unit/test_weight_types.c), so a valid encoding of the right error size is enough.
 * Element e of a block sits in sub-block 8 * (e / 128) + 2 * ((e % 128) / 32) + (e % 32 >= 16),
 * byte 32 * (e / 128) + e % 32 of qs at bits 2 * ((e % 128) / 32), as quant.c decodes it. */
#define K_SUB(e) (8 * ((e) / 128) + 2 * (((e) % 128) / 32) + ((e) % 32 >= 16))

void eng_quantize_row_q2_k(const float *x, void *y, int64_t n) {
    eng_block_q2_k *b = y;
    for (int64_t i = 0; i < n / 256; i++, x += 256) {
        float lo[16] = {0}, hi[16] = {0}, sc[16], max_sc = 0, max_mn = 0;
        for (int e = 0; e < 256; e++) {
            const int k = K_SUB(e);
            if (x[e] < lo[k]) lo[k] = x[e];
            if (x[e] > hi[k]) hi[k] = x[e];
        }
        for (int k = 0; k < 16; k++) {
            sc[k] = (hi[k] - lo[k]) / 3.0f;
            if (sc[k] > max_sc) max_sc = sc[k];
            if (-lo[k] > max_mn) max_mn = -lo[k];
        }
        const float d = max_sc / 15.0f, dmin = max_mn / 15.0f;
        b[i].d = H(d);
        b[i].dmin = H(dmin);
        const float dd = F(b[i].d), dm = F(b[i].dmin);
        float dl[16], ml[16];
        for (int k = 0; k < 16; k++) {
            const int qs = dd > 0 ? clampi(nearest_int(sc[k] / dd), 0, 15) : 0;
            const int qm = dm > 0 ? clampi(nearest_int(-lo[k] / dm), 0, 15) : 0;
            b[i].scales[k] = (uint8_t)(qs | qm << 4);
            dl[k] = dd * (float)qs;
            ml[k] = dm * (float)qm;
        }
        memset(b[i].qs, 0, sizeof(b[i].qs));
        for (int e = 0; e < 256; e++) {
            const int k = K_SUB(e), q = dl[k] > 0 ? clampi(nearest_int((x[e] + ml[k]) / dl[k]), 0, 3) : 0;
            b[i].qs[32 * (e / 128) + e % 32] |= (uint8_t)(q << (2 * ((e % 128) / 32)));
        }
    }
}

void eng_quantize_row_q3_k(const float *x, void *y, int64_t n) {
    eng_block_q3_k *b = y;
    for (int64_t i = 0; i < n / 256; i++, x += 256) {
        float sc[16] = {0}, amax[16] = {0}, max_abs = 0;
        for (int e = 0; e < 256; e++) {
            const int k = K_SUB(e);
            if (fabsf(x[e]) > amax[k]) amax[k] = fabsf(x[e]), sc[k] = -x[e] / 4.0f; /* the largest maps to -4 */
        }
        for (int k = 0; k < 16; k++)
            if (fabsf(sc[k]) > max_abs) max_abs = fabsf(sc[k]);
        const float d = max_abs / 31.0f;
        b[i].d = H(d);
        const float dd = F(b[i].d);
        memset(b[i].scales, 0, sizeof(b[i].scales));
        float dl[16];
        for (int k = 0; k < 16; k++) {
            const int s = dd > 0 ? clampi(nearest_int(sc[k] / dd), -32, 31) : 0, u = s + 32;
            if (k < 8) b[i].scales[k] |= (uint8_t)(u & 0xF);
            else b[i].scales[k - 8] |= (uint8_t)((u & 0xF) << 4);
            b[i].scales[8 + k % 4] |= (uint8_t)((u >> 4) << (2 * (k / 4)));
            dl[k] = dd * (float)s;
        }
        memset(b[i].qs, 0, sizeof(b[i].qs));
        memset(b[i].hmask, 0, sizeof(b[i].hmask));
        for (int e = 0; e < 256; e++) {
            const int k = K_SUB(e), nn = e / 128, j = (e % 128) / 32, l = e % 32;
            const int q = (dl[k] != 0 ? clampi(nearest_int(x[e] / dl[k]), -4, 3) : 0) + 4;
            b[i].qs[32 * nn + l] |= (uint8_t)((q & 3) << (2 * j));
            if (q >= 4) b[i].hmask[l] |= (uint8_t)(1u << (4 * nn + j));
        }
    }
}
#undef K_SUB

void eng_quantize_row_q8_k(const float *x, void *y, int64_t n) {
    eng_block_q8_k *b = y;
    for (int64_t i = 0; i < n / 256; i++, x += 256) {
        const float max = signed_absmax(x, 256);
        if (max == 0.0f) {
            memset(&b[i], 0, sizeof(b[i]));
            continue;
        }
        const float iscale = -127.0f / max;
        for (int j = 0; j < 256; j++) {
            int v = nearest_int(iscale * x[j]);
            b[i].qs[j] = (int8_t)(v > 127 ? 127 : v);
        }
        for (int g = 0; g < 16; g++) {
            int s = 0;
            for (int j = 0; j < 16; j++) s += b[i].qs[16 * g + j];
            b[i].bsums[g] = (int16_t)s;
        }
        b[i].d = 1.0f / iscale;
    }
}
