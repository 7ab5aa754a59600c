/*
 * test_cli.c - the docpipe binary end to end: inspect (text and JSON) on every fixture model,
 * exit codes for broken files and bad usage, make-test-model -> quantize -> inspect, and bench's
 * JSON with and without a shared prompt ahead of generation (--pps).
 */
#include "testutil.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_writer.h"
#include "platform.h"
#include "quant.h"

static void test_inspect_json_on_every_fixture_model(void **state) {
    (void)state;
    TU_NEED_FIXTURES();
    const char *models[] = {"qwen2-tiny-f16", "qwen3-tiny-f16", "qwen35-tiny-f16", "qwen35-tiny-q8_0",
                            "qwen35-k256-q4_k_m", "qwen35-k256-q5_k_m"};
    for (size_t i = 0; i < 6; i++) {
        char rel[128];
        snprintf(rel, sizeof(rel), "models/%s.gguf", models[i]);
        char *out;
        int rc = tu_run(&out, "inspect '%s' --json -c 4096 --seqs 2", tu_fixture(rel));
        if (rc != 0) fail_msg("%s: exit %d: %s", models[i], rc, tu_last_stderr());
        json_error_t je;
        json_t *o = json_loads(out, 0, &je);
        if (!o) fail_msg("%s: stdout is not one JSON object: %s", models[i], je.text);
        assert_string_equal(json_string_value(json_object_get(o, "architecture")),
                            i == 0 ? "qwen2" : i == 1 ? "qwen3" : "qwen35");
        json_t *ts = json_object_get(o, "tensors");
        assert_int_equal(json_array_size(ts), (size_t)json_integer_value(json_object_get(o, "n_tensors")));
        json_int_t sum = 0;
        size_t k;
        json_t *t;
        json_array_foreach(ts, k, t) {
            assert_non_null(json_string_value(json_object_get(t, "name")));
            assert_non_null(json_string_value(json_object_get(t, "type")));
            assert_true(json_array_size(json_object_get(t, "shape")) >= 1);
            sum += json_integer_value(json_object_get(t, "bytes"));
        }
        assert_int_equal(sum, json_integer_value(json_object_get(o, "weight_bytes")));
        json_t *md = json_object_get(o, "metadata");
        json_t *toks = json_object_get(md, "tokenizer.ggml.tokens");
        assert_int_equal(json_integer_value(json_object_get(toks, "length")), 151936); /* summarized */
        assert_string_equal(json_string_value(json_object_get(toks, "array_of")), "STRING");
        if (i >= 2) {
            json_t *sec = json_object_get(md, "qwen35.rope.dimension_sections"); /* <= 16: listed */
            assert_int_equal(json_array_size(sec), 4);
            json_t *mem = json_object_get(o, "memory");
            assert_true(json_integer_value(json_object_get(mem, "recurrent_state")) > 0);
            assert_int_equal(json_integer_value(json_object_get(mem, "n_ctx")), 4096);
        }
        json_decref(o);
        free(out);
    }
}

static void test_inspect_text_shows_tables_and_memory(void **state) {
    (void)state;
    TU_NEED_FIXTURES();
    char *out;
    assert_int_equal(tu_run(&out, "inspect '%s'", tu_fixture("models/qwen35-k256-q4_k_m.gguf")), 0);
    const char *want[] = {"architecture  qwen35", "6 Gated DeltaNet + 2 attention", "file type     Q4_K_M",
                          "blk.0.attn_qkv.weight", "type histogram", "Q6_K", "recurrent state", "KV cache (F16)",
                          "pre-tokenizer qwen35"};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        if (!strstr(out, want[i])) fail_msg("inspect output lacks '%s'", want[i]);
    free(out);
}

static void test_inspect_broken_or_missing_file_exits_78_with_reason(void **state) {
    (void)state;
    tu_write_file(tu_tmp("broken.gguf"), "GGUF\x03\0\0\0\xff\xff\xff\xff\xff\xff\xff\xff\0\0\0\0\0\0\0\0", 24);
    assert_int_equal(tu_run(NULL, "inspect '%s'", tu_tmp("broken.gguf")), 78);
    assert_non_null(strstr(tu_last_stderr(), "broken.gguf: offset 0x8"));
    assert_int_equal(tu_run(NULL, "inspect '%s'", tu_tmp("nope.gguf")), 78);
    assert_non_null(strstr(tu_last_stderr(), "nope.gguf"));
    assert_int_equal(tu_run(NULL, "inspect"), 64);
    assert_int_equal(tu_run(NULL, "inspect x.gguf --bogus"), 64);
    assert_int_equal(tu_run(NULL, "inspect x.gguf -c 0"), 64);
    assert_int_equal(tu_run(NULL, "frobnicate"), 64);
    assert_int_equal(tu_run(NULL, ""), 64);
    char *out;
    assert_int_equal(tu_run(&out, "--help"), 0);
    assert_non_null(strstr(out, "inspect"));
    free(out);
}

/* A small GGUF file: arch (NULL: none), general.type (NULL: none), with or without the model
 * keys, a tokenizer, and the named F32 tensors of 8 x 4. */
static const char *write_gguf(const char *name, const char *arch, const char *type, bool keys, bool tokenizer,
                              const char *const *tensors, size_t n_tensors) {
    eng_gguf_writer *w = NULL;
    assert_int_equal(eng_gguf_writer_init(&w), DP_OK);
    if (arch) assert_int_equal(eng_gguf_writer_set_str(w, "general.architecture", arch), DP_OK);
    if (type) assert_int_equal(eng_gguf_writer_set_str(w, "general.type", type), DP_OK);
    if (keys && arch) {
        const char *k[] = {"block_count", "embedding_length", "feed_forward_length", "attention.head_count",
                           "context_length"};
        const uint32_t v[] = {1, 8, 16, 2, 256};
        for (int i = 0; i < 5; i++) {
            char key[128];
            snprintf(key, sizeof(key), "%s.%s", arch, k[i]);
            assert_int_equal(eng_gguf_writer_set_u32(w, key, v[i]), DP_OK);
        }
    }
    if (tokenizer) {
        const char *toks[] = {"a", "b", "c", "ab"};
        assert_int_equal(eng_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2"), DP_OK);
        assert_int_equal(eng_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, NULL, 4), DP_OK);
    }
    static float data[32];
    const int64_t ne[2] = {8, 4};
    for (size_t i = 0; i < n_tensors; i++)
        assert_int_equal(eng_gguf_writer_add_tensor(w, tensors[i], ENG_TYPE_F32, 2, ne, data), DP_OK);
    const char *path = tu_tmp(name);
    dp_err err = {0};
    assert_int_equal(eng_gguf_writer_write(w, path, NULL, NULL, &err), DP_OK);
    eng_gguf_writer_free(w);
    return path;
}

/* Every file the GGUF reader accepts is shown; "runnable" says what is missing. */
static void test_inspect_shows_files_docpipe_cannot_run(void **state) {
    (void)state;
    const char *lora[] = {"blk.0.attn_q.weight.lora_a", "blk.0.attn_q.weight.lora_b"}, *other[] = {"token_embd.weight"};
    const struct {
        const char *file, *arch, *type;
        bool keys, tok;
        const char *const *tensors;
        size_t n;
        const char *want;
    } c[] = {
        {"vocab.gguf", "qwen2", NULL, true, true, NULL, 0, "a vocabulary-only file"},
        {"adapter.gguf", "qwen2", "adapter", false, false, lora, 2, "an adapter"},
        {"gemma.gguf", "gemma3", NULL, true, true, other, 1, "architecture 'gemma3' is not one the engine runs"},
        {"nokeys.gguf", "qwen3", NULL, false, true, other, 1, "required key 'qwen3.block_count' is missing"},
        {"noarch.gguf", NULL, NULL, false, false, other, 1, "general.architecture"},
    };
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
        char path[4096];
        snprintf(path, sizeof(path), "%s", write_gguf(c[i].file, c[i].arch, c[i].type, c[i].keys, c[i].tok,
                                                       c[i].tensors, c[i].n));
        char *out = NULL;
        if (tu_run(&out, "inspect '%s'", path) != 0) fail_msg("%s: %s", c[i].file, tu_last_stderr());
        if (!strstr(out, "runnable      no:") || !strstr(out, c[i].want) || !strstr(out, "metadata ("))
            fail_msg("%s: inspect said:\n%s", c[i].file, out);
        free(out);
        assert_int_equal(tu_run(&out, "inspect '%s' --json", path), 0);
        json_error_t je;
        json_t *o = json_loads(out, 0, &je);
        if (!o) fail_msg("%s: not JSON: %s", c[i].file, je.text);
        assert_true(json_is_false(json_object_get(o, "runnable")));
        json_t *why = json_object_get(o, "not_runnable_because");
        assert_true(json_array_size(why) >= 1);
        bool found = false;
        for (size_t k = 0; k < json_array_size(why); k++)
            found |= strstr(json_string_value(json_array_get(why, k)), c[i].want) != NULL;
        assert_true(found);
        assert_int_equal(json_integer_value(json_object_get(o, "n_tensors")), (json_int_t)c[i].n);
        json_decref(o);
        free(out);
    }
}

/* opt occurs in text as a whole option (not as the prefix of a longer one) */
static bool mentions(const char *text, const char *opt) {
    for (const char *p = strstr(text, opt); p; p = strstr(p + 1, opt)) {
        const char after = p[strlen(opt)];
        const char before = p == text ? ' ' : p[-1];
        if (!(after == '-' || (after >= 'a' && after <= 'z')) && before != '-' && !(before >= 'a' && before <= 'z'))
            return true;
    }
    return false;
}

/* Every command answers --help, -h and `help CMD` with its usage (exit 0), and the help names
 * every option its parser accepts: the options are read from the command's source. */
static void test_help_for_every_command_lists_every_option(void **state) {
    (void)state;
    static const struct {
        const char *src;
        const char *cmds[4];
    } c[] = {
        {"cmd_run.c", {"run", "plan", "status", "merge"}}, {"cmd_validate.c", {"validate"}},
        {"cmd_batch.c", {"batch"}},       {"cmd_inspect.c", {"inspect"}},   {"cmd_quantize.c", {"quantize"}},
        {"cmd_make_test_model.c", {"make-test-model"}}, {"cmd_tokenize.c", {"tokenize"}},
        {"cmd_eval.c", {"eval"}},         {"cmd_perplexity.c", {"perplexity"}}, {"cmd_generate.c", {"generate"}},
        {"cmd_bench.c", {"bench"}},
    };
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
        char all[1 << 16] = "";
        for (int k = 0; k < 4 && c[i].cmds[k]; k++) {
            const char *cmd = c[i].cmds[k];
            char *out = NULL, *out2 = NULL, *out3 = NULL;
            if (tu_run(&out, "%s --help", cmd) != 0) fail_msg("%s --help: %s", cmd, tu_last_stderr());
            assert_int_equal(tu_run(&out2, "%s -h", cmd), 0);
            assert_int_equal(tu_run(&out3, "help %s", cmd), 0);
            char want[64];
            snprintf(want, sizeof(want), "usage: docpipe %s", cmd);
            if (strncmp(out, want, strlen(want))) fail_msg("%s --help starts: %.80s", cmd, out);
            assert_string_equal(out, out2);
            assert_string_equal(out, out3);
            strncat(all, out, sizeof(all) - strlen(all) - 1);
            free(out), free(out2), free(out3);
        }
        char path[1024];
        snprintf(path, sizeof(path), "%s/pipeline/cli/%s", DP_SOURCE_DIR, c[i].src);
        char *src = NULL;
        size_t len = 0;
        dp_err err = {0};
        assert_int_equal(dp_file_read_all(path, 1 << 20, &src, &len, &err), DP_OK);
        int n_opts = 0;
        for (const char *p = strstr(src, ", \"-"); p; p = strstr(p + 1, ", \"-")) {
            char opt[64];
            size_t k = 0;
            for (const char *q = p + 3; *q && *q != '"' && *q != '=' && k < sizeof(opt) - 1; q++) opt[k++] = *q;
            opt[k] = 0;
            const char *from = p - src < 40 ? src : p - 40; /* only option comparisons: strcmp(x, "-...") */
            char window[48];
            snprintf(window, sizeof(window), "%.*s", (int)(p - from), from);
            if (!strstr(window, "strcmp(")) continue;
            if (!strcmp(opt, "-h") || !strcmp(opt, "--help") || !strcmp(opt, "-") || !opt[1]) continue;
            n_opts++;
            if (!mentions(all, opt)) fail_msg("%s accepts %s but `docpipe %s --help` does not mention it", c[i].src,
                                              opt, c[i].cmds[0]);
        }
        free(src);
        if (i != 1) assert_true(n_opts > 0); /* (validate takes none) */
    }
    /* --version says which build this is; the manual page and completions come from the same text */
    char *v = NULL;
    assert_int_equal(tu_run(&v, "--version"), 0);
    if (!strstr(v, "(git ") || !strstr(v, "build)") || !strstr(v, "cpu kernels: built scalar") ||
        !strstr(v, "this cpu runs") || !strstr(v, "cuda backend: "))
        fail_msg("--version said: %s", v);
    free(v);
    assert_int_equal(tu_run(&v, "help --man"), 0);
    assert_int_equal(strncmp(v, ".TH DOCPIPE 1", 13), 0);
    assert_non_null(strstr(v, ".SS \"docpipe run\""));
    assert_non_null(strstr(v, ".SS \"docpipe make-test-model\""));
    free(v);
    assert_int_equal(tu_run(&v, "help --completion bash"), 0);
    assert_non_null(strstr(v, "run) echo \"--restart"));
    assert_non_null(strstr(v, "complete -o filenames -F _docpipe docpipe"));
    tu_write_file(tu_tmp("completion.bash"), v, strlen(v));
    free(v);
#ifndef _WIN32 /* (no bash to check it with) */
    char cmd[4200];
    snprintf(cmd, sizeof(cmd), "bash -n '%s'", tu_tmp("completion.bash"));
    assert_int_equal(system(cmd), 0);
#endif
    assert_int_equal(tu_run(&v, "help --completion zsh"), 0);
    assert_int_equal(strncmp(v, "#compdef docpipe", 16), 0);
    free(v);
    /* unknown commands get a suggestion */
    assert_int_equal(tu_run(NULL, "runn x.yaml"), 64);
    assert_non_null(strstr(tu_last_stderr(), "did you mean 'run'"));
    assert_int_equal(tu_run(NULL, "help nosuch"), 64);
    /* and unknown options, from the options of the command's own help */
    assert_int_equal(tu_run(NULL, "run x.yaml --restrat"), 64);
    assert_non_null(strstr(tu_last_stderr(), "unknown option '--restrat' (did you mean '--restart'?)"));
    assert_int_equal(tu_run(NULL, "bench -m x.gguf --seq 4"), 64);
    assert_non_null(strstr(tu_last_stderr(), "did you mean '--seqs'?"));
    assert_int_equal(tu_run(NULL, "inspect x.gguf --zzzzzzzz"), 64);
    assert_null(strstr(tu_last_stderr(), "did you mean"));
}

static void test_make_test_model_quantize_inspect_chain(void **state) {
    (void)state;
    const char *f16 = tu_tmp("chain-f16.gguf"), *q = tu_tmp("chain-q4km.gguf");
    assert_int_equal(tu_run(NULL, "make-test-model --arch qwen35 --hidden 256 --ffn 512 --layers 4 --head-dim 64 "
                                  "--ssm-dim 64 --seed 9 --out '%s'", f16), 0);
    assert_int_equal(tu_run(NULL, "quantize '%s' '%s' q4_k_m -t 2", f16, q), 0);
    assert_non_null(strstr(tu_last_stderr(), "quantize: [")); /* progress lines */
    char *out;
    assert_int_equal(tu_run(&out, "inspect '%s' --json", q), 0);
    json_error_t je;
    json_t *o = json_loads(out, 0, &je);
    assert_non_null(o);
    assert_string_equal(json_string_value(json_object_get(o, "file_type")), "Q4_K_M");
    json_t *h = json_object_get(o, "type_histogram");
    assert_non_null(json_object_get(h, "Q4_K"));
    assert_non_null(json_object_get(h, "Q6_K"));
    assert_non_null(json_object_get(h, "F32"));
    assert_null(json_object_get(h, "F16"));
    json_decref(o);
    free(out);
    /* usage errors */
    assert_int_equal(tu_run(NULL, "quantize '%s' '%s' q3_k_xl", f16, q), 64);
    assert_int_equal(tu_run(NULL, "quantize '%s' '%s' q8_0", f16, f16), 64);
    assert_int_equal(tu_run(NULL, "quantize '%s' '%s' q8_0", tu_tmp("missing.gguf"), q), 78);
    assert_int_equal(tu_run(NULL, "make-test-model --arch gpt9 --out x"), 64);
    assert_int_equal(tu_run(NULL, "make-test-model --arch qwen3"), 64);
    assert_int_equal(tu_run(NULL, "make-test-model --arch qwen3 --heads 3 --kv-heads 2 --out '%s'",
                            tu_tmp("x.gguf")), 64);
    assert_int_equal(tu_run(NULL, "make-test-model --shape qwen3-4b --arch qwen2 --out x"), 64);
    /* bench: one figure per batch size; --pps generates after a 300-token prompt shared by all
     * sequences (one full block by reference, the partly filled one copied by all but the last) */
    q = tu_tmp("chain-q4km.gguf"); /* tu_tmp's buffer was reused above */
    double step_bytes[3] = {0};
    for (int pps = 0; pps < 3; pps++) { /* 2: at a depth of 600 tokens (llama-bench -d), with --pps */
        const int rc = tu_run(&out, "bench -m '%s' -t 2 -p 300 -n 4 --seqs 1,4 -r 1 --json%s", q,
                              pps == 2 ? " --pps -d 600" : pps ? " --pps" : "");
        if (rc) fail_msg("bench%s: exit %d: %s", pps ? " --pps" : "", rc, tu_last_stderr());
        o = json_loads(out, 0, &je);
        if (!o) fail_msg("bench%s: stdout is not one JSON object: %s", pps ? " --pps" : "", out);
        json_t *by = json_object_get(o, "tg_by_seqs");
        assert_true(json_real_value(json_object_get(by, "1")) > 0);
        assert_true(json_real_value(json_object_get(by, "4")) > 0);
        assert_true(json_real_value(json_object_get(o, "pp_tok_s")) > 0);
        assert_int_equal(json_integer_value(json_object_get(o, "n_depth")), pps == 2 ? 600 : 0);
        /* the decode roofline: the bytes a step reads grow with what it attends over */
        assert_true(json_number_value(json_object_get(o, "read_gb_s")) > 0);
        const double bytes = json_number_value(json_object_get(o, "decode_bytes_per_token"));
        assert_true(bytes > step_bytes[pps ? pps - 1 : 0] && json_number_value(json_object_get(o, "decode_roofline_tok_s")) > 0);
        step_bytes[pps] = bytes;
        json_decref(o);
        free(out);
    }
    assert_int_equal(tu_run(NULL, "bench -m '%s' --seqs 1,x", q), 64);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inspect_json_on_every_fixture_model),
        cmocka_unit_test(test_inspect_text_shows_tables_and_memory),
        cmocka_unit_test(test_inspect_broken_or_missing_file_exits_78_with_reason),
        cmocka_unit_test(test_inspect_shows_files_docpipe_cannot_run),
        cmocka_unit_test(test_help_for_every_command_lists_every_option),
        cmocka_unit_test(test_make_test_model_quantize_inspect_chain),
    };
    return cmocka_run_group_tests_name("cli", tests, NULL, NULL);
}
