/*
 * cmd_eval.c - `docpipe eval -m MODEL -f PROMPT_FILE [-n 16] [--top 10] [--exact] [-t N] [-c N]`.
 *
 * Prints one JSON object: {"tokens": prompt ids (add_special, special parsing on),
 * "top": the highest [id, logit] at the last prompt position, "greedy": n argmax ids (ties to
 * the lowest id, end-of-generation not special), "steps": the top-5 [id, logit] of the
 * distribution that chose each greedy id}. The shape of the fixtures' references, so engine
 * output can be compared with llama.cpp's directly. The KV cache is F32 here (as in the
 * references); --exact runs the scalar reference path (weights dequantized, f32 math).
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "help.h"
#include "engine.h"
#include "open_context.h"
#include "exit_codes.h"
#include "platform.h"

static json_t *top_k(const float *l, int32_t V, int k) {
    int32_t *idx = malloc((size_t)k * sizeof(int32_t));
    int n = 0;
    for (int32_t i = 0; i < V; i++) {
        /* insertion into a small sorted list: descending logit, lower id first on ties */
        if (n == k && !(l[i] > l[idx[k - 1]])) continue;
        int j = n < k ? n++ : k - 1;
        while (j > 0 && l[i] > l[idx[j - 1]]) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = i;
    }
    json_t *a = json_array();
    for (int j = 0; j < n; j++) {
        json_t *p = json_array();
        json_array_append_new(p, json_integer(idx[j]));
        json_array_append_new(p, json_real(l[idx[j]]));
        json_array_append_new(a, p);
    }
    free(idx);
    return a;
}

int pl_cmd_eval(int argc, char **argv) {
    const char *model = NULL, *file = NULL;
    uint32_t n_pred = 16, top = 10, threads = 0, n_ctx = 4096;
    bool exact = false;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(o, "-m") || !strcmp(o, "--model")) { if (!v) goto usage; model = v; i++; }
        else if (!strcmp(o, "-f") || !strcmp(o, "--file")) { if (!v) goto usage; file = v; i++; }
        else if (!strcmp(o, "-n")) { if (!pl_parse_u32(o, v, 0, 100000, &n_pred)) return PL_EXIT_USAGE; i++; }
        else if (!strcmp(o, "--top")) { if (!pl_parse_u32(o, v, 1, 1000, &top)) return PL_EXIT_USAGE; i++; }
        else if (!strcmp(o, "-t") || !strcmp(o, "--threads")) { if (!pl_parse_u32(o, v, 1, 1024, &threads)) return PL_EXIT_USAGE; i++; }
        else if (!strcmp(o, "-c") || !strcmp(o, "--ctx-size")) { if (!pl_parse_u32(o, v, 16, 1u << 24, &n_ctx)) return PL_EXIT_USAGE; i++; }
        else if (!strcmp(o, "--exact")) exact = true;
        else {
            pl_unknown_option("eval", o);
            goto usage;
        }
    }
    if (!model || !file) goto usage;
    dp_err err = {0};
    char *text = NULL;
    size_t len = 0;
    if (dp_file_read_all(file, (size_t)1 << 30, &text, &len, &err)) {
        fprintf(stderr, "docpipe eval: %s\n", dp_err_msg(&err));
        return PL_EXIT_NOINPUT;
    }
    eng_model *m = NULL;
    eng_context *c = NULL;
    eng_tokens ids = {0};
    int rc = PL_EXIT_OK;
    if (eng_model_load(model, &m, &err)) {
        fprintf(stderr, "docpipe eval: %s\n", dp_err_msg(&err));
        free(text);
        return PL_EXIT_CONFIG;
    }
    eng_context_params cp = eng_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_threads = (int)threads;
    cp.exact = exact;
    cp.kv_type = ENG_TYPE_F32;
    cp.device = DP_DEVICE_CPU;
    const int32_t V = (int32_t)eng_model_get_info(m)->n_vocab;
    if (pl_context_open(m, &cp, 0, &c, &err) ||
        eng_tokenize(eng_model_get_tokenizer(m), NULL, text, len, true, true, &ids, &err)) {
        fprintf(stderr, "docpipe eval: %s\n", dp_err_msg(&err));
        rc = PL_EXIT_CONFIG;
        goto done;
    }
    if (ids.n == 0 || ids.n + n_pred > n_ctx) {
        fprintf(stderr, "docpipe eval: the prompt has %zu tokens; it must be 1..%u minus -n\n", ids.n, n_ctx);
        rc = PL_EXIT_USAGE;
        goto done;
    }
    json_t *o = json_object(), *toks = json_array(), *greedy = json_array(), *steps = json_array();
    for (size_t i = 0; i < ids.n; i++) json_array_append_new(toks, json_integer(ids.ids[i]));
    if (eng_decode_sequence(c, 0, ids.ids, (int32_t)ids.n, 0, &err)) goto decode_fail;
    json_object_set_new(o, "tokens", toks);
    json_object_set_new(o, "top", top_k(eng_get_logits(c, 0), V, (int)top));
    for (uint32_t k = 0; k < n_pred; k++) {
        const float *l = eng_get_logits(c, 0);
        int32_t next = eng_argmax(l, V);
        json_array_append_new(greedy, json_integer(next));
        json_array_append_new(steps, top_k(l, V, 5));
        if (k + 1 < n_pred && eng_decode_sequence(c, 0, &next, 1, (int32_t)(ids.n + k), &err)) goto decode_fail;
    }
    json_object_set_new(o, "greedy", greedy);
    json_object_set_new(o, "steps", steps);
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9));
    if (s) puts(s);
    free(s);
    json_decref(o);
    goto done;
decode_fail:
    fprintf(stderr, "docpipe eval: %s\n", dp_err_msg(&err));
    json_decref(o);
    json_decref(greedy);
    json_decref(steps);
    rc = PL_EXIT_CONFIG;
done:
    eng_tokens_free(&ids);
    eng_context_free(c);
    eng_model_free(m);
    free(text);
    return rc;
usage:
    fprintf(stderr, "usage: docpipe eval -m MODEL.gguf -f PROMPT_FILE [-n 16] [--top 10] [--exact] [-t N] [-c N]\n");
    return PL_EXIT_USAGE;
}
