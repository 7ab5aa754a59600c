/*
 * forward.c - the layer loop: one forward pass over a batch of tokens (any mix of sequences)
 * for the qwen2, qwen3, llama and qwen35 architectures (model-formats.md section 4).
 *
 * DESIGN: reads top to bottom like llama2.c's forward(): shapes in comments, one backend call
 * per step, no allocation (every buffer lives in the context, sized for n_ubatch tokens), and
 * no access to the buffers' contents: they are backend memory (a GPU's for CUDA). The
 * attention KV cache and the DeltaNet states live in the context too; this file only indexes
 * them. Layer kinds: attention (qwen2/qwen3/llama, and qwen35's gated attention) and Gated
 * DeltaNet (qwen35).
 */
#include <math.h>

#include "backend.h"
#include "context.h"
#include "quant.h"

/* Products of one input x (q/k/v, gate/up, the DeltaNet inputs): one backend call where the
 * backend takes several weights at once (the CPU quantizes x once and claims the weights' rows
 * as one range), else one matmul each. Either way each output has matmul's bits. */
static void matmul_shared(eng_backend *be, int n, const eng_weight *const *w, const float *x, int ldx, int T,
                          float *const *y, const int *ldy) {
    if (be->ops->matmul_n) be->ops->matmul_n(be, n, w, x, ldx, T, y, ldy);
    else
        for (int i = 0; i < n; i++) be->ops->matmul(be, w[i], x, ldx, T, y[i], ldy[i]);
}

static void attention_layer(eng_context *c, const eng_layer *L, const eng_ubatch *ub) {
    const eng_model *m = c->model;
    const eng_model_info *in = &m->info;
    eng_backend *be = c->be;
    const int T = ub->n, hd = (int)in->head_dim_k, H = (int)in->n_head, Hkv = (int)in->n_head_kv;
    const int qd = H * hd, kvd = Hkv * hd;
    eng_buffers *b = &c->buf;

    /* projections: q [T][qd] (qwen35: [T][2*qd], query and gate per head), k, v [T][kvd] */
    {
        const eng_weight *w[3] = {&L->wq, &L->wk, &L->wv};
        float *y[3] = {b->qg, b->k, b->v};
        const int ld[3] = {b->ld_qg, kvd, kvd};
        matmul_shared(be, 3, w, b->h, b->ld_e, T, y, ld);
    }
    if (L->bq) {
        be->ops->add_rows(be, b->qg, b->ld_qg, T, L->bq, qd);
        be->ops->add_rows(be, b->k, kvd, T, L->bk, kvd);
        be->ops->add_rows(be, b->v, kvd, T, L->bv, kvd);
    }
    /* q [T][qd]: qwen35 interleaves [q_h | gate_h] per head, so rows of hd at a stride of 2*hd
     * (T*H of them) split into q and gate; otherwise qg already is q */
    float *q = b->qg;
    if (m->q_gated) {
        q = b->q;
        be->ops->copy2d(be, q, hd, b->qg, 2 * hd, T * H, hd);
        be->ops->copy2d(be, b->gate, hd, b->qg + hd, 2 * hd, T * H, hd);
    }
    /* per-head q/k RMSNorm before RoPE (qwen3, qwen35) */
    if (L->q_norm) {
        be->ops->rmsnorm(be, q, hd, L->q_norm, q, hd, T * H, hd, in->rms_eps);
        be->ops->rmsnorm(be, b->k, hd, L->k_norm, b->k, hd, T * Hkv, hd, in->rms_eps);
    }
    be->ops->rope(be, q, qd, T, H, hd, (int)in->n_rot, ub->pos, in->rope_base, m->rope_neox, m->rope_freqs);
    be->ops->rope(be, b->k, kvd, T, Hkv, hd, (int)in->n_rot, ub->pos, in->rope_base, m->rope_neox, m->rope_freqs);

    /* cache K (after RoPE) and V, then attend over positions <= pos of the same sequence */
    eng_kv_layer *kvl = &c->kv[L->kv_index];
    be->ops->kv_store(be, kvl->k, kvl->v, c->kv_type, kvd, hd, b->k, b->v, kvd, T, c->slot);
    eng_attn_args a = {T, q, qd, b->att, qd, H, Hkv, hd, ub->pos, ub->seq, kvl->k, kvl->v, c->kv_type,
                       c->blk_table, c->max_bps, ENG_KV_BLOCK, 1.0f / sqrtf((float)hd)};
    be->ops->attention(be, &a);
    if (m->q_gated) be->ops->mul_sigmoid(be, b->att, b->gate, (int64_t)T * qd); /* output gate */
    /* y [T][E] = att @ Wo */
    be->ops->matmul(be, &L->wo, b->att, qd, T, b->y, b->ld_e);
}

static void deltanet_layer(eng_context *c, const eng_layer *L, const eng_ubatch *ub) {
    const eng_model_info *in = &c->model->info;
    eng_backend *be = c->be;
    eng_buffers *b = &c->buf;
    const int T = ub->n, Hk = (int)in->ssm_n_group, Hv = (int)in->ssm_dt_rank, dk = (int)in->ssm_d_state;
    const int inner = (int)in->ssm_d_inner, dv = inner / Hv, conv_ch = 2 * Hk * dk + inner;

    /* projections: m [T][conv_ch] (q | k | v, pre-conv), z [T][inner], beta, alpha [T][Hv] */
    {
        const eng_weight *w[4] = {&L->wqkv, &L->wgate, &L->wbeta, &L->walpha};
        float *y[4] = {b->dn_qkv, b->dn_z, b->dn_beta, b->dn_alpha};
        const int ld[4] = {conv_ch, inner, Hv, Hv};
        matmul_shared(be, 4, w, b->h, b->ld_e, T, y, ld);
    }
    /* conv + SiLU, L2 norms, the delta rule per value head, gated RMSNorm -> out [T][inner] */
    eng_rec_layer *rl = &c->rec[L->rec_index];
    eng_deltanet_args a = {T, ub->seq, b->dn_qkv, b->dn_z, b->dn_beta, b->dn_alpha, b->dn_out, b->dn_conv,
                           L->conv1d, L->dt_bias, L->ssm_a, L->ssm_norm, rl->conv, rl->ssm, Hk, Hv, dk, dv,
                           (int)in->ssm_conv_kernel, in->rms_eps,
                           c->p.deltanet_mode == 2 || (c->p.deltanet_mode == 0 && !c->p.exact)};
    be->ops->deltanet(be, &a);
    /* y [T][E] = out @ W_ssm_out */
    be->ops->matmul(be, &L->wssm_out, b->dn_out, inner, T, b->y, b->ld_e);
}

/* The debug check: layer l's output for the step's T tokens, read back and tested. */
static void check_layer(eng_context *c, uint32_t l, int T, int E) {
    c->be->ops->to_host(c->be, c->check_x, c->buf.x, (size_t)T * E * sizeof(float));
    for (size_t i = 0; i < (size_t)T * E; i++)
        if (!isfinite(c->check_x[i])) {
            c->check_layer = (int)l;
            c->check_token = (int)(i / (size_t)E);
            return;
        }
}

void eng_forward(eng_context *c, const eng_ubatch *ub) {
    const eng_model *m = c->model;
    const eng_model_info *in = &m->info;
    eng_backend *be = c->be;
    eng_buffers *b = &c->buf;
    const int T = ub->n, E = (int)in->n_embd, F = (int)in->n_ff;

    be->ops->get_rows(be, &m->tok_embd, ub->token, T, b->x); /* x [T][E] */
    for (uint32_t l = 0; l < in->n_layer; l++) {
        const eng_layer *L = &m->layers[l];
        /* x += mixer(RMSNorm(x; attn_norm)) */
        be->ops->rmsnorm(be, b->x, E, L->attn_norm, b->h, E, T, E, in->rms_eps);
        if (L->kind == ENG_LAYER_ATTN) attention_layer(c, L, ub);
        else deltanet_layer(c, L, ub);
        be->ops->add(be, b->x, b->y, (int64_t)T * E);
        /* x += W_down (silu(W_gate h) * (W_up h)),  h = RMSNorm(x; ffn_norm) */
        be->ops->rmsnorm(be, b->x, E, L->ffn_norm, b->h, E, T, E, in->rms_eps);
        {
            const eng_weight *w[2] = {&L->wg, &L->wu};
            float *y[2] = {b->ffn_g, b->ffn_u};
            const int ld[2] = {F, F};
            matmul_shared(be, 2, w, b->h, E, T, y, ld);
        }
        be->ops->swiglu(be, b->ffn_g, b->ffn_u, b->ffn_g, (int64_t)T * F);
        be->ops->matmul(be, &L->wd, b->ffn_g, F, T, b->y, E);
        be->ops->add(be, b->x, b->y, (int64_t)T * E);
        if (c->check_x && c->check_layer < 0) check_layer(c, l, T, E);
    }
    /* an embedding context: every row's final hidden state RMSNorm(x; output_norm) to the host,
     * where eng_decode pools it; no output head */
    if (c->p.pooling) {
        be->ops->rmsnorm(be, b->x, E, m->output_norm, b->h, E, T, E, in->rms_eps);
        be->ops->to_host(be, c->emb_rows, b->h, (size_t)T * E * sizeof(float));
        return;
    }
    /* logits [n_out][V] = W_out RMSNorm(x; output_norm) for the rows that asked, gathered in
     * runs of consecutive rows (a decode step wants them all: one run) */
    int n_out = 0;
    for (int t = 0; t < T;) {
        if (!ub->want[t]) {
            t++;
            continue;
        }
        int t1 = t;
        while (t1 < T && ub->want[t1]) t1++;
        be->ops->copy2d(be, b->h + (size_t)n_out * E, E, b->x + (size_t)t * E, E, t1 - t, E);
        n_out += t1 - t;
        t = t1;
    }
    if (!n_out) return;
    be->ops->rmsnorm(be, b->h, E, m->output_norm, b->h, E, n_out, E, in->rms_eps);
    float *dst = c->logits_be + (size_t)c->n_logits * in->n_vocab;
    be->ops->matmul(be, &m->output, b->h, E, n_out, dst, (int)in->n_vocab);
    c->n_logits += n_out;
}
