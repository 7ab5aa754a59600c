// ops.cu - the CUDA backend's small float ops: embedding rows, RMSNorm, RoPE, SwiGLU, adds.
//
// DESIGN: the formulas and their operation order follow engine/cpu/backend_cpu.c, so the two
// backends differ only by summation order (RMSNorm's sum of squares is a float tree here, a
// double loop there) and by the libm behind sinf/cosf/expf.
#include "deq.cuh"
#include "kernels.cuh"
#include "reduce.cuh"

static unsigned blocks_for(int64_t n, int bs) { return (unsigned)((n + bs - 1) / bs); }

template <int TYPE>
__global__ void k_get_rows(const uint8_t *w, size_t row_bytes, int K, const int32_t *tok, int n, float *x) {
    const int n_chunks = K / 32;
    for (int t = blockIdx.y; t < n; t += gridDim.y) {
        const uint8_t *row = w + (size_t)tok[t] * row_bytes;
        for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < n_chunks; c += gridDim.x * blockDim.x) {
            float o[32];
            deq32<TYPE>(row, c, o);
            float *d = x + (size_t)t * K + 32 * c;
#pragma unroll
            for (int i = 0; i < 32; i++) d[i] = o[i];
        }
    }
}

void gk_get_rows(int type, const uint8_t *w, size_t row_bytes, int K, const int32_t *tok, int n, float *x,
                 cudaStream_t st) {
    if (n <= 0) return;
    const dim3 grid(blocks_for(K / 32, 64), (unsigned)(n < 65535 ? n : 65535));
#define LAUNCH(T) GK_LAUNCH(k_get_rows<T>, grid, 64, st, w, row_bytes, K, tok, n, x)
    DEQ_DISPATCH(type, LAUNCH, break)
#undef LAUNCH
}

// One block per row; the sum of squares reduced through shared memory.
__global__ void k_rmsnorm(const float *x, int ldx, const float *w, float *y, int ldy, int n, float eps) {
    __shared__ float part[33];
    const float *xr = x + (size_t)blockIdx.x * ldx;
    float *yr = y + (size_t)blockIdx.x * ldy;
    float ss = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) ss += xr[i] * xr[i];
    ss = block_sum(ss, part);
    const float scale = 1.0f / sqrtf(ss / (float)n + eps);
    // in place (x == y) is safe: every thread reads its own elements before writing them
    for (int i = threadIdx.x; i < n; i += blockDim.x) yr[i] = __fmul_rn(__fmul_rn(xr[i], scale), w[i]);
}

void gk_rmsnorm(const float *x, int ldx, const float *w, float *y, int ldy, int n_rows, int n, float eps,
                cudaStream_t st) {
    if (n_rows <= 0) return;
    const int bs = n >= 1024 ? 256 : n >= 256 ? 128 : 32;
    GK_LAUNCH(k_rmsnorm, (unsigned)n_rows, bs, st, x, ldx, w, y, ldy, n, eps);
}

// One thread per (token, head, rotated pair). theta_i = pos * theta_scale^i by repeated
// multiplication, as the CPU backend (and ggml) builds it.
__global__ void k_rope(float *x, int ld, int n_tok, int n_head, int hd, int n_rot, const int32_t *pos,
                       float theta_scale, bool neox, const float *freq_div) {
    const int half = n_rot / 2;
    const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (int64_t)n_tok * n_head * half) return;
    const int i = (int)(idx % half), h = (int)((idx / half) % n_head), t = (int)(idx / ((int64_t)half * n_head));
    float theta = (float)pos[t];
    for (int j = 0; j < i; j++) theta *= theta_scale;
    const float th = freq_div ? theta / freq_div[i] : theta;
    const float cs = cosf(th), sn = sinf(th);
    float *v = x + (size_t)t * ld + (size_t)h * hd;
    const int a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
    const float x0 = v[a], x1 = v[b];
    v[a] = __fsub_rn(__fmul_rn(x0, cs), __fmul_rn(x1, sn));
    v[b] = __fadd_rn(__fmul_rn(x0, sn), __fmul_rn(x1, cs));
}

void gk_rope(float *x, int ld, int n_tok, int n_head, int hd, int n_rot, const int32_t *pos, float base, bool neox,
             const float *freq_div, cudaStream_t st) {
    const int64_t n = (int64_t)n_tok * n_head * (n_rot / 2);
    if (n <= 0) return;
    const float theta_scale = powf(base, -2.0f / (float)n_rot); // host powf, as the CPU backend
    GK_LAUNCH(k_rope, blocks_for(n, 256), 256, st, x, ld, n_tok, n_head, hd, n_rot, pos, theta_scale, neox, freq_div);
}

__global__ void k_swiglu(const float *g, const float *u, float *out, int64_t n) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        const float x = g[i];
        out[i] = __fmul_rn(x / (1.0f + expf(-x)), u[i]);
    }
}

__global__ void k_add(float *x, const float *y, int64_t n) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += y[i];
}

__global__ void k_add_rows(float *x, int ld, int n_rows, const float *b, int n) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (int64_t)n_rows * n) x[(i / n) * ld + i % n] += b[i % n];
}

__global__ void k_mul_sigmoid(float *x, const float *g, int64_t n) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = __fmul_rn(x[i], 1.0f / (1.0f + expf(-g[i])));
}

void gk_swiglu(const float *g, const float *u, float *out, int64_t n, cudaStream_t st) {
    if (n > 0) GK_LAUNCH(k_swiglu, blocks_for(n, 256), 256, st, g, u, out, n);
}
void gk_add(float *x, const float *y, int64_t n, cudaStream_t st) {
    if (n > 0) GK_LAUNCH(k_add, blocks_for(n, 256), 256, st, x, y, n);
}
void gk_add_rows(float *x, int ld, int n_rows, const float *b, int n, cudaStream_t st) {
    if ((int64_t)n_rows * n > 0) GK_LAUNCH(k_add_rows, blocks_for((int64_t)n_rows * n, 256), 256, st, x, ld, n_rows, b, n);
}
void gk_mul_sigmoid(float *x, const float *g, int64_t n, cudaStream_t st) {
    if (n > 0) GK_LAUNCH(k_mul_sigmoid, blocks_for(n, 256), 256, st, x, g, n);
}
