/*
 * quant.c - the type table, half/bfloat16 conversion and dequantization of every block format.
 *
 * DESIGN: dequantizers are the plain scalar reading of model-formats.md section 2 and are the
 * reference every fast kernel is tested against. Float operations are written in ggml's order
 * (scale products first, e.g. (d * sc) * q - (dmin * m)) so results are bit-identical to
 * llama.cpp's to_float, which tests/unit/test_quant.c checks against dequant-rows.json.
 * This file is compiled without FMA contraction (C11 mode), which that exactness relies on.
 */
#include "quant.h"

#include "compiler.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* ---- Half and bfloat16 ------------------------------------------------------------------ */

static inline uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

float eng_f16_to_f32(eng_f16 h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1F;
    uint32_t mant = h & 0x3FF;
    if (exp == 0x1F) return bits_f32(sign | 0x7F800000u | (mant << 13)); /* inf / NaN */
    if (exp == 0) {
        if (mant == 0) return bits_f32(sign);
        /* subnormal: mant * 2^-24, exact in f32 */
        float v = (float)mant * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    return bits_f32(sign | ((exp + 112) << 23) | (mant << 13));
}

eng_f16 eng_f32_to_f16(float f) {
    uint32_t x = f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000;
    x &= 0x7FFFFFFFu;
    if (x >= 0x7F800000u) return (eng_f16)(sign | (x > 0x7F800000u ? 0x7E00 : 0x7C00));
    if (x >= 0x47800000u) return (eng_f16)(sign | 0x7C00); /* >= 65536: inf */
    if (x < 0x38800000u) {
        /* Result is subnormal (or zero): adding 0.5 aligns the value so the FPU's own
         * round-to-nearest-even does the rounding at bit 2^-24. */
        float v = bits_f32(x) + 0.5f;
        return (eng_f16)(sign | (f32_bits(v) - 0x3F000000u));
    }
    uint32_t odd = (x >> 13) & 1;
    x += 0xC8000000u + 0xFFF + odd; /* rebias exponent (-112 << 23) and round to even */
    return (eng_f16)(sign | (x >> 13));
}

float eng_bf16_to_f32(eng_bf16 h) { return bits_f32((uint32_t)h << 16); }

eng_bf16 eng_f32_to_bf16(float f) {
    uint32_t x = f32_bits(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) return (eng_bf16)((x >> 16) | 0x40); /* quiet NaN */
    return (eng_bf16)((x + 0x7FFF + ((x >> 16) & 1)) >> 16);
}

/* ---- Dequantizers ----------------------------------------------------------------------- */

#define F16(x) eng_f16_to_f32(x)

static void deq_f32(const void *src, float *dst, int64_t n) { memcpy(dst, src, (size_t)n * 4); }

static void deq_f16(const void *src, float *dst, int64_t n) {
    const eng_f16 *s = src;
    for (int64_t i = 0; i < n; i++) dst[i] = F16(s[i]);
}

static void deq_bf16(const void *src, float *dst, int64_t n) {
    const eng_bf16 *s = src;
    for (int64_t i = 0; i < n; i++) dst[i] = eng_bf16_to_f32(s[i]);
}

static void deq_q4_0(const void *src, float *dst, int64_t n) {
    const eng_block_q4_0 *b = src;
    for (int64_t i = 0; i < n / 32; i++, dst += 32) {
        const float d = F16(b[i].d);
        for (int j = 0; j < 16; j++) {
            dst[j] = (float)((b[i].qs[j] & 0xF) - 8) * d;
            dst[j + 16] = (float)((b[i].qs[j] >> 4) - 8) * d;
        }
    }
}

static void deq_q4_1(const void *src, float *dst, int64_t n) {
    const eng_block_q4_1 *b = src;
    for (int64_t i = 0; i < n / 32; i++, dst += 32) {
        const float d = F16(b[i].d), m = F16(b[i].m);
        for (int j = 0; j < 16; j++) {
            dst[j] = (float)(b[i].qs[j] & 0xF) * d + m;
            dst[j + 16] = (float)(b[i].qs[j] >> 4) * d + m;
        }
    }
}

static void deq_q5_0(const void *src, float *dst, int64_t n) {
    const eng_block_q5_0 *b = src;
    for (int64_t i = 0; i < n / 32; i++, dst += 32) {
        const float d = F16(b[i].d);
        uint32_t h;
        memcpy(&h, b[i].qh, 4);
        for (int j = 0; j < 16; j++) {
            int x0 = (int)((b[i].qs[j] & 0xF) | (((h >> j) & 1) << 4)) - 16;
            int x1 = (int)((b[i].qs[j] >> 4) | (((h >> (j + 16)) & 1) << 4)) - 16;
            dst[j] = (float)x0 * d;
            dst[j + 16] = (float)x1 * d;
        }
    }
}

/* Q8_1 is an activation format only (d * q; s is a by-product for the min term) */
static void deq_q8_1(const void *src, float *dst, int64_t n) {
    const eng_block_q8_1 *b = src;
    for (int64_t i = 0; i < n / 32; i++, dst += 32) {
        const float d = F16(b[i].d);
        for (int j = 0; j < 32; j++) dst[j] = (float)b[i].qs[j] * d;
    }
}

static void deq_q5_1(const void *src, float *dst, int64_t n) {
    const eng_block_q5_1 *b = src;
    for (int64_t i = 0; i < n / 32; i++, dst += 32) {
        const float d = F16(b[i].d), m = F16(b[i].m);
        uint32_t h;
        memcpy(&h, b[i].qh, 4);
        for (int j = 0; j < 16; j++) {
            int x0 = (int)((b[i].qs[j] & 0xF) | (((h >> j) & 1) << 4));
            int x1 = (int)((b[i].qs[j] >> 4) | (((h >> (j + 16)) & 1) << 4));
            dst[j] = (float)x0 * d + m;
            dst[j + 16] = (float)x1 * d + m;
        }
    }
}

static void deq_q8_0(const void *src, float *dst, int64_t n) {
    const eng_block_q8_0 *b = src;
    for (int64_t i = 0; i < n / 32; i++, dst += 32) {
        const float d = F16(b[i].d);
        for (int j = 0; j < 32; j++) dst[j] = (float)b[i].qs[j] * d;
    }
}

static void deq_q2_k(const void *src, float *dst, int64_t n) {
    const eng_block_q2_k *b = src;
    for (int64_t i = 0; i < n / 256; i++) {
        const float d = F16(b[i].d), dmin = F16(b[i].dmin);
        for (int e = 0; e < 256; e++) {
            int nn = e / 128, j = (e % 128) / 32, l = e % 32;
            int q = (b[i].qs[32 * nn + l] >> (2 * j)) & 3;
            int k = 8 * nn + 2 * j + (l >= 16);
            float dl = d * (float)(b[i].scales[k] & 0xF);
            float ml = dmin * (float)(b[i].scales[k] >> 4);
            *dst++ = dl * (float)q - ml;
        }
    }
}

static void deq_q3_k(const void *src, float *dst, int64_t n) {
    const eng_block_q3_k *b = src;
    for (int64_t i = 0; i < n / 256; i++) {
        const float d = F16(b[i].d);
        int S[16];
        for (int k = 0; k < 16; k++) {
            int low4 = k < 8 ? (b[i].scales[k] & 0xF) : (b[i].scales[k - 8] >> 4);
            int high2 = (b[i].scales[8 + k % 4] >> (2 * (k / 4))) & 3;
            S[k] = (low4 | (high2 << 4)) - 32;
        }
        for (int e = 0; e < 256; e++) {
            int nn = e / 128, j = (e % 128) / 32, l = e % 32;
            int k = 8 * nn + 2 * j + (l >= 16);
            int q2 = (b[i].qs[32 * nn + l] >> (2 * j)) & 3;
            int h = (b[i].hmask[l] >> (4 * nn + j)) & 1;
            int q = q2 - (h ? 0 : 4);
            float dl = d * (float)S[k];
            *dst++ = dl * (float)q;
        }
    }
}

static void deq_q4_k(const void *src, float *dst, int64_t n) {
    const eng_block_q4_k *b = src;
    for (int64_t i = 0; i < n / 256; i++) {
        const float d = F16(b[i].d), dmin = F16(b[i].dmin);
        const uint8_t *q = b[i].qs;
        for (int c = 0; c < 4; c++, q += 32) {
            int sc, mn;
            eng_k_scale_min(2 * c, b[i].scales, &sc, &mn);
            const float d1 = d * sc, m1 = dmin * mn;
            eng_k_scale_min(2 * c + 1, b[i].scales, &sc, &mn);
            const float d2 = d * sc, m2 = dmin * mn;
            for (int l = 0; l < 32; l++) *dst++ = d1 * (float)(q[l] & 0xF) - m1;
            for (int l = 0; l < 32; l++) *dst++ = d2 * (float)(q[l] >> 4) - m2;
        }
    }
}

static void deq_q5_k(const void *src, float *dst, int64_t n) {
    const eng_block_q5_k *b = src;
    for (int64_t i = 0; i < n / 256; i++) {
        const float d = F16(b[i].d), dmin = F16(b[i].dmin);
        const uint8_t *q = b[i].qs, *qh = b[i].qh;
        for (int c = 0; c < 4; c++, q += 32) {
            int sc, mn;
            eng_k_scale_min(2 * c, b[i].scales, &sc, &mn);
            const float d1 = d * sc, m1 = dmin * mn;
            eng_k_scale_min(2 * c + 1, b[i].scales, &sc, &mn);
            const float d2 = d * sc, m2 = dmin * mn;
            const int b1 = 2 * c, b2 = 2 * c + 1;
            for (int l = 0; l < 32; l++)
                *dst++ = d1 * (float)((q[l] & 0xF) + (((qh[l] >> b1) & 1) << 4)) - m1;
            for (int l = 0; l < 32; l++)
                *dst++ = d2 * (float)((q[l] >> 4) + (((qh[l] >> b2) & 1) << 4)) - m2;
        }
    }
}

static void deq_q6_k(const void *src, float *dst, int64_t n) {
    const eng_block_q6_k *b = src;
    for (int64_t i = 0; i < n / 256; i++) {
        const float d = F16(b[i].d);
        const uint8_t *ql = b[i].ql, *qh = b[i].qh;
        const int8_t *sc = b[i].scales;
        for (int half = 0; half < 2; half++, dst += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; l++) {
                int is = l / 16;
                int q1 = (int)((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                int q2 = (int)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                int q3 = (int)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                int q4 = (int)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                dst[l] = d * (float)sc[is + 0] * (float)q1;
                dst[l + 32] = d * (float)sc[is + 2] * (float)q2;
                dst[l + 64] = d * (float)sc[is + 4] * (float)q3;
                dst[l + 96] = d * (float)sc[is + 6] * (float)q4;
            }
        }
    }
}

static void deq_q8_k(const void *src, float *dst, int64_t n) {
    const eng_block_q8_k *b = src;
    for (int64_t i = 0; i < n / 256; i++)
        for (int j = 0; j < 256; j++) *dst++ = b[i].d * (float)b[i].qs[j];
}

/* ---- Type table ------------------------------------------------------------------------- */

static const eng_type_traits g_types[ENG_TYPE_COUNT] = {
    [ENG_TYPE_F32] = {"F32", 1, 4, deq_f32, eng_quantize_row_f32},
    [ENG_TYPE_F16] = {"F16", 1, 2, deq_f16, eng_quantize_row_f16},
    [ENG_TYPE_Q4_0] = {"Q4_0", 32, 18, deq_q4_0, eng_quantize_row_q4_0},
    [ENG_TYPE_Q4_1] = {"Q4_1", 32, 20, deq_q4_1, eng_quantize_row_q4_1},
    [4] = {"Q4_2 (removed)", 0, 0, NULL, NULL},
    [5] = {"Q4_3 (removed)", 0, 0, NULL, NULL},
    [ENG_TYPE_Q5_0] = {"Q5_0", 32, 22, deq_q5_0, eng_quantize_row_q5_0},
    [ENG_TYPE_Q5_1] = {"Q5_1", 32, 24, deq_q5_1, eng_quantize_row_q5_1},
    [ENG_TYPE_Q8_0] = {"Q8_0", 32, 34, deq_q8_0, eng_quantize_row_q8_0},
    [ENG_TYPE_Q8_1] = {"Q8_1", 32, 36, deq_q8_1, NULL},
    [ENG_TYPE_Q2_K] = {"Q2_K", 256, 84, deq_q2_k, eng_quantize_row_q2_k},
    [ENG_TYPE_Q3_K] = {"Q3_K", 256, 110, deq_q3_k, eng_quantize_row_q3_k},
    [ENG_TYPE_Q4_K] = {"Q4_K", 256, 144, deq_q4_k, eng_quantize_row_q4_k},
    [ENG_TYPE_Q5_K] = {"Q5_K", 256, 176, deq_q5_k, eng_quantize_row_q5_k},
    [ENG_TYPE_Q6_K] = {"Q6_K", 256, 210, deq_q6_k, eng_quantize_row_q6_k},
    [ENG_TYPE_Q8_K] = {"Q8_K", 256, 292, deq_q8_k, eng_quantize_row_q8_k},
    [16] = {"IQ2_XXS", 0, 0, NULL, NULL},
    [17] = {"IQ2_XS", 0, 0, NULL, NULL},
    [18] = {"IQ3_XXS", 0, 0, NULL, NULL},
    [19] = {"IQ1_S", 0, 0, NULL, NULL},
    [20] = {"IQ4_NL", 0, 0, NULL, NULL},
    [21] = {"IQ3_S", 0, 0, NULL, NULL},
    [22] = {"IQ2_S", 0, 0, NULL, NULL},
    [23] = {"IQ4_XS", 0, 0, NULL, NULL},
    [ENG_TYPE_I8] = {"I8", 1, 1, NULL, NULL},
    [ENG_TYPE_I16] = {"I16", 1, 2, NULL, NULL},
    [ENG_TYPE_I32] = {"I32", 1, 4, NULL, NULL},
    [ENG_TYPE_I64] = {"I64", 1, 8, NULL, NULL},
    [ENG_TYPE_F64] = {"F64", 1, 8, NULL, NULL},
    [29] = {"IQ1_M", 0, 0, NULL, NULL},
    [ENG_TYPE_BF16] = {"BF16", 1, 2, deq_bf16, eng_quantize_row_bf16},
    [31] = {"Q4_0_4_4 (removed)", 0, 0, NULL, NULL},
    [32] = {"Q4_0_4_8 (removed)", 0, 0, NULL, NULL},
    [33] = {"Q4_0_8_8 (removed)", 0, 0, NULL, NULL},
    [34] = {"TQ1_0", 0, 0, NULL, NULL},
    [35] = {"TQ2_0", 0, 0, NULL, NULL},
    [36] = {"IQ4_NL_4_4 (removed)", 0, 0, NULL, NULL},
    [37] = {"IQ4_NL_4_8 (removed)", 0, 0, NULL, NULL},
    [38] = {"IQ4_NL_8_8 (removed)", 0, 0, NULL, NULL},
    [39] = {"MXFP4", 0, 0, NULL, NULL},
    [40] = {"NVFP4", 0, 0, NULL, NULL},
    [41] = {"Q1_0", 0, 0, NULL, NULL},
    [42] = {"Q2_0", 0, 0, NULL, NULL},
};

const eng_type_traits *eng_type_get(int id) {
    if (id < 0 || id >= ENG_TYPE_COUNT || !g_types[id].name) return NULL;
    return &g_types[id];
}

const char *eng_type_name(int id) {
    const eng_type_traits *t = eng_type_get(id);
    if (t) return t->name;
    static DP_THREAD_LOCAL char buf[32];
    snprintf(buf, sizeof(buf), "type %d", id);
    return buf;
}

int eng_type_from_name(const char *name) {
    for (int i = 0; i < ENG_TYPE_COUNT; i++) {
        const char *a = g_types[i].name;
        if (!a || !g_types[i].blck) continue;
        size_t k = 0;
        while (a[k] && name[k] && tolower((unsigned char)a[k]) == tolower((unsigned char)name[k])) k++;
        if (!a[k] && !name[k]) return i;
    }
    return -1;
}

bool eng_type_is_supported(int id) {
    const eng_type_traits *t = eng_type_get(id);
    return t && t->to_float && id != ENG_TYPE_Q8_K && id != ENG_TYPE_Q8_1; /* activation formats */
}

size_t eng_row_size(int id, int64_t n) {
    const eng_type_traits *t = eng_type_get(id);
    if (!t || !t->blck || n < 0 || n % t->blck) return 0;
    return (size_t)(n / t->blck) * t->type_size;
}

dp_status eng_dequantize_row(int type, const void *src, float *dst, int64_t n) {
    const eng_type_traits *t = eng_type_get(type);
    if (!t || !t->to_float) return DP_EUNSUPPORTED;
    if (n % t->blck) return DP_EINVAL;
    t->to_float(src, dst, n);
    return DP_OK;
}

dp_status eng_quantize_row(int type, const float *src, void *dst, int64_t n) {
    const eng_type_traits *t = eng_type_get(type);
    if (!t || !t->from_float) return DP_EUNSUPPORTED;
    if (n % t->blck) return DP_EINVAL;
    t->from_float(src, dst, n);
    return DP_OK;
}
