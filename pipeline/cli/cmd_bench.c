/*
 * cmd_bench.c - `docpipe bench -m MODEL [-t N] [-p 512] [-n 64] [-d 0] [--seqs 1,4,16] [--pps] [-r 2]
 *               [--json]`.
 *
 * Measures what llama-bench / llama-batched-bench measure, on random tokens: prompt
 * processing (pp: one prompt of -p tokens in one decode call) and generation (tg: -n steps of
 * one token per sequence). With --seqs, generation runs with that many sequences at once,
 * each step one token per sequence, and the aggregate tokens/s is reported per batch size.
 * Generation starts from an empty context (as llama-bench's tg), or with --pps after the -p
 * prompt, decoded once (untimed) and shared by every sequence, as llama-batched-bench -pps
 * measures it: KV blocks shared by reference, a qwen35 recurrent state copied.
 * With -d N every test starts at depth N, as llama-bench -d defines it: N prompt tokens already in
 * the cache before the timed part (decoded once, untimed, in a sequence of its own that each test
 * copies: KV blocks by reference). The best of -r repetitions is kept.
 * With --json-schema FILE / --grammar-file FILE every generated token is drawn within the grammar
 * (greedy over the allowed tokens, a fresh matcher when one completes), so that generation with
 * and without the constraint can be set side by side; the time spent choosing tokens within the
 * grammar, and the grammar's compile time, are reported too.
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


/* A sequence's matcher back at the grammar's start. */
static dp_status restart_text(eng_grammar *g, eng_matcher **m, dp_err *err) {
    eng_matcher_free(*m);
    *m = NULL;
    return eng_matcher_new(g, false, m, err);
}

int pl_cmd_bench(int argc, char **argv) {
    const char *model = NULL, *seqs_arg = "1", *schema = NULL, *gfile = NULL;
    uint32_t threads = 0, n_p = 512, n_g = 64, reps = 2, depth = 0;
    int device = DP_DEVICE_AUTO;
    bool json = false, exact = false, pps = false;
    pl_kv_opts kv = PL_KV_OPTS_INIT;
    bool kv_bad = false;
    int kv_type = ENG_TYPE_F16;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool ok = true, takes = true;
        if (!strcmp(o, "-m") || !strcmp(o, "--model")) ok = (model = v) != NULL;
        else if (!strcmp(o, "-t") || !strcmp(o, "--threads")) ok = pl_parse_u32(o, v, 1, 1024, &threads);
        else if (!strcmp(o, "-p")) ok = pl_parse_u32(o, v, 0, 1u << 20, &n_p);
        else if (!strcmp(o, "-n")) ok = pl_parse_u32(o, v, 0, 1u << 20, &n_g);
        else if (!strcmp(o, "-r")) ok = pl_parse_u32(o, v, 1, 100, &reps);
        else if (!strcmp(o, "-d") || !strcmp(o, "--depth")) ok = pl_parse_u32(o, v, 0, 1u << 22, &depth);
        else if (!strcmp(o, "--seqs")) ok = (seqs_arg = v) != NULL;
        else if (!strcmp(o, "--json-schema")) ok = (schema = v) != NULL;
        else if (!strcmp(o, "--grammar-file")) ok = (gfile = v) != NULL;
        else if (!strcmp(o, "--device")) ok = pl_parse_device(v, &device);
        else if (pl_kv_option(&kv, o, v, &kv_bad)) ok = !kv_bad;
        else {
            takes = false;
            if (!strcmp(o, "--json")) json = true;
            else if (!strcmp(o, "--exact")) exact = true;
            else if (!strcmp(o, "--pps")) pps = true;
            else {
                pl_unknown_option("bench", o);
                goto usage;
            }
        }
        if (!ok) return PL_EXIT_USAGE;
        if (takes) i++;
    }
    if (!model) goto usage;
    if (!pl_kv_type(&kv, &kv_type)) return PL_EXIT_USAGE;
    uint32_t seqs[16];
    int n_seqs = 0;
    for (const char *s = seqs_arg; *s && n_seqs < 16;) {
        char *end;
        unsigned long v = strtoul(s, &end, 10);
        if (end == s || v == 0 || v > 4096) {
            fprintf(stderr, "docpipe bench: --seqs takes a list like 1,4,16\n");
            return PL_EXIT_USAGE;
        }
        seqs[n_seqs++] = (uint32_t)v;
        s = *end == ',' ? end + 1 : end;
    }
    uint32_t max_seq = 1;
    for (int i = 0; i < n_seqs; i++) max_seq = seqs[i] > max_seq ? seqs[i] : max_seq;
    dp_err err = {0};
    eng_model *m = NULL;
    eng_context *c = NULL;
    if (eng_model_load(model, &m, &err)) {
        fprintf(stderr, "docpipe bench: %s\n", dp_err_msg(&err));
        return PL_EXIT_CONFIG;
    }
    eng_context_params cp = eng_context_default_params();
    cp.n_ctx = depth + n_p + n_g + 16;
    cp.n_seq_max = max_seq + (depth ? 1 : 0); /* + the sequence that holds the depth */
    cp.n_threads = (int)threads;
    cp.n_ubatch = 512;
    cp.device = (dp_device)device;
    cp.exact = exact;
    cp.kv_type = kv_type;
    if (pl_context_open(m, &cp, 0, &c, &err)) {
        fprintf(stderr, "docpipe bench: %s\n", dp_err_msg(&err));
        eng_model_free(m);
        return PL_EXIT_CONFIG;
    }
    const int32_t V = (int32_t)eng_tokenizer_n_vocab(eng_model_get_tokenizer(m));
    /* the grammar: compiled twice, the first time with the vocabulary trie (once per model) */
    eng_grammar *gram = NULL;
    eng_matcher *gm[4096] = {0};
    eng_sampler *gs = NULL;
    double t_trie = 0, t_compile = 0, t_choose[16] = {0};
    if (schema || gfile) {
        dp_buf gb;
        dp_buf_init(&gb, (size_t)1 << 26);
        uint64_t t0 = dp_time_ns();
        dp_status st = pl_grammar_from_file(schema ? schema : gfile, schema != NULL, &gb, &err);
        const uint64_t t1 = dp_time_ns();
        if (!st) st = eng_grammar_compile(eng_model_get_tokenizer(m), (const char *)gb.data, gb.len, &gram, &err);
        const uint64_t t2 = dp_time_ns();
        eng_grammar_free(gram);
        gram = NULL;
        const uint64_t t3 = dp_time_ns();
        if (!st) st = eng_grammar_compile(eng_model_get_tokenizer(m), (const char *)gb.data, gb.len, &gram, &err);
        const uint64_t t4 = dp_time_ns();
        dp_buf_free(&gb);
        eng_sampler_params sp = eng_sampler_default_params();
        sp.temp = 0;
        if (!st) st = eng_sampler_new(&sp, V, &gs, &err);
        if (st) {
            fprintf(stderr, "docpipe bench: %s\n", dp_err_msg(&err));
            eng_context_free(c);
            eng_model_free(m);
            return PL_EXIT_DATAERR;
        }
        t_compile = (double)(t1 - t0 + t4 - t3) / 1e6;
        t_trie = (double)(t2 - t1) / 1e6 - (double)(t4 - t3) / 1e6;
    }
    /* random tokens: the depth's, then the prompt's */
    const size_t n_tok = (size_t)depth + (n_p > max_seq ? n_p : max_seq);
    int32_t *all = malloc(n_tok * sizeof(int32_t) + 16), *tok = all ? all + depth : NULL;
    if (!all) {
        dp_err_set(&err, DP_ENOMEM, "out of memory");
        goto fail;
    }
    uint64_t s = 1234567;
    for (size_t i = 0; i < n_tok; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        all[i] = (int32_t)((s >> 33) % (uint64_t)(V > 1000 ? V - 1000 : V));
    }
    const int32_t H = (int32_t)max_seq; /* the depth's sequence */
    if (depth && eng_decode_sequence(c, H, all, (int32_t)depth, 0, &err)) goto fail;
    double pp = 0, tg[16] = {0};
    int rc = PL_EXIT_OK;
    for (uint32_t r = 0; r < reps; r++) {
        if (n_p) {
            eng_seq_clear(c, 0);
            if (depth) eng_seq_copy(c, H, 0);
            uint64_t t0 = dp_time_ns();
            if (eng_decode_sequence(c, 0, tok, (int32_t)n_p, (int32_t)depth, &err)) goto fail;
            double v = n_p / ((double)(dp_time_ns() - t0) / 1e9);
            if (v > pp) pp = v;
        }
        for (int k = 0; k < n_seqs && n_g; k++) {
            const uint32_t B = seqs[k];
            int32_t *tk = malloc(B * 3 * sizeof(int32_t));
            int8_t *want = malloc(B);
            int32_t *ps = tk + B, *sq = ps + B;
            for (uint32_t q = 0; q < B; q++) eng_seq_clear(c, (int32_t)q);
            if (depth) eng_seq_copy(c, H, 0);
            const int32_t start = (int32_t)depth + (pps ? (int32_t)n_p : 0);
            if (pps && n_p && eng_decode_sequence(c, 0, tok, (int32_t)n_p, (int32_t)depth, &err)) {
                free(tk);
                free(want);
                goto fail;
            }
            for (uint32_t q = 0; q < B; q++) {
                if (start && q) eng_seq_copy(c, 0, (int32_t)q);
                tk[q] = tok[q % (n_p ? n_p : 1)];
                ps[q] = start;
                sq[q] = (int32_t)q;
                want[q] = 1;
            }
            for (uint32_t q = 0; gram && q < B; q++)
                if (restart_text(gram, &gm[q], &err)) {
                    free(tk);
                    free(want);
                    goto fail;
                }
            uint64_t t0 = dp_time_ns(), t_ch = 0;
            for (uint32_t step = 0; step < n_g; step++) {
                eng_batch b = {(int32_t)B, tk, ps, sq, want};
                if (eng_decode(c, &b, &err)) {
                    free(tk);
                    free(want);
                    goto fail;
                }
                const uint64_t tc = dp_time_ns();
                for (uint32_t q = 0; q < B; q++) {
                    const float *l = eng_get_logits(c, (int32_t)q);
                    if (!gram) {
                        tk[q] = eng_argmax(l, V);
                    } else {
                        int32_t t = eng_sampler_sample_masked(gs, l, gm[q]);
                        if (t < 0 || !eng_matcher_accept_token(gm[q], t) || eng_matcher_must_end(gm[q]) ||
                            eng_token_is_eog(eng_model_get_tokenizer(m), t)) {
                            /* complete (or stuck): a new text from the start, as the next request would */
                            if (restart_text(gram, &gm[q], &err)) {
                                free(tk);
                                free(want);
                                goto fail;
                            }
                            if (t < 0 || eng_token_is_eog(eng_model_get_tokenizer(m), t)) t = tok[q % (n_p ? n_p : 1)];
                        }
                        tk[q] = t;
                    }
                    ps[q]++;
                }
                t_ch += dp_time_ns() - tc;
            }
            const double el = (double)(dp_time_ns() - t0) / 1e9;
            double v = (double)B * n_g / el;
            if (v > tg[k]) tg[k] = v, t_choose[k] = (double)t_ch / 1e9 / el;
            free(tk);
            free(want);
        }
    }
    const eng_model_info *in = eng_model_get_info(m);
    /* decode's ceiling on the CPU: one step of one sequence reads every weight once, the KV
     * cache it attends over, and reads and writes the recurrent state, at the rate this
     * machine's threads read memory */
    int k1 = -1;
    for (int k = 0; k < n_seqs; k++)
        if (seqs[k] == 1) k1 = k;
    double read_bw = 0, roof = 0, step_bytes = 0;
    if (k1 >= 0 && n_g && !strncmp(eng_context_backend_name(c), "cpu", 3)) {
        read_bw = eng_read_bandwidth(cp.n_threads ? cp.n_threads : dp_cpu_count(), (size_t)512 << 20);
        eng_mem_estimate e;
        eng_model_mem_estimate_kv(in, 1, 1, 1, kv_type, &e);
        const double attended = (double)depth + (pps ? n_p : 0) + n_g / 2.0;
        step_bytes = (double)in->decode_bytes + (double)e.kv_per_token * attended + 2.0 * (double)e.rec_per_seq;
        if (read_bw > 0) roof = read_bw / step_bytes;
    }
    if (json) {
        printf("{\"model\": \"%s\", \"architecture\": \"%s\", \"backend\": \"%s\", \"threads\": %d, "
               "\"n_prompt\": %u, \"n_gen\": %u, \"n_depth\": %u, \"pp_tok_s\": %.3f, \"tg_tok_s\": %.3f, "
               "\"tg_by_seqs\": {",
               model, in->arch_name, eng_context_backend_name(c), cp.n_threads ? cp.n_threads : dp_cpu_count(), n_p,
               n_g, depth, pp, tg[0]);
        for (int k = 0; k < n_seqs; k++) printf("%s\"%u\": %.3f", k ? ", " : "", seqs[k], tg[k]);
        printf("}");
        if (roof > 0)
            printf(", \"read_gb_s\": %.3f, \"decode_bytes_per_token\": %.0f, \"decode_roofline_tok_s\": %.3f, "
                   "\"tg1_roofline_fraction\": %.4f", read_bw / 1e9, step_bytes, roof, tg[k1] / roof);
        if (gram) {
            uint64_t hits, misses;
            eng_grammar_cache_stats(gram, &hits, &misses);
            printf(", \"grammar\": {\"compile_ms\": %.3f, \"vocab_trie_ms\": %.3f, \"mask_cache_hits\": %llu, "
                   "\"mask_builds\": %llu, \"choose_share_by_seqs\": {", t_compile, t_trie, (unsigned long long)hits,
                   (unsigned long long)misses);
            for (int k = 0; k < n_seqs; k++) printf("%s\"%u\": %.5f", k ? ", " : "", seqs[k], t_choose[k]);
            printf("}}");
        }
        printf("}\n");
    } else {
        printf("model     %s (%s, %.2f GiB of weights)\nbackend   %s\n", model, in->arch_name,
               (double)in->weight_bytes / (1 << 30), eng_context_backend_name(c));
        char at[32] = "", label[64];
        if (depth) snprintf(at, sizeof(at), " @ d%u", depth);
        snprintf(label, sizeof(label), "pp%u%s", n_p, at);
        printf("%-16s %10.2f tok/s\n", label, pp);
        snprintf(label, sizeof(label), "tg%u%s", n_g, at);
        for (int k = 0; k < n_seqs; k++)
            printf("%-16s %10.2f tok/s aggregate with %u sequence%s\n", label, tg[k], seqs[k], seqs[k] > 1 ? "s" : "");
        if (roof > 0)
            printf("roofline  one sequence reads %.1f MB per token; at %.1f GB/s (%d threads reading) that is at most "
                   "%.2f tok/s: tg reaches %.1f %% of it\n", step_bytes / 1e6, read_bw / 1e9,
                   cp.n_threads ? cp.n_threads : dp_cpu_count(), roof, 100 * tg[k1] / roof);
        if (gram) {
            uint64_t hits, misses;
            eng_grammar_cache_stats(gram, &hits, &misses);
            printf("grammar   compiled in %.2f ms (the vocabulary trie, once per model: %.2f ms); %llu masks built, "
                   "%llu from the cache\n", t_compile, t_trie, (unsigned long long)misses, (unsigned long long)hits);
            for (int k = 0; k < n_seqs; k++)
                printf("          choosing tokens within it: %.2f %% of generation time with %u sequence%s\n",
                       100 * t_choose[k], seqs[k], seqs[k] > 1 ? "s" : "");
        }
    }
    goto done;
fail:
    fprintf(stderr, "docpipe bench: %s\n", dp_err_msg(&err));
    rc = PL_EXIT_CONFIG;
done:
    for (uint32_t q = 0; q < 4096 && gram; q++) eng_matcher_free(gm[q]);
    eng_grammar_free(gram);
    eng_sampler_free(gs);
    free(all);
    eng_context_free(c);
    eng_model_free(m);
    return rc;
usage:
    fprintf(stderr, "usage: docpipe bench -m MODEL.gguf [-t N] [-p 512] [-n 64] [-d 0] [--seqs 1,4,16] [--pps] [-r 2] "
                    "[--json]\n"
                    "                    [--exact] [--device cpu|cuda|auto] [--json-schema FILE | --grammar-file FILE]\n");
    return PL_EXIT_USAGE;
}
