// emu.h - a CPU emulator of the slice of CUDA the backend uses, for testing its kernels and
// host code on machines without a GPU (DP_CUDA=EMU). Not a product path: it is slow, and it
// checks logic (indexing, barriers, shuffles, reductions), not a GPU's timing or memory model.
//
// DESIGN
// - The .cu sources compile unchanged as C++ against this header (through the stand-ins
//   cuda_runtime.h, cuda_fp16.h, cuda_bf16.h and cublas_v2.h beside it): the CUDA keywords
//   are defined away, __shared__ becomes static (blocks run one after another), and
//   threadIdx/blockIdx read the running fiber's coordinates.
// - A launch runs each block's threads as cooperative fibers (ucontext) on the calling
//   thread. __syncthreads and the warp shuffles are barriers: a fiber yields until every
//   live thread of its block (or warp) has arrived. A deadlock (a barrier some thread never
//   reaches) aborts with a message.
// - Device memory is host memory; streams run synchronously; cuBLAS is a plain loop.
// - CUDA_VISIBLE_DEVICES set to empty hides the emulated device, as it hides a real one.
#pragma once

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <functional>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __restrict__

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct uint3 {
    unsigned x, y, z;
};
struct float4 {
    float x, y, z, w;
};
struct uint4 {
    unsigned x, y, z, w;
};
static inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }

const uint3 &emu_thread_idx();
extern uint3 emu_block_idx;
extern dim3 emu_block_dim, emu_grid_dim;
#define threadIdx (emu_thread_idx())
#define blockIdx (emu_block_idx)
#define blockDim (emu_block_dim)
#define gridDim (emu_grid_dim)

void __syncthreads();
float emu_shfl_xor(float v, int lane_mask);
static inline float __shfl_xor_sync(unsigned mask, float v, int lane_mask) {
    (void)mask;
    return emu_shfl_xor(v, lane_mask);
}

template <typename T> static inline T __ldg(const T *p) { return *p; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __uint_as_float(unsigned u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

// ---- runtime API -------------------------------------------------------------------------

typedef enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorNoDevice = 100,
    cudaErrorInsufficientDriver = 35,
} cudaError_t;
typedef enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
} cudaMemcpyKind;
typedef struct emu_stream *cudaStream_t;
#define cudaStreamNonBlocking 1
struct cudaDeviceProp {
    char name[256];
    int major, minor, multiProcessorCount;
    size_t totalGlobalMem;
};

cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int dev);
cudaError_t cudaSetDevice(int dev);
cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total);
cudaError_t cudaGetLastError(void);
const char *cudaGetErrorString(cudaError_t e);
cudaError_t cudaMalloc(void **p, size_t bytes);
cudaError_t cudaFree(void *p);
cudaError_t cudaMallocHost(void **p, size_t bytes);
cudaError_t cudaFreeHost(void *p);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t st);
cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                              cudaMemcpyKind kind, cudaStream_t st);
cudaError_t cudaMemsetAsync(void *p, int v, size_t bytes, cudaStream_t st);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *st, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t st);
cudaError_t cudaStreamSynchronize(cudaStream_t st);

void emu_launch(dim3 grid, dim3 block, cudaStream_t st, const std::function<void()> &kernel);

// ---- half and bfloat16 -------------------------------------------------------------------

struct __half {
    uint16_t bits;
};
struct __half2 {
    __half x, y;
};
float emu_h2f(uint16_t h);
uint16_t emu_f2h(float f);
static inline __half __ushort_as_half(uint16_t b) { return __half{b}; }
static inline float __half2float(__half h) { return emu_h2f(h.bits); }
static inline __half __float2half_rn(float f) { return __half{emu_f2h(f)}; }
static inline __half2 __floats2half2_rn(float a, float b) { return __half2{__float2half_rn(a), __float2half_rn(b)}; }

// ---- cuBLAS ------------------------------------------------------------------------------

typedef struct emu_blas *cublasHandle_t;
typedef enum {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_NOT_INITIALIZED = 1,
    CUBLAS_STATUS_ALLOC_FAILED = 3,
    CUBLAS_STATUS_INVALID_VALUE = 7,
    CUBLAS_STATUS_ARCH_MISMATCH = 8,
    CUBLAS_STATUS_EXECUTION_FAILED = 13,
    CUBLAS_STATUS_NOT_SUPPORTED = 15,
} cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 } cublasOperation_t;
typedef enum { CUDA_R_32F = 0, CUDA_R_16F = 2 } cudaDataType;
typedef enum { CUBLAS_COMPUTE_32F = 68 } cublasComputeType_t;
typedef enum { CUBLAS_GEMM_DEFAULT = -1 } cublasGemmAlgo_t;
cublasStatus_t cublasCreate(cublasHandle_t *h);
cublasStatus_t cublasDestroy(cublasHandle_t h);
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t st);
cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void *alpha, const void *A, cudaDataType at, int lda, const void *B,
                            cudaDataType bt, int ldb, const void *beta, void *C, cudaDataType ct, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t algo);
