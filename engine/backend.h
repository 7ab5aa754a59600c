/*
 * backend.h - the compute interface the forward pass (forward.c) and the context (engine.c)
 * are written against. Two implementations: the CPU (cpu/backend_cpu.c) and CUDA
 * (cuda/backend_cuda.cu, found through the device registry at the end of this header).
 *
 * DESIGN
 * - Activations, the KV cache and the recurrent state live in backend memory (alloc): host
 *   memory for the CPU, device memory for CUDA. The engine never dereferences it; it moves
 *   bytes with copy/fill0/to_host/from_host. Weight pointers (eng_weight.data, the f32 vectors
 *   of eng_layer) are the model's host pointers: a device backend keeps its own copy of each
 *   and translates.
 * - The step's integer arrays (token, pos, seq, slot, the block table) are handed over once per
 *   forward step by begin_step; ops that take one of them (get_rows, rope, kv_store,
 *   attention, deltanet) must be given the same host pointer, which a device backend maps to
 *   its uploaded copy.
 * - Ops may run asynchronously (CUDA: one stream, in order). to_host and sync wait; sync
 *   returns the first error any op met since the last sync (an op itself returns nothing).
 *
 * Shapes are given as [rows][columns] with a row stride (ld*) in floats.
 */
#ifndef ENG_BACKEND_H
#define ENG_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "device.h"
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
    int kv_type;                /* ENG_TYPE_F32, ENG_TYPE_F16 or ENG_TYPE_Q8_0 (CPU only) */
    const int32_t *blk_table;   /* [seq * blk_stride + i]: block holding positions i*blk_size.. */
    int blk_stride, blk_size;
    float scale;                /* 1/sqrt(hd) */
} eng_attn_args;

/* Floats of the CPU backend's attention scratch per query row: its running sum (a double),
 * running maximum, one cache block's scores, the query and the accumulator. */
static inline size_t eng_attn_row_floats(int blk_size, int hd) { return 3 + (size_t)blk_size + 2 * (size_t)hd; }

/* The CPU backend's attention works on clusters of consecutive tokens, each cluster and KV head
 * one thread's work item, holding its group's query rows. A cluster is at most 64 tokens, halved
 * while those rows would pass 2^18 floats (1 MB: a Zen 4's L2, half a Sapphire Rapids'), so that
 * each cache block is read from memory and widened once for as many tokens as fit. Here so the
 * memory estimate (model_info.c) counts what the backend takes. */
static inline int eng_attn_cluster_max(int group, int blk_size, int hd) {
    const size_t per_tok = (size_t)group * eng_attn_row_floats(blk_size, hd);
    int cl = 64;
    while (cl > 1 && (size_t)cl * per_tok > ((size_t)1 << 18)) cl /= 2;
    return cl;
}

/* Gated DeltaNet core of one layer (model-formats.md §4.9 steps 2-7) for n_tok tokens. */
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

/* The integer arrays of one forward step (host memory; see begin_step). */
typedef struct eng_step {
    int n_tok;
    const int32_t *token, *pos, *seq; /* [n_tok] */
    const int32_t *slot;              /* [n_tok] KV cache row of each token */
    const int32_t *blk_table;         /* [n_seq][blk_stride] */
    int n_seq, blk_stride;
} eng_step;

#define ENG_MATMUL_N 4 /* the most weights one matmul_n call takes (qwen35's DeltaNet inputs) */

typedef struct eng_backend_ops {
    const char *name;
    bool host_memory;  /* alloc returns host memory the engine may read directly */
    /* memory: alloc returns zeroed backend memory, or NULL when there is not enough */
    void *(*alloc)(eng_backend *be, size_t bytes);
    void (*release)(eng_backend *be, void *p);
    void (*copy)(eng_backend *be, void *dst, const void *src, size_t bytes);
    void (*fill0)(eng_backend *be, void *dst, size_t bytes);
    void (*to_host)(eng_backend *be, void *host_dst, const void *src, size_t bytes);
    void (*from_host)(eng_backend *be, void *dst, const void *host_src, size_t bytes);
    /* waits for every op issued so far; the first error since the last sync, or DP_OK */
    dp_status (*sync)(eng_backend *be, dp_err *err);
    void (*begin_step)(eng_backend *be, const eng_step *s);
    /* x[t] = row tok[t] of w as floats (the token embedding) */
    void (*get_rows)(eng_backend *be, const eng_weight *w, const int32_t *tok, int n, float *x);
    /* dst[r][0..cols) = src[r][0..cols) for n_rows rows */
    void (*copy2d)(eng_backend *be, float *dst, int ldd, const float *src, int lds, int n_rows, int cols);
    /* x[r][i] += b[i] for n_rows rows of n (biases) */
    void (*add_rows)(eng_backend *be, float *x, int ld, int n_rows, const float *b, int n);
    /* x[i] *= sigmoid(g[i]) (qwen35's attention output gate) */
    void (*mul_sigmoid)(eng_backend *be, float *x, const float *g, int64_t n);
    /* y[t][n] = sum_k W[n][k] * x[t][k]; x [n_tok][W.ne0] (ldx), y [n_tok][W.ne1] (ldy) */
    void (*matmul)(eng_backend *be, const eng_weight *w, const float *x, int ldx, int n_tok, float *y, int ldy);
    /* (optional, NULL: matmul per weight) the same for n (<= ENG_MATMUL_N) weights that read one
     * x, y[i] [n_tok][w[i]->ne1] (ldy[i]): each output's bits as matmul's */
    void (*matmul_n)(eng_backend *be, int n, const eng_weight *const *w, const float *x, int ldx, int n_tok,
                     float *const *y, const int *ldy);
    /* y[r] = x[r] * w / sqrt(mean(x[r]^2) + eps), n_rows rows of n */
    void (*rmsnorm)(eng_backend *be, const float *x, int ldx, const float *w, float *y, int ldy, int n_rows, int n,
                    float eps);
    /* in place on n_tok rows of n_head heads of hd (head h at x + t*ld + h*hd): rotate the first
     * n_rot dims by position (NEOX: pairs (i, i + n_rot/2); else (2i, 2i+1)) by the angle
     * pos * base^(-2i/n_rot), divided by freq_div[i] when given (Llama 3.1 rope_freqs) */
    void (*rope)(eng_backend *be, float *x, int ld, int n_tok, int n_head, int hd, int n_rot, const int32_t *pos,
                 float base, bool neox, const float *freq_div);
    /* writes n_tok rows of K and V (heads of hd values) into cache rows slot[t]; how a block's
     * rows lie within it is the backend's own (attention reads them; copies are whole blocks) */
    void (*kv_store)(eng_backend *be, void *kcache, void *vcache, int kv_type, int kv_dim, int hd, const float *k,
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
/* Tests: while on, every CPU backend's scratch allocation fails, as it would out of memory (the
 * step's sync then reports DP_ENOMEM). */
void eng_backend_cpu_fail_scratch(bool on);

/* ---- Device backends: the registry (devices.c) ----------------------------------------------
 * A backend for a device other than the CPU lives in its own library (cuda/backend_cuda.cu) and
 * registers itself there from a static initializer; the context asks the registry for the
 * backend its device setting names. */
typedef struct eng_device_backend {
    dp_device device;     /* DP_DEVICE_CUDA */
    const char *name;     /* "cuda" */
    /* device memory the backend's runtime takes beyond the buffers eng_model_mem_estimate counts */
    uint64_t reserve_bytes;
    /* usable devices (0 without a driver or device), and device 0's free memory and name */
    void (*probe)(int *n_devices, size_t *free_bytes, char *name, size_t name_len);
    /* why m cannot run there (NULL when it can): an architecture or weight type it has no
     * kernels for */
    const char *(*refuses)(const struct eng_model *m);
    /* a backend on device `index` that holds every weight of m (DP_ENOMEM naming the bytes when
     * the device cannot); activations per step: up to n_ubatch tokens, n_seq sequences of
     * blk_stride table entries */
    dp_status (*create)(const struct eng_model *m, int index, int n_ubatch, int n_seq, int blk_stride,
                        eng_backend **out, dp_err *err);
    /* "cuda (NVIDIA H200, sm_90)" */
    const char *(*describe)(const eng_backend *be);
} eng_device_backend;

/* Adds b; true when added (one backend per device kind). Called before main(). */
bool eng_device_register(const eng_device_backend *b);
/* The backend registered for device (AUTO: the first registered), NULL for the CPU or when
 * this build has none. */
const eng_device_backend *eng_device_backend_for(dp_device device);

#endif /* ENG_BACKEND_H */
