// deltanet.cu - qwen35's Gated DeltaNet core on the device (model-spec 4.9 steps 2-7): the
// causal conv1d with its state, the q/k L2 norms, the delta rule, and the gated RMSNorm.
//
// DESIGN
// - conv: one thread per channel walks the step's tokens in order, so a sequence's tokens see
//   the state its earlier tokens left, exactly as the CPU loop does.
// - The delta rule runs token by token (the recurrent form) for prompts and decode alike: one
//   thread block per (sequence, value head), thread j (a pair of threads for dk = 128) holding
//   row j of the head's dv x dk state in registers for the whole step, so the state is read
//   and written once per step.
//   Prompts get their parallelism from heads x sequences; a chunk-wise form for long
//   single-sequence prompts is future work.
// - The gated RMSNorm is fused after each token's output: one block reduction over dv.
// - Tokens arrive grouped by sequence (gk_dn.order/start, built by the backend's begin_step).
#include <math.h>

#include "kernels.cuh"
#include "reduce.cuh"

__device__ __forceinline__ float silu_f(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ float softplus_f(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

__global__ void k_dn_conv(gk_dn a) {
    const int ch = blockIdx.x * blockDim.x + threadIdx.x, ch_n = a.ch_n, K = a.kernel;
    if (ch >= ch_n) return;
    const float *w = a.conv_w + (size_t)ch * K;
    for (int t = 0; t < a.n_tok; t++) {
        float *st = a.conv_state + (size_t)a.seq[t] * (K - 1) * ch_n;
        const float m = a.qkv[(size_t)t * ch_n + ch];
        float s = 0.0f;
        for (int j = 0; j < K - 1; j++) s += w[j] * st[(size_t)j * ch_n + ch];
        s += w[K - 1] * m;
        a.scratch[(size_t)t * ch_n + ch] = silu_f(s);
        for (int j = 0; j + 1 < K - 1; j++) st[(size_t)j * ch_n + ch] = st[(size_t)(j + 1) * ch_n + ch];
        if (K > 1) st[(size_t)(K - 2) * ch_n + ch] = m;
    }
}

// One warp per (token, q or k, key head): L2-normalize, q also scaled by 1/sqrt(dk).
__global__ void k_dn_norm(gk_dn a) {
    const int w = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (w >= a.n_tok * 2 * a.n_k) return;
    const int t = w / (2 * a.n_k), part = (w / a.n_k) % 2, h = w % a.n_k;
    float *v = a.scratch + (size_t)t * a.ch_n + (size_t)part * a.n_k * a.dk + (size_t)h * a.dk;
    float ss = 0.0f;
    for (int i = lane; i < a.dk; i += 32) ss += v[i] * v[i];
    ss = warp_sum(ss);
    const float n = sqrtf(ss), inv = 1.0f / (n > a.eps ? n : a.eps);
    const float s = part == 0 ? inv * (1.0f / sqrtf((float)a.dk)) : inv;
    for (int i = lane; i < a.dk; i += 32) v[i] *= s;
}

// SPLIT threads share a state row, DK / SPLIT elements each (DK = 128 would need 128 registers
// for the row alone and spill), their partial dot products summed with one shuffle.
template <int DK, int SPLIT> __global__ void k_dn_rec(gk_dn a) {
    constexpr int DKP = DK / SPLIT;
    __shared__ float qs[DK], ks[DK], part[33];
    const int g = blockIdx.x, h = blockIdx.y, j = threadIdx.x / SPLIT, p0 = (threadIdx.x % SPLIT) * DKP;
    const int dv = a.dv, kh = h % a.n_k;
    const bool row = j < dv, lead = row && threadIdx.x % SPLIT == 0;
    const int *idx = a.order + a.start[g];
    const int n = a.start[g + 1] - a.start[g];
    float *Sg = a.ssm_state + ((size_t)a.seq[idx[0]] * a.n_v + h) * (size_t)dv * DK + (size_t)j * DK + p0;
    float S[DKP];
#pragma unroll
    for (int i = 0; i < DKP; i++) S[i] = row ? Sg[i] : 0.0f;
    const float A = a.ssm_a[h], dt = a.dt_bias[h], nw = row ? a.norm_w[j] : 0.0f;
    for (int r = 0; r < n; r++) {
        const int t = idx[r];
        const float *x = a.scratch + (size_t)t * a.ch_n;
        for (int i = threadIdx.x; i < DK; i += blockDim.x) {
            qs[i] = x[(size_t)kh * DK + i];
            ks[i] = x[(size_t)a.n_k * DK + (size_t)kh * DK + i];
        }
        __syncthreads();
        const float beta = 1.0f / (1.0f + expf(-a.beta_in[(size_t)t * a.n_v + h]));
        const float decay = expf(A * softplus_f(a.alpha_in[(size_t)t * a.n_v + h] + dt));
        const float v = row ? x[(size_t)2 * a.n_k * DK + (size_t)h * dv + j] : 0.0f;
        float u = 0.0f;
#pragma unroll
        for (int i = 0; i < DKP; i++) {
            S[i] *= decay;
            u += S[i] * ks[p0 + i];
        }
        if (SPLIT == 2) u += __shfl_xor_sync(0xffffffffu, u, 1);
        const float delta = beta * (v - u);
        float o = 0.0f;
#pragma unroll
        for (int i = 0; i < DKP; i++) {
            S[i] += ks[p0 + i] * delta;
            o += S[i] * qs[p0 + i];
        }
        if (SPLIT == 2) o += __shfl_xor_sync(0xffffffffu, o, 1);
        const float ss = block_sum(lead ? o * o : 0.0f, part); // also orders qs/ks reuse
        const float scale = 1.0f / sqrtf(ss / (float)dv + a.eps);
        if (lead) {
            const size_t at = (size_t)t * a.n_v * dv + (size_t)h * dv + j;
            a.out[at] = (o * scale) * nw * silu_f(a.z[at]);
        }
    }
    if (row)
#pragma unroll
        for (int i = 0; i < DKP; i++) Sg[i] = S[i];
}

bool gk_deltanet_supported(int dk, int dv, int kernel) {
    return (dk == 16 || dk == 32 || dk == 64 || dk == 128) && dv >= 1 && dv * (dk == 128 ? 2 : 1) <= 1024 &&
           kernel >= 1 && kernel <= 16;
}

void gk_deltanet(const gk_dn *a, cudaStream_t st) {
    if (a->n_tok <= 0) return;
    GK_LAUNCH(k_dn_conv, (unsigned)((a->ch_n + 127) / 128), 128, st, *a);
    const int warps = a->n_tok * 2 * a->n_k;
    GK_LAUNCH(k_dn_norm, (unsigned)((warps + 3) / 4), 128, st, *a);
    const dim3 grid((unsigned)a->n_groups, (unsigned)a->n_v);
    const int bs = (a->dv + 31) / 32 * 32;
    switch (a->dk) {
    case 16: GK_LAUNCH(k_dn_rec<16 GK_COMMA 1>, grid, bs, st, *a); break;
    case 32: GK_LAUNCH(k_dn_rec<32 GK_COMMA 1>, grid, bs, st, *a); break;
    case 64: GK_LAUNCH(k_dn_rec<64 GK_COMMA 1>, grid, bs, st, *a); break;
    default: GK_LAUNCH(k_dn_rec<128 GK_COMMA 2>, grid, 2 * bs, st, *a); break;
    }
}
