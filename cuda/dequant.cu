// dequant.cu - whole-tensor dequantization to f32 (the parity tests' window onto deq32).
//
// DESIGN: one thread per 32-element chunk through deq32 (deq.cuh), the decoder every other
// kernel uses, so a bit-exact match with engine/quant.c here vouches for all of them.
#include "common.cuh"
#include "deq.cuh"
#include "dequant.cuh"
#include "gpu.h"
#include "kernels.cuh"

template <int TYPE> __global__ void k_dequant(const uint8_t *src, float *dst, int64_t n_chunks) {
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n_chunks) return;
    float o[32];
    deq32<TYPE>(src, (int)t, o); // the tensor read as one long row: its chunks are in order
    float4 *d = (float4 *)(dst + 32 * t);
#pragma unroll
    for (int i = 0; i < 8; i++) d[i] = make_float4(o[4 * i], o[4 * i + 1], o[4 * i + 2], o[4 * i + 3]);
}

dp_status gpu_dequantize(int type, const void *src, float *dst, int64_t n, cudaStream_t st, dp_err *err) {
    const int bs = 128;
    const int64_t chunks = n / 32;
    const unsigned grid = (unsigned)((chunks + bs - 1) / bs);
    if (n % 32) return dp_err_set(err, DP_EINVAL, "gpu_dequantize: %lld elements is not a whole number of chunks",
                                  (long long)n);
    if (!chunks) return DP_OK;
#define LAUNCH(T) GK_LAUNCH(k_dequant<T>, grid, bs, st, (const uint8_t *)src, dst, chunks)
    DEQ_DISPATCH(type, LAUNCH,
                 return dp_err_set(err, DP_EUNSUPPORTED, "gpu_dequantize: type %s is not supported on the GPU",
                                   eng_type_name(type)))
#undef LAUNCH
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
