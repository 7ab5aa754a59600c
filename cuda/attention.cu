// attention.cu - the paged KV cache on the device: storing rows, and attention of query
// tokens over their sequence's cached positions.
//
// DESIGN
// - One thread block per (query token, KV head) with its G query heads: each cached K and V
//   row is read once for the whole group, as on the CPU.
// - The block's ATT_WARPS warps take interleaved positions, each keeping an online softmax
//   (running max, sum, weighted V) per query head; lane i holds dimensions i, i + 32, ... The
//   warps' partial results are merged through shared memory at the end.
// - Positions p of sequence s live at row table[s][p / blk_size] * blk_size + p % blk_size.
#include <cuda_fp16.h>
#include <math.h>

#include "kernels.cuh"
#include "reduce.cuh"

#define ATT_WARPS 4
#define MAX_D (GK_ATTN_MAX_HD / 32)
#define MAX_G GK_ATTN_MAX_G

template <typename KT> __device__ __forceinline__ float kv_f(KT v);
template <> __device__ __forceinline__ float kv_f<float>(float v) { return v; }
template <> __device__ __forceinline__ float kv_f<__half>(__half v) { return __half2float(v); }

template <typename KT> __global__ void k_kv_store(KT *kc, KT *vc, int kv_dim, const float *k, const float *v, int ld,
                                                  int n_tok, const int32_t *slot) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)n_tok * kv_dim) return;
    const int t = (int)(i / kv_dim), e = (int)(i % kv_dim);
    const size_t row = (size_t)slot[t] * kv_dim + e;
    if constexpr (sizeof(KT) == 2) {
        kc[row] = __float2half_rn(k[(size_t)t * ld + e]);
        vc[row] = __float2half_rn(v[(size_t)t * ld + e]);
    } else {
        kc[row] = k[(size_t)t * ld + e];
        vc[row] = v[(size_t)t * ld + e];
    }
}

void gk_kv_store(void *kc, void *vc, bool f16, int kv_dim, const float *k, const float *v, int ld, int n_tok,
                 const int32_t *slot, cudaStream_t st) {
    const int64_t n = (int64_t)n_tok * kv_dim;
    if (n <= 0) return;
    const unsigned grid = (unsigned)((n + 255) / 256);
    if (f16) GK_LAUNCH(k_kv_store<__half>, grid, 256, st, (__half *)kc, (__half *)vc, kv_dim, k, v, ld, n_tok, slot);
    else GK_LAUNCH(k_kv_store<float>, grid, 256, st, (float *)kc, (float *)vc, kv_dim, k, v, ld, n_tok, slot);
}

template <typename KT> __global__ void __launch_bounds__(ATT_WARPS * 32) k_attention(gk_attn a) {
    __shared__ float sm_m[ATT_WARPS][MAX_G], sm_l[ATT_WARPS][MAX_G];
    __shared__ float sm_acc[ATT_WARPS][MAX_G][GK_ATTN_MAX_HD];
    const int t = blockIdx.x, kvh = blockIdx.y, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int G = a.n_head / a.n_head_kv, kv_dim = a.n_head_kv * a.hd;
    const int n_pos = a.pos[t] + 1;
    const int32_t *table = a.blk_table + (size_t)a.seq[t] * a.blk_stride;
    const KT *kc = (const KT *)a.k, *vc = (const KT *)a.v;

    float q[MAX_G][MAX_D], acc[MAX_G][MAX_D], m[MAX_G], l[MAX_G];
#pragma unroll
    for (int g = 0; g < MAX_G; g++) {
        m[g] = -INFINITY;
        l[g] = 0.0f;
#pragma unroll
        for (int d = 0; d < MAX_D; d++) {
            const bool in = g < G && lane + 32 * d < a.hd;
            q[g][d] = in ? a.q[(size_t)t * a.ldq + (size_t)(kvh * G + g) * a.hd + lane + 32 * d] : 0.0f;
            acc[g][d] = 0.0f;
        }
    }
    for (int p = warp; p < n_pos; p += ATT_WARPS) {
        const size_t row = (size_t)table[p / a.blk_size] * a.blk_size + p % a.blk_size;
        const KT *kr = kc + row * kv_dim + (size_t)kvh * a.hd, *vr = vc + row * kv_dim + (size_t)kvh * a.hd;
        float kv[MAX_D], vv[MAX_D];
#pragma unroll
        for (int d = 0; d < MAX_D; d++) {
            const bool in = lane + 32 * d < a.hd;
            kv[d] = in ? kv_f(kr[lane + 32 * d]) : 0.0f;
            vv[d] = in ? kv_f(vr[lane + 32 * d]) : 0.0f;
        }
#pragma unroll
        for (int g = 0; g < MAX_G; g++) {
            if (g >= G) break;
            float s = 0.0f;
#pragma unroll
            for (int d = 0; d < MAX_D; d++) s += q[g][d] * kv[d];
            s = warp_sum(s) * a.scale;
            const float mn = fmaxf(m[g], s), corr = expf(m[g] - mn), w = expf(s - mn);
            l[g] = l[g] * corr + w;
#pragma unroll
            for (int d = 0; d < MAX_D; d++) acc[g][d] = acc[g][d] * corr + w * vv[d];
            m[g] = mn;
        }
    }
    // merge the warps: out = sum_w acc_w e^(m_w - M) / sum_w l_w e^(m_w - M)
#pragma unroll
    for (int g = 0; g < MAX_G; g++) {
        if (g >= G) break;
        if (lane == 0) {
            sm_m[warp][g] = m[g];
            sm_l[warp][g] = l[g];
        }
#pragma unroll
        for (int d = 0; d < MAX_D; d++)
            if (lane + 32 * d < a.hd) sm_acc[warp][g][lane + 32 * d] = acc[g][d];
    }
    __syncthreads();
    for (int i = threadIdx.x; i < G * a.hd; i += blockDim.x) {
        const int g = i / a.hd, e = i % a.hd;
        float M = -INFINITY;
        for (int w = 0; w < ATT_WARPS; w++) M = fmaxf(M, sm_m[w][g]);
        float L = 0.0f, o = 0.0f;
        for (int w = 0; w < ATT_WARPS; w++) {
            if (sm_m[w][g] == -INFINITY) continue; // a warp that saw no position
            const float f = expf(sm_m[w][g] - M);
            L += sm_l[w][g] * f;
            o += sm_acc[w][g][e] * f;
        }
        a.out[(size_t)t * a.ldo + (size_t)(kvh * G + g) * a.hd + e] = o / L;
    }
}

void gk_attention(const gk_attn *a, cudaStream_t st) {
    if (a->n_tok <= 0) return;
    const dim3 grid((unsigned)a->n_tok, (unsigned)a->n_head_kv);
    if (a->f16) GK_LAUNCH(k_attention<__half>, grid, ATT_WARPS * 32, st, *a);
    else GK_LAUNCH(k_attention<float>, grid, ATT_WARPS * 32, st, *a);
}
