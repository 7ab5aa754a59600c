// deq.cuh - one 32-element chunk of a weight row as floats, for every weight type the CUDA
// backend runs (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K).
//
// DESIGN: a row of K elements is K/32 chunks; chunk c is one legacy block (Q8_0, Q4_0) or one
// 32-element slice of a K-quant super-block. The dequantization, the matrix-vector kernels, the
// embedding lookup and the f16 tiles of prompt GEMMs all decode through deq32, so the parity
// test of the dequantization (bit-exact with engine/quant.c) covers the decoding of every
// kernel. __fmul_rn/__fsub_rn keep nvcc from fusing into FMAs, which would round differently
// from the C reference (built without contraction).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

extern "C" {
#include "quant.h"
}

__device__ __forceinline__ float h2f(uint16_t h) { return __half2float(__ushort_as_half(h)); }

// A vector load's address must be aligned to the vector on a GPU (a fault otherwise); the
// emulator checks it, since host loads would not care.
#ifdef DP_CUDA_EMU
#define VEC(T, p) ((const T *)emu_aligned((p), sizeof(T)))
#else
#define VEC(T, p) ((const T *)(p))
#endif

__device__ __forceinline__ void k_scale_min(int j, const uint8_t *s, int *sc, int *mn) {
    if (j < 4) {
        *sc = s[j] & 63;
        *mn = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
        *mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

template <int TYPE> __device__ __forceinline__ void deq32(const uint8_t *row, int c, float *o);

template <> __device__ __forceinline__ void deq32<ENG_TYPE_F32>(const uint8_t *row, int c, float *o) {
    const float4 *p = VEC(float4, row + 128 * (size_t)c);
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const float4 v = p[i];
        o[4 * i] = v.x, o[4 * i + 1] = v.y, o[4 * i + 2] = v.z, o[4 * i + 3] = v.w;
    }
}

template <> __device__ __forceinline__ void deq32<ENG_TYPE_F16>(const uint8_t *row, int c, float *o) {
    const uint4 *p = VEC(uint4, row + 64 * (size_t)c); // rows of K % 32 == 0 stay 64-aligned
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const uint4 v = p[i];
        const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int j = 0; j < 4; j++) {
            o[8 * i + 2 * j] = h2f((uint16_t)(w[j] & 0xFFFF));
            o[8 * i + 2 * j + 1] = h2f((uint16_t)(w[j] >> 16));
        }
    }
}

template <> __device__ __forceinline__ void deq32<ENG_TYPE_BF16>(const uint8_t *row, int c, float *o) {
    const uint4 *p = VEC(uint4, row + 64 * (size_t)c);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const uint4 v = p[i];
        const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int j = 0; j < 4; j++) {
            o[8 * i + 2 * j] = __uint_as_float(w[j] << 16);
            o[8 * i + 2 * j + 1] = __uint_as_float(w[j] & 0xFFFF0000u);
        }
    }
}

template <> __device__ __forceinline__ void deq32<ENG_TYPE_Q8_0>(const uint8_t *row, int c, float *o) {
    const eng_block_q8_0 *b = (const eng_block_q8_0 *)row + c; // 34-byte blocks: 2-byte aligned
    const float s = h2f(b->d);
    const uint16_t *q = VEC(uint16_t, b->qs);
#pragma unroll
    for (int i = 0; i < 16; i++) {
        const uint16_t w = q[i];
        o[2 * i] = __fmul_rn((float)(int8_t)(w & 0xFF), s);
        o[2 * i + 1] = __fmul_rn((float)(int8_t)(w >> 8), s);
    }
}

template <> __device__ __forceinline__ void deq32<ENG_TYPE_Q4_0>(const uint8_t *row, int c, float *o) {
    const eng_block_q4_0 *b = (const eng_block_q4_0 *)row + c; // 18-byte blocks: 2-byte aligned
    const float s = h2f(b->d);
    const uint16_t *q = VEC(uint16_t, b->qs);
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const uint16_t w = q[i];
        o[2 * i] = __fmul_rn((float)((w & 0xF) - 8), s);
        o[2 * i + 1] = __fmul_rn((float)(((w >> 8) & 0xF) - 8), s);
        o[2 * i + 16] = __fmul_rn((float)(((w >> 4) & 0xF) - 8), s);
        o[2 * i + 17] = __fmul_rn((float)((w >> 12) - 8), s);
    }
}

// Q4_1, Q5_0, Q5_1: llama-quantize's fallbacks for rows that are not whole super-blocks (small
// models' attention and DeltaNet projections). 20-, 22- and 24-byte blocks: 2-byte aligned.
template <> __device__ __forceinline__ void deq32<ENG_TYPE_Q4_1>(const uint8_t *row, int c, float *o) {
    const eng_block_q4_1 *b = (const eng_block_q4_1 *)row + c;
    const float d = h2f(b->d), m = h2f(b->m);
#pragma unroll
    for (int j = 0; j < 16; j++) {
        o[j] = __fadd_rn(__fmul_rn((float)(b->qs[j] & 0xF), d), m);
        o[j + 16] = __fadd_rn(__fmul_rn((float)(b->qs[j] >> 4), d), m);
    }
}

__device__ __forceinline__ uint32_t qh32(const uint8_t *qh) {
    const uint16_t *h = VEC(uint16_t, qh);
    return (uint32_t)h[0] | ((uint32_t)h[1] << 16);
}

template <> __device__ __forceinline__ void deq32<ENG_TYPE_Q5_0>(const uint8_t *row, int c, float *o) {
    const eng_block_q5_0 *b = (const eng_block_q5_0 *)row + c;
    const float d = h2f(b->d);
    const uint32_t h = qh32(b->qh);
#pragma unroll
    for (int j = 0; j < 16; j++) {
        o[j] = __fmul_rn((float)((int)((b->qs[j] & 0xF) | (((h >> j) & 1) << 4)) - 16), d);
        o[j + 16] = __fmul_rn((float)((int)((b->qs[j] >> 4) | (((h >> (j + 16)) & 1) << 4)) - 16), d);
    }
}

template <> __device__ __forceinline__ void deq32<ENG_TYPE_Q5_1>(const uint8_t *row, int c, float *o) {
    const eng_block_q5_1 *b = (const eng_block_q5_1 *)row + c;
    const float d = h2f(b->d), m = h2f(b->m);
    const uint32_t h = qh32(b->qh);
#pragma unroll
    for (int j = 0; j < 16; j++) {
        o[j] = __fadd_rn(__fmul_rn((float)((b->qs[j] & 0xF) | (((h >> j) & 1) << 4)), d), m);
        o[j + 16] = __fadd_rn(__fmul_rn((float)((b->qs[j] >> 4) | (((h >> (j + 16)) & 1) << 4)), d), m);
    }
}

template <> __device__ __forceinline__ void deq32<ENG_TYPE_Q4_K>(const uint8_t *row, int c, float *o) {
    const eng_block_q4_k *b = (const eng_block_q4_k *)row + c / 8; // 144-byte blocks, qs at 16
    const int sb = c % 8, shift = 4 * (sb % 2);
    int sc, mn;
    k_scale_min(sb, b->scales, &sc, &mn);
    const float d1 = __fmul_rn(h2f(b->d), (float)sc), m1 = __fmul_rn(h2f(b->dmin), (float)mn);
    const uint4 *q = VEC(uint4, b->qs + 32 * (sb / 2));
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const uint4 v = q[i];
        const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int j = 0; j < 16; j++) {
            const int nib = (w[j / 4] >> (8 * (j % 4) + shift)) & 0xF;
            o[16 * i + j] = __fsub_rn(__fmul_rn(d1, (float)nib), m1);
        }
    }
}

template <> __device__ __forceinline__ void deq32<ENG_TYPE_Q5_K>(const uint8_t *row, int c, float *o) {
    const eng_block_q5_k *b = (const eng_block_q5_k *)row + c / 8; // 176-byte blocks, qh at 16, qs at 48
    const int sb = c % 8, shift = 4 * (sb % 2);
    int sc, mn;
    k_scale_min(sb, b->scales, &sc, &mn);
    const float d1 = __fmul_rn(h2f(b->d), (float)sc), m1 = __fmul_rn(h2f(b->dmin), (float)mn);
    const uint4 *q = VEC(uint4, b->qs + 32 * (sb / 2)), *h = VEC(uint4, b->qh);
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const uint4 v = q[i], hv = h[i];
        const uint32_t w[4] = {v.x, v.y, v.z, v.w}, hw[4] = {hv.x, hv.y, hv.z, hv.w};
#pragma unroll
        for (int j = 0; j < 16; j++) {
            const int lo = (w[j / 4] >> (8 * (j % 4) + shift)) & 0xF;
            const int hi = (hw[j / 4] >> (8 * (j % 4) + sb)) & 1;
            o[16 * i + j] = __fsub_rn(__fmul_rn(d1, (float)(lo + (hi << 4))), m1);
        }
    }
}

template <> __device__ __forceinline__ void deq32<ENG_TYPE_Q6_K>(const uint8_t *row, int c, float *o) {
    const eng_block_q6_k *b = (const eng_block_q6_k *)row + c / 8; // 210-byte blocks: 2-byte aligned
    const int half = (c % 8) / 4, part = c % 4;
    const uint8_t *ql = b->ql + 64 * half + (part & 1) * 32, *qh = b->qh + 32 * half;
    const int8_t *scl = b->scales + 8 * half + 2 * part;
    const int lshift = 4 * (part >> 1), hshift = 2 * part;
    const float d = h2f(b->d);
    const float s0 = __fmul_rn(d, (float)scl[0]), s1 = __fmul_rn(d, (float)scl[1]);
    const uint16_t *ql16 = VEC(uint16_t, ql), *qh16 = VEC(uint16_t, qh);
#pragma unroll
    for (int i = 0; i < 16; i++) {
        const uint16_t lw = ql16[i], hw = qh16[i];
#pragma unroll
        for (int j = 0; j < 2; j++) {
            const int l = 2 * i + j;
            const int lo = ((lw >> (8 * j)) >> lshift) & 0xF, hi = ((hw >> (8 * j)) >> hshift) & 3;
            o[l] = __fmul_rn(l < 16 ? s0 : s1, (float)((lo | (hi << 4)) - 32));
        }
    }
}

// Dispatches a run-time type to a kernel template instantiated per type: F(TYPE) is called
// with the type as a compile-time constant. Unknown types take the default branch.
#define DEQ_DISPATCH(type, F, DEFAULT)                                                         \
    switch (type) {                                                                            \
    case ENG_TYPE_F32: F(ENG_TYPE_F32); break;                                                 \
    case ENG_TYPE_F16: F(ENG_TYPE_F16); break;                                                 \
    case ENG_TYPE_BF16: F(ENG_TYPE_BF16); break;                                               \
    case ENG_TYPE_Q8_0: F(ENG_TYPE_Q8_0); break;                                               \
    case ENG_TYPE_Q4_0: F(ENG_TYPE_Q4_0); break;                                               \
    case ENG_TYPE_Q4_1: F(ENG_TYPE_Q4_1); break;                                               \
    case ENG_TYPE_Q5_0: F(ENG_TYPE_Q5_0); break;                                               \
    case ENG_TYPE_Q5_1: F(ENG_TYPE_Q5_1); break;                                               \
    case ENG_TYPE_Q4_K: F(ENG_TYPE_Q4_K); break;                                               \
    case ENG_TYPE_Q5_K: F(ENG_TYPE_Q5_K); break;                                               \
    case ENG_TYPE_Q6_K: F(ENG_TYPE_Q6_K); break;                                               \
    default: DEFAULT;                                                                          \
    }

// True for the types deq32 decodes.
static inline bool deq_supported(int type) {
    return type == ENG_TYPE_F32 || type == ENG_TYPE_F16 || type == ENG_TYPE_BF16 || type == ENG_TYPE_Q8_0 ||
           type == ENG_TYPE_Q4_0 || type == ENG_TYPE_Q4_1 || type == ENG_TYPE_Q5_0 || type == ENG_TYPE_Q5_1 ||
           type == ENG_TYPE_Q4_K || type == ENG_TYPE_Q5_K || type == ENG_TYPE_Q6_K;
}
