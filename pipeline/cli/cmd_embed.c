/*
 * cmd_embed.c - `docpipe embed -m MODEL.gguf (TEXT | -p TEXT | -f FILE) [--pooling P]
 *               [--separator S] [--instruct TEXT] [--no-normalize] [--format json|array] [-t N]
 *               [--device D]`: sentence embeddings, printed in llama-embedding's JSON shape.
 *
 * DESIGN: the text is split at the separator (a newline by default, as llama-embedding splits
 * its prompt) and each non-empty piece is one embedding. Pieces are tokenized as llama-embedding
 * does (add_special, so a tokenizer with add_eos_token appends EOS; special-token parsing on),
 * decoded many at a time in one embedding context (each piece its own sequence, all tokens of a
 * group in one eng_decode call, which the engine cuts into steps), then pooled and L2-normalized
 * by the engine. A piece's vector does not depend on the others (the engine's batch invariance),
 * so the grouping is a matter of speed only.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "help.h"
#include "engine.h"
#include "exit_codes.h"
#include "open_context.h"
#include "platform.h"

#define GROUP 64 /* sequences decoded together */

typedef struct piece {
    const char *p;
    size_t n;
} piece;

/* Splits text at sep (non-empty pieces only). Returns the count; *out is malloc'ed. */
static size_t split(const char *text, size_t len, const char *sep, piece **out) {
    const size_t sl = strlen(sep);
    size_t n = 0, cap = 16;
    piece *v = malloc(cap * sizeof(*v));
    size_t a = 0;
    while (v && a <= len) {
        const char *hit = NULL;
        for (size_t i = a; sl && i + sl <= len; i++)
            if (!memcmp(text + i, sep, sl)) {
                hit = text + i;
                break;
            }
        const size_t e = hit ? (size_t)(hit - text) : len;
        if (e > a) {
            if (n == cap) {
                piece *nv = realloc(v, (cap *= 2) * sizeof(*v));
                if (!nv) {
                    free(v);
                    return *out = NULL, 0;
                }
                v = nv;
            }
            v[n++] = (piece){text + a, e - a};
        }
        if (!hit) break;
        a = e + sl;
    }
    *out = v;
    return v ? n : 0;
}

static void print_json(float *emb, size_t n, size_t E, bool array) {
    printf(array ? "[" : "{\n  \"object\": \"list\",\n  \"data\": [\n");
    for (size_t j = 0; j < n; j++) {
        if (!array) printf("    {\n      \"object\": \"embedding\",\n      \"index\": %zu,\n      \"embedding\": ", j);
        printf("[");
        for (size_t i = 0; i < E; i++) printf(i ? ",%1.7f" : "%1.7f", (double)emb[j * E + i]);
        printf(array ? "]" : "]\n    }");
        if (j + 1 < n) printf(array ? "," : ",\n");
    }
    printf(array ? "]\n" : "\n  ]\n}\n");
}

int pl_cmd_embed(int argc, char **argv) {
    const char *model = NULL, *file = NULL, *text = NULL, *sep = "\n", *instruct = NULL, *pool_name = NULL;
    const char *format = "json";
    bool normalize = true;
    uint32_t threads = 0;
    int device = DP_DEVICE_AUTO;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool ok = true, val = true;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) model = v;
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) file = v;
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) text = v;
        else if (!strcmp(a, "--separator")) sep = v;
        else if (!strcmp(a, "--instruct")) instruct = v;
        else if (!strcmp(a, "--pooling")) pool_name = v;
        else if (!strcmp(a, "--format")) format = v;
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) ok = pl_parse_u32(a, v, 1, 1024, &threads);
        else if (!strcmp(a, "--device")) ok = pl_parse_device(v, &device);
        else if (!strcmp(a, "--no-normalize")) normalize = false, val = false;
        else if (a[0] == '-' && a[1]) {
            pl_unknown_option("embed", a);
            return PL_EXIT_USAGE;
        } else if (!text) text = a, val = false;
        else {
            fprintf(stderr, "docpipe embed: more than one text given\n");
            return PL_EXIT_USAGE;
        }
        if (val && !v) {
            fprintf(stderr, "docpipe embed: %s needs a value\n", a);
            return PL_EXIT_USAGE;
        }
        if (!ok) return PL_EXIT_USAGE;
        if (val) i++;
    }
    if (!model || (!text && !file) || (text && file)) {
        fprintf(stderr, "usage: docpipe embed -m MODEL.gguf (TEXT | -p TEXT | -f FILE) [--pooling mean|cls|last] "
                        "[--separator S] [--instruct TEXT] [--no-normalize] [--format json|array] [-t N] "
                        "[--device cpu|cuda|auto]\n");
        return PL_EXIT_USAGE;
    }
    eng_pooling pooling = ENG_POOLING_NONE;
    if (pool_name && (!eng_pooling_parse(pool_name, &pooling) || pooling == ENG_POOLING_NONE)) {
        fprintf(stderr, "docpipe embed: --pooling is mean, cls or last (got '%s')\n", pool_name);
        return PL_EXIT_USAGE;
    }
    if (strcmp(format, "json") && strcmp(format, "array")) {
        fprintf(stderr, "docpipe embed: --format is json or array (got '%s')\n", format);
        return PL_EXIT_USAGE;
    }
    dp_err err = {0};
    char *data = NULL;
    size_t len = 0;
    if (file && dp_file_read_all(file, (size_t)1 << 30, &data, &len, &err)) {
        fprintf(stderr, "docpipe embed: %s\n", dp_err_msg(&err));
        return PL_EXIT_NOINPUT;
    }
    if (!file) len = strlen(text);
    else if (len && data[len - 1] == '\n') len--; /* as llama.cpp reads -f: one final newline dropped */
    piece *pieces = NULL;
    const size_t n = split(file ? data : text, len, sep, &pieces);
    eng_model *m = NULL;
    eng_context *c = NULL;
    eng_tokens *ids = NULL;
    float *emb = NULL;
    int rc = PL_EXIT_OK;
    if (!n) {
        fprintf(stderr, "docpipe embed: no text to embed\n");
        rc = PL_EXIT_NOINPUT;
        goto done;
    }
    if (eng_model_load(model, &m, &err)) {
        fprintf(stderr, "docpipe embed: %s\n", dp_err_msg(&err));
        rc = PL_EXIT_CONFIG;
        goto done;
    }
    if (!pool_name) {
        pooling = eng_model_pooling(m, ENG_POOLING_LAST);
        if (eng_model_get_info(m)->pooling_type < ENG_POOLING_MEAN)
            fprintf(stderr, "docpipe embed: %s names no pooling; using last (choose with --pooling)\n", model);
    }
    /* tokenize every piece first: the context is sized for the longest */
    const eng_tokenizer *tk = eng_model_get_tokenizer(m);
    ids = calloc(n, sizeof(*ids));
    const size_t E = eng_model_get_info(m)->n_embd;
    emb = malloc(n * E * sizeof(float));
    if (!ids || !emb) {
        rc = PL_EXIT_SOFTWARE;
        goto done;
    }
    size_t longest = 0, total = 0;
    dp_buf q;
    dp_buf_init(&q, (size_t)1 << 30);
    for (size_t i = 0; i < n && !rc; i++) {
        dp_buf_reset(&q);
        if (instruct) dp_buf_printf(&q, "Instruct: %s\nQuery: ", instruct);
        dp_buf_append(&q, pieces[i].p, pieces[i].n);
        if (eng_tokenize(tk, NULL, (const char *)q.data, q.len, true, true, &ids[i], &err)) {
            fprintf(stderr, "docpipe embed: text %zu: %s\n", i, dp_err_msg(&err));
            rc = PL_EXIT_DATAERR;
        }
        longest = ids[i].n > longest ? ids[i].n : longest;
        total += ids[i].n;
    }
    dp_buf_free(&q);
    if (rc) goto done;
    const uint32_t train = eng_model_get_info(m)->n_ctx_train;
    if (train && longest > train) {
        fprintf(stderr, "docpipe embed: a text has %zu tokens; the model was trained for %u (split it first)\n",
                longest, train);
        rc = PL_EXIT_DATAERR;
        goto done;
    }
    eng_context_params cp = eng_context_default_params();
    cp.n_ctx = (uint32_t)longest;
    cp.n_seq_max = n < GROUP ? (uint32_t)n : GROUP;
    cp.n_ubatch = total < 2048 ? (uint32_t)total : 2048;
    cp.n_threads = (int)threads;
    cp.device = (dp_device)device;
    cp.pooling = pooling;
    if (pl_context_open(m, &cp, 0, &c, &err)) {
        fprintf(stderr, "docpipe embed: %s\n", dp_err_msg(&err));
        rc = PL_EXIT_CONFIG;
        goto done;
    }
    const uint64_t t0 = dp_time_ns();
    int32_t *tok = malloc(total * 3 * sizeof(int32_t));
    if (!tok) {
        rc = PL_EXIT_SOFTWARE;
        goto done;
    }
    for (size_t g0 = 0; g0 < n && !rc; g0 += cp.n_seq_max) {
        const size_t g1 = g0 + cp.n_seq_max < n ? g0 + cp.n_seq_max : n;
        int32_t *pos = tok + total, *seq = pos + total, k = 0;
        for (size_t i = g0; i < g1; i++) {
            eng_seq_clear(c, (int32_t)(i - g0));
            for (size_t t = 0; t < ids[i].n; t++, k++)
                tok[k] = ids[i].ids[t], pos[k] = (int32_t)t, seq[k] = (int32_t)(i - g0);
        }
        const eng_batch b = {k, tok, pos, seq, NULL};
        if (eng_decode(c, &b, &err)) {
            fprintf(stderr, "docpipe embed: %s\n", dp_err_msg(&err));
            rc = PL_EXIT_SOFTWARE;
        }
        for (size_t i = g0; i < g1 && !rc; i++)
            if (eng_get_embedding(c, (int32_t)(i - g0), normalize, emb + i * E, &err)) {
                fprintf(stderr, "docpipe embed: text %zu: %s\n", i, dp_err_msg(&err));
                rc = PL_EXIT_SOFTWARE;
            }
    }
    free(tok);
    if (!rc) {
        const double s = (double)(dp_time_ns() - t0) / 1e9;
        print_json(emb, n, E, !strcmp(format, "array"));
        fprintf(stderr, "docpipe embed: %zu texts, %zu tokens in %.3f s (%.1f tokens/s), pooling %s, %s\n", n, total, s,
                s > 0 ? (double)total / s : 0.0, eng_pooling_name(pooling), eng_context_backend_name(c));
    }
done:
    if (ids)
        for (size_t i = 0; i < n; i++) eng_tokens_free(&ids[i]);
    free(ids);
    free(emb);
    free(pieces);
    free(data);
    eng_context_free(c);
    eng_model_free(m);
    return rc;
}
