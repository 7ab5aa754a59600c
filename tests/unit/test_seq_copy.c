/*
 * test_seq_copy.c - eng_seq_copy, the engine half of shared prompt prefixes: a sequence
 * continued from a copy gives bit-identical logits to one that computed the prefix itself, for
 * an attention-only model (qwen3: KV rows) and a hybrid one (qwen35: KV rows and the DeltaNet
 * conv and delta states); and the copy leaves its source untouched.
 */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#include "engine.h"

static void decode(eng_context *c, int32_t seq, const int32_t *tok, int32_t n, int32_t pos0) {
    int32_t pos[64], sq[64];
    for (int32_t i = 0; i < n; i++) pos[i] = pos0 + i, sq[i] = seq;
    eng_batch b = {n, tok, pos, sq, NULL};
    dp_err err = {0};
    if (eng_decode(c, &b, &err)) fail_msg("decode: %s", err.msg);
}

static void check_arch(eng_arch arch, const char *name) {
    eng_test_model_params p;
    eng_test_model_defaults(&p, arch);
    dp_err err = {0};
    const char *path = tu_tmp(name);
    assert_int_equal(eng_test_model_write(&p, path, 2, &err), 0);
    eng_model *m;
    eng_context *c;
    assert_int_equal(eng_model_load(path, &m, &err), 0);
    eng_context_params cp = eng_context_default_params();
    cp.n_ctx = 128;
    cp.n_seq_max = 3;
    cp.n_threads = 2;
    assert_int_equal(eng_context_new(m, &cp, &c, &err), 0);
    const int32_t V = (int32_t)eng_model_get_info(m)->n_vocab;
    int32_t prefix[24], suffix[9];
    for (int i = 0; i < 24; i++) prefix[i] = (i * 37 + 5) % V;
    for (int i = 0; i < 9; i++) suffix[i] = (i * 11 + 3) % V;
    float *want = malloc((size_t)V * sizeof(float));
    /* seq 1 computes everything itself */
    decode(c, 1, prefix, 24, 0);
    decode(c, 1, suffix, 9, 24);
    memcpy(want, eng_get_logits(c, 0), (size_t)V * sizeof(float));
    /* seq 2 holds the prefix; seq 0 continues from a copy of it */
    decode(c, 2, prefix, 24, 0);
    eng_seq_copy(c, 2, 0);
    assert_int_equal(eng_seq_len(c, 0), 24);
    decode(c, 0, suffix, 9, 24);
    if (memcmp(want, eng_get_logits(c, 0), (size_t)V * sizeof(float)))
        fail_msg("%s: logits after a copied prefix differ from a computed one", name);
    /* the source is unchanged: a second copy gives the same again */
    eng_seq_copy(c, 2, 1);
    decode(c, 1, suffix, 9, 24);
    if (memcmp(want, eng_get_logits(c, 0), (size_t)V * sizeof(float)))
        fail_msg("%s: the copy changed its source sequence", name);
    free(want);
    eng_context_free(c);
    eng_model_free(m);
}

static void test_copy_qwen3(void **state) {
    (void)state;
    check_arch(ENG_ARCH_QWEN3, "copy-qwen3.gguf");
}

static void test_copy_qwen35(void **state) {
    (void)state;
    check_arch(ENG_ARCH_QWEN35, "copy-qwen35.gguf");
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_copy_qwen3), cmocka_unit_test(test_copy_qwen35)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
