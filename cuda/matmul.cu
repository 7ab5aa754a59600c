// matmul.cu - quantized matrix products on the device.
//
// DESIGN
// - Batch invariance first: a token's products must not depend on how many other tokens share
//   the call (a request's output is the same alone or among 64), so every call for a weight
//   type takes one kernel whose per-element reduction order is fixed by K alone: no split-K,
//   no choice of algorithm by shape.
// - Quantized, F16 and BF16 weights: gk_mma, tensor-core MMAs on f16 weights decoded in shared
//   memory and f16-rounded activations, f32 accumulation along K in a fixed order. Decode
//   steps read each weight byte once; a prompt re-reads the weights once per 32 tokens.
// - F32 weights (tiny models, norms-sized tensors): gk_matvec, one warp per row, each lane
//   decoding chunks into registers and multiplying them with up to 8 tokens' f32 activations
//   at a time; each token's sum has the same order whatever the batch.
#include <mma.h>

#include "deq.cuh"
#include "kernels.cuh"
#include "reduce.cuh"

using namespace nvcuda;

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
        const float s = warp_sum(sum[t]);
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
    if (N <= 0) return;
    for (int t0 = 0; t0 < n_tok; t0 += 8) { // 8 tokens a launch, each token's sum in the same order
        const int n = n_tok - t0 < 8 ? n_tok - t0 : 8;
        const float *xs = x + (size_t)t0 * ldx;
        float *ys = y + (size_t)t0 * ldy;
#define LAUNCH(T) matvec_t<T>(w, row_bytes, N, K, xs, ldx, n, ys, ldy, st)
        DEQ_DISPATCH(type, LAUNCH, break)
#undef LAUNCH
    }
}

// ---- the tensor-core product -------------------------------------------------------------
// A block is 4 warps and computes 64 weight rows x 32 tokens; warp w owns rows 16w..16w+15 and
// both 16-token halves. Per step of 32 along K, the block decodes the 64 rows' chunks to f16
// (one thread per row) and rounds the 32 tokens' activations to f16 into shared memory, then
// each warp issues 2 x 2 16x16x16 MMAs with f32 accumulation.
#define MM_ROWS 64
#define MM_TOK 32
#define MM_LD 40 // halves per shared row: 32 + 8 of padding against bank conflicts (and 16-byte rows)

template <int TYPE>
__global__ void __launch_bounds__(128)
    k_mma(const uint8_t *w, size_t row_bytes, int N, int K, const float *x, int ldx, int n_tok, float *y, int ldy) {
    __shared__ __align__(32) __half As[MM_ROWS * MM_LD];
    __shared__ __align__(32) __half Bs[MM_TOK * MM_LD];
    __shared__ __align__(32) float Cs[4][16 * 16];
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int r0 = blockIdx.x * MM_ROWS, t0 = blockIdx.y * MM_TOK;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2];
    wmma::fill_fragment(acc[0], 0.0f);
    wmma::fill_fragment(acc[1], 0.0f);
    for (int c = 0; c < K / 32; c++) {
        if (tid < MM_ROWS) {
            __half2 *dst = (__half2 *)(As + tid * MM_LD);
            if (r0 + tid < N) {
                float o[32];
                deq32<TYPE>(w + (size_t)(r0 + tid) * row_bytes, c, o);
#pragma unroll
                for (int j = 0; j < 16; j++) dst[j] = __floats2half2_rn(o[2 * j], o[2 * j + 1]);
            } else {
#pragma unroll
                for (int j = 0; j < 16; j++) dst[j] = __floats2half2_rn(0.0f, 0.0f);
            }
        }
        // 32 tokens x 32 activations: thread i rounds 8 of token i / 4
        {
            const int t = tid / 4, k8 = (tid % 4) * 8;
            __half2 *dst = (__half2 *)(Bs + t * MM_LD + k8);
            const bool in = t0 + t < n_tok;
            const float *src = x + (size_t)(t0 + t) * ldx + 32 * c + k8;
#pragma unroll
            for (int j = 0; j < 4; j++)
                dst[j] = in ? __floats2half2_rn(src[2 * j], src[2 * j + 1]) : __floats2half2_rn(0.0f, 0.0f);
        }
        __syncthreads();
#pragma unroll
        for (int ks = 0; ks < 32; ks += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
            wmma::load_matrix_sync(a, As + warp * 16 * MM_LD + ks, MM_LD);
#pragma unroll
            for (int h = 0; h < 2; h++) {
                // B (k x token) column-major: element (k, t) at Bs[t][k]
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> b;
                wmma::load_matrix_sync(b, Bs + h * 16 * MM_LD + ks, MM_LD);
                wmma::mma_sync(acc[h], a, b, acc[h]);
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int h = 0; h < 2; h++) {
        wmma::store_matrix_sync(Cs[warp], acc[h], 16, wmma::mem_row_major); // (row i, token j) at [i][j]
        __syncwarp();
        for (int e = lane; e < 256; e += 32) {
            const int i = e / 16, j = e % 16, r = r0 + warp * 16 + i, t = t0 + h * 16 + j;
            if (r < N && t < n_tok) y[(size_t)t * ldy + r] = Cs[warp][e];
        }
        __syncwarp();
    }
}

void gk_mma(int type, const uint8_t *w, size_t row_bytes, int N, int K, const float *x, int ldx, int n_tok, float *y,
            int ldy, cudaStream_t st) {
    if (N <= 0 || n_tok <= 0) return;
    const dim3 grid((unsigned)((N + MM_ROWS - 1) / MM_ROWS), (unsigned)((n_tok + MM_TOK - 1) / MM_TOK));
#define LAUNCH(T) GK_LAUNCH(k_mma<T>, grid, 128, st, w, row_bytes, N, K, x, ldx, n_tok, y, ldy)
    DEQ_DISPATCH(type, LAUNCH, break)
#undef LAUNCH
}
