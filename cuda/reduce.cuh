// reduce.cuh - sums across a warp and across a thread block.
#pragma once

#include <cuda_runtime.h>

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Sum over the block, returned to every thread. blockDim.x is a multiple of 32 (at most 1024)
// and part holds 33 floats of shared memory; a block may call it repeatedly.
__device__ __forceinline__ float block_sum(float v, float *part) {
    v = warp_sum(v);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x < 32) {
        v = warp_sum(threadIdx.x < (blockDim.x >> 5) ? part[threadIdx.x] : 0.0f);
        if (threadIdx.x == 0) part[32] = v;
    }
    __syncthreads();
    v = part[32];
    __syncthreads(); // part is free again for the next call
    return v;
}
