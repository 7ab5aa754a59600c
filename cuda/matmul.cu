// matmul.cu - quantized matrix products on the device.
//
// DESIGN
// - Decode and small batches (<= GK_MATVEC_MAX_TOK tokens): one warp per weight row; each lane
//   decodes 32-element chunks (deq32) into registers and multiplies them with every token's
//   activations, so each weight byte is read once per call, the memory-bound ideal.
// - Larger batches go through cuBLAS (backend_cuda.cu): the weight is decoded to f16 in row
//   tiles (gk_weight_f16) and the activations rounded to f16 (gk_act_f16), then one tensor-core
//   GEMM per tile with f32 accumulation. The decoding costs one pass over the tile, small next
//   to the GEMM when the batch is a prompt.
#include "deq.cuh"
#include "kernels.cuh"

#define MV_WARPS 4

template <int TYPE, int NT>
__global__ void __launch_bounds__(MV_WARPS * 32)
    k_matvec(const uint8_t *w, size_t row_bytes, int N, int K, const float *x, int ldx, float *y, int ldy) {
    const int row = blockIdx.x * MV_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;
    const uint8_t *wr = w + (size_t)row * row_bytes;
    float sum[NT];
#pragma unroll
    for (int t = 0; t < NT; t++) sum[t] = 0.0f;
    for (int c = lane; c < K / 32; c += 32) {
        float o[32];
        deq32<TYPE>(wr, c, o);
#pragma unroll
        for (int t = 0; t < NT; t++) {
            const float *xc = x + (size_t)t * ldx + 32 * c;
            float s = 0.0f;
#pragma unroll
            for (int i = 0; i < 32; i++) s += o[i] * __ldg(xc + i);
            sum[t] += s;
        }
    }
#pragma unroll
    for (int t = 0; t < NT; t++) {
        float s = sum[t];
#pragma unroll
        for (int off = 16; off; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
        if (lane == 0) y[(size_t)t * ldy + row] = s;
    }
}

template <int TYPE>
static void matvec_t(const uint8_t *w, size_t row_bytes, int N, int K, const float *x, int ldx, int n_tok, float *y,
                     int ldy, cudaStream_t st) {
    const unsigned grid = (unsigned)((N + MV_WARPS - 1) / MV_WARPS);
    const int bs = MV_WARPS * 32;
    switch (n_tok) {
    case 1: GK_LAUNCH(k_matvec<TYPE GK_COMMA 1>, grid, bs, st, w, row_bytes, N, K, x, ldx, y, ldy); break;
    case 2: GK_LAUNCH(k_matvec<TYPE GK_COMMA 2>, grid, bs, st, w, row_bytes, N, K, x, ldx, y, ldy); break;
    case 3: GK_LAUNCH(k_matvec<TYPE GK_COMMA 3>, grid, bs, st, w, row_bytes, N, K, x, ldx, y, ldy); break;
    case 4: GK_LAUNCH(k_matvec<TYPE GK_COMMA 4>, grid, bs, st, w, row_bytes, N, K, x, ldx, y, ldy); break;
    case 5: GK_LAUNCH(k_matvec<TYPE GK_COMMA 5>, grid, bs, st, w, row_bytes, N, K, x, ldx, y, ldy); break;
    case 6: GK_LAUNCH(k_matvec<TYPE GK_COMMA 6>, grid, bs, st, w, row_bytes, N, K, x, ldx, y, ldy); break;
    case 7: GK_LAUNCH(k_matvec<TYPE GK_COMMA 7>, grid, bs, st, w, row_bytes, N, K, x, ldx, y, ldy); break;
    default: GK_LAUNCH(k_matvec<TYPE GK_COMMA 8>, grid, bs, st, w, row_bytes, N, K, x, ldx, y, ldy); break;
    }
}

void gk_matvec(int type, const uint8_t *w, size_t row_bytes, int N, int K, const float *x, int ldx, int n_tok,
               float *y, int ldy, cudaStream_t st) {
    if (N <= 0 || n_tok <= 0) return;
#define LAUNCH(T) matvec_t<T>(w, row_bytes, N, K, x, ldx, n_tok, y, ldy, st)
    DEQ_DISPATCH(type, LAUNCH, break)
#undef LAUNCH
}

template <int TYPE>
__global__ void k_weight_f16(const uint8_t *w, size_t row_bytes, int64_t r0, int rows, int K, __half *dst) {
    const int per_row = K / 32;
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)rows * per_row) return;
    const int r = (int)(i / per_row), c = (int)(i % per_row);
    float o[32];
    deq32<TYPE>(w + (size_t)(r0 + r) * row_bytes, c, o);
    __half2 *d = (__half2 *)(dst + (size_t)r * K + 32 * c);
#pragma unroll
    for (int j = 0; j < 16; j++) d[j] = __floats2half2_rn(o[2 * j], o[2 * j + 1]);
}

void gk_weight_f16(int type, const uint8_t *w, size_t row_bytes, int64_t r0, int rows, int K, __half *dst,
                   cudaStream_t st) {
    const int64_t n = (int64_t)rows * (K / 32);
    if (n <= 0) return;
    const unsigned grid = (unsigned)((n + 127) / 128);
#define LAUNCH(T) GK_LAUNCH(k_weight_f16<T>, grid, 128, st, w, row_bytes, r0, rows, K, dst)
    DEQ_DISPATCH(type, LAUNCH, break)
#undef LAUNCH
}

__global__ void k_act_f16(const float *x, int ldx, int n_tok, int K, __half *dst) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)n_tok * K) return;
    dst[i] = __float2half_rn(x[(i / K) * ldx + i % K]);
}

void gk_act_f16(const float *x, int ldx, int n_tok, int K, __half *dst, cudaStream_t st) {
    const int64_t n = (int64_t)n_tok * K;
    if (n > 0) GK_LAUNCH(k_act_f16, (unsigned)((n + 255) / 256), 256, st, x, ldx, n_tok, K, dst);
}
