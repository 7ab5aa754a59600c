/*
 * quantize.c - `docpipe quantize`: re-encode a model's tensors with a file type's mix.
 *
 * DESIGN: the per-tensor type rules are llama.cpp's (model-formats.md §2.6, post-2026-03 version
 * where the fused attn_qkv counts like attn_v); everything else (metadata, tensor order) is
 * copied. Rows stream through the GGUF writer's bounded buffer and are converted in parallel
 * slices: each row is dequantized to f32 and re-quantized with the reference quantizer, so
 * the output does not depend on the thread count.
 */
#include "quantize.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "gguf_writer.h"
#include "engine.h"
#include "parallel.h"
#include "quant.h"

int eng_ftype_from_name(const char *name) {
    static const struct { const char *n; eng_ftype t; } map[] = {
        {"q4_0", ENG_FTYPE_Q4_0}, {"q8_0", ENG_FTYPE_Q8_0}, {"q4_k_m", ENG_FTYPE_Q4_K_M},
        {"q5_k_m", ENG_FTYPE_Q5_K_M}, {"q6_k", ENG_FTYPE_Q6_K},
    };
    char low[16];
    size_t i = 0;
    for (; name[i] && i < sizeof(low) - 1; i++) low[i] = (char)tolower((unsigned char)name[i]);
    low[i] = '\0';
    for (size_t k = 0; k < sizeof(map) / sizeof(map[0]); k++)
        if (!strcmp(low, map[k].n)) return map[k].t;
    return -1;
}

static bool ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

/* llama.cpp's use_more_bits: the first and last eighth, and every third in between. */
static bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

int eng_quantize_tensor_type(eng_ftype ftype, const char *name, uint32_t n_dims, int64_t ne0, int src_type,
                             int i_layer, int n_layer, int i_v, int n_v, int tied) {
    if (n_dims < 2 || !ends_with(name, ".weight")) return src_type;
    if (strstr(name, "_norm.weight") || strstr(name, "ssm_conv1d") || strstr(name, "ffn_gate_inp")) return src_type;
    int base;
    switch (ftype) {
    case ENG_FTYPE_Q4_0: base = ENG_TYPE_Q4_0; break;
    case ENG_FTYPE_Q8_0: base = ENG_TYPE_Q8_0; break;
    case ENG_FTYPE_Q4_K_M: base = ENG_TYPE_Q4_K; break;
    case ENG_FTYPE_Q5_K_M: base = ENG_TYPE_Q5_K; break;
    case ENG_FTYPE_Q6_K: base = ENG_TYPE_Q6_K; break;
    default: return src_type;
    }
    const bool km = ftype == ENG_FTYPE_Q4_K_M || ftype == ENG_FTYPE_Q5_K_M;
    int t = base;
    if (!strcmp(name, "output.weight") || (tied && !strcmp(name, "token_embd.weight"))) {
        t = ftype == ENG_FTYPE_Q8_0 ? ENG_TYPE_Q8_0 : ENG_TYPE_Q6_K;
    } else if (km && (strstr(name, ".attn_v.") || strstr(name, ".attn_qkv."))) {
        if (use_more_bits(i_v, n_v)) t = ENG_TYPE_Q6_K;
    } else if (km && strstr(name, ".ffn_down.")) {
        if (use_more_bits(i_layer, n_layer)) t = ENG_TYPE_Q6_K;
    }
    /* Rows that do not fill whole super-blocks fall back as llama-quantize does. */
    if (ne0 % ENG_QK_K) {
        if (t == ENG_TYPE_Q4_K) t = ENG_TYPE_Q5_0;
        else if (t == ENG_TYPE_Q5_K) t = ENG_TYPE_Q5_1;
        else if (t == ENG_TYPE_Q6_K) t = ENG_TYPE_Q8_0;
    }
    if (ne0 % 32) t = ENG_TYPE_F16;
    return t;
}

typedef struct qctx {
    const eng_gguf *src;
    int n_threads;
    eng_quantize_progress_fn progress;
    void *ud;
    uint64_t bytes_out;
    /* per call */
    const eng_gguf_tensor *in, *out;
    int64_t row0;
    void *dst;
    int fail;
} qctx;

static void convert_rows(void *vctx, int64_t lo, int64_t hi) {
    qctx *c = vctx;
    const int64_t n = c->in->ne[0];
    const size_t in_row = eng_row_size(c->in->type, n), out_row = eng_row_size(c->out->type, n);
    float *tmp = malloc((size_t)n * sizeof(float));
    if (!tmp) {
        c->fail = 1;
        return;
    }
    for (int64_t r = lo; r < hi; r++) {
        const uint8_t *s = (const uint8_t *)c->in->data + (size_t)(c->row0 + r) * in_row;
        uint8_t *d = (uint8_t *)c->dst + (size_t)r * out_row;
        if (c->in->type == c->out->type) {
            memcpy(d, s, out_row);
            continue;
        }
        eng_dequantize_row(c->in->type, s, tmp, n);
        eng_quantize_row(c->out->type, tmp, d, n);
    }
    free(tmp);
}

static dp_status fill(void *ud, int64_t idx, const eng_gguf_tensor *t, int64_t row0, int64_t n_rows, void *dst,
                      dp_err *err) {
    qctx *c = ud;
    c->in = eng_gguf_tensor_at(c->src, idx);
    c->out = t;
    c->row0 = row0;
    c->dst = dst;
    c->fail = 0;
    dp_status st = eng_parallel_for(c->n_threads, n_rows, convert_rows, c, err);
    if (!st && c->fail) st = dp_err_set(err, DP_ENOMEM, "out of memory converting tensor '%s'", t->name);
    if (st) return st;
    c->bytes_out += (uint64_t)n_rows * eng_row_size(t->type, t->ne[0]);
    const int64_t total_rows = t->ne[1] * t->ne[2] * t->ne[3];
    if (c->progress && row0 + n_rows == total_rows)
        c->progress(c->ud, idx, eng_gguf_n_tensors(c->src), t->name, t->type, c->bytes_out);
    return DP_OK;
}

dp_status eng_quantize_file(const char *in, const char *out, eng_ftype ftype, int n_threads,
                            eng_quantize_progress_fn progress, void *ud, dp_err *err) {
    eng_gguf *g = NULL;
    eng_gguf_writer *w = NULL;
    eng_model_info info;
    dp_status st = eng_gguf_open(in, &g, err);
    if (st) return st;
    if ((st = eng_model_info_load(g, &info, err))) goto done;
    if ((st = eng_gguf_writer_init(&w))) {
        st = dp_err_set(err, st, "out of memory");
        goto done;
    }
    for (int64_t i = 0; i < eng_gguf_n_kv(g); i++)
        if ((st = eng_gguf_writer_copy_kv(w, eng_gguf_kv_at(g, i)))) {
            st = dp_err_set(err, st, "cannot copy metadata: %s", dp_status_str(st));
            goto done;
        }
    eng_gguf_writer_set_u32(w, "general.file_type", (uint32_t)ftype);
    eng_gguf_writer_set_u32(w, "general.quantization_version", 2);

    int n_v = 0, i_v = 0;
    for (int64_t i = 0; i < eng_gguf_n_tensors(g); i++) {
        const char *nm = eng_gguf_tensor_at(g, i)->name;
        if (strstr(nm, ".attn_v.weight") || strstr(nm, ".attn_qkv.weight")) n_v++;
    }
    for (int64_t i = 0; i < eng_gguf_n_tensors(g); i++) {
        const eng_gguf_tensor *t = eng_gguf_tensor_at(g, i);
        if (!eng_type_get(t->type)->to_float) {
            st = dp_err_set(err, DP_EUNSUPPORTED, "%s: tensor '%s' has type %s, which cannot be re-quantized", in,
                            t->name, eng_type_name(t->type));
            goto done;
        }
        unsigned layer = 0;
        sscanf(t->name, "blk.%u.", &layer);
        int type = eng_quantize_tensor_type(ftype, t->name, t->n_dims, t->ne[0], t->type, (int)layer,
                                            (int)info.n_layer, i_v, n_v, info.tied_embeddings);
        if (strstr(t->name, ".attn_v.weight") || strstr(t->name, ".attn_qkv.weight")) i_v++;
        if ((st = eng_gguf_writer_add_tensor(w, t->name, type, t->n_dims, t->ne, NULL))) {
            st = dp_err_set(err, st, "tensor '%s': cannot be written as %s", t->name, eng_type_name(type));
            goto done;
        }
    }
    qctx c = {.src = g, .n_threads = n_threads, .progress = progress, .ud = ud};
    st = eng_gguf_writer_write(w, out, fill, &c, err);
done:
    eng_gguf_writer_free(w);
    eng_gguf_close(g);
    return st;
}
