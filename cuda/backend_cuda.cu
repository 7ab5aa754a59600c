// backend_cuda.cu - the CUDA implementation of engine/backend.h (qwen2, qwen3, qwen35, llama).
//
// DESIGN
// - The model's weights and f32 vectors are uploaded once into one device allocation, each
//   tensor 256-byte aligned; a table sorted by host address maps the model's pointers (which
//   the forward pass hands to every op) to their device copies.
// - Every op is enqueued on one stream, in order; nothing waits except to_host, sync and
//   begin_step (which must not overwrite the pinned staging buffer while a copy from it may
//   still be pending). CUDA errors are latched, first one wins, and reported by
//   the next sync, naming the op.
// - begin_step packs the step's integer arrays into one pinned buffer and uploads it with
//   one copy; ops given one of the step's host arrays read its device twin.
// - begin_step also groups the step's tokens by sequence for the Gated DeltaNet (qwen35).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.cuh"
#include "deq.cuh"
#include "gpu.h"
#include "kernels.cuh"

extern "C" {
#include "backend.h"
#include "model.h"
}

typedef struct wmap {
    const uint8_t *host;
    size_t bytes, off; // off: into the device blob
} wmap;

typedef struct cuda_be {
    int dev;
    cudaStream_t st;
    uint8_t *blob; // the weights
    wmap *map;
    int n_map, cap_map;
    size_t blob_bytes;
    // the step
    int32_t *h_step, *d_step; // pinned staging and its device copy
    size_t step_cap;          // int32s
    int n_seq_cap;
    const int32_t *hp[5];     // token, pos, seq, slot, blk_table as handed to begin_step
    int32_t *dp[5];
    int32_t *d_order, *d_start; // the step's tokens grouped by sequence (DeltaNet)
    int n_groups;
    int32_t *h_count;           // [n_seq + 1] scratch of the grouping
    // the first error since the last sync
    char err[512];
    bool failed;
    char name[320];
} cuda_be;

static cuda_be *CB(eng_backend *be) { return (cuda_be *)be->impl; }

static void latch(cuda_be *c, const char *op, const char *what) {
    if (c->failed) return;
    c->failed = true;
    snprintf(c->err, sizeof(c->err), "cuda %s: %s", op, what);
}

static void check_launch(cuda_be *c, const char *op) {
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) latch(c, op, cudaGetErrorString(e));
}

static void check_call(cuda_be *c, cudaError_t e, const char *op) {
    if (e != cudaSuccess) {
        cudaGetLastError();
        latch(c, op, cudaGetErrorString(e));
    }
}

// The device copy of a model pointer (a weight, or a vector inside one of the uploaded
// tensors); NULL, latching an error, for a pointer that was never uploaded.
static const void *dev_of(cuda_be *c, const void *host, const char *op) {
    if (!host) return NULL;
    const uint8_t *p = (const uint8_t *)host;
    int lo = 0, hi = c->n_map - 1;
    while (lo <= hi) {
        const int mid = (lo + hi) / 2;
        const wmap *w = &c->map[mid];
        if (p < w->host) hi = mid - 1;
        else if (p >= w->host + w->bytes) lo = mid + 1;
        else return c->blob + w->off + (size_t)(p - w->host);
    }
    latch(c, op, "a tensor the model did not upload (engine bug)");
    return NULL;
}

// The device twin of one of the step's host arrays.
static const int32_t *step_of(cuda_be *c, const int32_t *host, const char *op) {
    for (int i = 0; i < 5; i++)
        if (host && host == c->hp[i]) return c->dp[i];
    latch(c, op, "an integer array that begin_step did not receive (engine bug)");
    return NULL;
}

// ---- memory ------------------------------------------------------------------------------

static void *cu_alloc(eng_backend *be, size_t bytes) {
    cuda_be *c = CB(be);
    void *p = NULL;
    if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
        cudaGetLastError(); // out of memory is reported by the caller, with what it wanted
        return NULL;
    }
    if (cudaMemsetAsync(p, 0, bytes, c->st) != cudaSuccess) check_call(c, cudaGetLastError(), "alloc");
    return p;
}

static void cu_release(eng_backend *be, void *p) {
    (void)be;
    if (p) cudaFree(p);
}

static void cu_copy(eng_backend *be, void *dst, const void *src, size_t bytes) {
    cuda_be *c = CB(be);
    if (bytes) check_call(c, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, c->st), "copy");
}

static void cu_fill0(eng_backend *be, void *dst, size_t bytes) {
    cuda_be *c = CB(be);
    if (bytes) check_call(c, cudaMemsetAsync(dst, 0, bytes, c->st), "fill0");
}

static void cu_to_host(eng_backend *be, void *host, const void *src, size_t bytes) {
    cuda_be *c = CB(be);
    if (!bytes) return;
    check_call(c, cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, c->st), "to_host");
    check_call(c, cudaStreamSynchronize(c->st), "to_host");
}

static void cu_from_host(eng_backend *be, void *dst, const void *host, size_t bytes) {
    cuda_be *c = CB(be);
    if (!bytes) return;
    check_call(c, cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, c->st), "from_host");
    check_call(c, cudaStreamSynchronize(c->st), "from_host"); // the caller may reuse host at once
}

static dp_status cu_sync(eng_backend *be, dp_err *err) {
    cuda_be *c = CB(be);
    check_call(c, cudaStreamSynchronize(c->st), "sync");
    if (!c->failed) return DP_OK;
    c->failed = false;
    return dp_err_set(err, strstr(c->err, "out of memory") ? DP_ENOMEM : DP_EIO, "%s", c->err);
}

static void cu_begin_step(eng_backend *be, const eng_step *s) {
    cuda_be *c = CB(be);
    const size_t n = (size_t)s->n_tok, nt = (size_t)s->n_seq * s->blk_stride, need = 6 * n + 1 + nt;
    if (need > c->step_cap || s->n_seq > c->n_seq_cap) {
        latch(c, "begin_step", "the step is larger than the backend was created for (engine bug)");
        return;
    }
    check_call(c, cudaStreamSynchronize(c->st), "begin_step"); // the last upload has left h_step
    const int32_t *src[5] = {s->token, s->pos, s->seq, s->slot, s->blk_table};
    const size_t len[5] = {n, n, n, n, nt};
    size_t at = 0;
    for (int i = 0; i < 5; i++) {
        if (src[i] && len[i]) memcpy(c->h_step + at, src[i], len[i] * sizeof(int32_t));
        c->hp[i] = src[i];
        c->dp[i] = c->d_step + at;
        at += len[i];
    }
    // tokens grouped by sequence, each group in batch (= position) order: a stable counting sort
    int32_t *order = c->h_step + at, *start = order + n, *cnt = c->h_count;
    memset(cnt, 0, ((size_t)s->n_seq + 1) * sizeof(int32_t));
    for (size_t t = 0; t < n; t++) cnt[s->seq[t] + 1]++;
    c->n_groups = 0;
    for (int q = 0; q < s->n_seq; q++) {
        if (cnt[q + 1]) start[c->n_groups++] = cnt[q];
        cnt[q + 1] += cnt[q];
    }
    start[c->n_groups] = (int32_t)n;
    for (size_t t = 0; t < n; t++) order[cnt[s->seq[t]]++] = (int32_t)t;
    c->d_order = c->d_step + at;
    c->d_start = c->d_step + at + n;
    at += n + (size_t)c->n_groups + 1;
    check_call(c, cudaMemcpyAsync(c->d_step, c->h_step, at * sizeof(int32_t), cudaMemcpyHostToDevice, c->st),
               "begin_step");
}

// ---- ops ---------------------------------------------------------------------------------

static void cu_get_rows(eng_backend *be, const eng_weight *w, const int32_t *tok, int n, float *x) {
    cuda_be *c = CB(be);
    const uint8_t *wd = (const uint8_t *)dev_of(c, w->data, "get_rows");
    const int32_t *dt = step_of(c, tok, "get_rows");
    if (!wd || !dt) return;
    gk_get_rows(w->type, wd, w->row_bytes, (int)w->ne0, dt, n, x, c->st);
    check_launch(c, "get_rows");
}

static void cu_copy2d(eng_backend *be, float *dst, int ldd, const float *src, int lds, int n_rows, int cols) {
    cuda_be *c = CB(be);
    if (n_rows <= 0 || cols <= 0) return;
    check_call(c, cudaMemcpy2DAsync(dst, (size_t)ldd * 4, src, (size_t)lds * 4, (size_t)cols * 4, (size_t)n_rows,
                                    cudaMemcpyDeviceToDevice, c->st), "copy2d");
}

static void cu_add_rows(eng_backend *be, float *x, int ld, int n_rows, const float *b, int n) {
    cuda_be *c = CB(be);
    const float *bd = (const float *)dev_of(c, b, "add_rows");
    if (!bd) return;
    gk_add_rows(x, ld, n_rows, bd, n, c->st);
    check_launch(c, "add_rows");
}

static void cu_mul_sigmoid(eng_backend *be, float *x, const float *g, int64_t n) {
    cuda_be *c = CB(be);
    gk_mul_sigmoid(x, g, n, c->st);
    check_launch(c, "mul_sigmoid");
}

static void cu_matmul(eng_backend *be, const eng_weight *w, const float *x, int ldx, int n_tok, float *y, int ldy) {
    cuda_be *c = CB(be);
    const uint8_t *wd = (const uint8_t *)dev_of(c, w->data, "matmul");
    if (!wd || n_tok <= 0) return;
    if (w->type == ENG_TYPE_F32) // f32 weights stay f32, as on the CPU
        gk_matvec(w->type, wd, w->row_bytes, (int)w->ne1, (int)w->ne0, x, ldx, n_tok, y, ldy, c->st);
    else
        gk_mma(w->type, wd, w->row_bytes, (int)w->ne1, (int)w->ne0, x, ldx, n_tok, y, ldy, c->st);
    check_launch(c, "matmul");
}

static void cu_rmsnorm(eng_backend *be, const float *x, int ldx, const float *w, float *y, int ldy, int n_rows, int n,
                       float eps) {
    cuda_be *c = CB(be);
    const float *wd = (const float *)dev_of(c, w, "rmsnorm");
    if (!wd) return;
    gk_rmsnorm(x, ldx, wd, y, ldy, n_rows, n, eps, c->st);
    check_launch(c, "rmsnorm");
}

static void cu_rope(eng_backend *be, float *x, int ld, int n_tok, int n_head, int hd, int n_rot, const int32_t *pos,
                    float base, bool neox, const float *freq_div) {
    cuda_be *c = CB(be);
    const int32_t *dpos = step_of(c, pos, "rope");
    const float *fd = freq_div ? (const float *)dev_of(c, freq_div, "rope") : NULL;
    if (!dpos || (freq_div && !fd)) return;
    gk_rope(x, ld, n_tok, n_head, hd, n_rot, dpos, base, neox, fd, c->st);
    check_launch(c, "rope");
}

static void cu_kv_store(eng_backend *be, void *kc, void *vc, int kv_type, int kv_dim, int hd, const float *k,
                        const float *v, int ld, int n_tok, const int32_t *slot) {
    (void)hd; /* rows stay whole: the attention kernels read a head's slice of each */
    cuda_be *c = CB(be);
    const int32_t *ds = step_of(c, slot, "kv_store");
    if (!ds) return;
    gk_kv_store(kc, vc, kv_type == ENG_TYPE_F16, kv_dim, k, v, ld, n_tok, ds, c->st);
    check_launch(c, "kv_store");
}

static void cu_attention(eng_backend *be, const eng_attn_args *a) {
    cuda_be *c = CB(be);
    gk_attn g = {a->n_tok, a->q, a->ldq, a->out, a->ldo, a->n_head, a->n_head_kv, a->hd,
                 step_of(c, a->pos, "attention"), step_of(c, a->seq, "attention"), a->k, a->v,
                 a->kv_type == ENG_TYPE_F16, step_of(c, a->blk_table, "attention"), a->blk_stride, a->blk_size,
                 a->scale};
    if (!g.pos || !g.seq || !g.blk_table) return;
    gk_attention(&g, c->st);
    check_launch(c, "attention");
}

static void cu_deltanet(eng_backend *be, const eng_deltanet_args *a) {
    cuda_be *c = CB(be);
    gk_dn d;
    d.n_tok = a->n_tok;
    d.seq = step_of(c, a->seq, "deltanet");
    d.order = c->d_order;
    d.start = c->d_start;
    d.n_groups = c->n_groups;
    d.qkv = a->qkv, d.z = a->z, d.beta_in = a->beta_in, d.alpha_in = a->alpha_in;
    d.out = a->out, d.scratch = a->scratch;
    d.conv_w = (const float *)dev_of(c, a->conv_w, "deltanet");
    d.dt_bias = (const float *)dev_of(c, a->dt_bias, "deltanet");
    d.ssm_a = (const float *)dev_of(c, a->ssm_a, "deltanet");
    d.norm_w = (const float *)dev_of(c, a->norm_w, "deltanet");
    d.conv_state = a->conv_state, d.ssm_state = a->ssm_state;
    d.n_k = a->n_k, d.n_v = a->n_v, d.dk = a->dk, d.dv = a->dv, d.kernel = a->kernel;
    d.ch_n = 2 * a->n_k * a->dk + a->n_v * a->dv;
    d.eps = a->eps;
    d.chunked = a->chunked;
    if (!d.seq || !d.conv_w || !d.dt_bias || !d.ssm_a || !d.norm_w) return;
    gk_deltanet(&d, c->st);
    check_launch(c, "deltanet");
}

static void cu_swiglu(eng_backend *be, const float *g, const float *u, float *out, int64_t n) {
    cuda_be *c = CB(be);
    gk_swiglu(g, u, out, n, c->st);
    check_launch(c, "swiglu");
}

static void cu_add(eng_backend *be, float *x, const float *y, int64_t n) {
    cuda_be *c = CB(be);
    gk_add(x, y, n, c->st);
    check_launch(c, "add");
}

static void cu_free(eng_backend *be) {
    if (!be) return;
    cuda_be *c = CB(be);
    if (c) {
        if (c->st) cudaStreamSynchronize(c->st);
        cudaFree(c->blob);
        cudaFree(c->d_step);
        if (c->h_step) cudaFreeHost(c->h_step);
        free(c->h_count);
        if (c->st) cudaStreamDestroy(c->st);
        free(c->map);
        free(c);
    }
    free(be);
}

static const eng_backend_ops cuda_ops = {
    /* .name        = */ "cuda",
    /* .host_memory = */ false,
    /* .alloc       = */ cu_alloc,
    /* .release     = */ cu_release,
    /* .copy        = */ cu_copy,
    /* .fill0       = */ cu_fill0,
    /* .to_host     = */ cu_to_host,
    /* .from_host   = */ cu_from_host,
    /* .sync        = */ cu_sync,
    /* .begin_step  = */ cu_begin_step,
    /* .get_rows    = */ cu_get_rows,
    /* .copy2d      = */ cu_copy2d,
    /* .add_rows    = */ cu_add_rows,
    /* .mul_sigmoid = */ cu_mul_sigmoid,
    /* .matmul      = */ cu_matmul,
    /* .matmul_n    = */ NULL, /* forward.c calls matmul per weight */
    /* .rmsnorm     = */ cu_rmsnorm,
    /* .rope        = */ cu_rope,
    /* .kv_store    = */ cu_kv_store,
    /* .attention   = */ cu_attention,
    /* .deltanet    = */ cu_deltanet,
    /* .swiglu      = */ cu_swiglu,
    /* .add         = */ cu_add,
    /* .free        = */ cu_free,
};

// ---- creation ----------------------------------------------------------------------------

static void collect(void *ud, const void *p, size_t bytes) {
    cuda_be *c = (cuda_be *)ud;
    if (c->failed) return;
    if (c->n_map == c->cap_map) {
        const int cap = c->cap_map ? 2 * c->cap_map : 256;
        wmap *m = (wmap *)realloc(c->map, (size_t)cap * sizeof(wmap));
        if (!m) {
            latch(c, "upload", "out of host memory");
            return;
        }
        c->map = m;
        c->cap_map = cap;
    }
    c->map[c->n_map++] = wmap{(const uint8_t *)p, bytes, 0};
}

static int by_host(const void *a, const void *b) {
    const uint8_t *x = ((const wmap *)a)->host, *y = ((const wmap *)b)->host;
    return x < y ? -1 : x > y;
}

/* Device memory the CUDA runtime, cuBLAS and the dequantized weight tile of prompt GEMMs take beyond
 * the buffers eng_model_mem_estimate counts. */
#define CUDA_RESERVE_BYTES ((uint64_t)512 << 20)

static const char *cuda_refuses(const eng_model *m) {
    static __thread char why[256];
    const eng_model_info *in = &m->info;
    if (in->n_rec_layers) {
        const int dk = (int)in->ssm_d_state, dv = in->ssm_dt_rank ? (int)(in->ssm_d_inner / in->ssm_dt_rank) : 0;
        if (!gk_deltanet_supported(dk, dv, (int)in->ssm_conv_kernel)) {
            snprintf(why, sizeof(why), "a Gated DeltaNet with state %d x %d and conv kernel %u has no CUDA kernel", dv,
                     dk, in->ssm_conv_kernel);
            return why;
        }
    }
    const int hd = (int)in->head_dim_k;
    if (in->head_dim_v != in->head_dim_k || hd % 2 || hd > GK_ATTN_MAX_HD || in->n_head % in->n_head_kv ||
        (int)(in->n_head / in->n_head_kv) > GK_ATTN_MAX_G || (int)in->n_rot > hd) {
        snprintf(why, sizeof(why), "attention with head size %d and %u/%u heads has no CUDA kernel", hd, in->n_head,
                 in->n_head_kv);
        return why;
    }
    const eng_weight *ws[2] = {&m->tok_embd, &m->output};
    for (int i = 0; i < 2; i++)
        if (!deq_supported(ws[i]->type) || ws[i]->ne0 % 32) goto bad_type;
    for (uint32_t l = 0; l < in->n_layer; l++) {
        const eng_layer *L = &m->layers[l];
        const eng_weight *lw[12] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->wg, &L->wu, &L->wd,
                                    &L->wqkv, &L->wgate, &L->wbeta, &L->walpha, &L->wssm_out};
        for (int i = 0; i < 12; i++)
            if (lw[i]->data && (!deq_supported(lw[i]->type) || lw[i]->ne0 % 32)) {
                ws[0] = lw[i];
                goto bad_type;
            }
    }
    return NULL;
bad_type:
    snprintf(why, sizeof(why), "tensor '%s' has type %s, which the CUDA backend does not decode",
             ws[0]->name ? ws[0]->name : "?", eng_type_name(ws[0]->type));
    return why;
}

static void cuda_probe(int *n_devices, size_t *free_bytes, char *name, size_t name_len) {
    *n_devices = 0;
    *free_bytes = 0;
    if (name_len) name[0] = 0;
    dp_err err = {};
    int n = 0;
    if (gpu_device_count(&n, &err) || n <= 0) return;
    gpu_device_info info;
    if (gpu_device_get_info(0, &info, &err)) return;
    *n_devices = n;
    *free_bytes = info.mem_free;
    if (name_len) snprintf(name, name_len, "%s", info.name);
}

static dp_status cuda_backend_new(const eng_model *m, int index, int n_ubatch, int n_seq, int blk_stride,
                                          eng_backend **out, dp_err *err) {
    *out = NULL;
    const char *why = cuda_refuses(m);
    if (why) return dp_err_set(err, DP_EUNSUPPORTED, "device cuda: %s", why);
    eng_backend *be = (eng_backend *)calloc(1, sizeof(*be));
    cuda_be *c = (cuda_be *)calloc(1, sizeof(*c));
    if (!be || !c) {
        free(be);
        free(c);
        return dp_err_set(err, DP_ENOMEM, "out of memory");
    }
    be->ops = &cuda_ops;
    be->impl = c;
    c->dev = index;
    dp_status st = DP_OK;
    cudaDeviceProp prop;
#define TRY(call)                                                                                                  \
    do {                                                                                                           \
        cudaError_t e_ = (call);                                                                                   \
        if (e_ != cudaSuccess) {                                                                                   \
            cudaGetLastError();                                                                                    \
            st = dp_err_set(err, e_ == cudaErrorMemoryAllocation ? DP_ENOMEM : DP_EIO, "device cuda: %s: %s", #call, \
                            cudaGetErrorString(e_));                                                               \
            goto fail;                                                                                             \
        }                                                                                                          \
    } while (0)
    TRY(cudaSetDevice(index));
    TRY(cudaGetDeviceProperties(&prop, index));
    snprintf(c->name, sizeof(c->name), "cuda (%s, sm_%d%d)", prop.name, prop.major, prop.minor);
    TRY(cudaStreamCreateWithFlags(&c->st, cudaStreamNonBlocking));
    // the weights: one allocation, tensors 256-byte aligned
    eng_model_for_each_tensor(m, collect, c);
    if (c->failed) {
        st = dp_err_set(err, DP_ENOMEM, "%s", c->err);
        goto fail;
    }
    qsort(c->map, (size_t)c->n_map, sizeof(wmap), by_host);
    {
        int k = 0; // drop repeats (a tensor named twice)
        for (int i = 0; i < c->n_map; i++)
            if (!k || c->map[i].host != c->map[k - 1].host) c->map[k++] = c->map[i];
        c->n_map = k;
    }
    for (int i = 0; i < c->n_map; i++) {
        c->map[i].off = c->blob_bytes;
        c->blob_bytes += (c->map[i].bytes + 255) & ~(size_t)255;
    }
    if (cudaMalloc((void **)&c->blob, c->blob_bytes ? c->blob_bytes : 1) != cudaSuccess) {
        cudaGetLastError();
        size_t fr = 0, tot = 0;
        cudaMemGetInfo(&fr, &tot);
        st = dp_err_set(err, DP_ENOMEM, "device cuda: the weights need %zu MiB and %s has %zu MiB free",
                        c->blob_bytes >> 20, prop.name, fr >> 20);
        goto fail;
    }
    for (int i = 0; i < c->n_map; i++)
        TRY(cudaMemcpy(c->blob + c->map[i].off, c->map[i].host, c->map[i].bytes, cudaMemcpyHostToDevice));
    // the step's integers: token, pos, seq, slot per token, and the block table
    c->step_cap = 6 * (size_t)n_ubatch + 1 + (size_t)n_seq * blk_stride + 1;
    c->n_seq_cap = n_seq;
    c->h_count = (int32_t *)calloc((size_t)n_seq + 1, sizeof(int32_t));
    if (!c->h_count) {
        st = dp_err_set(err, DP_ENOMEM, "out of memory");
        goto fail;
    }
    TRY(cudaMallocHost((void **)&c->h_step, c->step_cap * sizeof(int32_t)));
    TRY(cudaMalloc((void **)&c->d_step, c->step_cap * sizeof(int32_t)));
#undef TRY
    *out = be;
    return DP_OK;
fail:
    cu_free(be);
    return st;
}

// the backend's display name ("cuda (NVIDIA H200, sm_90)") replaces the table's short one
static const char *cuda_describe(const eng_backend *be) { return ((const cuda_be *)be->impl)->name; }

/* Registered with the engine's device registry (engine/devices.c) before main(): the build links
 * this library whole (dp_engine_devices), so this initializer runs although nothing names it. */
static const eng_device_backend g_cuda_device = {
    DP_DEVICE_CUDA, "cuda", CUDA_RESERVE_BYTES, cuda_probe, cuda_refuses, cuda_backend_new, cuda_describe,
};
[[maybe_unused]] static const bool g_cuda_registered = eng_device_register(&g_cuda_device);

extern "C" dp_status gpu_matmul_host(int index, int type, const void *w, int N, int K, const float *x, int n_tok,
                                     float *y, dp_err *err) {
    if (!deq_supported(type) || K % 32)
        return dp_err_set(err, DP_EUNSUPPORTED, "gpu_matmul_host: type %s with K = %d", eng_type_name(type), K);
    const size_t rb = eng_row_size(type, K), wbytes = rb * (size_t)N;
    cuda_be c;
    memset(&c, 0, sizeof(c));
    eng_backend be = {&cuda_ops, &c};
    wmap one = {(const uint8_t *)w, wbytes, 0};
    c.map = &one;
    c.n_map = 1;
    c.dev = index;
    float *dx = NULL, *dy = NULL;
    dp_status st = DP_OK;
    GPU_CHECK(cudaSetDevice(index));
    GPU_CHECK(cudaStreamCreateWithFlags(&c.st, cudaStreamNonBlocking));
    cudaError_t e = cudaMalloc((void **)&c.blob, wbytes);
    if (e == cudaSuccess) e = cudaMalloc((void **)&dx, (size_t)n_tok * K * sizeof(float));
    if (e == cudaSuccess) e = cudaMalloc((void **)&dy, (size_t)n_tok * N * sizeof(float));
    if (e == cudaSuccess) e = cudaMemcpy(c.blob, w, wbytes, cudaMemcpyHostToDevice);
    if (e == cudaSuccess) e = cudaMemcpy(dx, x, (size_t)n_tok * K * sizeof(float), cudaMemcpyHostToDevice);
    if (e == cudaSuccess) {
        const eng_weight wt = {w, type, K, N, rb, "test"};
        cu_matmul(&be, &wt, dx, K, n_tok, dy, N);
        st = cu_sync(&be, err);
        if (!st) e = cudaMemcpy(y, dy, (size_t)n_tok * N * sizeof(float), cudaMemcpyDeviceToHost);
    }
    if (!st && e != cudaSuccess)
        st = dp_err_set(err, e == cudaErrorMemoryAllocation ? DP_ENOMEM : DP_EIO, "gpu_matmul_host: %s",
                        cudaGetErrorString(e));
    cudaFree(c.blob);
    cudaFree(dx);
    cudaFree(dy);
    cudaStreamDestroy(c.st);
    return st;
}
