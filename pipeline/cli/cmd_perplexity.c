/*
 * cmd_perplexity.c - `docpipe perplexity -m MODEL -f TEXT [-c 512] [-b N] [--chunks N] [-t N]
 * [--exact] [--json]`: the check to run after quantizing a model, with llama-perplexity's
 * definition so that the two tools' figures can be compared.
 *
 * The text is tokenized whole (BOS first when the model adds one, special-token text read as
 * plain text) and cut into floor(n / c) chunks of c tokens; a chunk's first token becomes BOS
 * when the model adds one. Each chunk is evaluated from an empty cache, and only its second half
 * is scored: for positions j in [c/2, c - 1), the negative log-likelihood of token j + 1 under the
 * logits after token j (a log-softmax in double over float exponentials). After every chunk the
 * running perplexity exp(mean NLL) is printed as "[i]value,"; at the end the estimate with its
 * error: PPL * the standard error of the per-token NLL, sqrt((E[nll^2] - E[nll]^2) / (N - 1)).
 * -b is the tokens per engine call (speed only: the engine's results do not depend on it).
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "help.h"
#include "engine.h"
#include "open_context.h"
#include "exit_codes.h"
#include "platform.h"

/* -log softmax(l)[tok] as llama-perplexity computes it */
static double nll_of(const float *l, int32_t V, int32_t tok) {
    float mx = l[0];
    for (int32_t i = 1; i < V; i++) mx = l[i] > mx ? l[i] : mx;
    double sum = 0.0;
    for (int32_t i = 0; i < V; i++) sum += expf(l[i] - mx);
    return -((double)(l[tok] - mx) - log(sum));
}

static void usage(FILE *f) {
    fprintf(f, "usage: docpipe perplexity -m MODEL.gguf -f TEXT [-c 512] [-b N] [--chunks N] [-t N] [--exact] [--json]\n"
               "  -c N        tokens per chunk (default 512); the second half of each chunk is scored\n"
               "  -b N        tokens per engine call (default: the chunk)\n"
               "  --chunks N  score only the first N chunks\n"
               "  --exact     the reference path (weights dequantized, f32 math)\n"
               "  --json      one JSON object instead of llama-perplexity's lines\n");
}

int pl_cmd_perplexity(int argc, char **argv) {
    const char *model = NULL, *file = NULL;
    uint32_t n_ctx = 512, n_batch = 0, threads = 0, max_chunks = 0;
    bool exact = false, as_json = false;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool ok = true, takes = true;
        if (!strcmp(o, "-m") || !strcmp(o, "--model")) ok = (model = v) != NULL;
        else if (!strcmp(o, "-f") || !strcmp(o, "--file")) ok = (file = v) != NULL;
        else if (!strcmp(o, "-c") || !strcmp(o, "--ctx-size")) ok = pl_parse_u32(o, v, 8, 1u << 20, &n_ctx);
        else if (!strcmp(o, "-b") || !strcmp(o, "--batch-size")) ok = pl_parse_u32(o, v, 1, 1u << 20, &n_batch);
        else if (!strcmp(o, "--chunks")) ok = pl_parse_u32(o, v, 1, 1u << 30, &max_chunks);
        else if (!strcmp(o, "-t") || !strcmp(o, "--threads")) ok = pl_parse_u32(o, v, 1, 1024, &threads);
        else if (!strcmp(o, "--exact")) exact = true, takes = false;
        else if (!strcmp(o, "--json")) as_json = true, takes = false;
        else if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            usage(stdout);
            return PL_EXIT_OK;
        } else {
            pl_unknown_option("perplexity", o);
            usage(stderr);
            return PL_EXIT_USAGE;
        }
        if (!ok) {
            if (!v) fprintf(stderr, "docpipe perplexity: %s needs a value\n", o);
            return PL_EXIT_USAGE;
        }
        if (takes) i++;
    }
    if (!model || !file) {
        usage(stderr);
        return PL_EXIT_USAGE;
    }
    if (!n_batch || n_batch > n_ctx) n_batch = n_ctx;
    dp_err err = {0};
    char *text = NULL;
    size_t len = 0;
    if (dp_file_read_all(file, (size_t)1 << 31, &text, &len, &err)) {
        fprintf(stderr, "docpipe perplexity: %s\n", dp_err_msg(&err));
        return PL_EXIT_NOINPUT;
    }
    eng_model *m = NULL;
    eng_context *c = NULL;
    eng_tokens ids = {0};
    int8_t *want = NULL;
    int32_t *pos = NULL, *seq = NULL, *tok = NULL;
    json_t *running = json_array();
    int rc = PL_EXIT_OK;
    if (eng_model_load(model, &m, &err)) {
        fprintf(stderr, "docpipe perplexity: %s\n", dp_err_msg(&err));
        rc = PL_EXIT_CONFIG;
        goto done;
    }
    const eng_tokenizer *tk = eng_model_get_tokenizer(m);
    const int32_t V = (int32_t)eng_model_get_info(m)->n_vocab;
    const uint64_t t0 = dp_time_ns();
    if (eng_tokenize(tk, NULL, text, len, true, false, &ids, &err)) {
        fprintf(stderr, "docpipe perplexity: %s\n", dp_err_msg(&err));
        rc = PL_EXIT_DATAERR;
        goto done;
    }
    if (ids.n < 2 * (size_t)n_ctx) {
        fprintf(stderr, "docpipe perplexity: %s has %zu tokens; a context of %u needs at least %u\n", file, ids.n, n_ctx,
                2 * n_ctx);
        rc = PL_EXIT_DATAERR;
        goto done;
    }
    size_t n_chunk = ids.n / n_ctx;
    if (max_chunks && max_chunks < n_chunk) n_chunk = max_chunks;
    eng_context_params cp = eng_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_ubatch = n_batch;
    cp.n_threads = (int)threads;
    cp.exact = exact;
    if (exact) cp.kv_type = ENG_TYPE_F32;
    cp.device = exact ? DP_DEVICE_CPU : DP_DEVICE_AUTO;
    if (pl_context_open(m, &cp, 0, &c, &err)) {
        fprintf(stderr, "docpipe perplexity: %s\n", dp_err_msg(&err));
        rc = PL_EXIT_CONFIG;
        goto done;
    }
    want = malloc(n_batch);
    pos = malloc(n_batch * sizeof(int32_t));
    seq = calloc(n_batch, sizeof(int32_t));
    tok = malloc(n_ctx * sizeof(int32_t));
    if (!want || !pos || !seq || !tok) {
        fprintf(stderr, "docpipe perplexity: out of memory\n");
        rc = PL_EXIT_SOFTWARE;
        goto done;
    }
    if (!as_json)
        fprintf(stderr, "perplexity: %zu tokens, %zu chunks of %u, %s\n", ids.n, n_chunk, n_ctx,
                eng_context_backend_name(c));
    const int32_t first = (int32_t)n_ctx / 2;
    double nll = 0, nll2 = 0;
    long count = 0;
    for (size_t ch = 0; ch < n_chunk; ch++) {
        memcpy(tok, ids.ids + ch * n_ctx, n_ctx * sizeof(int32_t));
        if (eng_token_add_bos(tk)) tok[0] = eng_token_bos(tk);
        eng_seq_clear(c, 0);
        /* the engine hands out at most 64 logits rows per call: the scored half goes in runs */
        for (int32_t p0 = 0; p0 < (int32_t)n_ctx;) {
            int32_t n = (int32_t)n_ctx - p0 < (int32_t)n_batch ? (int32_t)n_ctx - p0 : (int32_t)n_batch;
            if (p0 + n > first && n > 64) n = p0 >= first ? 64 : first - p0;
            int n_want = 0;
            for (int32_t i = 0; i < n; i++) {
                pos[i] = p0 + i;
                want[i] = p0 + i >= first && p0 + i < (int32_t)n_ctx - 1;
                n_want += want[i];
            }
            if (!n_want) want[n - 1] = 1; /* (the engine always hands out one row) */
            eng_batch b = {n, tok + p0, pos, seq, want};
            if (eng_decode(c, &b, &err)) {
                fprintf(stderr, "docpipe perplexity: chunk %zu: %s\n", ch + 1, dp_err_msg(&err));
                rc = err.code == DP_ENUMERIC ? PL_EXIT_SOFTWARE : PL_EXIT_CONFIG;
                goto done;
            }
            for (int32_t i = 0, j = 0; i < n; i++) {
                if (!want[i]) continue;
                const float *l = eng_get_logits(c, j++);
                if (p0 + i < first || p0 + i >= (int32_t)n_ctx - 1) continue;
                const double v = nll_of(l, V, tok[p0 + i + 1]);
                nll += v;
                nll2 += v * v;
                count++;
            }
            p0 += n;
        }
        const double run_ppl = exp(nll / (double)count);
        json_array_append_new(running, json_real(run_ppl));
        if (!as_json) {
            printf("[%zu]%.4f,", ch + 1, run_ppl);
            fflush(stdout);
        }
    }
    const double mean = nll / (double)count, ppl = exp(mean);
    double var = nll2 / (double)count - mean * mean, e = 0;
    if (var > 0) e = sqrt(var / (double)(count - 1)) * ppl;
    const double secs = (double)(dp_time_ns() - t0) / 1e9;
    if (as_json) {
        json_t *o = json_object();
        json_object_set_new(o, "model", json_string(model));
        json_object_set_new(o, "text", json_string(file));
        json_object_set_new(o, "tokens", json_integer((json_int_t)ids.n));
        json_object_set_new(o, "ctx", json_integer(n_ctx));
        json_object_set_new(o, "chunks", json_integer((json_int_t)n_chunk));
        json_object_set_new(o, "scored_tokens", json_integer(count));
        json_object_set_new(o, "exact", json_boolean(exact));
        json_object_set_new(o, "ppl", json_real(ppl));
        json_object_set_new(o, "ppl_error", json_real(e));
        json_object_set_new(o, "running_ppl", running);
        running = NULL;
        json_object_set_new(o, "seconds", json_real(secs));
        char *s = json_dumps(o, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(8));
        if (s) puts(s);
        free(s);
        json_decref(o);
    } else {
        printf("\nFinal estimate: PPL = %.4f +/- %.5f\n", ppl, e);
        fprintf(stderr, "perplexity: %ld tokens scored in %.1f s (%.1f tokens/s evaluated)\n", count, secs,
                (double)(n_chunk * n_ctx) / secs);
    }
done:
    json_decref(running);
    free(want);
    free(pos);
    free(seq);
    free(tok);
    eng_tokens_free(&ids);
    eng_context_free(c);
    eng_model_free(m);
    free(text);
    return rc;
}
