/*
 * quant.h - tensor element types, quantization block layouts, and row conversions.
 *
 * Type ids are ggml's (they are stored in GGUF files and never change). Block layouts are the
 * on-disk bytes, shared by the C and CUDA code and pinned with static_assert; see
 * docs/engine.md and model-formats.md section 2 for the decoding formulas.
 *
 *   type   elems/block  bytes/block   layout
 *   Q4_0   32           18            d:f16 qs[16] (low nibbles = elems 0..15, high = 16..31)
 *   Q4_1   32           20            d:f16 m:f16 qs[16]
 *   Q5_0   32           22            d:f16 qh[4] qs[16]
 *   Q5_1   32           24            d:f16 m:f16 qh[4] qs[16]
 *   Q8_0   32           34            d:f16 qs[32]:i8
 *   Q2_K   256          84            scales[16] qs[64] d:f16 dmin:f16
 *   Q3_K   256          110           hmask[32] qs[64] scales[12] d:f16
 *   Q4_K   256          144           d:f16 dmin:f16 scales[12] qs[128]
 *   Q5_K   256          176           d:f16 dmin:f16 scales[12] qh[32] qs[128]
 *   Q6_K   256          210           ql[128] qh[64] scales[16]:i8 d:f16
 *   Q8_K   256          292           d:f32 qs[256]:i8 bsums[16]:i16   (activations only)
 *
 * The public part is declared in engine.h; this header adds what only the engine, its backends
 * and its tests use.
 */
#ifndef ENG_QUANT_H
#define ENG_QUANT_H

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "status.h"

#define ENG_QK4_0 32
#define ENG_QK8_0 32
#define ENG_QK_K 256
#define ENG_K_SCALE_SIZE 12

typedef uint16_t eng_f16;  /* IEEE binary16 bits */
typedef uint16_t eng_bf16; /* upper half of an f32 */

typedef struct { eng_f16 d; uint8_t qs[16]; } eng_block_q4_0;
typedef struct { eng_f16 d, m; uint8_t qs[16]; } eng_block_q4_1;
typedef struct { eng_f16 d; uint8_t qh[4]; uint8_t qs[16]; } eng_block_q5_0;
typedef struct { eng_f16 d, m; uint8_t qh[4]; uint8_t qs[16]; } eng_block_q5_1;
typedef struct { eng_f16 d; int8_t qs[32]; } eng_block_q8_0;
typedef struct { eng_f16 d, s; int8_t qs[32]; } eng_block_q8_1;
typedef struct { uint8_t scales[16]; uint8_t qs[64]; eng_f16 d, dmin; } eng_block_q2_k;
typedef struct { uint8_t hmask[32]; uint8_t qs[64]; uint8_t scales[12]; eng_f16 d; } eng_block_q3_k;
typedef struct { eng_f16 d, dmin; uint8_t scales[12]; uint8_t qs[128]; } eng_block_q4_k;
typedef struct { eng_f16 d, dmin; uint8_t scales[12]; uint8_t qh[32]; uint8_t qs[128]; } eng_block_q5_k;
typedef struct { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; eng_f16 d; } eng_block_q6_k;
typedef struct { float d; int8_t qs[256]; int16_t bsums[16]; } eng_block_q8_k;

static_assert(sizeof(eng_block_q4_0) == 18, "Q4_0 block");
static_assert(sizeof(eng_block_q4_1) == 20, "Q4_1 block");
static_assert(sizeof(eng_block_q5_0) == 22, "Q5_0 block");
static_assert(sizeof(eng_block_q5_1) == 24, "Q5_1 block");
static_assert(sizeof(eng_block_q8_0) == 34, "Q8_0 block");
static_assert(sizeof(eng_block_q8_1) == 36, "Q8_1 block");
static_assert(sizeof(eng_block_q2_k) == 84, "Q2_K block");
static_assert(sizeof(eng_block_q3_k) == 110, "Q3_K block");
static_assert(sizeof(eng_block_q4_k) == 144, "Q4_K block");
static_assert(sizeof(eng_block_q5_k) == 176, "Q5_K block");
static_assert(sizeof(eng_block_q6_k) == 210, "Q6_K block");
static_assert(sizeof(eng_block_q8_k) == 292, "Q8_K block");

/* 6-bit scale and min of sub-block j (0..7) from the 12 packed scale bytes of Q4_K/Q5_K. */
static inline void eng_k_scale_min(int j, const uint8_t *s, int *sc, int *mn) {
    if (j < 4) {
        *sc = s[j] & 63;
        *mn = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
        *mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

/* Row conversions: n must be a multiple of the block size. */
typedef void (*eng_to_float_fn)(const void *src, float *dst, int64_t n);
typedef void (*eng_from_float_fn)(const float *src, void *dst, int64_t n);

typedef struct eng_type_traits {
    const char *name;            /* "Q4_K"; for every id below ENG_TYPE_COUNT */
    int64_t blck;                /* elements per block; 0 = no layout known */
    size_t type_size;            /* bytes per block; 0 = no layout known */
    eng_to_float_fn to_float;    /* (optional) dequantize; NULL = not decodable here */
    eng_from_float_fn from_float;/* (optional) reference quantizer */
} eng_type_traits;

/* Traits for a type id; NULL when id >= ENG_TYPE_COUNT or negative. Borrowed. */
const eng_type_traits *eng_type_get(int id);
/* Bytes of a row of n elements; 0 if n is not a multiple of the block size. */
size_t eng_row_size(int id, int64_t n);

/* Dequantizes n elements (a multiple of the block size). DP_EUNSUPPORTED for other types. */
dp_status eng_dequantize_row(int type, const void *src, float *dst, int64_t n);
/* Reference quantizer (scalar, deterministic). DP_EUNSUPPORTED when the type has none. */
dp_status eng_quantize_row(int type, const float *src, void *dst, int64_t n);

/* ---- Half and bfloat16 ------------------------------------------------------------------ */

float eng_f16_to_f32(eng_f16 h);
eng_f16 eng_f32_to_f16(float f); /* round to nearest even; overflow -> inf; NaN kept */
float eng_bf16_to_f32(eng_bf16 h);
eng_bf16 eng_f32_to_bf16(float f); /* round to nearest even; NaN kept quiet */

/* The reference quantizer of each type (quant_ref.c), one row of n (a multiple of the block). */
void eng_quantize_row_q4_0(const float *x, void *y, int64_t n);
void eng_quantize_row_q4_1(const float *x, void *y, int64_t n);
void eng_quantize_row_q5_0(const float *x, void *y, int64_t n);
void eng_quantize_row_q5_1(const float *x, void *y, int64_t n);
void eng_quantize_row_q8_0(const float *x, void *y, int64_t n);
void eng_quantize_row_q2_k(const float *x, void *y, int64_t n);
void eng_quantize_row_q3_k(const float *x, void *y, int64_t n);
void eng_quantize_row_q4_k(const float *x, void *y, int64_t n);
void eng_quantize_row_q5_k(const float *x, void *y, int64_t n);
void eng_quantize_row_q6_k(const float *x, void *y, int64_t n);
void eng_quantize_row_q8_k(const float *x, void *y, int64_t n);
void eng_quantize_row_f16(const float *x, void *y, int64_t n);
void eng_quantize_row_bf16(const float *x, void *y, int64_t n);
void eng_quantize_row_f32(const float *x, void *y, int64_t n);

#endif /* ENG_QUANT_H */
