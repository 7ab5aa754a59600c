// kernels.cuh - launchers of the CUDA backend's kernels (device pointers, one stream each).
//
// Each launcher only enqueues work; backend_cuda.cu checks cudaGetLastError after it and
// latches the first failure for the next sync.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

// Kernel launches go through GK_LAUNCH so that the same sources also build against the CPU
// emulator of cuda/emu (DP_CUDA=EMU), which runs a kernel's threads as cooperative fibers.
// A template argument list with a comma is written with GK_COMMA.
#define GK_COMMA ,
#ifdef DP_CUDA_EMU
#define GK_LAUNCH(kern, grid, block, st, ...) emu_launch(dim3(grid), dim3(block), st, [=]() { kern(__VA_ARGS__); })
#else
#define GK_LAUNCH(kern, grid, block, st, ...) kern<<<grid, block, 0, st>>>(__VA_ARGS__)
#endif

// ops.cu: the small float ops
void gk_get_rows(int type, const uint8_t *w, size_t row_bytes, int K, const int32_t *tok, int n, float *x,
                 cudaStream_t st);
void gk_rmsnorm(const float *x, int ldx, const float *w, float *y, int ldy, int n_rows, int n, float eps,
                cudaStream_t st);
void gk_rope(float *x, int ld, int n_tok, int n_head, int hd, int n_rot, const int32_t *pos, float base, bool neox,
             const float *freq_div, cudaStream_t st);
void gk_swiglu(const float *g, const float *u, float *out, int64_t n, cudaStream_t st);
void gk_add(float *x, const float *y, int64_t n, cudaStream_t st);
void gk_add_rows(float *x, int ld, int n_rows, const float *b, int n, cudaStream_t st);
void gk_mul_sigmoid(float *x, const float *g, int64_t n, cudaStream_t st);

// attention.cu: the paged KV cache
void gk_kv_store(void *kc, void *vc, bool f16, int kv_dim, const float *k, const float *v, int ld, int n_tok,
                 const int32_t *slot, cudaStream_t st);
typedef struct gk_attn {
    int n_tok;
    const float *q; int ldq;
    float *out; int ldo;
    int n_head, n_head_kv, hd;
    const int32_t *pos, *seq;
    const void *k, *v;
    bool f16;
    const int32_t *blk_table;
    int blk_stride, blk_size;
    float scale;
} gk_attn;
// Limits of gk_attention: a head size up to GK_ATTN_MAX_HD, at most GK_ATTN_MAX_G query heads
// per KV head.
#define GK_ATTN_MAX_HD 256
#define GK_ATTN_MAX_G 8
void gk_attention(const gk_attn *a, cudaStream_t st);

// deltanet.cu: qwen35's Gated DeltaNet core (engine/backend.h's eng_deltanet_args, with the
// step's tokens grouped by sequence: order[start[g] .. start[g + 1]) in position order)
typedef struct gk_dn {
    int n_tok;
    const int32_t *seq;
    const int32_t *order, *start;
    int n_groups;
    const float *qkv, *z, *beta_in, *alpha_in;
    float *out, *scratch;
    const float *conv_w, *dt_bias, *ssm_a, *norm_w;
    float *conv_state, *ssm_state;
    int n_k, n_v, dk, dv, kernel, ch_n;
    float eps;
    bool chunked; // prompts chunk-wise (engine/backend.h); decode steps are recurrent either way
} gk_dn;
// A sequence with at least this many tokens in a chunked step goes chunk-wise, as on the CPU
// (backend_cpu.c's DN_CHUNK_MIN); the rest token by token. The choice depends on the sequence's
// own tokens only, so results stay batch-invariant.
#define GK_DN_CHUNK_MIN 16
bool gk_deltanet_supported(int dk, int dv, int kernel);
void gk_deltanet(const gk_dn *a, cudaStream_t st);

// matmul.cu: y[t][n] = sum_k W[n][k] x[t][k], W [N][K] of a weight type, x [n_tok][K] (ldx).
// Both are batch invariant: token t's results do not depend on n_tok or the other tokens.
// gk_matvec: f32 throughout, for F32 weights (any n_tok).
void gk_matvec(int type, const uint8_t *w, size_t row_bytes, int N, int K, const float *x, int ldx, int n_tok,
               float *y, int ldy, cudaStream_t st);
// gk_mma: f16 tensor-core products with f32 accumulation, for every other weight type.
void gk_mma(int type, const uint8_t *w, size_t row_bytes, int N, int K, const float *x, int ldx, int n_tok, float *y,
            int ldy, cudaStream_t st);
