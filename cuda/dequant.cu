// dequant.cu - dequantization kernels for F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K and Q6_K.
//
// DESIGN: each thread produces 32 consecutive outputs (one legacy block, or one 32-element
// slice of a K-quant super-block) with the same float operation order as the CPU reference
// in engine/quant.c, so results are bit-identical to it (the gpu parity test checks this).
// Block layouts come from engine/quant.h, shared with the C code.
#include <cuda_fp16.h>

#include "common.cuh"
#include "dequant.cuh"
#include "gpu.h"

extern "C" {
#include "quant.h"
}

__device__ __forceinline__ float h2f(uint16_t h) { return __half2float(__ushort_as_half(h)); }

__global__ void k_deq_f16(const uint16_t *s, float *d, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) d[i] = h2f(s[i]);
}

__global__ void k_deq_bf16(const uint16_t *s, float *d, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) d[i] = __uint_as_float((uint32_t)s[i] << 16);
}

__global__ void k_deq_q8_0(const eng_block_q8_0 *b, float *d, int64_t nb) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nb) return;
    const float s = h2f(b[i].d);
    for (int j = 0; j < 32; j++) d[32 * i + j] = (float)b[i].qs[j] * s;
}

__global__ void k_deq_q4_0(const eng_block_q4_0 *b, float *d, int64_t nb) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nb) return;
    const float s = h2f(b[i].d);
    for (int j = 0; j < 16; j++) {
        d[32 * i + j] = (float)((b[i].qs[j] & 0xF) - 8) * s;
        d[32 * i + j + 16] = (float)((b[i].qs[j] >> 4) - 8) * s;
    }
}

__device__ __forceinline__ void scale_min_k(int j, const uint8_t *s, uint8_t *sc, uint8_t *mn) {
    if (j < 4) {
        *sc = s[j] & 63;
        *mn = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
        *mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

// thread t handles sub-block t % 8 of super-block t / 8
__global__ void k_deq_q4_k(const eng_block_q4_k *b, float *d, int64_t nsub) {
    int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= nsub) return;
    const eng_block_q4_k *x = &b[t / 8];
    const int sb = (int)(t % 8), c = sb / 2, upper = sb % 2;
    uint8_t sc, mn;
    scale_min_k(sb, x->scales, &sc, &mn);
    const float d1 = h2f(x->d) * sc, m1 = h2f(x->dmin) * mn;
    const uint8_t *q = x->qs + 32 * c;
    float *o = d + 32 * t;
    for (int l = 0; l < 32; l++) o[l] = d1 * (float)(upper ? q[l] >> 4 : q[l] & 0xF) - m1;
}

__global__ void k_deq_q5_k(const eng_block_q5_k *b, float *d, int64_t nsub) {
    int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= nsub) return;
    const eng_block_q5_k *x = &b[t / 8];
    const int sb = (int)(t % 8), c = sb / 2, upper = sb % 2;
    uint8_t sc, mn;
    scale_min_k(sb, x->scales, &sc, &mn);
    const float d1 = h2f(x->d) * sc, m1 = h2f(x->dmin) * mn;
    const uint8_t *q = x->qs + 32 * c;
    float *o = d + 32 * t;
    for (int l = 0; l < 32; l++) {
        int v = (upper ? q[l] >> 4 : q[l] & 0xF) + (((x->qh[l] >> sb) & 1) << 4);
        o[l] = d1 * (float)v - m1;
    }
}

// thread t handles 32 elements: half t%8/4, quarter (t%4) of super-block t/8
__global__ void k_deq_q6_k(const eng_block_q6_k *b, float *d, int64_t nsub) {
    int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= nsub) return;
    const eng_block_q6_k *x = &b[t / 8];
    const int half = (int)(t % 8) / 4, part = (int)(t % 4);
    const uint8_t *ql = x->ql + 64 * half, *qh = x->qh + 32 * half;
    const int8_t *sc = x->scales + 8 * half;
    const float s = h2f(x->d);
    float *o = d + 32 * t;
    for (int l = 0; l < 32; l++) {
        const int is = l / 16;
        int q;
        switch (part) {
        case 0: q = (int)((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32; break;
        case 1: q = (int)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32; break;
        case 2: q = (int)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32; break;
        default: q = (int)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32; break;
        }
        o[l] = s * (float)sc[is + 2 * part] * (float)q;
    }
}

static unsigned grid(int64_t n, int bs) { return (unsigned)((n + bs - 1) / bs); }

dp_status gpu_dequantize(int type, const void *src, float *dst, int64_t n, cudaStream_t st, dp_err *err) {
    const int bs = 256;
    switch (type) {
    case ENG_TYPE_F16: k_deq_f16<<<grid(n, bs), bs, 0, st>>>((const uint16_t *)src, dst, n); break;
    case ENG_TYPE_BF16: k_deq_bf16<<<grid(n, bs), bs, 0, st>>>((const uint16_t *)src, dst, n); break;
    case ENG_TYPE_Q8_0: k_deq_q8_0<<<grid(n / 32, bs), bs, 0, st>>>((const eng_block_q8_0 *)src, dst, n / 32); break;
    case ENG_TYPE_Q4_0: k_deq_q4_0<<<grid(n / 32, bs), bs, 0, st>>>((const eng_block_q4_0 *)src, dst, n / 32); break;
    case ENG_TYPE_Q4_K: k_deq_q4_k<<<grid(n / 32, bs), bs, 0, st>>>((const eng_block_q4_k *)src, dst, n / 32); break;
    case ENG_TYPE_Q5_K: k_deq_q5_k<<<grid(n / 32, bs), bs, 0, st>>>((const eng_block_q5_k *)src, dst, n / 32); break;
    case ENG_TYPE_Q6_K: k_deq_q6_k<<<grid(n / 32, bs), bs, 0, st>>>((const eng_block_q6_k *)src, dst, n / 32); break;
    default:
        return dp_err_set(err, DP_EUNSUPPORTED, "gpu_dequantize: type %s is not supported on the GPU yet",
                          eng_type_name(type));
    }
    GPU_CHECK(cudaGetLastError());
    return DP_OK;
}

extern "C" dp_status gpu_dequantize_host(int index, int type, const void *src, size_t src_bytes, float *dst,
                                         int64_t n, dp_err *err) {
    GPU_CHECK(cudaSetDevice(index));
    void *d_src = NULL;
    float *d_dst = NULL;
    dp_status st = DP_OK;
    cudaError_t e = cudaMalloc(&d_src, src_bytes);
    if (e == cudaSuccess) e = cudaMalloc((void **)&d_dst, (size_t)n * sizeof(float));
    if (e == cudaSuccess) e = cudaMemcpy(d_src, src, src_bytes, cudaMemcpyHostToDevice);
    if (e == cudaSuccess) {
        st = gpu_dequantize(type, d_src, d_dst, n, 0, err);
        if (!st) e = cudaMemcpy(dst, d_dst, (size_t)n * sizeof(float), cudaMemcpyDeviceToHost);
    }
    cudaFree(d_src);
    cudaFree(d_dst);
    if (!st && e != cudaSuccess)
        st = dp_err_set(err, e == cudaErrorMemoryAllocation ? DP_ENOMEM : DP_EIO, "gpu_dequantize_host: %s",
                        cudaGetErrorString(e));
    return st;
}
