// emu.h - a CPU emulator of the slice of CUDA the backend uses, for testing its kernels and
// host code on machines without a GPU (DP_CUDA=EMU). Not a product path: it is slow, and it
// checks logic (indexing, barriers, shuffles, reductions), not a GPU's timing or memory model.
//
// DESIGN
// - The .cu sources compile unchanged as C++ against this header (through the stand-ins
//   cuda_runtime.h, cuda_fp16.h, cuda_bf16.h and mma.h beside it): the CUDA keywords
//   are defined away, __shared__ becomes static (blocks run one after another), and
//   threadIdx/blockIdx read the running fiber's coordinates.
// - A launch runs each block's threads as cooperative fibers (ucontext) on the calling
//   thread. __syncthreads and the warp shuffles are barriers: a fiber yields until every
//   live thread of its block (or warp) has arrived. A deadlock (a barrier some thread never
//   reaches) aborts with a message.
// - Device memory is host memory; streams run synchronously; the warp matrix operations of
//   mma.h are plain loops.
// - CUDA_VISIBLE_DEVICES set to empty hides the emulated device, as it hides a real one.
#pragma once

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <functional>
#include <type_traits>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __restrict__
#define __align__(n) __attribute__((aligned(n)))

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
// p, after checking that it is aligned to align bytes (aborts naming it otherwise)
const void *emu_aligned(const void *p, size_t align);
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

// ---- warp matrix operations (mma.h) -----------------------------------------------------
// Each thread holds a whole 16x16 tile (the warp's 32 copies agree), so the fragments'
// distribution over lanes, which CUDA leaves unspecified, plays no part; one lane computes each
// product for its warp (emu_mma). Pointers must be 32-byte aligned and ldm a multiple of 16
// bytes, as CUDA requires; the emulator aborts otherwise.
void __syncwarp(unsigned mask = 0xffffffffu);
void emu_wmma_check(const void *p, unsigned ldm, size_t elem);
void emu_mma(float d[16][16], const float a[16][16], const float b[16][16], const float c[16][16]);
bool emu_warp_leader(); // the lane that computes the warp's products: only it needs A and B
namespace nvcuda {
namespace wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };
template <typename Use, int M, int N, int K, typename T, typename Layout = void> struct fragment {
    float v[16][16]; // a: [m][k], b: [k][n], accumulator: [m][n]
};
template <typename U, typename T, typename L> inline void fill_fragment(fragment<U, 16, 16, 16, T, L> &f, float x) {
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) f.v[i][j] = x;
}
template <typename U, typename L>
inline void load_matrix_sync(fragment<U, 16, 16, 16, __half, L> &f, const __half *p, unsigned ldm) {
    emu_wmma_check(p, ldm, 2);
    if (!emu_warp_leader()) return;
    const bool row = std::is_same<L, row_major>::value;
    for (int i = 0; i < 16; i++) // (i, j) of the fragment's matrix: rows of A or of B (k)
        for (int j = 0; j < 16; j++) f.v[i][j] = __half2float(row ? p[(size_t)i * ldm + j] : p[i + (size_t)j * ldm]);
}
template <typename T, typename L>
inline void mma_sync(fragment<accumulator, 16, 16, 16, float> &d, const fragment<matrix_a, 16, 16, 16, T, row_major> &a,
                     const fragment<matrix_b, 16, 16, 16, T, L> &b, const fragment<accumulator, 16, 16, 16, float> &c) {
    emu_mma(d.v, a.v, b.v, c.v);
}
inline void store_matrix_sync(float *p, const fragment<accumulator, 16, 16, 16, float> &f, unsigned ldm, layout_t l) {
    emu_wmma_check(p, ldm, 4);
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) (l == mem_row_major ? p[(size_t)i * ldm + j] : p[i + (size_t)j * ldm]) = f.v[i][j];
}
} // namespace wmma
} // namespace nvcuda
