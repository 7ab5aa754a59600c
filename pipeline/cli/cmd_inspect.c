/*
 * cmd_inspect.c - `docpipe inspect MODEL.gguf [-c N] [--seqs N] [--json]`.
 *
 * Shows what a GGUF file is and what it costs to run: architecture, hyper-parameters,
 * tokenizer, every tensor, a type histogram and the memory for weights + KV cache + recurrent
 * state at the given context and sequence count. Any file the GGUF reader accepts is shown,
 * including those docpipe cannot run (a vocabulary-only file, an adapter, an architecture the
 * engine does not have, a model missing keys or tensors): "runnable" then says what is
 * missing, and the model's figures (hyper-parameters, memory) are left out where they cannot
 * be read. Only a file that is not GGUF at all exits 78, with the reader's message. JSON goes
 * to stdout; nothing else is printed there with --json.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "help.h"
#include "engine.h"
#include "exit_codes.h"
#include "platform.h"
#include "utf8.h"

static void fmt_bytes(uint64_t b, char *out, size_t n) {
    if (b >= (1ull << 30)) snprintf(out, n, "%.2f GiB", (double)b / (1ull << 30));
    else if (b >= (1ull << 20)) snprintf(out, n, "%.2f MiB", (double)b / (1ull << 20));
    else if (b >= 1024) snprintf(out, n, "%.1f KiB", (double)b / 1024);
    else snprintf(out, n, "%llu B", (unsigned long long)b);
}

/* A JSON string from bytes that may not be UTF-8 (repaired with U+FFFD). */
static json_t *jstr(const char *p, size_t n) {
    json_t *s = json_stringn(p, n);
    if (s) return s;
    uint8_t *fix = malloc(3 * n + 1);
    if (!fix) return json_null();
    size_t m = dp_utf8_repair((const uint8_t *)p, n, fix, NULL);
    s = json_stringn((const char *)fix, m);
    free(fix);
    return s ? s : json_null();
}

static json_t *kv_elem(const eng_gguf_kv *kv, uint64_t i) {
    int64_t iv;
    double fv;
    if (kv->arr_type == ENG_GGUF_TYPE_STRING) return jstr(kv->strs[i].ptr, (size_t)kv->strs[i].len);
    if (kv->arr_type == ENG_GGUF_TYPE_BOOL) return json_boolean(kv->data[i]);
    if (eng_gguf_kv_float(kv, i, &fv)) return json_real(fv);
    if (eng_gguf_kv_int(kv, i, &iv)) return json_integer(iv);
    if (kv->arr_type == ENG_GGUF_TYPE_UINT64) { /* above INT64_MAX */
        uint64_t u;
        memcpy(&u, kv->data + 8 * i, 8);
        return json_real((double)u);
    }
    return json_null();
}

static json_t *kv_value(const eng_gguf_kv *kv) {
    if (kv->type != ENG_GGUF_TYPE_ARRAY) return kv_elem(kv, 0);
    if (kv->n > 16) {
        json_t *o = json_object();
        json_object_set_new(o, "array_of", json_string(eng_gguf_type_name(kv->arr_type)));
        json_object_set_new(o, "length", json_integer((json_int_t)kv->n));
        return o;
    }
    json_t *a = json_array();
    for (uint64_t i = 0; i < kv->n; i++) json_array_append_new(a, kv_elem(kv, i));
    return a;
}

static void print_kv_text(const eng_gguf_kv *kv) {
    printf("  %-44.*s ", (int)kv->key.len, kv->key.ptr);
    if (kv->type == ENG_GGUF_TYPE_ARRAY && kv->n > 16) {
        printf("[%s x %llu]\n", eng_gguf_type_name(kv->arr_type), (unsigned long long)kv->n);
        return;
    }
    json_t *v = kv_value(kv);
    char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    if (s && strlen(s) > 100) strcpy(s + 96, "...");
    printf("%s\n", s ? s : "?");
    free(s);
    json_decref(v);
}

static json_t *shape_json(const eng_gguf_tensor *t) {
    json_t *a = json_array();
    for (uint32_t j = 0; j < t->n_dims; j++) json_array_append_new(a, json_integer(t->ne[j]));
    return a;
}

#define MAX_REASONS 6

/* Why the engine cannot run this file (none: it can, as far as a look at the file tells;
 * loading still checks every tensor). info is NULL when the model keys could not be read,
 * load_err then says why. */
static int why_not_runnable(const eng_gguf *g, const eng_model_info *info, const char *load_err,
                            char why[MAX_REASONS][DP_ERR_MSG_MAX]) {
    int n = 0;
    eng_gguf_str type;
    const bool adapter = !eng_gguf_get_str(g, "general.type", &type, NULL) && eng_gguf_str_eq(type, "adapter");
    if (adapter)
        snprintf(why[n++], DP_ERR_MSG_MAX, "an adapter (general.type = adapter), not a model: docpipe does not apply "
                 "adapters; use the model it was made for, with the adapter merged into it");
    if (!info) { /* (an adapter has no model keys of its own: nothing more to say) */
        if (!adapter) snprintf(why[n++], DP_ERR_MSG_MAX, "the model keys cannot be read: %s", load_err);
        return n;
    }
    if (info->arch == ENG_ARCH_UNKNOWN)
        snprintf(why[n++], DP_ERR_MSG_MAX, "architecture '%s' is not one the engine runs (qwen2, qwen3, qwen35, "
                 "llama)", info->arch_name);
    if (eng_gguf_n_tensors(g) == 0)
        snprintf(why[n++], DP_ERR_MSG_MAX, "no tensors: a vocabulary-only file (docpipe tokenize can use its "
                 "tokenizer)");
    else if (!adapter && !eng_gguf_find_tensor(g, "token_embd.weight"))
        snprintf(why[n++], DP_ERR_MSG_MAX, "no token_embd.weight tensor");
    if (!info->n_tokens) snprintf(why[n++], DP_ERR_MSG_MAX, "no tokenizer (tokenizer.ggml.tokens is missing)");
    return n;
}

int pl_cmd_inspect(int argc, char **argv) {
    const char *path = NULL;
    uint32_t n_ctx = 0, n_seqs = 1;
    bool as_json = false, show_all_kv = false, kv_bad = false;
    pl_kv_opts kvo = PL_KV_OPTS_INIT;
    int kv_type = ENG_TYPE_F16;
    for (int i = 1; i < argc; i++) {
        if (pl_kv_option(&kvo, argv[i], i + 1 < argc ? argv[i + 1] : NULL, &kv_bad)) {
            if (kv_bad) return PL_EXIT_USAGE;
            i++;
        } else if (!strcmp(argv[i], "-c") || !strcmp(argv[i], "--ctx-size")) {
            if (!pl_parse_u32(argv[i], i + 1 < argc ? argv[i + 1] : NULL, 1, 1u << 26, &n_ctx)) return PL_EXIT_USAGE;
            i++;
        } else if (!strcmp(argv[i], "--seqs")) {
            if (!pl_parse_u32(argv[i], i + 1 < argc ? argv[i + 1] : NULL, 1, 1u << 16, &n_seqs)) return PL_EXIT_USAGE;
            i++;
        } else if (!strcmp(argv[i], "--json")) {
            as_json = true;
        } else if (!strcmp(argv[i], "--all")) {
            show_all_kv = true;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            pl_unknown_option("inspect", argv[i]);
            return PL_EXIT_USAGE;
        } else if (!path) {
            path = argv[i];
        } else {
            fprintf(stderr, "docpipe inspect: more than one model given ('%s')\n", argv[i]);
            return PL_EXIT_USAGE;
        }
    }
    if (!path) {
        fprintf(stderr, "usage: docpipe inspect MODEL.gguf [-c N] [--seqs N] [-ctk f16|q8_0] [--json] [--all]\n");
        return PL_EXIT_USAGE;
    }
    if (!pl_kv_type(&kvo, &kv_type)) return PL_EXIT_USAGE;
    dp_err err = {0};
    eng_gguf *g = NULL;
    eng_model_info info;
    if (eng_gguf_open(path, &g, &err)) {
        fprintf(stderr, "docpipe inspect: %s\n", dp_err_msg(&err));
        eng_gguf_close(g);
        return PL_EXIT_CONFIG;
    }
    const bool have_info = eng_model_info_load(g, &info, &err) == DP_OK;
    if (!have_info) {
        /* what can still be said: the name of the architecture, if it has one */
        eng_gguf_str a;
        memset(&info, 0, sizeof(info));
        if (!eng_gguf_get_str(g, "general.architecture", &a, NULL))
            snprintf(info.arch_name, sizeof(info.arch_name), "%.*s", (int)(a.len < 63 ? a.len : 63), a.ptr);
    }
    char why[MAX_REASONS][DP_ERR_MSG_MAX];
    const int n_why = why_not_runnable(g, have_info ? &info : NULL, dp_err_msg(&err), why);
    /* a model's figures, where the keys could be read and there is something to run */
    const bool figures = have_info && info.arch != ENG_ARCH_UNKNOWN && eng_gguf_n_tensors(g) > 0;
    if (!n_ctx) n_ctx = info.n_ctx_train && info.n_ctx_train < 8192 ? info.n_ctx_train : 8192;
    eng_mem_estimate mem;
    if (kv_type == ENG_TYPE_Q8_0 && figures && (info.head_dim_k % 32 || info.head_dim_v % 32)) {
        fprintf(stderr, "docpipe inspect: a Q8_0 KV cache needs head sizes that are multiples of 32 (this model's: %u); "
                        "the estimate is for F16\n", info.head_dim_k);
        kv_type = ENG_TYPE_F16;
    }
    eng_model_mem_estimate_kv(&info, n_ctx, n_seqs, 512, kv_type, &mem);
    /* what run and batch will do with it: the KV pool shrinks to the memory available */
    const uint64_t avail = dp_mem_available(), bps = (n_ctx + ENG_KV_BLOCK - 1) / ENG_KV_BLOCK;
    const uint64_t fit_blocks = eng_kv_blocks_fitting(&info, n_ctx, n_seqs, 512, kv_type, avail, NULL);
    const bool fits = !avail || !eng_kv_block_bytes(&info, kv_type) || fit_blocks >= bps * n_seqs;

    /* type histogram */
    uint64_t hist_n[ENG_TYPE_COUNT] = {0}, hist_b[ENG_TYPE_COUNT] = {0};
    for (int64_t i = 0; i < eng_gguf_n_tensors(g); i++) {
        const eng_gguf_tensor *t = eng_gguf_tensor_at(g, i);
        hist_n[t->type]++;
        hist_b[t->type] += t->nbytes;
    }

    if (as_json) {
        json_t *o = json_object();
        json_object_set_new(o, "file", json_string(path));
        json_object_set_new(o, "file_bytes", json_integer((json_int_t)eng_gguf_file_size(g)));
        json_object_set_new(o, "gguf_version", json_integer(eng_gguf_version(g)));
        json_object_set_new(o, "architecture", info.arch_name[0] ? jstr(info.arch_name, strlen(info.arch_name))
                                                                 : json_null());
        json_object_set_new(o, "architecture_supported", json_boolean(have_info && info.arch != ENG_ARCH_UNKNOWN));
        json_object_set_new(o, "runnable", json_boolean(n_why == 0));
        json_t *wn = json_array();
        for (int i = 0; i < n_why; i++) json_array_append_new(wn, jstr(why[i], strlen(why[i])));
        json_object_set_new(o, "not_runnable_because", wn);
        json_object_set_new(o, "name", jstr(info.name, strlen(info.name)));
        const char *ftn = eng_file_type_name(info.file_type);
        json_object_set_new(o, "file_type", ftn ? json_string(ftn) : json_null());
        json_object_set_new(o, "n_tensors", json_integer(eng_gguf_n_tensors(g)));
        json_object_set_new(o, "weight_bytes", json_integer((json_int_t)info.weight_bytes));
        json_t *hp = have_info ? json_object() : json_null();
        json_object_set_new(hp, "n_layer", json_integer(info.n_layer));
        json_object_set_new(hp, "n_layer_total", json_integer(info.n_layer_total));
        json_object_set_new(hp, "n_attention_layers", json_integer(info.n_attn_layers));
        json_object_set_new(hp, "n_recurrent_layers", json_integer(info.n_rec_layers));
        json_object_set_new(hp, "n_embd", json_integer(info.n_embd));
        json_object_set_new(hp, "n_ff", json_integer(info.n_ff));
        json_object_set_new(hp, "n_head", json_integer(info.n_head));
        json_object_set_new(hp, "n_head_kv", json_integer(info.n_head_kv));
        json_object_set_new(hp, "head_dim", json_integer(info.head_dim_k));
        json_object_set_new(hp, "n_rot", json_integer(info.n_rot));
        json_object_set_new(hp, "n_ctx_train", json_integer(info.n_ctx_train));
        json_object_set_new(hp, "n_vocab", json_integer(info.n_vocab));
        json_object_set_new(hp, "rope_freq_base", json_real(info.rope_base));
        json_object_set_new(hp, "rms_eps", json_real(info.rms_eps));
        json_object_set_new(hp, "tied_embeddings", json_boolean(info.tied_embeddings));
        json_object_set_new(o, "hparams", hp);
        json_t *tok = have_info ? json_object() : json_null();
        json_object_set_new(tok, "model", json_string(info.tok_model));
        json_object_set_new(tok, "pre", json_string(info.tok_pre));
        json_object_set_new(tok, "n_tokens", json_integer(info.n_tokens));
        json_object_set_new(tok, "n_merges", json_integer(info.n_merges));
        json_object_set_new(tok, "bos_id", json_integer(info.bos_id));
        json_object_set_new(tok, "eos_id", json_integer(info.eos_id));
        json_object_set_new(tok, "chat_template", json_boolean(info.has_chat_template));
        json_object_set_new(o, "tokenizer", tok);
        json_t *m = figures ? json_object() : json_null();
        json_object_set_new(m, "n_ctx", json_integer(n_ctx));
        json_object_set_new(m, "n_seqs", json_integer(n_seqs));
        json_object_set_new(m, "weights", json_integer((json_int_t)mem.weights));
        json_object_set_new(m, "kv_cache", json_integer((json_int_t)mem.kv_cache));
        json_object_set_new(m, "kv_type", json_string(eng_type_name(kv_type)));
        json_object_set_new(m, "recurrent_state", json_integer((json_int_t)mem.recurrent));
        json_object_set_new(m, "compute", json_integer((json_int_t)mem.compute));
        json_object_set_new(m, "total", json_integer((json_int_t)mem.total));
        json_object_set_new(m, "kv_bytes_per_token", json_integer((json_int_t)mem.kv_per_token));
        json_object_set_new(m, "recurrent_bytes_per_seq", json_integer((json_int_t)mem.rec_per_seq));
        json_object_set_new(m, "available", json_integer((json_int_t)avail));
        json_object_set_new(m, "fits", json_boolean(fits));
        if (!fits && figures) json_object_set_new(m, "kv_blocks_that_fit", json_integer((json_int_t)fit_blocks));
        json_object_set_new(o, "memory", m);
        json_t *h = json_object();
        for (int t = 0; t < ENG_TYPE_COUNT; t++) {
            if (!hist_n[t]) continue;
            json_t *e = json_object();
            json_object_set_new(e, "tensors", json_integer((json_int_t)hist_n[t]));
            json_object_set_new(e, "bytes", json_integer((json_int_t)hist_b[t]));
            json_object_set_new(h, eng_type_name(t), e);
        }
        json_object_set_new(o, "type_histogram", h);
        json_t *ts = json_array();
        for (int64_t i = 0; i < eng_gguf_n_tensors(g); i++) {
            const eng_gguf_tensor *t = eng_gguf_tensor_at(g, i);
            json_t *e = json_object();
            json_object_set_new(e, "name", json_string(t->name));
            json_object_set_new(e, "type", json_string(eng_type_name(t->type)));
            json_object_set_new(e, "shape", shape_json(t));
            json_object_set_new(e, "bytes", json_integer((json_int_t)t->nbytes));
            json_array_append_new(ts, e);
        }
        json_object_set_new(o, "tensors", ts);
        json_t *md = json_object();
        for (int64_t i = 0; i < eng_gguf_n_kv(g); i++) {
            const eng_gguf_kv *kv = eng_gguf_kv_at(g, i);
            char key[1024];
            size_t kl = kv->key.len < sizeof(key) - 1 ? (size_t)kv->key.len : sizeof(key) - 1;
            memcpy(key, kv->key.ptr, kl);
            key[kl] = '\0';
            json_t *v = kv_value(kv);
            if (json_object_set_new(md, key, v) != 0) { /* key not UTF-8: repair */
                json_t *k2 = jstr(key, kl);
                json_object_set_new(md, json_is_string(k2) ? json_string_value(k2) : "?", kv_value(kv));
                json_decref(k2);
            }
        }
        json_object_set_new(o, "metadata", md);
        char *s = json_dumps(o, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
        if (s) puts(s);
        free(s);
        json_decref(o);
        eng_gguf_close(g);
        return PL_EXIT_OK;
    }

    char b1[32], b2[32], b3[32], b4[32], b5[32];
    fmt_bytes(eng_gguf_file_size(g), b1, sizeof(b1));
    printf("file          %s (%s, GGUF v%u, alignment %u)\n", path, b1, eng_gguf_version(g), eng_gguf_alignment(g));
    printf("architecture  %s%s\n", info.arch_name[0] ? info.arch_name : "-",
           have_info && info.arch == ENG_ARCH_UNKNOWN ? " (not supported by the engine)" : "");
    if (n_why == 0) printf("runnable      yes\n");
    for (int i = 0; i < n_why; i++) printf("%s %s\n", i ? "             " : "runnable      no:", why[i]);
    if (have_info) {
        const char *ftn = eng_file_type_name(info.file_type);
        printf("name          %s\nfile type     %s\n", info.name[0] ? info.name : "-", ftn ? ftn : "-");
    }
    if (figures) {
        printf("\nhyper-parameters\n");
        printf("  layers              %u", info.n_layer);
        if (info.n_rec_layers) printf(" (%u Gated DeltaNet + %u attention)", info.n_rec_layers, info.n_attn_layers);
        if (info.n_nextn) printf(" + %u MTP (skipped)", info.n_nextn);
        printf("\n  embedding           %u\n  feed-forward        %u\n", info.n_embd, info.n_ff);
        printf("  attention heads     %u q / %u kv, head dim %u, rope %u dims, base %g\n", info.n_head,
               info.n_head_kv, info.head_dim_k, info.n_rot, (double)info.rope_base);
        if (info.n_rec_layers)
            printf("  delta net           %u k heads / %u v heads x %u, conv %u\n", info.ssm_n_group,
                   info.ssm_dt_rank, info.ssm_d_state, info.ssm_conv_kernel);
        printf("  trained context     %u\n  vocabulary          %u%s\n  rms eps             %g\n", info.n_ctx_train,
               info.n_vocab, info.tied_embeddings ? " (tied embeddings)" : "", (double)info.rms_eps);
    }
    if (have_info)
        printf("\ntokenizer     %s, pre-tokenizer %s, %u tokens, %u merges, bos %lld, eos %lld, chat template %s\n",
               info.tok_model[0] ? info.tok_model : "-", info.tok_pre[0] ? info.tok_pre : "-", info.n_tokens,
               info.n_merges, (long long)info.bos_id, (long long)info.eos_id, info.has_chat_template ? "yes" : "no");

    printf("\nmetadata (%lld keys)\n", (long long)eng_gguf_n_kv(g));
    for (int64_t i = 0; i < eng_gguf_n_kv(g); i++) {
        const eng_gguf_kv *kv = eng_gguf_kv_at(g, i);
        if (!show_all_kv && eng_gguf_str_eq(kv->key, "tokenizer.chat_template")) {
            printf("  %-44s [%llu bytes; --all shows it]\n", "tokenizer.chat_template",
                   (unsigned long long)kv->strs[0].len);
            continue;
        }
        print_kv_text(kv);
    }

    printf("\ntensors (%lld)\n  %-40s %-6s %-22s %12s\n", (long long)eng_gguf_n_tensors(g), "name", "type", "shape",
           "bytes");
    for (int64_t i = 0; i < eng_gguf_n_tensors(g); i++) {
        const eng_gguf_tensor *t = eng_gguf_tensor_at(g, i);
        char shape[64];
        int n = snprintf(shape, sizeof(shape), "%lld", (long long)t->ne[0]);
        for (uint32_t j = 1; j < t->n_dims; j++)
            n += snprintf(shape + n, sizeof(shape) - (size_t)n, " x %lld", (long long)t->ne[j]);
        printf("  %-40s %-6s %-22s %12zu\n", t->name, eng_type_name(t->type), shape, t->nbytes);
    }
    printf("\ntype histogram\n");
    for (int t = 0; t < ENG_TYPE_COUNT; t++) {
        if (!hist_n[t]) continue;
        fmt_bytes(hist_b[t], b1, sizeof(b1));
        printf("  %-6s %5llu tensors %12s\n", eng_type_name(t), (unsigned long long)hist_n[t], b1);
    }
    uint64_t n_elem = 0;
    for (int64_t i = 0; i < eng_gguf_n_tensors(g); i++) {
        const eng_gguf_tensor *t = eng_gguf_tensor_at(g, i);
        n_elem += (uint64_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
    }
    uint64_t all_bytes = 0;
    for (int64_t i = 0; i < eng_gguf_n_tensors(g); i++) all_bytes += eng_gguf_tensor_at(g, i)->nbytes;
    fmt_bytes(all_bytes, b1, sizeof(b1));
    printf("  total  %5lld tensors %12s (%.2f bits/weight)\n", (long long)eng_gguf_n_tensors(g), b1,
           n_elem ? (double)all_bytes * 8.0 / (double)n_elem : 0.0);
    if (!figures) {
        eng_gguf_close(g);
        return PL_EXIT_OK;
    }

    fmt_bytes(mem.weights, b1, sizeof(b1));
    fmt_bytes(mem.kv_cache, b2, sizeof(b2));
    fmt_bytes(mem.recurrent, b3, sizeof(b3));
    fmt_bytes(mem.compute, b4, sizeof(b4));
    fmt_bytes(mem.total, b5, sizeof(b5));
    printf("\nmemory at context %u x %u sequence%s\n", n_ctx, n_seqs, n_seqs == 1 ? "" : "s");
    char kvl[32];
    snprintf(kvl, sizeof(kvl), "KV cache (%s)", eng_type_name(kv_type));
    printf("  weights (mapped)    %s\n  %-19s %s (%llu bytes per token per sequence)\n", b1, kvl, b2,
           (unsigned long long)mem.kv_per_token);
    if (info.n_rec_layers)
        printf("  recurrent state     %s (%llu bytes per sequence)\n", b3, (unsigned long long)mem.rec_per_seq);
    printf("  compute buffers     %s\n  total               %s\n", b4, b5);
    fmt_bytes(avail, b1, sizeof(b1));
    if (fits)
        printf("  available now       %s: fits\n", avail ? b1 : "unknown");
    else
        printf("  available now       %s: the KV cache shrinks to %llu blocks of %d positions (%llu sequence%s at "
               "full context; shorter requests share the rest)\n", b1, (unsigned long long)fit_blocks, ENG_KV_BLOCK,
               (unsigned long long)(fit_blocks / bps), fit_blocks / bps == 1 ? "" : "s");
    eng_gguf_close(g);
    return PL_EXIT_OK;
}
