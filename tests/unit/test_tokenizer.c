/*
 * test_tokenizer.c - the tokenizer against llama.cpp (every fixture prompt on every model,
 * with and without special parsing, and the vocab test vectors), byte-exact round trips,
 * streaming detokenization, refusal of other tokenizers, and hostile input.
 */
#include "testutil.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "gguf_writer.h"
#include "tokenizer.h"
#include "platform.h"
#include "utf8.h"

static eng_tokenizer *load(const char *path) {
    eng_gguf *g;
    eng_tokenizer *t;
    dp_err err = {0};
    if (eng_gguf_open(path, &g, &err)) fail_msg("%s", err.msg);
    if (eng_tokenizer_load(g, &t, &err)) fail_msg("%s", err.msg);
    eng_gguf_close(g);
    return t;
}

static void expect_ids(eng_tokenizer *t, eng_tok_ws *ws, const char *text, size_t len, bool special, json_t *want,
                       const char *what) {
    eng_tokens ids = {0};
    dp_err err = {0};
    assert_int_equal(eng_tokenize(t, ws, text, len, true, special, &ids, &err), DP_OK);
    size_t n = json_array_size(want);
    size_t m = ids.n < n ? ids.n : n, k = 0;
    while (k < m && ids.ids[k] == json_integer_value(json_array_get(want, k))) k++;
    if (ids.n != n || k != n)
        fail_msg("%s: %zu ids, llama.cpp %zu; first difference at %zu: ours %d, llama.cpp %lld", what, ids.n, n, k,
                 k < ids.n ? ids.ids[k] : -1, k < n ? (long long)json_integer_value(json_array_get(want, k)) : -1LL);
    eng_tokens_free(&ids);
}

static void test_tokenizer_matches_llama_cpp_on_every_fixture_prompt(void **state) {
    (void)state;
    TU_NEED_FIXTURES();
    const char *models[] = {"qwen2-tiny-f16", "qwen3-tiny-f16", "qwen35-tiny-f16", "qwen35-tiny-q8_0",
                            "qwen35-k256-q4_k_m", "qwen35-k256-q5_k_m"};
    int n_cases = 0;
    eng_tok_ws *ws;
    assert_int_equal(eng_tok_ws_new(&ws), DP_OK);
    for (size_t i = 0; i < 6; i++) {
        char rel[160];
        snprintf(rel, sizeof(rel), "models/%s.gguf", models[i]);
        eng_tokenizer *t = load(tu_fixture(rel));
        assert_string_equal(eng_tokenizer_pre(t), i < 2 ? "qwen2" : "qwen35");
        snprintf(rel, sizeof(rel), "models/%s.refs.json", models[i]);
        json_error_t je;
        json_t *root = json_load_file(tu_fixture(rel), 0, &je);
        assert_non_null(root);
        size_t k;
        json_t *c;
        json_array_foreach(json_object_get(root, "cases"), k, c) {
            char path[256], what[512];
            snprintf(path, sizeof(path), "prompts/%s.txt", json_string_value(json_object_get(c, "id")));
            char *text;
            size_t len;
            dp_err err = {0};
            assert_int_equal(dp_file_read_all(tu_fixture(path), 1 << 20, &text, &len, &err), DP_OK);
            assert_string_equal(text, json_string_value(json_object_get(c, "prompt")));
            snprintf(what, sizeof(what), "%s / %s (parse_special)", models[i], path);
            expect_ids(t, ws, text, len, true, json_object_get(c, "tokens"), what);
            snprintf(what, sizeof(what), "%s / %s (no parse_special)", models[i], path);
            expect_ids(t, ws, text, len, false, json_object_get(c, "tokens_parse_special_false"), what);
            free(text);
            n_cases++;
        }
        json_decref(root);
        eng_tokenizer_free(t);
    }
    assert_int_equal(n_cases, 36);
    eng_tok_ws_free(ws);
}

static void run_vectors(const char *model, const char *vectors, int want_cases) {
    eng_tokenizer *t = load(tu_fixture(model));
    json_error_t je;
    json_t *root = json_load_file(tu_fixture(vectors), 0, &je);
    assert_non_null(root);
    size_t k;
    json_t *c;
    int n = 0;
    json_array_foreach(json_object_get(root, "cases"), k, c) {
        const char *text = json_string_value(json_object_get(c, "text"));
        size_t len = json_string_length(json_object_get(c, "text"));
        eng_tokens ids = {0};
        dp_err err = {0};
        assert_int_equal(eng_tokenize(t, NULL, text, len, false, false, &ids, &err), DP_OK);
        json_t *want = json_object_get(c, "ids");
        bool same = ids.n == json_array_size(want);
        for (size_t i = 0; same && i < ids.n; i++) same = ids.ids[i] == json_integer_value(json_array_get(want, i));
        if (!same) fail_msg("%s: vector %zu (%s) differs from llama.cpp", model, k, text);
        eng_tokens_free(&ids);
        n++;
    }
    assert_int_equal(n, want_cases);
    json_decref(root);
    eng_tokenizer_free(t);
}

static void test_tokenizer_passes_llama_cpp_vocab_vectors(void **state) {
    (void)state;
    TU_NEED_FIXTURES();
    run_vectors("models/qwen2-tiny-f16.gguf", "tokenizer/qwen2-vectors.json", 47);
    run_vectors("models/qwen3-tiny-f16.gguf", "tokenizer/qwen2-vectors.json", 47);
    run_vectors("models/qwen35-tiny-f16.gguf", "tokenizer/qwen35-vectors.json", 51);
}

static void test_tokenizer_special_tokens_only_with_parse_special(void **state) {
    (void)state;
    TU_NEED_FIXTURES();
    eng_tokenizer *t = load(tu_fixture("models/qwen3-tiny-f16.gguf"));
    eng_tokens a = {0}, b = {0};
    dp_err err = {0};
    const char *s = "a<|im_end|>b</s><think>";
    assert_int_equal(eng_tokenize(t, NULL, s, strlen(s), true, true, &a, &err), DP_OK);
    assert_int_equal(eng_tokenize(t, NULL, s, strlen(s), true, false, &b, &err), DP_OK);
    bool has_im_end = false, has_eos_s = false, has_think_b = false;
    for (size_t i = 0; i < a.n; i++) has_im_end |= a.ids[i] == 151645, has_eos_s |= a.ids[i] == 128247;
    for (size_t i = 0; i < b.n; i++) {
        assert_int_not_equal(b.ids[i], 151645); /* a document cannot end the turn */
        assert_int_not_equal(b.ids[i], 128247);
        has_think_b |= b.ids[i] == 151667;    /* USER_DEFINED tokens match either way */
    }
    assert_true(has_im_end && has_eos_s && has_think_b);
    assert_true(eng_token_is_eog(t, 151645) && eng_token_is_eog(t, 151643) && eng_token_is_eog(t, 128247));
    assert_false(eng_token_is_eog(t, 151667));
    assert_int_equal(eng_token_get_type(t, 128247), ENG_TOKEN_TYPE_CONTROL); /* promoted, as llama.cpp does */
    const char *p;
    assert_int_equal(eng_token_to_piece(t, 151645, false, &p), 0);  /* control: hidden unless asked */
    assert_int_equal(eng_token_to_piece(t, 151645, true, &p), 10);
    assert_int_equal(eng_token_to_piece(t, 151667, false, &p), 7);  /* <think> is printed */
    eng_tokens_free(&a);
    eng_tokens_free(&b);
    eng_tokenizer_free(t);
}

static const char *const k_texts[] = {
    "Hello, world! It's a test: don't, we'll, they've, I'm, you're, she'd.",
    "中文文档的总结报告。第二段落！还有问题？",
    "日本語のテキストとカタカナ、ひらがな。",
    "emoji 👨‍👩‍👧‍👦 family, flags 🇫🇷🇯🇵, skin 👍🏽",
    "combining: e\xCC\x81 a\xCC\x8A n\xCC\x83 and a lone \xCC\x81 mark",
    "int main(void) {\n\treturn 0;\n}\r\n\r\n  indented\n",
    "tabs\t\tand     spaces          end   ",
    "digits 1234567890 and 3.14159 and ١٢٣ and ⅷ",
    "\r\n\r\n\n\n  \n\t\n",
    "مرحبا بالعالم עברית हिन्दी 한국어",
    "   leading and trailing spaces   ",
    "",
    "a",
};

static void round_trip(eng_tokenizer *t, const char *s, size_t n) {
    eng_tokens ids = {0};
    dp_err err = {0};
    assert_int_equal(eng_tokenize(t, NULL, s, n, false, false, &ids, &err), DP_OK);
    char *out = malloc(n + 64);
    size_t o = 0;
    eng_detok d = {0};
    uint8_t buf[512];
    const bool valid_in = dp_utf8_valid((const uint8_t *)s, n);
    for (size_t i = 0; i < ids.n; i++) {
        size_t k = eng_detok_push(t, &d, ids.ids[i], false, buf, sizeof(buf));
        /* valid input streams out as valid UTF-8 chunks: split characters are held back */
        if (valid_in && !dp_utf8_valid(buf, k)) fail_msg("streamed chunk %zu is not valid UTF-8", i);
        memcpy(out + o, buf, k);
        o += k;
    }
    o += eng_detok_flush(&d, (uint8_t *)out + o);
    if (o != n || memcmp(out, s, n) != 0) fail_msg("round trip of %zu bytes gave %zu bytes", n, o);
    free(out);
    eng_tokens_free(&ids);
}

static void test_tokenizer_round_trips_text_byte_for_byte(void **state) {
    (void)state;
    /* with the built-in vocabulary of a test model (always available) */
    eng_test_model_params p;
    eng_test_model_defaults(&p, ENG_ARCH_QWEN35);
    dp_err err = {0};
    assert_int_equal(eng_test_model_write(&p, tu_tmp("tok.gguf"), 2, &err), DP_OK);
    eng_tokenizer *tiny = load(tu_tmp("tok.gguf"));
    eng_tokenizer *real = tu_fixture("README.md") ? load(tu_fixture("models/qwen35-tiny-f16.gguf")) : NULL;
    char spaces[3000];
    memset(spaces, ' ', sizeof(spaces));
    char digits[3000];
    for (size_t i = 0; i < sizeof(digits); i++) digits[i] = (char)('0' + i % 10);
    const uint8_t invalid[] = {'a', 0xFF, 0xC3, 'b', 0xE4, 0xB8, 0, 'c', 0xED, 0xA0, 0x80, 0xF0, 0x9F};
    for (int k = 0; k < 2; k++) {
        eng_tokenizer *t = k ? real : tiny;
        if (!t) continue;
        for (size_t i = 0; i < sizeof(k_texts) / sizeof(k_texts[0]); i++) round_trip(t, k_texts[i], strlen(k_texts[i]));
        round_trip(t, spaces, sizeof(spaces));
        round_trip(t, digits, sizeof(digits));
        round_trip(t, (const char *)invalid, sizeof(invalid)); /* invalid UTF-8 and NUL survive */
    }
    eng_tokenizer_free(tiny);
    eng_tokenizer_free(real);
}

static void test_tokenizer_handles_pathological_input(void **state) {
    (void)state;
    eng_test_model_params p;
    eng_test_model_defaults(&p, ENG_ARCH_QWEN3);
    dp_err err = {0};
    assert_int_equal(eng_test_model_write(&p, tu_tmp("tok3.gguf"), 2, &err), DP_OK);
    eng_tokenizer *t = load(tu_tmp("tok3.gguf"));
    const size_t n = 3u << 20; /* one 3 MiB letter run: crosses the 1 MiB BPE segment */
    char *s = malloc(n);
    memset(s, 'a', n);
    round_trip(t, s, n);
    uint64_t seed = 5; /* 1 MiB of random printable ASCII without whitespace */
    for (size_t i = 0; i < (1u << 20); i++) s[i] = (char)('!' + tu_rand(&seed) % 94);
    round_trip(t, s, 1u << 20);
    for (size_t i = 0; i < (1u << 20); i++) s[i] = (char)tu_rand(&seed); /* random bytes */
    round_trip(t, s, 1u << 20);
    free(s);
    eng_tokenizer_free(t);
}

static void test_tokenizer_refuses_other_models_and_pre_tokenizers(void **state) {
    (void)state;
    const struct { const char *model, *pre, *msg; } c[] = {
        {"llama", "default", "tokenizer model 'llama' is not supported"},
        {"gpt2", "falcon", "pre-tokenizer 'falcon' is not supported"},
        {"gpt2", NULL, "tokenizer.ggml.pre is missing"},
    };
    for (size_t i = 0; i < 3; i++) {
        eng_gguf_writer *w;
        assert_int_equal(eng_gguf_writer_init(&w), DP_OK);
        eng_gguf_writer_set_str(w, "tokenizer.ggml.model", c[i].model);
        if (c[i].pre) eng_gguf_writer_set_str(w, "tokenizer.ggml.pre", c[i].pre);
        const char *toks[2] = {"a", "b"};
        eng_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, NULL, 2);
        dp_err err = {0};
        assert_int_equal(eng_gguf_writer_write(w, tu_tmp("badtok.gguf"), NULL, NULL, &err), DP_OK);
        eng_gguf_writer_free(w);
        eng_gguf *g;
        eng_tokenizer *t;
        assert_int_equal(eng_gguf_open(tu_tmp("badtok.gguf"), &g, &err), DP_OK);
        assert_int_equal(eng_tokenizer_load(g, &t, &err), DP_EUNSUPPORTED);
        if (!strstr(err.msg, c[i].msg)) fail_msg("got '%s', want '%s'", err.msg, c[i].msg);
        eng_gguf_close(g);
    }
    /* an out-of-range special id is refused (model-formats.md §1.6 rule 12) */
    eng_gguf_writer *w;
    assert_int_equal(eng_gguf_writer_init(&w), DP_OK);
    eng_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
    eng_gguf_writer_set_str(w, "tokenizer.ggml.pre", "qwen2");
    const char *toks[2] = {"a", "b"};
    eng_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, NULL, 2);
    eng_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2);
    dp_err err = {0};
    assert_int_equal(eng_gguf_writer_write(w, tu_tmp("badid.gguf"), NULL, NULL, &err), DP_OK);
    eng_gguf_writer_free(w);
    eng_gguf *g;
    eng_tokenizer *t;
    assert_int_equal(eng_gguf_open(tu_tmp("badid.gguf"), &g, &err), DP_OK);
    assert_int_equal(eng_tokenizer_load(g, &t, &err), DP_EFORMAT);
    assert_non_null(strstr(err.msg, "eos_token_id is 2 but the vocabulary has 2 tokens"));
    eng_gguf_close(g);
}

static void test_tokenize_cli_json_and_file_input(void **state) {
    (void)state;
    TU_NEED_FIXTURES();
    char *out;
    tu_write_file(tu_tmp("p.txt"), "hi\n", 3); /* the newline is kept */
    assert_int_equal(tu_run(&out, "tokenize -m '%s' --json -f '%s'", tu_fixture("models/qwen3-tiny-f16.gguf"),
                            tu_tmp("p.txt")), 0);
    assert_string_equal(out, "[6023, 198]\n");
    free(out);
    assert_int_equal(tu_run(&out, "tokenize -m '%s' --json '<|im_start|>x'", tu_fixture("models/qwen3-tiny-f16.gguf")), 0);
    assert_string_equal(out, "[151644, 87]\n");
    free(out);
    assert_int_equal(tu_run(&out, "tokenize -m '%s' --json --no-special '<|im_start|>'",
                            tu_fixture("models/qwen3-tiny-f16.gguf")), 0);
    assert_null(strstr(out, "151644"));
    free(out);
    assert_int_equal(tu_run(&out, "tokenize -m '%s' --pieces ' hello'", tu_fixture("models/qwen3-tiny-f16.gguf")), 0);
    assert_non_null(strstr(out, "' hello'"));
    free(out);
    assert_int_equal(tu_run(NULL, "tokenize --json x"), 64);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tokenizer_matches_llama_cpp_on_every_fixture_prompt),
        cmocka_unit_test(test_tokenizer_passes_llama_cpp_vocab_vectors),
        cmocka_unit_test(test_tokenizer_special_tokens_only_with_parse_special),
        cmocka_unit_test(test_tokenizer_round_trips_text_byte_for_byte),
        cmocka_unit_test(test_tokenizer_handles_pathological_input),
        cmocka_unit_test(test_tokenizer_refuses_other_models_and_pre_tokenizers),
        cmocka_unit_test(test_tokenize_cli_json_and_file_input),
    };
    return cmocka_run_group_tests_name("tokenizer", tests, NULL, NULL);
}
