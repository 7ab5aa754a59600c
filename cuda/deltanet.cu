// deltanet.cu - qwen35's Gated DeltaNet core on the device (model-formats.md §4.9 steps 2-7): the
// causal conv1d with its state, the q/k L2 norms, the delta rule, and the gated RMSNorm.
//
// DESIGN
// - conv: one thread per channel walks the step's tokens in order, so a sequence's tokens see
//   the state its earlier tokens left, exactly as the CPU loop does.
// - The delta rule: one thread block per (sequence, value head), thread j (a pair of threads
//   for dk = 128) holding row j of the head's dv x dk state in registers for the whole step, so
//   the state is read and written once per step. Decode steps (and sequences with fewer than
//   GK_DN_CHUNK_MIN tokens in a step) go token by token (k_dn_rec); prompt pieces chunk-wise
//   (k_dn_chunk), 16 tokens at a time in the WY form of model-formats.md §4.9, the CPU's delta_chunk.h
//   formulation: most of a chunk's work is then products the block's threads share, and a
//   16-token chunk costs about as many barriers as one recurrent token.
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
__device__ __forceinline__ bool dn_chunkwise(const gk_dn &a, int n) { return a.chunked && n >= GK_DN_CHUNK_MIN && a.dv <= a.dk; }

template <int DK, int SPLIT> __global__ void k_dn_rec(gk_dn a) {
    constexpr int DKP = DK / SPLIT;
    __shared__ float qs[DK], ks[DK], part[33];
    const int g = blockIdx.x, h = blockIdx.y, j = threadIdx.x / SPLIT, p0 = (threadIdx.x % SPLIT) * DKP;
    const int dv = a.dv, kh = h % a.n_k;
    const bool row = j < dv, lead = row && threadIdx.x % SPLIT == 0;
    const int *idx = a.order + a.start[g];
    const int n = a.start[g + 1] - a.start[g];
    if (dn_chunkwise(a, n)) return; // k_dn_chunk's
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

// The chunk-wise form (model-formats.md §4.9's WY representation, as delta_chunk.h on the CPU) for one
// (sequence, value head): per chunk of c <= GK_DN_C tokens, with G = cumsum(g),
//   A_rs = beta_r (k_r . k_s) e^(G_r - G_s) (s < r), T = (I + A)^-1 (forward substitution),
//   U = T diag(beta) V, W = T diag(beta e^G) K, Vt = U - W S, O = e^G (Q S) + ((Q K^T) o e^(G_r - G_s)) Vt,
//   S' = e^(G_c) S + (diag(e^(G_c - G)) K)^T Vt.
// The state stays in registers as in k_dn_rec; the chunk's q, k, v, W and U/Vt live in shared
// memory (5 x 16 x 128 floats = 40 KB for dk = 128, under the 48 KB static limit), O in the lead
// threads' registers until the gated RMSNorm, one warp per token row.
#define GK_DN_C 16
template <int DK, int SPLIT> __global__ void k_dn_chunk(gk_dn a) {
    constexpr int DKP = DK / SPLIT, C = GK_DN_C;
    __shared__ float qs[C][DK], ks[C][DK], vs[C][DK], ws[C][DK], us[C][DK];
    __shared__ float As[C][C], Ts[C][C], QKs[C][C], Gc[C], eg[C], coef[C], bt[C], gg[C];
    const int g = blockIdx.x, h = blockIdx.y, tid = threadIdx.x, nth = blockDim.x;
    const int j = tid / SPLIT, p0 = (tid % SPLIT) * DKP;
    const int dv = a.dv, kh = h % a.n_k;
    const bool row = j < dv, lead = row && tid % SPLIT == 0;
    const int *idx = a.order + a.start[g];
    const int n = a.start[g + 1] - a.start[g];
    if (!dn_chunkwise(a, n)) return; // k_dn_rec's
    float *Sg = a.ssm_state + ((size_t)a.seq[idx[0]] * a.n_v + h) * (size_t)dv * DK + (size_t)j * DK + p0;
    float S[DKP];
#pragma unroll
    for (int i = 0; i < DKP; i++) S[i] = row ? Sg[i] : 0.0f;
    const float Aa = a.ssm_a[h], dt = a.dt_bias[h];
    const size_t kq = (size_t)kh * DK, kk = (size_t)a.n_k * DK + (size_t)kh * DK, vv = (size_t)2 * a.n_k * DK + (size_t)h * dv;
    for (int c0 = 0; c0 < n; c0 += C) {
        const int c = n - c0 < C ? n - c0 : C;
        for (int e = tid; e < c * DK; e += nth) {
            const int r = e / DK, i = e % DK;
            const float *x = a.scratch + (size_t)idx[c0 + r] * a.ch_n;
            qs[r][i] = x[kq + i];
            ks[r][i] = x[kk + i];
            vs[r][i] = i < dv ? x[vv + i] : 0.0f;
        }
        if (tid < c) {
            const int t = idx[c0 + tid];
            bt[tid] = 1.0f / (1.0f + expf(-a.beta_in[(size_t)t * a.n_v + h]));
            gg[tid] = Aa * softplus_f(a.alpha_in[(size_t)t * a.n_v + h] + dt);
        }
        __syncthreads();
        if (tid == 0) {
            float run = 0.0f;
            for (int r = 0; r < c; r++) {
                run += gg[r];
                Gc[r] = run;
                eg[r] = expf(run);
            }
            for (int r = 0; r < c; r++) coef[r] = expf(Gc[c - 1] - Gc[r]);
        }
        __syncthreads();
        for (int e = tid; e < c * c; e += nth) { // A and the decayed Q K^T, one (r, s) pair per thread
            const int r = e / c, s = e % c;
            if (s > r) continue;
            float dkk = 0.0f, dqk = 0.0f;
            for (int i = 0; i < DK; i++) {
                dkk += ks[r][i] * ks[s][i];
                dqk += qs[r][i] * ks[s][i];
            }
            const float dec = expf(Gc[r] - Gc[s]);
            if (s < r) As[r][s] = bt[r] * dkk * dec;
            QKs[r][s] = dqk * dec;
        }
        __syncthreads();
        for (int r = 0; r < c; r++) { // T = (I + A)^-1, row r from the rows above it
            if (tid <= r) {
                float t = tid == r ? 1.0f : 0.0f;
                for (int m = tid; m < r; m++) t -= As[r][m] * Ts[m][tid];
                Ts[r][tid] = t;
            }
            __syncthreads();
        }
        for (int e = tid; e < c * DK; e += nth) { // U = T diag(beta) V, W = T diag(beta e^G) K
            const int r = e / DK, i = e % DK;
            float u = 0.0f, w = 0.0f;
            for (int s = 0; s <= r; s++) {
                const float tb = Ts[r][s] * bt[s];
                u += tb * vs[s][i];
                w += tb * eg[s] * ks[s][i];
            }
            us[r][i] = u;
            ws[r][i] = w;
        }
        __syncthreads();
        float o[C];
#pragma unroll
        for (int r = 0; r < C; r++) { // Vt = U - W S and e^G (Q S), state row j
            if (r >= c) break;
            float wS = 0.0f, qS = 0.0f;
#pragma unroll
            for (int i = 0; i < DKP; i++) {
                wS += ws[r][p0 + i] * S[i];
                qS += qs[r][p0 + i] * S[i];
            }
            if (SPLIT == 2) {
                wS += __shfl_xor_sync(0xffffffffu, wS, 1);
                qS += __shfl_xor_sync(0xffffffffu, qS, 1);
            }
            if (lead) us[r][j] -= wS;
            o[r] = eg[r] * qS;
        }
        __syncthreads();
        if (lead)
#pragma unroll
            for (int r = 0; r < C; r++) {
                if (r >= c) break;
                for (int s = 0; s <= r; s++) o[r] += QKs[r][s] * us[s][j];
                qs[r][j] = o[r]; // q is spent: its rows take the outputs
            }
        const float el = eg[c - 1];
#pragma unroll
        for (int i = 0; i < DKP; i++) S[i] *= el;
        for (int r = 0; r < c; r++) {
            const float f = row ? coef[r] * us[r][j] : 0.0f;
#pragma unroll
            for (int i = 0; i < DKP; i++) S[i] += f * ks[r][p0 + i];
        }
        __syncthreads();
        for (int r = tid / 32; r < c; r += nth / 32) { // gated RMSNorm, a warp per token
            const int lane = tid % 32, t = idx[c0 + r];
            float ss = 0.0f;
            for (int jj = lane; jj < dv; jj += 32) ss += qs[r][jj] * qs[r][jj];
            ss = warp_sum(ss);
            const float scale = 1.0f / sqrtf(ss / (float)dv + a.eps);
            for (int jj = lane; jj < dv; jj += 32) {
                const size_t at = (size_t)t * a.n_v * dv + (size_t)h * dv + jj;
                a.out[at] = (qs[r][jj] * scale) * a.norm_w[jj] * silu_f(a.z[at]);
            }
        }
        __syncthreads(); // the next chunk overwrites the shared rows
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
    // both kernels run over every sequence; each returns at once for those of the other form
    switch (a->dk) {
    case 16: GK_LAUNCH(k_dn_rec<16 GK_COMMA 1>, grid, bs, st, *a); break;
    case 32: GK_LAUNCH(k_dn_rec<32 GK_COMMA 1>, grid, bs, st, *a); break;
    case 64: GK_LAUNCH(k_dn_rec<64 GK_COMMA 1>, grid, bs, st, *a); break;
    default: GK_LAUNCH(k_dn_rec<128 GK_COMMA 2>, grid, 2 * bs, st, *a); break;
    }
    if (!a->chunked) return;
    switch (a->dk) {
    case 16: GK_LAUNCH(k_dn_chunk<16 GK_COMMA 1>, grid, bs, st, *a); break;
    case 32: GK_LAUNCH(k_dn_chunk<32 GK_COMMA 1>, grid, bs, st, *a); break;
    case 64: GK_LAUNCH(k_dn_chunk<64 GK_COMMA 1>, grid, bs, st, *a); break;
    default: GK_LAUNCH(k_dn_chunk<128 GK_COMMA 2>, grid, 2 * bs, st, *a); break;
    }
}
