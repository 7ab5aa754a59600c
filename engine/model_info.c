/*
 * model_info.c - hyper-parameters and memory math (model-formats.md sections 3 and 8).
 *
 * DESIGN: keys are read as "{arch}.<name>" with the types the spec allows; per-layer arrays
 * (hybrid models of other families) are accepted for head counts and the FFN size when all
 * main-layer values agree, which is the only case the Qwen engines need. Everything that sizes
 * memory is bounded here so later code can multiply without overflow checks.
 */
#include "backend.h"
#include "engine.h"
#include "gguf.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "platform.h"
#include "quant.h"

const char *eng_arch_name(eng_arch a) {
    switch (a) {
    case ENG_ARCH_LLAMA: return "llama";
    case ENG_ARCH_QWEN2: return "qwen2";
    case ENG_ARCH_QWEN3: return "qwen3";
    case ENG_ARCH_QWEN35: return "qwen35";
    default: return "unknown";
    }
}

const char *eng_file_type_name(uint32_t ft) {
    switch (ft) {
    case 0: return "F32";
    case 1: return "F16";
    case 2: return "Q4_0";
    case 3: return "Q4_1";
    case 7: return "Q8_0";
    case 8: return "Q5_0";
    case 9: return "Q5_1";
    case 10: return "Q2_K";
    case 11: return "Q3_K_S";
    case 12: return "Q3_K_M";
    case 13: return "Q3_K_L";
    case 14: return "Q4_K_S";
    case 15: return "Q4_K_M";
    case 16: return "Q5_K_S";
    case 17: return "Q5_K_M";
    case 18: return "Q6_K";
    case 32: return "BF16";
    default: return NULL;
    }
}

/* Reads {arch}.{suffix} as u32 within [lo, hi]; a missing key gives def (or an error when
 * required). A per-layer array is accepted when all main-layer values are equal. */
static dp_status get_u32_key(const eng_gguf *g, const char *arch, const char *suffix, uint32_t *out, uint32_t def,
                             bool required, uint32_t lo, uint32_t hi, dp_err *err) {
    char key[160];
    snprintf(key, sizeof(key), "%s.%s", arch, suffix);
    const eng_gguf_kv *kv = eng_gguf_find(g, key);
    if (!kv) {
        if (required) return dp_err_set(err, DP_EFORMAT, "%s: required key '%s' is missing", eng_gguf_path(g), key);
        *out = def;
        return DP_OK;
    }
    int64_t v;
    if (kv->type == ENG_GGUF_TYPE_ARRAY) {
        int64_t first;
        if (kv->n == 0 || !eng_gguf_kv_int(kv, 0, &first))
            return dp_err_set(err, DP_EFORMAT, "%s: key '%s' must be an integer or an array of integers",
                              eng_gguf_path(g), key);
        for (uint64_t i = 1; i < kv->n; i++) {
            int64_t x;
            if (!eng_gguf_kv_int(kv, i, &x) || (x != first && x != 0))
                return dp_err_set(err, DP_EUNSUPPORTED, "%s: key '%s' varies per layer, which is not supported",
                                  eng_gguf_path(g), key);
        }
        v = first;
    } else if (!eng_gguf_kv_int(kv, 0, &v)) {
        return dp_err_set(err, DP_EFORMAT, "%s: key '%s' has type %s but must be an integer", eng_gguf_path(g), key,
                          eng_gguf_type_name(kv->type));
    }
    if (v < (int64_t)lo || v > (int64_t)hi)
        return dp_err_set(err, DP_EFORMAT, "%s: key '%s' is %lld but must be in [%u, %u]", eng_gguf_path(g), key,
                          (long long)v, lo, hi);
    *out = (uint32_t)v;
    return DP_OK;
}

/* A float key: finite, and > 0 where positive, else >= 0. A NaN base or a negative epsilon would
 * otherwise surface only as non-finite logits, blamed on the kernels. */
static dp_status get_f32_key(const eng_gguf *g, const char *arch, const char *suffix, float *out, float def,
                             bool positive, dp_err *err) {
    char key[160];
    snprintf(key, sizeof(key), "%s.%s", arch, suffix);
    if (!eng_gguf_find(g, key)) {
        *out = def;
        return DP_OK;
    }
    dp_status st = eng_gguf_get_f32(g, key, out, err);
    if (st) return st;
    if (!isfinite(*out) || (positive ? !(*out > 0) : !(*out >= 0)))
        return dp_err_set(err, DP_EFORMAT, "%s: key '%s' is %g but must be a finite number %s 0", eng_gguf_path(g), key,
                          (double)*out, positive ? ">" : ">=");
    return DP_OK;
}

static void copy_str(const eng_gguf *g, const char *key, char *dst, size_t cap) {
    const eng_gguf_kv *kv = eng_gguf_find(g, key);
    dst[0] = '\0';
    if (!kv || kv->type != ENG_GGUF_TYPE_STRING) return;
    size_t n = kv->strs[0].len < cap - 1 ? (size_t)kv->strs[0].len : cap - 1;
    memcpy(dst, kv->strs[0].ptr, n);
    dst[n] = '\0';
}

static int64_t get_id(const eng_gguf *g, const char *key) {
    const eng_gguf_kv *kv = eng_gguf_find(g, key);
    int64_t v;
    if (!kv || kv->type == ENG_GGUF_TYPE_ARRAY || !eng_gguf_kv_int(kv, 0, &v)) return -1;
    return v;
}

dp_status eng_model_info_load(const eng_gguf *g, eng_model_info *m, dp_err *err) {
    memset(m, 0, sizeof(*m));
    const char *path = eng_gguf_path(g);
    eng_gguf_str s;
    dp_status st = eng_gguf_get_str(g, "general.architecture", &s, err);
    if (st) return st;
    if (s.len == 0 || s.len >= sizeof(m->arch_name))
        return dp_err_set(err, DP_EFORMAT, "%s: general.architecture has length %llu (must be 1..63)", path,
                          (unsigned long long)s.len);
    memcpy(m->arch_name, s.ptr, (size_t)s.len);
    m->arch_name[s.len] = '\0';
    for (size_t i = 0; i < s.len; i++) {
        char c = m->arch_name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
            return dp_err_set(err, DP_EFORMAT, "%s: general.architecture contains an invalid character", path);
    }
    const char *a = m->arch_name;
    if (!strcmp(a, "qwen2")) m->arch = ENG_ARCH_QWEN2;
    else if (!strcmp(a, "qwen3")) m->arch = ENG_ARCH_QWEN3;
    else if (!strcmp(a, "qwen35")) m->arch = ENG_ARCH_QWEN35;
    else if (!strcmp(a, "llama")) m->arch = ENG_ARCH_LLAMA;
    copy_str(g, "general.name", m->name, sizeof(m->name));
    int64_t ft = get_id(g, "general.file_type");
    m->file_type = ft < 0 || ft > UINT32_MAX ? UINT32_MAX : (uint32_t)ft;

    const bool known = m->arch != ENG_ARCH_UNKNOWN;
    const uint32_t big = 1u << 20;
    if ((st = get_u32_key(g, a, "block_count", &m->n_layer_total, 0, known, 0, ENG_MAX_LAYERS, err))) return st;
    if ((st = get_u32_key(g, a, "nextn_predict_layers", &m->n_nextn, 0, false, 0, m->n_layer_total, err))) return st;
    m->n_layer = m->n_layer_total - m->n_nextn;
    if ((st = get_u32_key(g, a, "embedding_length", &m->n_embd, 0, known, 1, big, err))) return st;
    if ((st = get_u32_key(g, a, "feed_forward_length", &m->n_ff, 0, known, 1, 4 * big, err))) return st;
    if ((st = get_u32_key(g, a, "attention.head_count", &m->n_head, 0, known, 1, 4096, err))) return st;
    if ((st = get_u32_key(g, a, "attention.head_count_kv", &m->n_head_kv, m->n_head, false, 1, 4096, err))) return st;
    if ((st = get_u32_key(g, a, "context_length", &m->n_ctx_train, 0, false, 0, 1u << 26, err))) return st;
    uint32_t pool = UINT32_MAX; /* (informational: a value the engine does not know is not an error) */
    if ((st = get_u32_key(g, a, "pooling_type", &pool, UINT32_MAX, false, 0, UINT32_MAX, err))) return st;
    m->pooling_type = pool <= 4 ? (int32_t)pool : -1;
    if (m->n_head) {
        if (m->n_head % m->n_head_kv)
            return dp_err_set(err, DP_EFORMAT, "%s: attention.head_count %u is not a multiple of head_count_kv %u", path,
                              m->n_head, m->n_head_kv);
        uint32_t def_hd = m->n_embd / m->n_head;
        if ((st = get_u32_key(g, a, "attention.key_length", &m->head_dim_k, def_hd, false, 1, 4096, err))) return st;
        if ((st = get_u32_key(g, a, "attention.value_length", &m->head_dim_v, m->head_dim_k, false, 1, 4096, err)))
            return st;
        if ((st = get_u32_key(g, a, "rope.dimension_count", &m->n_rot, m->head_dim_k, false, 0, m->head_dim_k, err)))
            return st;
        if (m->n_rot % 2)
            return dp_err_set(err, DP_EFORMAT, "%s: rope.dimension_count %u must be even", path, m->n_rot);
    }
    if ((st = get_f32_key(g, a, "rope.freq_base", &m->rope_base, 10000.0f, true, err))) return st;
    if ((st = get_f32_key(g, a, "attention.layer_norm_rms_epsilon", &m->rms_eps, 1e-6f, false, err))) return st;

    char sk[160];
    snprintf(sk, sizeof(sk), "%s.rope.scaling.type", a);
    copy_str(g, sk, m->rope_scaling, sizeof(m->rope_scaling));
    if (!strcmp(m->rope_scaling, "none")) m->rope_scaling[0] = '\0';
    m->rope_scaling_yarn = m->rope_scaling[0] != '\0';

    /* Recurrent layout (qwen35); every other arch is all attention. */
    m->n_attn_layers = m->n_layer;
    if (m->arch == ENG_ARCH_QWEN35) {
        if ((st = get_u32_key(g, a, "ssm.conv_kernel", &m->ssm_conv_kernel, 0, true, 1, 64, err))) return st;
        if ((st = get_u32_key(g, a, "ssm.state_size", &m->ssm_d_state, 0, true, 1, 4096, err))) return st;
        if ((st = get_u32_key(g, a, "ssm.group_count", &m->ssm_n_group, 0, true, 1, 4096, err))) return st;
        if ((st = get_u32_key(g, a, "ssm.time_step_rank", &m->ssm_dt_rank, 0, true, 1, 4096, err))) return st;
        if ((st = get_u32_key(g, a, "ssm.inner_size", &m->ssm_d_inner, 0, true, 1, big, err))) return st;
        if ((st = get_u32_key(g, a, "full_attention_interval", &m->full_attn_interval, 4, false, 1, 4096, err)))
            return st;
        if (m->ssm_d_inner % m->ssm_dt_rank || m->ssm_dt_rank % m->ssm_n_group)
            return dp_err_set(err, DP_EFORMAT,
                              "%s: ssm.inner_size %u must be a multiple of ssm.time_step_rank %u, which must be a "
                              "multiple of ssm.group_count %u", path, m->ssm_d_inner, m->ssm_dt_rank, m->ssm_n_group);
        char key[160];
        snprintf(key, sizeof(key), "%s.attention.recurrent_layers", a);
        const eng_gguf_kv *rl = eng_gguf_find(g, key);
        if (rl) {
            if (rl->type != ENG_GGUF_TYPE_ARRAY || rl->arr_type != ENG_GGUF_TYPE_BOOL || rl->n != m->n_layer_total)
                return dp_err_set(err, DP_EFORMAT, "%s: key '%s' must be an array of %u BOOL", path, key,
                                  m->n_layer_total);
            for (uint32_t i = 0; i < m->n_layer; i++) m->is_recurrent[i] = rl->data[i] != 0;
        } else {
            for (uint32_t i = 0; i < m->n_layer; i++) m->is_recurrent[i] = (i + 1) % m->full_attn_interval != 0;
        }
        m->n_attn_layers = 0;
        for (uint32_t i = 0; i < m->n_layer; i++) {
            if (m->is_recurrent[i]) m->n_rec_layers++;
            else m->n_attn_layers++;
        }
    }

    /* Tokenizer summary */
    copy_str(g, "tokenizer.ggml.model", m->tok_model, sizeof(m->tok_model));
    copy_str(g, "tokenizer.ggml.pre", m->tok_pre, sizeof(m->tok_pre));
    const eng_gguf_kv *kv = eng_gguf_find(g, "tokenizer.ggml.tokens");
    if (kv && kv->type == ENG_GGUF_TYPE_ARRAY) m->n_tokens = (uint32_t)kv->n;
    kv = eng_gguf_find(g, "tokenizer.ggml.merges");
    if (kv && kv->type == ENG_GGUF_TYPE_ARRAY) m->n_merges = (uint32_t)kv->n;
    m->bos_id = get_id(g, "tokenizer.ggml.bos_token_id");
    m->eos_id = get_id(g, "tokenizer.ggml.eos_token_id");
    m->pad_id = get_id(g, "tokenizer.ggml.padding_token_id");
    kv = eng_gguf_find(g, "tokenizer.ggml.add_bos_token");
    m->add_bos = kv && kv->type == ENG_GGUF_TYPE_BOOL && kv->data[0];
    m->has_chat_template = eng_gguf_find(g, "tokenizer.chat_template") != NULL;

    /* Tensors */
    const eng_gguf_tensor *emb = eng_gguf_find_tensor(g, "token_embd.weight");
    m->n_vocab = emb ? (uint32_t)(emb->ne[1] > UINT32_MAX ? UINT32_MAX : emb->ne[1]) : m->n_tokens;
    m->tied_embeddings = eng_gguf_find_tensor(g, "output.weight") == NULL;
    for (int64_t i = 0; i < eng_gguf_n_tensors(g); i++) {
        const eng_gguf_tensor *t = eng_gguf_tensor_at(g, i);
        m->weight_bytes += t->nbytes;
        unsigned blk;
        if (sscanf(t->name, "blk.%u.", &blk) == 1 && blk >= m->n_layer && m->n_nextn) continue;
        m->weight_bytes_main += t->nbytes;
    }
    m->decode_bytes = m->weight_bytes_main;
    if (emb && !m->tied_embeddings && emb->ne[1] > 0) /* one row of it per token */
        m->decode_bytes -= emb->nbytes - emb->nbytes / (uint64_t)emb->ne[1];
    return DP_OK;
}

void eng_model_mem_estimate(const eng_model_info *m, uint32_t n_ctx, uint32_t n_seqs, uint32_t n_ubatch,
                            eng_mem_estimate *e) {
    eng_model_mem_estimate_kv(m, n_ctx, n_seqs, n_ubatch, ENG_TYPE_F16, e);
}

void eng_model_mem_estimate_kv(const eng_model_info *m, uint32_t n_ctx, uint32_t n_seqs, uint32_t n_ubatch,
                               int kv_type, eng_mem_estimate *e) {
    memset(e, 0, sizeof(*e));
    e->weights = m->weight_bytes_main;
    /* K and V per attention layer, in the cache's type */
    e->kv_per_token = (uint64_t)m->n_attn_layers * (eng_row_size(kv_type, (int64_t)m->n_head_kv * m->head_dim_k) +
                                                     eng_row_size(kv_type, (int64_t)m->n_head_kv * m->head_dim_v));
    e->kv_cache = e->kv_per_token * n_ctx * n_seqs;
    if (m->n_rec_layers) {
        uint64_t d_v = m->ssm_d_inner / m->ssm_dt_rank;
        uint64_t delta = (uint64_t)m->ssm_dt_rank * m->ssm_d_state * d_v * 4;
        uint64_t conv_ch = 2ull * m->ssm_n_group * m->ssm_d_state + m->ssm_d_inner;
        uint64_t conv = (uint64_t)(m->ssm_conv_kernel ? m->ssm_conv_kernel - 1 : 0) * conv_ch * 4;
        e->rec_per_seq = (uint64_t)m->n_rec_layers * (delta + conv);
        e->recurrent = e->rec_per_seq * n_seqs;
    }
    /* Compute buffers: per token of a prefill batch, the residual stream, the widest
     * projection outputs and the FFN intermediate in f32; per thread, attention's tiles (a
     * cluster's query heads of a KV group with one cache block of scores each, and one block of
     * K and V rows widened to floats: the cache is read block by block with an online softmax, so
     * nothing here grows with the context); and one logits row per sequence. */
    uint64_t q_width = (uint64_t)m->n_head * m->head_dim_k * 2 + 2ull * m->n_head_kv * m->head_dim_k;
    uint64_t rec_width = m->ssm_d_inner ? 2ull * m->ssm_d_inner + 2ull * m->ssm_n_group * m->ssm_d_state : 0;
    uint64_t width = 3ull * m->n_embd + 2ull * m->n_ff + (q_width > rec_width ? q_width : rec_width);
    uint64_t tokens = n_ubatch > n_seqs ? n_ubatch : n_seqs;
    const uint64_t group = m->n_head_kv ? (uint64_t)m->n_head / m->n_head_kv : 0, hd = m->head_dim_k;
    const uint64_t cl = group ? (uint64_t)eng_attn_cluster_max((int)group, ENG_KV_BLOCK, (int)hd) : 0;
    const uint64_t rows = cl * group * eng_attn_row_floats(ENG_KV_BLOCK, (int)hd);
    const uint64_t attn = (uint64_t)dp_cpu_count() * 4 * (rows + 2 * ENG_KV_BLOCK * hd);
    e->compute = tokens * width * 4 + attn + (uint64_t)m->n_vocab * 4 * n_seqs;
    e->total = e->weights + e->kv_cache + e->recurrent + e->compute;
}
