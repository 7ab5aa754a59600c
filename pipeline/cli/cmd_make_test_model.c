/*
 * cmd_make_test_model.c - `docpipe make-test-model --arch ARCH --out FILE [options]`.
 *
 * Writes a deterministic random-weight model with the real file layout (engine/test_model.c).
 * Such a model produces meaningless text; it exists so tests, examples and benchmarks need no
 * download. --shape gives the real sizes (qwen3-4b, qwen35-4b, qwen2.5-3b).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "help.h"
#include "engine.h"
#include "exit_codes.h"
#include "platform.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: docpipe make-test-model (--arch qwen2|qwen3|qwen35 | --shape qwen3-4b|qwen35-4b|qwen2.5-3b)\n"
            "                               --out FILE [--layers N] [--hidden N] [--heads N] [--kv-heads N]\n"
            "                               [--head-dim N] [--ffn N] [--vocab N] [--vocab-from MODEL.gguf]\n"
            "                               [--ssm-k-heads N] [--ssm-v-heads N] [--ssm-dim N]\n"
            "                               [--type TYPE] [--token-embedding-type TYPE] [--output-tensor-type TYPE]\n"
            "                               [--tensor-type NAME=TYPE ...] [--seed N] [-t N]\n"
            "TYPE: f32 f16 bf16 q4_0 q4_1 q5_0 q5_1 q8_0 q2_k q3_k q4_k q5_k q6_k (K-quants need widths that\n"
            "are multiples of 256, the others of 32). --output-tensor-type writes a separate output.weight\n"
            "(untied head); without it the head is tied to token_embd. --tensor-type gives every 2-D weight\n"
            "whose name contains NAME that type (first match wins; up to 8).\n");
}

int pl_cmd_make_test_model(int argc, char **argv) {
    eng_test_model_params p;
    const char *arch = NULL, *shape = NULL, *out = NULL;
    /* first pass: the arch or shape sets the defaults the other options override */
    for (int i = 1; i + 1 < argc; i++) {
        if (!strcmp(argv[i], "--arch")) arch = argv[i + 1];
        else if (!strcmp(argv[i], "--shape")) shape = argv[i + 1];
    }
    if (shape) {
        if (eng_test_model_shape(&p, shape)) {
            fprintf(stderr, "docpipe make-test-model: unknown --shape '%s' (qwen3-4b, qwen35-4b, qwen2.5-3b)\n", shape);
            return PL_EXIT_USAGE;
        }
        if (arch && strcmp(arch, eng_arch_name(p.arch))) {
            fprintf(stderr, "docpipe make-test-model: --arch %s contradicts --shape %s\n", arch, shape);
            return PL_EXIT_USAGE;
        }
    } else if (arch) {
        eng_arch a = !strcmp(arch, "qwen2") ? ENG_ARCH_QWEN2 : !strcmp(arch, "qwen3") ? ENG_ARCH_QWEN3
                   : !strcmp(arch, "qwen35") ? ENG_ARCH_QWEN35 : ENG_ARCH_UNKNOWN;
        if (a == ENG_ARCH_UNKNOWN) {
            fprintf(stderr, "docpipe make-test-model: unknown --arch '%s' (qwen2, qwen3, qwen35)\n", arch);
            return PL_EXIT_USAGE;
        }
        eng_test_model_defaults(&p, a);
    } else {
        usage(stderr);
        return PL_EXIT_USAGE;
    }
    uint32_t threads = (uint32_t)dp_cpu_count(), seed = 42;
    p.seed = seed;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint32_t *dst = NULL;
        uint32_t lo = 1, hi = 1u << 24;
        if (!strcmp(o, "--arch") || !strcmp(o, "--shape")) { i++; continue; }
        else if (!strcmp(o, "--out") || !strcmp(o, "-o")) { if (!v) goto missing; out = v; i++; continue; }
        else if (!strcmp(o, "--vocab-from")) { if (!v) goto missing; p.vocab_from = v; i++; continue; }
        else if (!strcmp(o, "--type") || !strcmp(o, "--token-embedding-type") || !strcmp(o, "--output-tensor-type") ||
                 !strcmp(o, "--tensor-type")) {
            if (!v) goto missing;
            const char *tn = v;
            const char *eq = !strcmp(o, "--tensor-type") ? strchr(v, '=') : NULL;
            if (!strcmp(o, "--tensor-type")) {
                if (!eq || eq == v) {
                    fprintf(stderr, "docpipe make-test-model: --tensor-type wants NAME=TYPE, got '%s'\n", v);
                    return PL_EXIT_USAGE;
                }
                if (p.n_overrides == 8) {
                    fprintf(stderr, "docpipe make-test-model: at most 8 --tensor-type options\n");
                    return PL_EXIT_USAGE;
                }
                tn = eq + 1;
            }
            int t = eng_type_from_name(tn);
            if (t < 0 || !eng_type_is_supported(t)) {
                fprintf(stderr, "docpipe make-test-model: %s: unknown type '%s' (f32 f16 bf16 q4_0 q4_1 q5_0 q5_1 q8_0 "
                        "q2_k q3_k q4_k q5_k q6_k)\n", o, tn);
                return PL_EXIT_USAGE;
            }
            if (!strcmp(o, "--type")) p.weight_type = t;
            else if (!strcmp(o, "--token-embedding-type")) p.embd_type = t;
            else if (!strcmp(o, "--output-tensor-type")) p.output_type = t;
            else {
                /* argv outlives p: the pattern is the text before '=' in place */
                argv[i + 1][eq - v] = '\0';
                p.override_pattern[p.n_overrides] = v;
                p.override_type[p.n_overrides++] = t;
            }
            i++;
            continue;
        }
        else if (!strcmp(o, "--layers")) dst = &p.n_layer, hi = ENG_MAX_LAYERS;
        else if (!strcmp(o, "--hidden")) dst = &p.n_embd;
        else if (!strcmp(o, "--heads")) dst = &p.n_head, hi = 4096;
        else if (!strcmp(o, "--kv-heads")) dst = &p.n_head_kv, hi = 4096;
        else if (!strcmp(o, "--head-dim")) dst = &p.head_dim, hi = 4096;
        else if (!strcmp(o, "--ffn")) dst = &p.n_ff;
        else if (!strcmp(o, "--vocab")) dst = &p.n_vocab;
        else if (!strcmp(o, "--ssm-k-heads")) dst = &p.ssm_n_group, hi = 4096;
        else if (!strcmp(o, "--ssm-v-heads")) dst = &p.ssm_dt_rank, hi = 4096;
        else if (!strcmp(o, "--ssm-dim")) dst = &p.ssm_d_state, hi = 4096;
        else if (!strcmp(o, "--seed")) dst = &seed, lo = 0, hi = UINT32_MAX;
        else if (!strcmp(o, "-t") || !strcmp(o, "--threads")) dst = &threads, hi = 256;
        else {
            pl_unknown_option("make-test-model", o);
            usage(stderr);
            return PL_EXIT_USAGE;
        }
        if (!pl_parse_u32(o, v, lo, hi, dst)) return PL_EXIT_USAGE;
        i++;
    }
    p.seed = seed;
    if (!out) {
        fprintf(stderr, "docpipe make-test-model: --out FILE is required\n");
        return PL_EXIT_USAGE;
    }
    dp_err err = {0};
    uint64_t t0 = dp_time_ns();
    dp_status st = eng_test_model_write(&p, out, (int)threads, &err);
    if (st) {
        fprintf(stderr, "docpipe %s\n", dp_err_msg(&err));
        if (st == DP_EINVAL) return PL_EXIT_USAGE;
        if (p.vocab_from && (st == DP_EFORMAT || st == DP_ENOENT || st == DP_EUNSUPPORTED)) return PL_EXIT_CONFIG;
        return st == DP_ENOSPC || st == DP_EIO ? PL_EXIT_IOERR : PL_EXIT_CANTCREAT;
    }
    fprintf(stderr, "make-test-model: wrote %s (%s, random weights) in %.1f s\n", out, eng_arch_name(p.arch),
            (double)(dp_time_ns() - t0) / 1e9);
    return PL_EXIT_OK;
missing:
    fprintf(stderr, "docpipe make-test-model: %s needs a value\n", argv[argc - 1]);
    return PL_EXIT_USAGE;
}
