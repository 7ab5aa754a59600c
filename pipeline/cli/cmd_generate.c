/*
 * cmd_generate.c - `docpipe generate`: one prompt, streamed like llama-cli.
 *
 *   docpipe generate -m MODEL (-p PROMPT | -f FILE) [-n N] [--temp T] [--top-k K] [--top-p P]
 *                    [--min-p P] [--repeat-penalty R] [--presence-penalty P]
 *                    [--frequency-penalty F] [-s SEED] [--chat] [--system S] [--think]
 *                    [-c N] [-t N] [--device cpu|auto|cuda] [--exact] [--stop STR ...]
 *                    [--json-schema FILE | --grammar-file FILE]
 *
 * With --chat the prompt is the user message of a ChatML conversation rendered for the
 * model's template family, thinking off unless --think (model-formats.md §6). Generation stops at
 * an end-of-generation token, at a stop string (OpenAI's rule: the text ends before it, the
 * string is not printed) or after -n tokens. Text streams to stdout as complete UTF-8, the last
 * few bytes held back while they could still begin a stop string; a timing line goes to stderr.
 * With a schema or grammar every token is drawn from those the grammar allows and generation
 * ends when the grammar is complete; with --think the grammar starts after "</think>".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "help.h"
#include "json_schema.h"
#include "engine.h"
#include "open_context.h"
#include "exit_codes.h"
#include "platform.h"

static bool parse_f(const char *opt, const char *v, float *out) {
    char *end;
    if (!v) {
        fprintf(stderr, "docpipe: %s needs a value\n", opt);
        return false;
    }
    *out = strtof(v, &end);
    if (end == v || *end) {
        fprintf(stderr, "docpipe: %s: '%s' is not a number\n", opt, v);
        return false;
    }
    return true;
}

#define MAX_STOP 16

/* Where the earliest stop string occurs in t[0..n), looking only where one could have been
 * completed by the bytes from `from` on; n when none. */
static size_t find_stop(const char *t, size_t n, size_t from, const char *const *stop, size_t n_stop) {
    size_t at = n;
    for (size_t q = 0; q < n_stop; q++) {
        const size_t sl = strlen(stop[q]);
        for (size_t i = from >= sl ? from - sl + 1 : 0; i + sl <= n && i < at; i++)
            if (!memcmp(t + i, stop[q], sl)) at = i;
    }
    return at;
}

int pl_cmd_generate(int argc, char **argv) {
    const char *model = NULL, *prompt = NULL, *file = NULL, *system = NULL, *schema = NULL, *gfile = NULL;
    const char *stop[MAX_STOP];
    size_t n_stop = 0, hold = 0;
    uint32_t n_pred = 128, n_ctx = 4096, threads = 0, seed = 0xFFFFFFFFu;
    int device = DP_DEVICE_AUTO;
    bool chat = false, think = false, exact = false;
    eng_sampler_params sp = eng_sampler_default_params();
    pl_kv_opts kv = PL_KV_OPTS_INIT;
    bool kv_bad = false;
    int kv_type = ENG_TYPE_F16;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool ok = true, takes = true;
        if (!strcmp(o, "-m") || !strcmp(o, "--model")) ok = (model = v) != NULL;
        else if (!strcmp(o, "-p") || !strcmp(o, "--prompt")) ok = (prompt = v) != NULL;
        else if (!strcmp(o, "-f") || !strcmp(o, "--file")) ok = (file = v) != NULL;
        else if (!strcmp(o, "--system")) ok = (system = v) != NULL;
        else if (!strcmp(o, "--json-schema")) ok = (schema = v) != NULL;
        else if (!strcmp(o, "--grammar-file")) ok = (gfile = v) != NULL;
        else if (!strcmp(o, "-n") || !strcmp(o, "--n-predict")) ok = pl_parse_u32(o, v, 0, 1u << 24, &n_pred);
        else if (!strcmp(o, "-c") || !strcmp(o, "--ctx-size")) ok = pl_parse_u32(o, v, 16, 1u << 24, &n_ctx);
        else if (!strcmp(o, "-t") || !strcmp(o, "--threads")) ok = pl_parse_u32(o, v, 1, 1024, &threads);
        else if (!strcmp(o, "-s") || !strcmp(o, "--seed")) ok = pl_parse_u32(o, v, 0, UINT32_MAX, &seed);
        else if (!strcmp(o, "--temp")) ok = parse_f(o, v, &sp.temp);
        else if (!strcmp(o, "--top-k")) {
            uint32_t k;
            ok = pl_parse_u32(o, v, 0, 1u << 24, &k);
            sp.top_k = (int32_t)k;
        } else if (!strcmp(o, "--top-p")) ok = parse_f(o, v, &sp.top_p);
        else if (!strcmp(o, "--min-p")) ok = parse_f(o, v, &sp.min_p);
        else if (!strcmp(o, "--repeat-penalty")) ok = parse_f(o, v, &sp.repeat_penalty);
        else if (!strcmp(o, "--presence-penalty")) ok = parse_f(o, v, &sp.presence_penalty);
        else if (!strcmp(o, "--frequency-penalty")) ok = parse_f(o, v, &sp.frequency_penalty);
        else if (!strcmp(o, "--device")) ok = pl_parse_device(v, &device);
        else if (pl_kv_option(&kv, o, v, &kv_bad)) ok = !kv_bad;
        else if (!strcmp(o, "--stop")) {
            if ((ok = v && *v && n_stop < MAX_STOP)) {
                stop[n_stop++] = v;
                if (strlen(v) > hold) hold = strlen(v);
            } else {
                fprintf(stderr, "docpipe generate: --stop takes a non-empty string, at most %d of them\n", MAX_STOP);
            }
        } else {
            takes = false;
            if (!strcmp(o, "--chat")) chat = true;
            else if (!strcmp(o, "--think")) think = true;
            else if (!strcmp(o, "--exact")) exact = true;
            else {
                pl_unknown_option("generate", o);
                goto usage;
            }
        }
        if (!ok) return PL_EXIT_USAGE;
        if (takes) i++;
    }
    if (!model || (!prompt && !file) || (prompt && file)) goto usage;
    if (!pl_kv_type(&kv, &kv_type)) return PL_EXIT_USAGE;
    if (schema && gfile) {
        fprintf(stderr, "docpipe generate: --json-schema and --grammar-file exclude each other\n");
        return PL_EXIT_USAGE;
    }
    dp_err err = {0};
    dp_buf gbnf;
    dp_buf_init(&gbnf, (size_t)1 << 26);
    if ((schema || gfile) && pl_grammar_from_file(schema ? schema : gfile, schema != NULL, &gbnf, &err)) {
        fprintf(stderr, "docpipe generate: %s\n", dp_err_msg(&err));
        dp_buf_free(&gbnf);
        return err.code == DP_ENOENT || err.code == DP_EIO ? PL_EXIT_NOINPUT : PL_EXIT_DATAERR;
    }
    char *text = NULL;
    size_t len = 0;
    if (file) {
        if (dp_file_read_all(file, (size_t)1 << 30, &text, &len, &err)) {
            fprintf(stderr, "docpipe generate: %s\n", dp_err_msg(&err));
            dp_buf_free(&gbnf);
            return PL_EXIT_NOINPUT;
        }
        prompt = text;
    }
    uint64_t t_load = dp_time_ns();
    eng_model *m = NULL;
    eng_context *c = NULL;
    eng_sampler *smp = NULL;
    eng_grammar *gram = NULL;
    eng_matcher *gm = NULL;
    eng_tokens ids = {0};
    dp_buf rendered;
    dp_buf_init(&rendered, (size_t)1 << 30);
    int rc = PL_EXIT_OK;
    if (eng_model_load(model, &m, &err)) {
        fprintf(stderr, "docpipe generate: %s\n", dp_err_msg(&err));
        free(text);
        dp_buf_free(&gbnf);
        return PL_EXIT_CONFIG;
    }
    const eng_tokenizer *tok = eng_model_get_tokenizer(m);
    if (gbnf.len && (eng_grammar_compile(tok, (const char *)gbnf.data, gbnf.len, &gram, &err) ||
                     eng_matcher_new_after(gram, think ? "</think>" : NULL, &gm, &err))) {
        fprintf(stderr, "docpipe generate: %s\n", dp_err_msg(&err));
        rc = PL_EXIT_DATAERR;
        goto done;
    }
    eng_context_params cp = eng_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_threads = (int)threads;
    cp.device = (dp_device)device;
    cp.exact = exact;
    cp.kv_type = kv_type;
    if (seed == 0xFFFFFFFFu) seed = (uint32_t)dp_time_ns();
    sp.seed = seed;
    if (pl_context_open(m, &cp, 0, &c, &err) ||
        eng_sampler_new(&sp, (int32_t)eng_model_get_info(m)->n_vocab, &smp, &err)) {
        fprintf(stderr, "docpipe generate: %s\n", dp_err_msg(&err));
        rc = PL_EXIT_CONFIG;
        goto done;
    }
    if (chat) {
        eng_chat_msg msgs[2];
        size_t n = 0;
        if (system) msgs[n++] = (eng_chat_msg){"system", system};
        msgs[n++] = (eng_chat_msg){"user", prompt};
        if (eng_chat_render(eng_model_chat_kind(m), msgs, n, true, think, &rendered, &err)) {
            fprintf(stderr, "docpipe generate: %s\n", dp_err_msg(&err));
            rc = PL_EXIT_CONFIG;
            goto done;
        }
        prompt = (const char *)rendered.data;
        len = rendered.len;
    } else if (!file) {
        len = strlen(prompt);
    }
    if (eng_tokenize(tok, NULL, prompt, len, true, true, &ids, &err)) {
        fprintf(stderr, "docpipe generate: %s\n", dp_err_msg(&err));
        rc = PL_EXIT_DATAERR;
        goto done;
    }
    if (ids.n == 0 || ids.n >= n_ctx) {
        fprintf(stderr, "docpipe generate: the prompt has %zu tokens; the context holds %u\n", ids.n, n_ctx);
        rc = PL_EXIT_USAGE;
        goto done;
    }
    for (size_t i = 0; i < ids.n; i++) eng_sampler_accept(smp, ids.ids[i]);
    const double load_s = (double)(dp_time_ns() - t_load) / 1e9;
    uint64_t t0 = dp_time_ns();
    if (eng_decode_sequence(c, 0, ids.ids, (int32_t)ids.n, 0, &err)) goto decode_fail;
    const double pp_s = (double)(dp_time_ns() - t0) / 1e9;
    uint64_t t1 = dp_time_ns();
    eng_detok d = {0};
    uint8_t buf[1024];
    uint32_t n_gen = 0;
    dp_buf out; /* the text so far: a stop string can span tokens */
    dp_buf_init(&out, (size_t)1 << 30);
    size_t printed = 0, stop_at = SIZE_MAX;
    for (; n_gen < n_pred && ids.n + n_gen < n_ctx; n_gen++) {
        /* (with --think the matcher lets the reasoning run free until </think>) */
        int32_t next = gm ? eng_sampler_sample_masked(smp, eng_get_logits(c, 0), gm)
                          : eng_sampler_sample(smp, eng_get_logits(c, 0));
        if (gm && (next < 0 || !eng_matcher_accept_token(gm, next))) {
            fprintf(stderr, "docpipe generate: %s\n", eng_matcher_failure(gm));
            rc = PL_EXIT_DATAERR;
            break;
        }
        if (eng_token_is_eog(tok, next)) break;
        eng_sampler_accept(smp, next);
        size_t k = eng_detok_push(tok, &d, next, false, buf, sizeof(buf));
        const size_t before = out.len;
        dp_buf_append(&out, buf, k);
        const size_t at = n_stop ? find_stop((const char *)out.data, out.len, before, stop, n_stop) : out.len;
        if (at < out.len) {
            stop_at = at;
            n_gen++;
            break;
        }
        if (gm && eng_matcher_must_end(gm)) { /* complete, and nothing may follow */
            n_gen++;
            break;
        }
        /* print what can no longer be the start of a stop string */
        const size_t safe = out.len > hold ? out.len - (hold ? hold - 1 : 0) : 0;
        if (safe > printed) {
            fwrite(out.data + printed, 1, safe - printed, stdout);
            fflush(stdout);
            printed = safe;
        }
        if (eng_decode_sequence(c, 0, &next, 1, (int32_t)(ids.n + n_gen), &err)) {
            dp_buf_free(&out);
            goto decode_fail;
        }
    }
    if (stop_at == SIZE_MAX) {
        size_t k = eng_detok_flush(&d, buf);
        dp_buf_append(&out, buf, k);
        const size_t at = n_stop ? find_stop((const char *)out.data, out.len, printed, stop, n_stop) : out.len;
        stop_at = at;
    }
    if (stop_at > printed) fwrite(out.data + printed, 1, stop_at - printed, stdout);
    dp_buf_free(&out);
    putchar('\n');
    const double tg_s = (double)(dp_time_ns() - t1) / 1e9;
    fprintf(stderr, "generate: %s | load %.2f s | prompt %zu tokens, %.2f tok/s | generated %u tokens, %.2f tok/s | seed %u\n",
            eng_context_backend_name(c), load_s, ids.n, (double)ids.n / pp_s, n_gen, n_gen ? n_gen / tg_s : 0.0, seed);
    goto done;
decode_fail:
    fprintf(stderr, "docpipe generate: %s\n", dp_err_msg(&err));
    rc = PL_EXIT_CONFIG;
done:
    dp_buf_free(&rendered);
    dp_buf_free(&gbnf);
    eng_matcher_free(gm);
    eng_grammar_free(gram);
    eng_tokens_free(&ids);
    eng_sampler_free(smp);
    eng_context_free(c);
    eng_model_free(m);
    free(text);
    return rc;
usage:
    fprintf(stderr, "usage: docpipe generate -m MODEL.gguf (-p PROMPT | -f FILE) [-n N] [--temp T] [--top-k K] [--top-p P]\n"
                    "       [--min-p P] [--repeat-penalty R] [-s SEED] [--chat] [--system S] [--think] [-c N] [-t N]\n"
                    "       [--stop STR ...] [--json-schema FILE | --grammar-file FILE]\n");
    return PL_EXIT_USAGE;
}
