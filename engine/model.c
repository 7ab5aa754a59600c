/*
 * model.c - eng_model_load: open a GGUF file, read hyper-parameters and the tokenizer, and
 * bind every tensor of the architecture to a typed view, refusing a missing tensor, a wrong
 * shape or a type the engine cannot multiply with a message naming the tensor.
 *
 * DESIGN: weights stay in the mapping (no copies); 1-D tensors that the forward pass reads as
 * floats must be F32 in the file or are converted once into owned buffers. MTP blocks of
 * qwen35 (index >= n_layer) are left unbound.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/kernels.h"
#include "engine.h"
#include "log.h"
#include "model.h"
#include "quant.h"

static dp_status get_weight(eng_model *m, const char *name, int64_t ne0, int64_t ne1, bool required, eng_weight *w,
                            dp_err *err) {
    memset(w, 0, sizeof(*w));
    const eng_gguf_tensor *t = eng_gguf_find_tensor(m->gguf, name);
    const char *path = eng_gguf_path(m->gguf);
    if (!t) {
        if (!required) return DP_OK;
        return dp_err_set(err, DP_EFORMAT, "%s: required tensor '%s' is missing (architecture %s)", path, name,
                          m->info.arch_name);
    }
    if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != 1 || t->ne[3] != 1)
        return dp_err_set(err, DP_EFORMAT, "%s: tensor '%s' has shape [%lld, %lld, %lld, %lld] but the hyper-parameters "
                          "need [%lld, %lld]", path, name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                          (long long)t->ne[3], (long long)ne0, (long long)ne1);
    if (!eng_vec_dot_ref(t->type))
        return dp_err_set(err, DP_EUNSUPPORTED, "%s: tensor '%s' has type %s (%d), which this engine does not support",
                          path, name, eng_type_name(t->type), t->type);
    w->data = t->data;
    w->type = t->type;
    w->ne0 = ne0;
    w->ne1 = ne1;
    w->row_bytes = eng_row_size(t->type, ne0);
    w->name = t->name;
    return DP_OK;
}

/* A 1-D tensor of n floats (converted to an owned F32 copy when stored otherwise). */
static dp_status get_vec(eng_model *m, const char *name, int64_t n, bool required, const float **out, dp_err *err) {
    *out = NULL;
    const eng_gguf_tensor *t = eng_gguf_find_tensor(m->gguf, name);
    const char *path = eng_gguf_path(m->gguf);
    if (!t) {
        if (!required) return DP_OK;
        return dp_err_set(err, DP_EFORMAT, "%s: required tensor '%s' is missing (architecture %s)", path, name,
                          m->info.arch_name);
    }
    int64_t ne = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    if (ne != n)
        return dp_err_set(err, DP_EFORMAT, "%s: tensor '%s' has %lld elements but the hyper-parameters need %lld", path,
                          name, (long long)ne, (long long)n);
    if (t->type == ENG_TYPE_F32) {
        *out = t->data;
        return DP_OK;
    }
    const eng_type_traits *tr = eng_type_get(t->type);
    if (!tr->to_float || n % tr->blck)
        return dp_err_set(err, DP_EUNSUPPORTED, "%s: tensor '%s' has type %s, which cannot be read as floats", path,
                          name, eng_type_name(t->type));
    float *f = malloc((size_t)n * sizeof(float));
    float **o = realloc(m->owned, (size_t)(m->n_owned + 1) * sizeof(float *));
    if (!f || !o) {
        free(f);
        return dp_err_set(err, DP_ENOMEM, "out of memory");
    }
    m->owned = o;
    m->owned[m->n_owned++] = f;
    tr->to_float(t->data, f, n);
    *out = f;
    return DP_OK;
}

static dp_status bind_layers(eng_model *m, dp_err *err) {
    const eng_model_info *in = &m->info;
    const int64_t E = in->n_embd, F = in->n_ff, hd = in->head_dim_k, H = in->n_head, Hkv = in->n_head_kv;
    char nm[96];
    dp_status st = DP_OK;
    int n_kv = 0, n_rec = 0;
#define NM(fmt) (snprintf(nm, sizeof(nm), "blk.%u." fmt, i), nm)
    for (uint32_t i = 0; i < in->n_layer && !st; i++) {
        eng_layer *L = &m->layers[i];
        L->kind = in->is_recurrent[i] ? ENG_LAYER_DELTANET : ENG_LAYER_ATTN;
        if ((st = get_vec(m, NM("attn_norm.weight"), E, true, &L->attn_norm, err))) break;
        const char *ffn_norm = in->arch == ENG_ARCH_QWEN35 ? "post_attention_norm.weight" : "ffn_norm.weight";
        snprintf(nm, sizeof(nm), "blk.%u.%s", i, ffn_norm);
        if ((st = get_vec(m, nm, E, true, &L->ffn_norm, err))) break;
        if (L->kind == ENG_LAYER_ATTN) {
            L->kv_index = n_kv++;
            if ((st = get_weight(m, NM("attn_q.weight"), E, (m->q_gated ? 2 : 1) * H * hd, true, &L->wq, err))) break;
            if ((st = get_weight(m, NM("attn_k.weight"), E, Hkv * hd, true, &L->wk, err))) break;
            if ((st = get_weight(m, NM("attn_v.weight"), E, Hkv * in->head_dim_v, true, &L->wv, err))) break;
            if ((st = get_weight(m, NM("attn_output.weight"), H * in->head_dim_v, E, true, &L->wo, err))) break;
            const bool bias = in->arch == ENG_ARCH_QWEN2;
            if ((st = get_vec(m, NM("attn_q.bias"), H * hd, bias, &L->bq, err))) break;
            if ((st = get_vec(m, NM("attn_k.bias"), Hkv * hd, bias, &L->bk, err))) break;
            if ((st = get_vec(m, NM("attn_v.bias"), Hkv * in->head_dim_v, bias, &L->bv, err))) break;
            const bool qk_norm = in->arch == ENG_ARCH_QWEN3 || in->arch == ENG_ARCH_QWEN35;
            if ((st = get_vec(m, NM("attn_q_norm.weight"), hd, qk_norm, &L->q_norm, err))) break;
            if ((st = get_vec(m, NM("attn_k_norm.weight"), hd, qk_norm, &L->k_norm, err))) break;
        } else {
            L->rec_index = n_rec++;
            const int64_t dk = in->ssm_d_state, Hk = in->ssm_n_group, Hv = in->ssm_dt_rank;
            const int64_t inner = in->ssm_d_inner, dv = inner / Hv, conv_ch = 2 * Hk * dk + inner;
            const int64_t K = in->ssm_conv_kernel;
            if ((st = get_weight(m, NM("attn_qkv.weight"), E, conv_ch, true, &L->wqkv, err))) break;
            if ((st = get_weight(m, NM("attn_gate.weight"), E, inner, true, &L->wgate, err))) break;
            if ((st = get_weight(m, NM("ssm_beta.weight"), E, Hv, true, &L->wbeta, err))) break;
            if ((st = get_weight(m, NM("ssm_alpha.weight"), E, Hv, true, &L->walpha, err))) break;
            if ((st = get_weight(m, NM("ssm_out.weight"), inner, E, true, &L->wssm_out, err))) break;
            if ((st = get_vec(m, NM("ssm_conv1d.weight"), K * conv_ch, true, &L->conv1d, err))) break;
            if ((st = get_vec(m, NM("ssm_dt.bias"), Hv, true, &L->dt_bias, err))) break;
            if ((st = get_vec(m, NM("ssm_a"), Hv, true, &L->ssm_a, err))) break;
            if ((st = get_vec(m, NM("ssm_norm.weight"), dv, true, &L->ssm_norm, err))) break;
        }
        if ((st = get_weight(m, NM("ffn_gate.weight"), E, F, true, &L->wg, err))) break;
        if ((st = get_weight(m, NM("ffn_up.weight"), E, F, true, &L->wu, err))) break;
        if ((st = get_weight(m, NM("ffn_down.weight"), F, E, true, &L->wd, err))) break;
    }
#undef NM
    return st;
}

dp_status eng_model_load(const char *path, eng_model **out, dp_err *err) {
    *out = NULL;
    eng_model *m = calloc(1, sizeof(*m));
    if (!m) return dp_err_set(err, DP_ENOMEM, "out of memory");
    dp_status st = eng_gguf_open(path, &m->gguf, err);
    if (st) goto fail;
    if ((st = eng_model_info_load(m->gguf, &m->info, err))) goto fail;
    const eng_model_info *in = &m->info;
    if (in->arch == ENG_ARCH_UNKNOWN) {
        st = dp_err_set(err, DP_EUNSUPPORTED, "%s: architecture '%s' is not supported (supported: qwen2, qwen3, qwen35, "
                        "llama)", path, in->arch_name);
        goto fail;
    }
    if (in->n_layer == 0 || in->n_head == 0) {
        st = dp_err_set(err, DP_EFORMAT, "%s: the model has no layers or no attention heads", path);
        goto fail;
    }
    if (in->rope_scaling_yarn) {
        st = dp_err_set(err, DP_EUNSUPPORTED, "%s: RoPE scaling '%s' is not supported yet", path, in->rope_scaling);
        goto fail;
    }
    m->q_gated = in->arch == ENG_ARCH_QWEN35;
    m->rope_neox = in->arch != ENG_ARCH_LLAMA;
    if ((st = eng_tokenizer_load(m->gguf, &m->tok, err))) goto fail;
    if ((st = get_weight(m, "token_embd.weight", in->n_embd, in->n_vocab, true, &m->tok_embd, err))) goto fail;
    if ((st = get_weight(m, "output.weight", in->n_embd, in->n_vocab, false, &m->output, err))) goto fail;
    if (!m->output.data) m->output = m->tok_embd;
    if ((st = get_vec(m, "output_norm.weight", in->n_embd, true, &m->output_norm, err))) goto fail;
    if (in->arch == ENG_ARCH_LLAMA && (st = get_vec(m, "rope_freqs.weight", in->n_rot / 2, false, &m->rope_freqs, err)))
        goto fail;
    if (eng_tokenizer_n_vocab(m->tok) > (int32_t)in->n_vocab) {
        st = dp_err_set(err, DP_EFORMAT, "%s: the tokenizer has %d tokens but the embedding only %u rows", path,
                        eng_tokenizer_n_vocab(m->tok), in->n_vocab);
        goto fail;
    }
    m->layers = calloc(in->n_layer, sizeof(eng_layer));
    if (!m->layers) {
        st = dp_err_set(err, DP_ENOMEM, "out of memory");
        goto fail;
    }
    if ((st = bind_layers(m, err))) goto fail;
    eng_gguf_str tmpl = {0};
    if (eng_gguf_get_str(m->gguf, "tokenizer.chat_template", &tmpl, NULL) == DP_OK)
        m->template_kind = (char)eng_chat_detect(tmpl.ptr, (size_t)tmpl.len);
    else
        m->template_kind = ENG_CHAT_CHATML;
    *out = m;
    return DP_OK;
fail:
    eng_model_free(m);
    return st;
}

void eng_model_free(eng_model *m) {
    if (!m) return;
    for (int i = 0; i < m->n_owned; i++) free(m->owned[i]);
    free(m->owned);
    free(m->layers);
    eng_tokenizer_free(m->tok);
    eng_gguf_close(m->gguf);
    free(m);
}

static void each_weight(const eng_weight *w, eng_tensor_fn fn, void *ud) {
    if (w->data) fn(ud, w->data, (size_t)w->ne1 * w->row_bytes);
}

static void each_vec(const float *v, int64_t n, eng_tensor_fn fn, void *ud) {
    if (v) fn(ud, v, (size_t)n * sizeof(float));
}

void eng_model_for_each_tensor(const eng_model *m, eng_tensor_fn fn, void *ud) {
    const eng_model_info *in = &m->info;
    const int64_t E = in->n_embd, hd = in->head_dim_k, H = in->n_head, Hkv = in->n_head_kv;
    each_weight(&m->tok_embd, fn, ud);
    if (m->output.data != m->tok_embd.data) each_weight(&m->output, fn, ud);
    each_vec(m->output_norm, E, fn, ud);
    each_vec(m->rope_freqs, in->n_rot / 2, fn, ud);
    for (uint32_t i = 0; i < in->n_layer; i++) {
        const eng_layer *L = &m->layers[i];
        each_vec(L->attn_norm, E, fn, ud);
        each_vec(L->ffn_norm, E, fn, ud);
        if (L->kind == ENG_LAYER_ATTN) {
            each_weight(&L->wq, fn, ud);
            each_weight(&L->wk, fn, ud);
            each_weight(&L->wv, fn, ud);
            each_weight(&L->wo, fn, ud);
            each_vec(L->bq, H * hd, fn, ud);
            each_vec(L->bk, Hkv * hd, fn, ud);
            each_vec(L->bv, Hkv * (int64_t)in->head_dim_v, fn, ud);
            each_vec(L->q_norm, hd, fn, ud);
            each_vec(L->k_norm, hd, fn, ud);
        } else {
            const int64_t dk = in->ssm_d_state, Hk = in->ssm_n_group, Hv = in->ssm_dt_rank;
            const int64_t inner = in->ssm_d_inner, conv_ch = 2 * Hk * dk + inner;
            each_weight(&L->wqkv, fn, ud);
            each_weight(&L->wgate, fn, ud);
            each_weight(&L->wbeta, fn, ud);
            each_weight(&L->walpha, fn, ud);
            each_weight(&L->wssm_out, fn, ud);
            each_vec(L->conv1d, in->ssm_conv_kernel * conv_ch, fn, ud);
            each_vec(L->dt_bias, Hv, fn, ud);
            each_vec(L->ssm_a, Hv, fn, ud);
            each_vec(L->ssm_norm, inner / Hv, fn, ud);
        }
        each_weight(&L->wg, fn, ud);
        each_weight(&L->wu, fn, ud);
        each_weight(&L->wd, fn, ud);
    }
}

const eng_model_info *eng_model_get_info(const eng_model *m) { return &m->info; }
const eng_tokenizer *eng_model_get_tokenizer(const eng_model *m) { return m->tok; }
