/*
 * engine.c - contexts and decoding (engine.h): sizes and owns the KV cache, the recurrent
 * state and the activation buffers, validates batches and runs them through eng_forward in
 * steps of at most n_ubatch tokens.
 *
 * DESIGN: a sequence is a slot 0..n_seq_max-1 with its own DeltaNet state and a table of KV
 * blocks (ENG_KV_BLOCK positions each) from one pool per context; it grows by consecutive
 * positions and is reset by eng_seq_clear. A block may be referred to by several sequences (a
 * shared prompt prefix, eng_seq_copy); a step that writes into a shared block first gives the
 * writer its own copy. Blocks are taken before a step runs, all or none. All memory is
 * allocated at context creation; decoding allocates nothing. Logits of a decode call are kept
 * until the next call.
 *
 * The KV cache, the recurrent state, the activations and the logits the forward pass writes
 * are backend memory (backend.h): the GPU's under CUDA. This file keeps the bookkeeping (block
 * tables, lengths) on the host and moves state only through the backend's copy ops.
 */
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "cpu/kernels.h"
#include "log.h"
#include "platform.h"
#include "quant.h"

eng_context_params eng_context_default_params(void) {
    eng_context_params p = {.n_ctx = 4096, .n_seq_max = 1, .n_ubatch = 512, .n_threads = 0,
                            .device = DP_DEVICE_AUTO, .exact = false, .kv_type = ENG_TYPE_F16};
    return p;
}

eng_chat_kind eng_model_chat_kind(const eng_model *m) { return (eng_chat_kind)m->template_kind; }

static const char *const k_pooling_names[] = {"none", "mean", "cls", "last"};

const char *eng_pooling_name(eng_pooling p) {
    return (unsigned)p < sizeof(k_pooling_names) / sizeof(k_pooling_names[0]) ? k_pooling_names[p] : "?";
}

bool eng_pooling_parse(const char *s, eng_pooling *out) {
    for (int i = 0; s && i < (int)(sizeof(k_pooling_names) / sizeof(k_pooling_names[0])); i++)
        if (!strcmp(s, k_pooling_names[i])) {
            *out = (eng_pooling)i;
            return true;
        }
    return false;
}

eng_pooling eng_model_pooling(const eng_model *m, eng_pooling fallback) {
    const int32_t t = m->info.pooling_type;
    return t >= ENG_POOLING_MEAN && t <= ENG_POOLING_LAST ? (eng_pooling)t : fallback;
}

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

/* Resolves p->device: the CPU (*dev NULL), or device 0 of a registered device backend *dev (with
 * its free memory when dev_free is given). auto takes the accelerator when one is present and
 * the model runs there, else the CPU with one log line (when log); naming a device that is not
 * usable, or cannot run the model, is an error. */
static dp_status pick_device(const eng_model *m, const eng_context_params *p, bool log,
                             const eng_device_backend **dev, uint64_t *dev_free, dp_err *err) {
    *dev = NULL;
    if (p->device == DP_DEVICE_CPU) return DP_OK;
    const eng_device_backend *b = eng_device_backend_for(p->device);
    const char *why = NULL;
    if (!b) {
        why = p->device == DP_DEVICE_AUTO ? "this build has no GPU backend"
                                          : "this build has no backend for it (its toolkit was not found when the "
                                            "build was configured)";
    } else {
        int n = 0;
        size_t free_b = 0;
        char name[128] = "";
        b->probe(&n, &free_b, name, sizeof(name));
        if (p->exact) why = "--exact runs on the CPU only";
        else if (!n) why = "no usable device (driver or GPU missing)";
        else why = b->refuses(m);
        if (!why) {
            *dev = b;
            if (dev_free) *dev_free = free_b;
            if (log) DP_LOG_INFO("device %s: using %s device 0 (%s, %zu MiB free)",
                                 p->device == DP_DEVICE_AUTO ? "auto" : b->name, b->name, name, free_b >> 20);
            return DP_OK;
        }
    }
    if (p->device != DP_DEVICE_AUTO)
        return dp_err_set(err, DP_EUNSUPPORTED, "device %s: %s", dp_device_name(p->device), why);
    if (log) DP_LOG_INFO("device auto: using the CPU backend (%s)", why);
    return DP_OK;
}

dp_status eng_context_new(eng_model *m, const eng_context_params *pin, eng_context **out, dp_err *err) {
    *out = NULL;
    const eng_model_info *in = &m->info;
    eng_context_params p = *pin;
    if (p.n_ctx == 0 || p.n_seq_max == 0 || p.n_ubatch == 0)
        return dp_err_set(err, DP_EINVAL, "context: n_ctx, n_seq_max and n_ubatch must be > 0");
    if (p.n_ctx > (1u << 24) || p.n_seq_max > 4096 || p.n_ubatch > 65536)
        return dp_err_set(err, DP_ERANGE, "context: n_ctx %u, n_seq_max %u or n_ubatch %u out of range", p.n_ctx,
                          p.n_seq_max, p.n_ubatch);
    if (p.kv_type != ENG_TYPE_F16 && p.kv_type != ENG_TYPE_F32 && p.kv_type != ENG_TYPE_Q8_0)
        return dp_err_set(err, DP_EINVAL, "context: the KV cache type must be F16, Q8_0 or F32");
    if (p.kv_type == ENG_TYPE_Q8_0 && in->n_attn_layers && (in->head_dim_k % 32 || in->head_dim_v % 32))
        return dp_err_set(err, DP_EINVAL, "context: a Q8_0 KV cache needs a head size that is a multiple of 32 (this "
                          "model's is %u): use F16", in->head_dim_k);
    if ((unsigned)p.pooling > ENG_POOLING_LAST)
        return dp_err_set(err, DP_EINVAL, "context: pooling %d is not none, mean, cls or last", (int)p.pooling);
    const eng_device_backend *dev = NULL;
    dp_status st = pick_device(m, &p, true, &dev, NULL, err);
    if (st) return st;
    if (dev && p.kv_type == ENG_TYPE_Q8_0)
        return dp_err_set(err, DP_EUNSUPPORTED, "context: the %s backend keeps its KV cache in F16; a Q8_0 cache runs "
                          "on the CPU backend (device: cpu)", dev->name);
    if (p.n_threads <= 0) p.n_threads = dp_cpu_count();
    if (p.n_ubatch > p.n_ctx * p.n_seq_max) p.n_ubatch = p.n_ctx * p.n_seq_max;

    eng_context *c = calloc(1, sizeof(*c));
    if (!c) return dp_err_set(err, DP_ENOMEM, "out of memory");
    c->model = m;
    c->p = p;
    c->n_ctx = (int)p.n_ctx;
    c->n_seq = (int)p.n_seq_max;
    c->n_ubatch = (int)p.n_ubatch;
    c->kv_type = p.kv_type;
    c->max_bps = (int32_t)((p.n_ctx + ENG_KV_BLOCK - 1) / ENG_KV_BLOCK);
    if (dev) {
        st = dev->create(m, 0, (int)p.n_ubatch, c->n_seq, c->max_bps, &c->be, err);
        if (st) goto fail;
        snprintf(c->be_name, sizeof(c->be_name), "%s", dev->describe(c->be));
    }
    if (!c->be) {
        st = eng_backend_cpu_new(p.n_threads, p.exact, &c->be, err);
        if (st) goto fail;
        snprintf(c->be_name, sizeof(c->be_name), "cpu (%s, %d threads)", p.exact ? "exact f32" : eng_cpu_kernel_name(),
                 p.n_threads);
    }
    eng_backend *be = c->be;

    const size_t T = (size_t)p.n_ubatch, E = in->n_embd, F = in->n_ff;
    const size_t hd = in->head_dim_k, H = in->n_head, Hkv = in->n_head_kv;
    const size_t qd = H * hd, kvd = Hkv * hd, qrows = (m->q_gated ? 2 : 1) * qd;
    const size_t Hv = in->ssm_dt_rank, inner = in->ssm_d_inner;
    const size_t conv_ch = in->n_rec_layers ? 2 * (size_t)in->ssm_n_group * in->ssm_d_state + inner : 0;
    const size_t dv = Hv ? inner / Hv : 0;

    /* KV cache */
    const int64_t full = (int64_t)c->n_seq * c->max_bps;
    c->n_blocks = !in->n_attn_layers ? 0 : p.n_kv_blocks && p.n_kv_blocks < full ? (int32_t)p.n_kv_blocks : (int32_t)full;
    c->kv_row_bytes = eng_row_size(p.kv_type, (int64_t)kvd);
    c->blk_table = malloc((size_t)full * sizeof(int32_t));
    c->blk_ref = calloc((size_t)c->n_blocks + 1, sizeof(int32_t));
    c->blk_free = malloc(((size_t)c->n_blocks + 1) * sizeof(int32_t));
    c->blk_writers = calloc((size_t)c->n_blocks + 1, sizeof(int32_t));
    c->slot = malloc((size_t)p.n_ubatch * sizeof(int32_t));
    if (!c->blk_table || !c->blk_ref || !c->blk_free || !c->blk_writers || !c->slot) goto oom;
    for (int64_t i = 0; i < full; i++) c->blk_table[i] = -1;
    for (int32_t i = 0; i < c->n_blocks; i++) c->blk_free[i] = c->n_blocks - 1 - i; /* block 0 pops first */
    c->n_free = c->n_blocks;
    const size_t kv_layer = (size_t)c->n_blocks * ENG_KV_BLOCK * c->kv_row_bytes;
    c->kv = calloc(in->n_attn_layers ? in->n_attn_layers : 1, sizeof(eng_kv_layer));
    if (!c->kv) goto oom;
    for (uint32_t i = 0; i < in->n_attn_layers; i++) {
        c->kv[i].k = be->ops->alloc(be, kv_layer);
        c->kv[i].v = be->ops->alloc(be, kv_layer);
        if (!c->kv[i].k || !c->kv[i].v) {
            st = dp_err_set(err, DP_ENOMEM, "cannot allocate the KV cache (%zu MiB: %d blocks of %d positions for %u "
                            "attention layers)", 2 * kv_layer * in->n_attn_layers >> 20, c->n_blocks, ENG_KV_BLOCK,
                            in->n_attn_layers);
            goto fail;
        }
    }
    /* recurrent state, zero = a fresh sequence */
    c->rec = calloc(in->n_rec_layers ? in->n_rec_layers : 1, sizeof(eng_rec_layer));
    if (!c->rec) goto oom;
    const size_t conv_per_seq = (size_t)(in->ssm_conv_kernel ? in->ssm_conv_kernel - 1 : 0) * conv_ch;
    const size_t ssm_per_seq = Hv * dv * in->ssm_d_state;
    c->conv_per_seq = conv_per_seq;
    c->ssm_per_seq = ssm_per_seq;
    c->rec_bytes_per_seq = (conv_per_seq + ssm_per_seq) * 4 * in->n_rec_layers;
    for (uint32_t i = 0; i < in->n_rec_layers; i++) {
        c->rec[i].conv = be->ops->alloc(be, ((size_t)c->n_seq * conv_per_seq + 1) * 4);
        c->rec[i].ssm = be->ops->alloc(be, ((size_t)c->n_seq * ssm_per_seq + 1) * 4);
        if (!c->rec[i].conv || !c->rec[i].ssm) {
            st = dp_err_set(err, DP_ENOMEM, "cannot allocate the recurrent state (%zu MiB for %d sequences)",
                            c->rec_bytes_per_seq * (size_t)c->n_seq >> 20, c->n_seq);
            goto fail;
        }
    }
    c->seq_len = calloc((size_t)c->n_seq, sizeof(int32_t));
    c->seq_next = calloc((size_t)c->n_seq, sizeof(int32_t));
    if (!c->seq_len || !c->seq_next) goto oom;

    /* activation buffers: one allocation */
    const size_t sizes[] = {T * E, T * E, T * E, T * qrows, T * qd, T * qd, T * qd, T * kvd, T * kvd, T * F, T * F,
                            T * conv_ch, T * conv_ch, T * inner, T * inner, T * Hv, T * Hv};
    float **dst[] = {&c->buf.x, &c->buf.h, &c->buf.y, &c->buf.qg, &c->buf.q, &c->buf.gate, &c->buf.att, &c->buf.k,
                     &c->buf.v, &c->buf.ffn_g, &c->buf.ffn_u, &c->buf.dn_qkv, &c->buf.dn_conv, &c->buf.dn_z,
                     &c->buf.dn_out, &c->buf.dn_beta, &c->buf.dn_alpha};
    size_t total = 0;
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) total += align64(sizes[i] * 4);
    c->buf_mem = be->ops->alloc(be, total);
    if (!c->buf_mem) {
        st = dp_err_set(err, DP_ENOMEM, "cannot allocate %zu MiB of activation buffers for %zu tokens per step",
                        total >> 20, T);
        goto fail;
    }
    size_t off = 0;
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        *dst[i] = (float *)(void *)((uint8_t *)c->buf_mem + off);
        off += align64(sizes[i] * 4);
    }
    c->buf.ld_e = (int)E;
    c->buf.ld_qg = (int)qrows;
    /* an embedding context computes no logits (one row is kept so that the code paths stay one) */
    c->n_logits_max = p.pooling ? 1 : c->n_seq > 64 ? c->n_seq : 64;
    if (p.pooling) {
        c->emb_rows = malloc(T * E * sizeof(float));
        c->emb_acc = calloc((size_t)c->n_seq * E, sizeof(double));
        c->emb_n = calloc((size_t)c->n_seq, sizeof(int32_t));
        if (!c->emb_rows || !c->emb_acc || !c->emb_n) goto oom;
    }
    const size_t logits_bytes = (size_t)c->n_logits_max * in->n_vocab * sizeof(float);
    c->logits_be = be->ops->alloc(be, logits_bytes);
    c->logits = be->ops->host_memory ? c->logits_be : malloc(logits_bytes);
    c->want = malloc(T);
    if (!c->logits_be || !c->logits || !c->want) goto oom;
    const char *chk = getenv("DOCPIPE_CHECK_LAYERS");
    if (p.check_layers || (chk && *chk && strcmp(chk, "0") != 0)) {
        c->check_x = malloc(T * E * sizeof(float));
        if (!c->check_x) goto oom;
    }
    *out = c;
    return DP_OK;
oom:
    st = dp_err_set(err, DP_ENOMEM, "out of memory creating the context");
fail:
    eng_context_free(c);
    return st;
}

void eng_context_free(eng_context *c) {
    if (!c) return;
    const eng_model_info *in = &c->model->info;
    eng_backend *be = c->be;
    if (be) {
        if (c->kv)
            for (uint32_t i = 0; i < in->n_attn_layers; i++) {
                be->ops->release(be, c->kv[i].k);
                be->ops->release(be, c->kv[i].v);
            }
        if (c->rec)
            for (uint32_t i = 0; i < in->n_rec_layers; i++) {
                be->ops->release(be, c->rec[i].conv);
                be->ops->release(be, c->rec[i].ssm);
            }
        be->ops->release(be, c->buf_mem);
        if (c->logits != c->logits_be) free(c->logits);
        be->ops->release(be, c->logits_be);
    }
    free(c->check_x);
    free(c->emb_rows);
    free(c->emb_acc);
    free(c->emb_n);
    free(c->kv);
    free(c->rec);
    free(c->seq_len);
    free(c->seq_next);
    free(c->blk_table);
    free(c->blk_ref);
    free(c->blk_writers);
    free(c->blk_free);
    free(c->slot);
    free(c->want);
    free(c->call_pos);
    if (c->be) c->be->ops->free(c->be);
    free(c);
}

const char *eng_context_backend_name(const eng_context *c) { return c->be_name; }

/* ---- the block pool ---------------------------------------------------------------------- */

static void blocks_release(eng_context *c, int32_t seq) {
    int32_t *table = c->blk_table + (size_t)seq * c->max_bps;
    for (int32_t i = 0; i < c->max_bps; i++) {
        const int32_t b = table[i];
        if (b < 0) continue;
        if (--c->blk_ref[b] == 0) c->blk_free[c->n_free++] = b;
        table[i] = -1;
    }
}

int32_t eng_kv_blocks_total(const eng_context *c) { return c->n_blocks; }
int32_t eng_kv_blocks_free(const eng_context *c) { return c->n_free; }

int32_t eng_kv_blocks_needed(int32_t len, int32_t shared_len) {
    if (shared_len > len) shared_len = len;
    /* blocks wholly inside the shared prefix stay shared; a partly shared one is copied */
    return (len + ENG_KV_BLOCK - 1) / ENG_KV_BLOCK - shared_len / ENG_KV_BLOCK;
}

size_t eng_kv_block_bytes(const eng_model_info *in, int kv_type) {
    return 2 * (size_t)in->n_attn_layers * ENG_KV_BLOCK * eng_row_size(kv_type, (int64_t)in->n_head_kv * in->head_dim_k);
}

uint64_t eng_kv_blocks_fitting(const eng_model_info *in, uint32_t n_ctx, uint32_t n_seqs, uint32_t n_ubatch,
                               int kv_type, uint64_t budget, uint64_t *fixed_bytes) {
    eng_mem_estimate e;
    eng_model_mem_estimate_kv(in, n_ctx, n_seqs, n_ubatch, kv_type, &e);
    const uint64_t fixed = e.weights + e.recurrent + e.compute, bb = eng_kv_block_bytes(in, kv_type);
    if (fixed_bytes) *fixed_bytes = fixed;
    return bb && budget > fixed ? (budget - fixed) / bb : 0;
}

dp_status eng_context_fit_budget(const eng_model *m, eng_context_params *p, uint64_t budget, dp_err *err) {
    const eng_model_info *in = &m->info;
    const bool automatic = budget == 0;
    const eng_device_backend *dev = NULL;
    uint64_t dev_free = 0;
    dp_status st = pick_device(m, p, false, &dev, &dev_free, err);
    if (st) return st;
    if (automatic)
        budget = dev ? (dev_free > dev->reserve_bytes ? dev_free - dev->reserve_bytes : 1) : dp_mem_available();
    const uint32_t bps = (p->n_ctx + ENG_KV_BLOCK - 1) / ENG_KV_BLOCK;
    const uint64_t full = (uint64_t)bps * p->n_seq_max;
    const size_t bb = eng_kv_block_bytes(in, p->kv_type);
    if (!budget || !bb) { /* unknown memory, or no attention layers: no limit to apply */
        p->n_kv_blocks = 0;
        return DP_OK;
    }
    uint64_t fixed;
    const uint64_t room = eng_kv_blocks_fitting(in, p->n_ctx, p->n_seq_max, p->n_ubatch, p->kv_type, budget, &fixed);
    if (room < bps)
        return dp_err_set(err, DP_ENOMEM,
                          "memory: %s %.2f GiB leaves room for %llu KV blocks after %.2f GiB of weights, state and "
                          "buffers; one sequence of %u tokens needs %u (%.2f GiB): lower the context or the sequences",
                          automatic ? (dev ? "the GPU's free" : "the available") : "a budget of", (double)budget / (1 << 30),
                          (unsigned long long)room, (double)fixed / (1 << 30), p->n_ctx, bps,
                          (double)bps * bb / (1 << 30));
    p->n_kv_blocks = room >= full ? 0 : (uint32_t)room;
    return DP_OK;
}

/* Blocks the step needs to let every sequence write positions [seq_len, next): one per block
 * not allocated yet, and one copy per writer of a shared block except its last holder, which
 * blocks_take leaves writing in place (sequences that share a prompt all step past it at once). */
static int32_t blocks_for_step(eng_context *c, const int32_t *next) {
    if (!c->n_blocks) return 0;
    int32_t n = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int32_t s = 0; s < c->n_seq; s++) {
            const int32_t p0 = c->seq_len[s], p1 = next[s], *table = c->blk_table + (size_t)s * c->max_bps;
            for (int32_t bi = p0 / ENG_KV_BLOCK; p1 > p0 && bi <= (p1 - 1) / ENG_KV_BLOCK; bi++) {
                const int32_t b = table[bi];
                if (pass == 0) {
                    if (b < 0) n++;
                    else if (c->blk_ref[b] > 1) n++, c->blk_writers[b]++;
                } else if (b >= 0 && c->blk_writers[b]) {
                    n -= c->blk_writers[b] == c->blk_ref[b];
                    c->blk_writers[b] = 0;
                }
            }
        }
    return n;
}

/* Gives sequence s its own blocks for positions [p0, p1): new ones, or a copy of a shared one
 * (its rows below p0). The caller checked that enough are free. */
static void blocks_take(eng_context *c, int32_t s, int32_t p0, int32_t p1) {
    int32_t *table = c->blk_table + (size_t)s * c->max_bps;
    const eng_model_info *in = &c->model->info;
    for (int32_t bi = p0 / ENG_KV_BLOCK; bi <= (p1 - 1) / ENG_KV_BLOCK; bi++) {
        const int32_t old = table[bi];
        if (old >= 0 && c->blk_ref[old] == 1) continue;
        const int32_t b = c->blk_free[--c->n_free];
        c->blk_ref[b] = 1;
        if (old >= 0) {
            /* the whole block: a backend may lay a block's rows out in its own order (the CPU
             * keeps K in panels of positions), so its rows below p0 are not a prefix of it */
            const size_t bb = ENG_KV_BLOCK * c->kv_row_bytes;
            eng_backend *be = c->be;
            for (uint32_t l = 0; l < in->n_attn_layers; l++) {
                be->ops->copy(be, (char *)c->kv[l].k + b * bb, (const char *)c->kv[l].k + old * bb, bb);
                be->ops->copy(be, (char *)c->kv[l].v + b * bb, (const char *)c->kv[l].v + old * bb, bb);
            }
            c->blk_ref[old]--;
        }
        table[bi] = b;
    }
}

void eng_seq_clear(eng_context *c, int32_t seq) {
    if (seq < 0 || seq >= c->n_seq) return;
    const eng_model_info *in = &c->model->info;
    c->seq_len[seq] = 0;
    blocks_release(c, seq);
    if (c->emb_n) {
        const size_t E = in->n_embd;
        memset(c->emb_acc + (size_t)seq * E, 0, E * sizeof(double));
        c->emb_n[seq] = 0;
    }
    const size_t conv_per_seq = c->conv_per_seq, ssm_per_seq = c->ssm_per_seq;
    for (uint32_t i = 0; i < in->n_rec_layers; i++) {
        c->be->ops->fill0(c->be, c->rec[i].conv + (size_t)seq * conv_per_seq, conv_per_seq * 4);
        c->be->ops->fill0(c->be, c->rec[i].ssm + (size_t)seq * ssm_per_seq, ssm_per_seq * 4);
    }
}

void eng_seq_copy(eng_context *c, int32_t src, int32_t dst) {
    if (src < 0 || src >= c->n_seq || dst < 0 || dst >= c->n_seq || src == dst) return;
    const eng_model_info *in = &c->model->info;
    /* KV blocks by reference: dst copies one only when it writes into it */
    blocks_release(c, dst);
    const int32_t *st = c->blk_table + (size_t)src * c->max_bps;
    int32_t *dt = c->blk_table + (size_t)dst * c->max_bps;
    for (int32_t i = 0; i < c->max_bps; i++)
        if ((dt[i] = st[i]) >= 0) c->blk_ref[st[i]]++;
    const size_t conv_per_seq = c->conv_per_seq, ssm_per_seq = c->ssm_per_seq;
    eng_backend *be = c->be;
    for (uint32_t i = 0; i < in->n_rec_layers; i++) {
        be->ops->copy(be, c->rec[i].conv + (size_t)dst * conv_per_seq, c->rec[i].conv + (size_t)src * conv_per_seq,
                      conv_per_seq * 4);
        be->ops->copy(be, c->rec[i].ssm + (size_t)dst * ssm_per_seq, c->rec[i].ssm + (size_t)src * ssm_per_seq,
                      ssm_per_seq * 4);
    }
    c->seq_len[dst] = c->seq_len[src];
    if (c->emb_n) { /* an embedding's pool continues too (an instruction prefix computed once) */
        const size_t E = in->n_embd;
        memcpy(c->emb_acc + (size_t)dst * E, c->emb_acc + (size_t)src * E, E * sizeof(double));
        c->emb_n[dst] = c->emb_n[src];
    }
}

int32_t eng_seq_len(const eng_context *c, int32_t seq) {
    return seq >= 0 && seq < c->n_seq ? c->seq_len[seq] : 0;
}

/* What every step checks of what it returns: each logits row finite and not flat. A pass over
 * n_vocab floats per row, ~0.1 % of a decode step. */
static dp_status check_logits(eng_context *c, const eng_batch *b, dp_err *err) {
    const size_t V = c->model->info.n_vocab;
    int32_t j = 0;
    for (int32_t i = 0; i < b->n && j < c->n_logits; i++) {
        if (!(b->logits ? b->logits[i] != 0 : i == b->n - 1)) continue;
        const float *l = c->logits + (size_t)j++ * V;
        const float l0 = l[0];
        bool flat = true;
        for (size_t v = 0; v < V; v++) {
            if (!isfinite(l[v]))
                return dp_err_set(err, DP_ENUMERIC, "decode: the logits after position %d of sequence %d are not finite "
                                  "(token %zu: %g): a kernel or the model's weights are wrong; DOCPIPE_CHECK_LAYERS=1 "
                                  "names the first layer that goes wrong", b->pos[i], b->seq[i], v, (double)l[v]);
            flat &= l[v] == l0;
        }
        if (flat && V > 1)
            return dp_err_set(err, DP_ENUMERIC, "decode: the logits after position %d of sequence %d are all %g: a kernel "
                              "or the model's weights are wrong", b->pos[i], b->seq[i], (double)l0);
    }
    return DP_OK;
}

/* An embedding context's step: fold the final hidden states of its n tokens (emb_rows, on the host
 * after the forward pass) into each sequence's pool, in token order, so a sequence's vector
 * depends on its own tokens alone. */
static void pool_rows(eng_context *c, const int32_t *seq, const int32_t *pos, int32_t n) {
    const size_t E = c->model->info.n_embd;
    for (int32_t i = 0; i < n; i++) {
        const float *r = c->emb_rows + (size_t)i * E;
        double *a = c->emb_acc + (size_t)seq[i] * E;
        switch (c->p.pooling) {
        case ENG_POOLING_MEAN:
            for (size_t k = 0; k < E; k++) a[k] += r[k];
            break;
        case ENG_POOLING_CLS:
            if (pos[i] != 0) continue;
            /* fall through */
        default: /* LAST: the latest token's row */
            for (size_t k = 0; k < E; k++) a[k] = r[k];
            break;
        }
        c->emb_n[seq[i]]++;
    }
}

dp_status eng_decode(eng_context *c, const eng_batch *b, dp_err *err) {
    c->n_logits = 0;
    if (b->n <= 0) return DP_OK;
    /* validate: known sequences, consecutive positions, room in the context, logits budget */
    int32_t *next = c->seq_next; /* no allocation per step */
    memcpy(next, c->seq_len, (size_t)c->n_seq * sizeof(int32_t));
    int32_t n_want = 0;
    dp_status st = DP_OK;
    for (int32_t i = 0; i < b->n && !st; i++) {
        const int32_t s = b->seq[i], p = b->pos[i], t = b->token[i];
        if (s < 0 || s >= c->n_seq)
            st = dp_err_set(err, DP_EINVAL, "decode: token %d has sequence %d, but the context has %d", i, s, c->n_seq);
        else if (p != next[s])
            st = dp_err_set(err, DP_EINVAL, "decode: token %d of sequence %d has position %d, expected %d", i, s, p,
                            next[s]);
        else if (p >= c->n_ctx)
            st = dp_err_set(err, DP_ERANGE, "decode: sequence %d is full (context of %d tokens)", s, c->n_ctx);
        else if (t < 0 || t >= (int32_t)c->model->info.n_vocab)
            st = dp_err_set(err, DP_EINVAL, "decode: token id %d is outside the vocabulary", t);
        next[s]++;
        n_want += b->logits ? b->logits[i] != 0 : i == b->n - 1;
    }
    if (st) return st;
    if (!c->p.pooling && n_want > c->n_logits_max)
        return dp_err_set(err, DP_ERANGE, "decode: %d logits rows requested, at most %d per call", n_want,
                          c->n_logits_max);
    /* KV blocks for the whole call, all or none */
    const int32_t need = blocks_for_step(c, next);
    if (need > c->n_free)
        return dp_err_set(err, DP_ENOMEM, "decode: the step needs %d KV blocks, %d of %d are free", need, c->n_free,
                          c->n_blocks);
    if (c->n_blocks)
        for (int32_t s = 0; s < c->n_seq; s++)
            if (next[s] > c->seq_len[s]) blocks_take(c, s, c->seq_len[s], next[s]);
    for (int32_t i0 = 0; i0 < b->n; i0 += c->n_ubatch) {
        const int32_t n = b->n - i0 < c->n_ubatch ? b->n - i0 : c->n_ubatch;
        for (int32_t i = 0; i < n; i++) {
            c->want[i] = b->logits ? b->logits[i0 + i] != 0 : (i0 + i == b->n - 1);
            const int32_t s = b->seq[i0 + i], p = b->pos[i0 + i];
            c->slot[i] = c->n_blocks ? c->blk_table[(size_t)s * c->max_bps + p / ENG_KV_BLOCK] * ENG_KV_BLOCK + p % ENG_KV_BLOCK : 0;
        }
        eng_ubatch ub = {n, b->token + i0, b->pos + i0, b->seq + i0, c->want};
        c->check_layer = -1;
        const eng_step step = {n, ub.token, ub.pos, ub.seq, c->slot, c->blk_table, c->n_seq, c->max_bps};
        const int32_t first = c->n_logits;
        c->be->ops->begin_step(c->be, &step);
        eng_forward(c, &ub);
        if (c->logits != c->logits_be && c->n_logits > first) {
            const size_t V = c->model->info.n_vocab;
            c->be->ops->to_host(c->be, c->logits + (size_t)first * V, c->logits_be + (size_t)first * V,
                                (size_t)(c->n_logits - first) * V * sizeof(float));
        }
        for (int32_t i = 0; i < n; i++) c->seq_len[b->seq[i0 + i]] = b->pos[i0 + i] + 1;
        if (c->p.pooling) pool_rows(c, b->seq + i0, b->pos + i0, n);
        if (c->check_layer >= 0) {
            const int32_t t = i0 + c->check_token;
            dp_status sst = c->be->ops->sync(c->be, err);
            if (sst) return sst;
            return dp_err_set(err, DP_ENUMERIC, "decode: layer %d's output is not finite for the token at position %d of "
                              "sequence %d (DOCPIPE_CHECK_LAYERS): the model's weights or a kernel are wrong there",
                              c->check_layer, b->pos[t], b->seq[t]);
        }
    }
    /* a backend error leaves the step half done: the caller must treat the context as lost */
    dp_status st2 = c->be->ops->sync(c->be, err);
    if (st2) return st2;
    return c->p.pooling ? DP_OK : check_logits(c, b, err);
}

dp_status eng_get_embedding(const eng_context *c, int32_t seq, bool normalize, float *out, dp_err *err) {
    if (!c->p.pooling) return dp_err_set(err, DP_EINVAL, "embedding: the context computes logits (pooling none)");
    if (seq < 0 || seq >= c->n_seq || !c->emb_n[seq])
        return dp_err_set(err, DP_EINVAL, "embedding: sequence %d has no %s", seq,
                          c->p.pooling == ENG_POOLING_CLS ? "first token" : "tokens");
    const size_t E = c->model->info.n_embd;
    const double *a = c->emb_acc + (size_t)seq * E;
    const double div = c->p.pooling == ENG_POOLING_MEAN ? (double)c->emb_n[seq] : 1.0;
    double ss = 0;
    for (size_t i = 0; i < E; i++) {
        const double v = a[i] / div;
        if (!isfinite(v))
            return dp_err_set(err, DP_ENUMERIC, "embedding of sequence %d: component %zu is not finite: a kernel or "
                              "the model's weights are wrong", seq, i);
        ss += v * v;
    }
    /* llama.cpp's --embd-normalize 2: divide by the Euclidean norm (a zero vector stays zero) */
    const double scale = normalize && ss > 0 ? 1.0 / sqrt(ss) : 1.0;
    for (size_t i = 0; i < E; i++) out[i] = (float)(a[i] / div * scale);
    return DP_OK;
}

dp_status eng_decode_sequence(eng_context *c, int32_t seq, const int32_t *tokens, int32_t n, int32_t pos0,
                              dp_err *err) {
    const size_t need = 2 * (size_t)(n > 0 ? n : 1);
    if (need > c->call_pos_cap) {
        int32_t *p = realloc(c->call_pos, need * sizeof(int32_t));
        if (!p) return dp_err_set(err, DP_ENOMEM, "decode: out of memory for %d positions", n);
        c->call_pos = p;
        c->call_pos_cap = need;
    }
    int32_t *pos = c->call_pos, *sq = pos + n;
    for (int32_t i = 0; i < n; i++) {
        pos[i] = pos0 + i;
        sq[i] = seq;
    }
    eng_batch b = {n, tokens, pos, sq, NULL};
    return eng_decode(c, &b, err);
}

const float *eng_get_logits(const eng_context *c, int32_t j) {
    if (j < 0 || j >= c->n_logits) return NULL;
    return c->logits + (size_t)j * c->model->info.n_vocab;
}

int32_t eng_n_logits(const eng_context *c) { return c->n_logits; }
