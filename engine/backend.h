/*
 * backend.h - the compute interface the forward pass (forward.c) is written against. The CPU
 * backend (cpu/backend_cpu.c) implements it now; the CUDA backend will fill the same table,
 * with the float pointers then naming device memory.
 *
 * Shapes are given as [rows][columns] with a row stride (ld*) in floats. All ops are
 * synchronous from the caller's view.
 */
#ifndef ENG_BACKEND_H
#define ENG_BACKEND_H

#include <stdbool.h>
#include <stdint.h>

#include "model.h"
#include "status.h"

typedef struct eng_backend eng_backend;

/* Attention of n_tok query tokens against a KV cache (one head dimension hd for K and V). */
typedef struct eng_attn_args {
    int n_tok;
    const float *q;  int ldq;   /* [n_tok][n_head * hd] */
    float *out;      int ldo;   /* [n_tok][n_head * hd] */
    int n_head, n_head_kv, hd;
    const int32_t *pos;         /* [n_tok] position of each query token */
    const int32_t *seq;         /* [n_tok] sequence of each query token */
    const void *k, *v;          /* cache of this layer: [n_blocks][blk_size][n_head_kv * hd] */
    int kv_type;                /* ENG_TYPE_F32 or ENG_TYPE_F16 */
    const int32_t *blk_table;   /* [seq * blk_stride + i]: block holding positions i*blk_size.. */
    int blk_stride, blk_size;
    float scale;                /* 1/sqrt(hd) */
} eng_attn_args;

/* Gated DeltaNet core of one layer (model-spec 4.9 steps 2-7) for n_tok tokens. */
typedef struct eng_deltanet_args {
    int n_tok;
    const int32_t *seq;         /* [n_tok]; tokens of a sequence are in order */
    const float *qkv;           /* [n_tok][conv_ch] pre-conv projections */
    const float *z;             /* [n_tok][n_v * dv] output gate */
    const float *beta_in;       /* [n_tok][n_v] */
    const float *alpha_in;      /* [n_tok][n_v] */
    float *out;                 /* [n_tok][n_v * dv] gated, normed outputs */
    float *scratch;             /* [n_tok][conv_ch] */
    const float *conv_w;        /* [conv_ch][kernel] */
    const float *dt_bias, *ssm_a, *norm_w;
    float *conv_state;          /* this layer: [n_seq][kernel - 1][conv_ch] */
    float *ssm_state;           /* this layer: [n_seq][n_v][dv][dk] */
    int n_k, n_v, dk, dv, kernel;
    float eps;
    bool chunked;               /* prompts in the chunk-wise (WY) form; decode steps always recurrent */
} eng_deltanet_args;

typedef struct eng_backend_ops {
    const char *name;
    /* y[t][n] = sum_k W[n][k] * x[t][k]; x [n_tok][W.ne0] (ldx), y [n_tok][W.ne1] (ldy) */
    void (*matmul)(eng_backend *be, const eng_weight *w, const float *x, int ldx, int n_tok, float *y, int ldy);
    /* y[r] = x[r] * w / sqrt(mean(x[r]^2) + eps), n_rows rows of n */
    void (*rmsnorm)(eng_backend *be, const float *x, int ldx, const float *w, float *y, int ldy, int n_rows, int n,
                    float eps);
    /* in place on n_tok rows of n_head heads of hd (head h at x + t*ld + h*hd): rotate the first
     * n_rot dims by position (NEOX: pairs (i, i + n_rot/2); else (2i, 2i+1)) by the angle
     * pos * base^(-2i/n_rot), divided by freq_div[i] when given (Llama 3.1 rope_freqs) */
    void (*rope)(eng_backend *be, float *x, int ld, int n_tok, int n_head, int hd, int n_rot, const int32_t *pos,
                 float base, bool neox, const float *freq_div);
    /* writes n_tok rows of K and V into cache rows slot[t] */
    void (*kv_store)(eng_backend *be, void *kcache, void *vcache, int kv_type, int kv_dim, const float *k,
                     const float *v, int ld, int n_tok, const int32_t *slot);
    void (*attention)(eng_backend *be, const eng_attn_args *a);
    void (*deltanet)(eng_backend *be, const eng_deltanet_args *a);
    /* out = silu(g) * u, elementwise over n */
    void (*swiglu)(eng_backend *be, const float *g, const float *u, float *out, int64_t n);
    /* x += y over n */
    void (*add)(eng_backend *be, float *x, const float *y, int64_t n);
    void (*free)(eng_backend *be);
} eng_backend_ops;

struct eng_backend {
    const eng_backend_ops *ops;
    void *impl;
};

/* The CPU backend: n_threads workers; exact = scalar reference kernels on dequantized
 * weights, no activation quantization. */
dp_status eng_backend_cpu_new(int n_threads, bool exact, eng_backend **out, dp_err *err);

#endif /* ENG_BACKEND_H */
