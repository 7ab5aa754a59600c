/*
 * test_kv_pages.c - the paged KV cache: a pool smaller than every sequence's full context gives
 * the same logits, bit for bit, as a full one; a step that needs more blocks than are free is
 * refused and changes nothing; shared prefix blocks are held by reference and copied only when
 * a sequence writes into one, leaving its source intact; sequences that share a partly filled
 * block and all write into it in one step need one copy fewer than they are (the last writes in
 * place), so a pool with just that room runs the step; sequences stepping together over the same
 * full blocks (attention reads such a block once for all of them) each get the bits of a
 * sequence decoded alone, token by token, whatever the thread count, with an F16 or a Q8_0 cache.
 */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "engine.h"

typedef struct fixture {
    eng_model *m;
    int32_t V;
} fixture;

static int setup(void **state) {
    static fixture f;
    eng_test_model_params p;
    eng_test_model_defaults(&p, ENG_ARCH_QWEN3);
    dp_err err = {0};
    const char *path = tu_tmp("kv-pages-qwen3.gguf");
    if (eng_test_model_write(&p, path, 3, &err) || eng_model_load(path, &f.m, &err)) return -1;
    f.V = (int32_t)eng_model_get_info(f.m)->n_vocab;
    *state = &f;
    return 0;
}

static int teardown(void **state) {
    eng_model_free(((fixture *)*state)->m);
    return 0;
}

static eng_context *context(fixture *f, uint32_t n_blocks) {
    eng_context_params cp = eng_context_default_params();
    cp.n_ctx = 1024;
    cp.n_seq_max = 4;
    cp.n_threads = 2;
    cp.n_ubatch = 256;
    cp.n_kv_blocks = n_blocks;
    eng_context *c = NULL;
    dp_err err = {0};
    if (eng_context_new(f->m, &cp, &c, &err)) fail_msg("context: %s", err.msg);
    return c;
}

/* n tokens of seq from position pos0 (token ids derived from the position only) */
static dp_status step(fixture *f, eng_context *c, int32_t seq, int32_t n, int32_t pos0, dp_err *err) {
    int32_t *tok = malloc((size_t)n * sizeof(int32_t));
    for (int32_t i = 0; i < n; i++) tok[i] = ((pos0 + i) * 31 + 1) % f->V;
    dp_status st = eng_decode_sequence(c, seq, tok, n, pos0, err);
    free(tok);
    return st;
}

static void must_step(fixture *f, eng_context *c, int32_t seq, int32_t n, int32_t pos0) {
    dp_err err = {0};
    if (step(f, c, seq, n, pos0, &err)) fail_msg("decode seq %d: %s", seq, err.msg);
}

static void test_small_pool_gives_full_pool_logits(void **state) {
    fixture *f = *state;
    eng_context *full = context(f, 0), *small = context(f, 6);
    assert_int_equal(eng_kv_blocks_total(full), 16);
    assert_int_equal(eng_kv_blocks_total(small), 6);
    float *want = malloc((size_t)f->V * sizeof(float));
    const int32_t len[3] = {300, 500, 200};
    for (int round = 0; round < 2; round++) {
        eng_context *c = round ? small : full;
        /* interleaved pieces, so blocks of different sequences alternate in the pool */
        for (int32_t p0 = 0; p0 < 500; p0 += 100)
            for (int32_t s = 0; s < 3; s++)
                if (p0 < len[s]) must_step(f, c, s, len[s] - p0 < 100 ? len[s] - p0 : 100, p0);
        for (int32_t s = 0; s < 3; s++) must_step(f, c, s, 1, len[s]);
        if (!round) memcpy(want, eng_get_logits(c, 0), (size_t)f->V * sizeof(float));
        else if (memcmp(want, eng_get_logits(c, 0), (size_t)f->V * sizeof(float)))
            fail_msg("logits with a 6-block pool differ from a full pool");
    }
    /* 301, 501 and 201 positions hold 2 + 2 + 1 blocks */
    assert_int_equal(eng_kv_blocks_free(small), 1);
    eng_seq_clear(small, 1);
    assert_int_equal(eng_kv_blocks_free(small), 3);
    free(want);
    eng_context_free(full);
    eng_context_free(small);
}

static void test_exhausted_pool_refuses_the_step_and_changes_nothing(void **state) {
    fixture *f = *state;
    eng_context *c = context(f, 3);
    must_step(f, c, 0, 256, 0);
    must_step(f, c, 1, 200, 0);
    assert_int_equal(eng_kv_blocks_free(c), 1);
    must_step(f, c, 1, 56, 200);
    /* both at 256 now: a step of one token each needs 2 new blocks, 1 is free */
    int32_t tok[2] = {5, 7}, pos[2] = {256, 256}, sq[2] = {0, 1};
    eng_batch b = {2, tok, pos, sq, NULL};
    dp_err err = {0};
    assert_int_equal(eng_decode(c, &b, &err), DP_ENOMEM);
    assert_non_null(strstr(err.msg, "KV blocks"));
    assert_int_equal(eng_seq_len(c, 0), 256);
    assert_int_equal(eng_seq_len(c, 1), 256);
    assert_int_equal(eng_kv_blocks_free(c), 1);
    /* one of them alone fits; after a clear both do */
    must_step(f, c, 0, 1, 256);
    assert_int_equal(eng_kv_blocks_free(c), 0);
    eng_seq_clear(c, 0);
    assert_int_equal(eng_kv_blocks_free(c), 2);
    must_step(f, c, 1, 1, 256);
    eng_context_free(c);
}

/* A step whose CPU scratch memory cannot be had fails with DP_ENOMEM and says so, rather than
 * leaving some outputs unwritten and the logits wrong; with memory back, a new context decodes. */
static void test_scratch_out_of_memory_fails_the_step(void **state) {
    fixture *f = *state;
    eng_context *c = context(f, 0);
    dp_err err = {0};
    eng_backend_cpu_fail_scratch(true);
    const dp_status st = step(f, c, 0, 40, 0, &err);
    eng_backend_cpu_fail_scratch(false);
    assert_int_equal(st, DP_ENOMEM);
    assert_non_null(strstr(err.msg, "scratch"));
    eng_context_free(c);
    c = context(f, 0);
    must_step(f, c, 0, 40, 0);
    must_step(f, c, 0, 1, 40);
    eng_context_free(c);
}

static void test_shared_prefix_blocks_are_held_by_reference(void **state) {
    fixture *f = *state;
    eng_context *c = context(f, 8);
    float *want = malloc((size_t)f->V * sizeof(float));
    /* a 512-token prefix: two full blocks, shared by three copies without taking any */
    must_step(f, c, 0, 256, 0);
    must_step(f, c, 0, 256, 256);
    assert_int_equal(eng_kv_blocks_free(c), 6);
    for (int32_t s = 1; s < 4; s++) eng_seq_copy(c, 0, s);
    assert_int_equal(eng_kv_blocks_free(c), 6);
    must_step(f, c, 1, 10, 512);
    assert_int_equal(eng_kv_blocks_free(c), 5);
    assert_int_equal(eng_kv_blocks_needed(522, 512), 1);
    /* a 300-token prefix: its second block is partly shared and copied on the first write */
    for (int32_t s = 0; s < 4; s++) eng_seq_clear(c, s);
    assert_int_equal(eng_kv_blocks_free(c), 8);
    must_step(f, c, 0, 256, 0);
    must_step(f, c, 0, 44, 256);
    must_step(f, c, 0, 20, 300);
    memcpy(want, eng_get_logits(c, 0), (size_t)f->V * sizeof(float));
    eng_seq_clear(c, 0);
    must_step(f, c, 0, 256, 0);
    must_step(f, c, 0, 44, 256);
    eng_seq_copy(c, 0, 2);
    assert_int_equal(eng_kv_blocks_free(c), 6);
    must_step(f, c, 2, 20, 300); /* the same ids as the unshared run: the same logits */
    if (memcmp(want, eng_get_logits(c, 0), (size_t)f->V * sizeof(float)))
        fail_msg("a copy that wrote into a shared block differs from an unshared sequence");
    assert_int_equal(eng_kv_blocks_free(c), 5);
    assert_int_equal(eng_kv_blocks_needed(320, 300), 1);
    /* the source is intact: continuing it gives what an unshared sequence gives */
    must_step(f, c, 0, 20, 300);
    if (memcmp(want, eng_get_logits(c, 0), (size_t)f->V * sizeof(float)))
        fail_msg("the source of a copy changed when the copy wrote into a shared block");
    free(want);
    eng_context_free(c);
}

static void test_all_holders_of_a_shared_block_step_with_one_copy_fewer(void **state) {
    fixture *f = *state;
    /* 4 sequences share a 100-token prompt in one block; one step past it for all four takes 3
     * copies (the last holder keeps the original): exactly what a 4-block pool has free */
    eng_context *c = context(f, 4), *ref = context(f, 0);
    must_step(f, c, 0, 100, 0);
    for (int32_t s = 1; s < 4; s++) eng_seq_copy(c, 0, s);
    assert_int_equal(eng_kv_blocks_free(c), 3);
    int32_t tok[4], pos[4], sq[4];
    int8_t want[4] = {1, 1, 1, 1};
    for (int32_t s = 0; s < 4; s++) tok[s] = 11 + 7 * s, pos[s] = 100, sq[s] = s;
    eng_batch b = {4, tok, pos, sq, want};
    dp_err err = {0};
    if (eng_decode(c, &b, &err)) fail_msg("the step of all four holders: %s", err.msg);
    assert_int_equal(eng_kv_blocks_free(c), 0);
    /* each sequence's logits are those of the same tokens decoded unshared */
    for (int32_t s = 0; s < 4; s++) {
        eng_seq_clear(ref, 0);
        must_step(f, ref, 0, 100, 0);
        const int32_t t1 = tok[s];
        if (eng_decode_sequence(ref, 0, &t1, 1, 100, &err)) fail_msg("reference: %s", err.msg);
        if (memcmp(eng_get_logits(ref, 0), eng_get_logits(c, s), (size_t)f->V * sizeof(float)))
            fail_msg("sequence %d after the shared step differs from an unshared one", s);
    }
    eng_context_free(c);
    eng_context_free(ref);
}

/* One step over 8 sequences: six hold a 512-token prefix by reference (two full blocks), one has
 * its own 300 tokens and sits between them, one runs a 20-token prompt piece past a full block of
 * its own. Each sequence's logits must equal a lone token-by-token decode of the same ids. */
static void shared_blocks_step(fixture *f, int n_threads, int kv_type) {
    eng_context_params cp = eng_context_default_params();
    cp.n_ctx = 1024;
    cp.n_seq_max = 8;
    cp.n_threads = n_threads;
    cp.kv_type = kv_type;
    cp.n_ubatch = 256;
    eng_context *c = NULL, *ref = NULL;
    dp_err err = {0};
    if (eng_context_new(f->m, &cp, &c, &err) || eng_context_new(f->m, &cp, &ref, &err)) fail_msg("context: %s", err.msg);
    must_step(f, c, 0, 256, 0);
    must_step(f, c, 0, 256, 256);
    for (int32_t s = 1; s < 6; s++) eng_seq_copy(c, 0, s);
    must_step(f, c, 6, 256, 0);
    must_step(f, c, 6, 44, 256);
    must_step(f, c, 7, 256, 0);
    must_step(f, c, 7, 4, 256);
    /* order: seqs 0-2, 6, 3-5, then 7's piece; one logits row per sequence */
    enum { N = 27 };
    int32_t tok[N], pos[N], sq[N];
    int8_t want[N] = {0};
    const int32_t order[7] = {0, 1, 2, 6, 3, 4, 5};
    for (int i = 0; i < 7; i++) {
        sq[i] = order[i];
        pos[i] = order[i] == 6 ? 300 : 512;
        tok[i] = (13 + 17 * order[i]) % f->V;
        want[i] = 1;
    }
    for (int i = 7; i < N; i++) sq[i] = 7, pos[i] = 260 + i - 7, tok[i] = (5 + 3 * i) % f->V;
    want[N - 1] = 1;
    eng_batch b = {N, tok, pos, sq, want};
    if (eng_decode(c, &b, &err)) fail_msg("the shared step: %s", err.msg);
    for (int i = 0; i < 8; i++) {
        const int32_t s = i < 7 ? sq[i] : 7;
        eng_seq_clear(ref, 0);
        if (s == 6) {
            must_step(f, ref, 0, 256, 0);
            must_step(f, ref, 0, 44, 256);
        } else {
            must_step(f, ref, 0, 256, 0);
            must_step(f, ref, 0, s == 7 ? 4 : 256, 256);
        }
        const int first = i < 7 ? i : 7, last = i < 7 ? i : N - 1;
        for (int t = first; t <= last; t++)
            if (eng_decode_sequence(ref, 0, &tok[t], 1, pos[t], &err)) fail_msg("reference: %s", err.msg);
        if (memcmp(eng_get_logits(ref, 0), eng_get_logits(c, i), (size_t)f->V * sizeof(float)))
            fail_msg("%d threads, %s cache: sequence %d stepped over shared blocks differs from a lone decode",
                     n_threads, eng_type_name(kv_type), s);
    }
    eng_context_free(c);
    eng_context_free(ref);
}

static void test_sequences_over_shared_blocks_get_lone_results(void **state) {
    for (int kv = 0; kv < 2; kv++) { /* F16, and Q8_0 (a block read as stored or widened first) */
        shared_blocks_step(*state, 1, kv ? ENG_TYPE_Q8_0 : ENG_TYPE_F16);
        shared_blocks_step(*state, 2, kv ? ENG_TYPE_Q8_0 : ENG_TYPE_F16);
        shared_blocks_step(*state, 3, kv ? ENG_TYPE_Q8_0 : ENG_TYPE_F16);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_pool_gives_full_pool_logits),
        cmocka_unit_test(test_exhausted_pool_refuses_the_step_and_changes_nothing),
        cmocka_unit_test(test_scratch_out_of_memory_fails_the_step),
        cmocka_unit_test(test_shared_prefix_blocks_are_held_by_reference),
        cmocka_unit_test(test_all_holders_of_a_shared_block_step_with_one_copy_fewer),
        cmocka_unit_test(test_sequences_over_shared_blocks_get_lone_results),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
