/*
 * test_sampler_chat.c - sampler chain semantics and reproducibility; ChatML rendering for
 * each template family (golden strings) and template detection.
 */
#include "testutil.h"

#include "rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

static void test_greedy_is_argmax_with_ties_to_lowest_id(void **state) {
    (void)state;
    float l[5] = {1, 3, 3, 2, -1};
    assert_int_equal(eng_argmax(l, 5), 1);
    eng_sampler_params p = eng_sampler_default_params();
    p.temp = 0;
    eng_sampler *s;
    assert_int_equal(eng_sampler_new(&p, 5, &s, NULL), DP_OK);
    assert_int_equal(eng_sampler_sample(s, l), 1);
    eng_sampler_free(s);
}

/* The piecewise argmax against the plain loop it replaces: lengths around its 16-lane and
 * 4096-value pieces, ties (first index wins), NaNs (never win unless at 0), -inf, signed zeros;
 * and the greedy sampler (which takes it when no penalty applies) with a penalty window too. */
static int32_t argmax_plain(const float *l, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (l[i] > l[best]) best = i;
    return best;
}

static void test_argmax_matches_the_plain_loop(void **state) {
    (void)state;
    enum { N = 3 * 4096 + 37 };
    float *l = malloc(N * sizeof(float));
    uint64_t r = 11;
    const int32_t lens[] = {1, 2, 15, 16, 17, 31, 4095, 4096, 4097, 8192 + 5, N};
    for (int trial = 0; trial < 40; trial++)
        for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
            const int32_t n = lens[li];
            for (int32_t i = 0; i < n; i++) l[i] = (float)(int)(tu_randn(&r) * (trial % 4 ? 3.0f : 300.0f));
            switch (trial % 8) { /* coarse values give ties; then the special cases */
            case 1: l[0] = NAN; break;
            case 2: l[n / 2] = NAN; l[n - 1] = 1e30f; break;
            case 3: for (int32_t i = 0; i < n; i++) l[i] = -INFINITY; break;
            case 4: for (int32_t i = 0; i < n; i++) l[i] = i % 3 ? 0.0f : -0.0f; break;
            case 5: l[n - 1] = 1e9f; l[n / 3] = 1e9f; break;
            case 6: for (int32_t i = 0; i < n; i += 7) l[i] = NAN; break;
            default: break;
            }
            const int32_t want = argmax_plain(l, n), got = eng_argmax(l, n);
            if (got != want) fail_msg("n=%d trial %d: argmax %d, plain loop %d", n, trial, got, want);
        }
    for (int32_t i = 0; i < N; i++) l[i] = (float)(int)(tu_randn(&r) * 4.0f);
    eng_sampler_params p = eng_sampler_default_params();
    p.temp = 0;
    eng_sampler *s;
    assert_int_equal(eng_sampler_new(&p, N, &s, NULL), DP_OK);
    assert_int_equal(eng_sampler_sample(s, l), argmax_plain(l, N));
    eng_sampler_free(s);
    p.repeat_penalty = 4.0f; /* the argmax token, seen once, falls behind the runner-up */
    assert_int_equal(eng_sampler_new(&p, N, &s, NULL), DP_OK);
    const int32_t top = argmax_plain(l, N);
    eng_sampler_accept(s, top);
    const float keep = l[top];
    l[top] = -INFINITY;
    const int32_t second = argmax_plain(l, N);
    l[top] = keep;
    if (keep > 0 && keep / 4.0f < l[second]) assert_int_equal(eng_sampler_sample(s, l), second);
    eng_sampler_free(s);
    free(l);
}

static void test_same_seed_same_tokens_and_truncation_respected(void **state) {
    (void)state;
    enum { V = 1000 };
    float *l = malloc(V * 4);
    uint64_t r = 3;
    for (int i = 0; i < V; i++) l[i] = tu_randn(&r) * 2;
    eng_sampler_params p = eng_sampler_default_params();
    p.seed = 42;
    p.top_k = 5;
    eng_sampler *a, *b;
    assert_int_equal(eng_sampler_new(&p, V, &a, NULL), DP_OK);
    assert_int_equal(eng_sampler_new(&p, V, &b, NULL), DP_OK);
    int top5[5];
    float tmp[V];
    memcpy(tmp, l, sizeof(tmp));
    for (int k = 0; k < 5; k++) {
        top5[k] = eng_argmax(tmp, V);
        tmp[top5[k]] = -INFINITY;
    }
    int seen_other = 0;
    for (int i = 0; i < 300; i++) {
        int x = eng_sampler_sample(a, l), y = eng_sampler_sample(b, l);
        assert_int_equal(x, y); /* same seed, same stream */
        bool in = false;
        for (int k = 0; k < 5; k++) in |= x == top5[k];
        assert_true(in); /* top-k keeps only the 5 best */
        seen_other |= x != top5[0];
    }
    assert_true(seen_other); /* it does sample */
    eng_sampler_free(a);
    eng_sampler_free(b);
    /* min-p 0.99 keeps only tokens within ln(0.99) of the best: the best alone here */
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.99f;
    assert_int_equal(eng_sampler_new(&p, V, &a, NULL), DP_OK);
    for (int i = 0; i < 50; i++) assert_int_equal(eng_sampler_sample(a, l), top5[0]);
    eng_sampler_free(a);
    free(l);
}

static void test_repeat_penalty_divides_positive_and_multiplies_negative(void **state) {
    (void)state;
    float l[3] = {2.0f, -1.0f, 1.9f};
    eng_sampler_params p = eng_sampler_default_params();
    p.temp = 0;
    p.repeat_penalty = 2.0f;
    eng_sampler *s;
    assert_int_equal(eng_sampler_new(&p, 3, &s, NULL), DP_OK);
    assert_int_equal(eng_sampler_sample(s, l), 0);
    eng_sampler_accept(s, 0); /* 2.0 -> 1.0 < 1.9 */
    assert_int_equal(eng_sampler_sample(s, l), 2);
    eng_sampler_free(s);
}

static void render(eng_chat_kind k, bool think, const char *want) {
    eng_chat_msg msgs[] = {{"system", "  Be brief. "}, {"user", "Hi\n"}};
    dp_buf b;
    dp_buf_init(&b, 1 << 20);
    dp_err err = {0};
    assert_int_equal(eng_chat_render(k, msgs, 2, true, think, &b, &err), DP_OK);
    assert_string_equal((const char *)b.data, want);
    dp_buf_free(&b);
}

static void test_chat_rendering_per_family(void **state) {
    (void)state;
    render(ENG_CHAT_CHATML, false,
           "<|im_start|>system\n  Be brief. <|im_end|>\n<|im_start|>user\nHi\n<|im_end|>\n<|im_start|>assistant\n");
    render(ENG_CHAT_QWEN3, false,
           "<|im_start|>system\n  Be brief. <|im_end|>\n<|im_start|>user\nHi\n<|im_end|>\n<|im_start|>assistant\n"
           "<think>\n\n</think>\n\n");
    render(ENG_CHAT_QWEN3, true,
           "<|im_start|>system\n  Be brief. <|im_end|>\n<|im_start|>user\nHi\n<|im_end|>\n<|im_start|>assistant\n");
    render(ENG_CHAT_QWEN35, true,
           "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n");
    render(ENG_CHAT_QWEN35, false,
           "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
           "<think>\n\n</think>\n\n");
    eng_chat_msg only_user[] = {{"user", "x"}};
    dp_buf b;
    dp_buf_init(&b, 1 << 20);
    dp_err err = {0};
    assert_int_equal(eng_chat_render(ENG_CHAT_QWEN25, only_user, 1, false, false, &b, &err), DP_OK);
    assert_non_null(strstr((const char *)b.data, "You are Qwen, created by Alibaba Cloud"));
    eng_chat_msg no_user[] = {{"system", "x"}};
    assert_int_equal(eng_chat_render(ENG_CHAT_QWEN35, no_user, 1, true, false, &b, &err), DP_EINVAL);
    eng_chat_msg bad_role[] = {{"tool", "x"}};
    assert_int_equal(eng_chat_render(ENG_CHAT_CHATML, bad_role, 1, true, false, &b, &err), DP_EINVAL);
    dp_buf_free(&b);
}

static void test_chat_template_detection(void **state) {
    (void)state;
    const char *q35 = "{%- if enable_thinking %}<|im_start|>{{- '<think>\\n' }}";
    const char *q3 = "<|im_start|> {%- if enable_thinking is defined and enable_thinking is false %}";
    const char *q25 = "<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud.";
    assert_int_equal(eng_chat_detect(q35, strlen(q35)), ENG_CHAT_QWEN35);
    assert_int_equal(eng_chat_detect(q3, strlen(q3)), ENG_CHAT_QWEN3);
    assert_int_equal(eng_chat_detect(q25, strlen(q25)), ENG_CHAT_QWEN25);
    assert_int_equal(eng_chat_detect("<|im_start|>", 12), ENG_CHAT_CHATML);
    assert_int_equal(eng_chat_detect("[INST]", 6), ENG_CHAT_UNSUPPORTED);
    if (tu_fixture("README.md")) { /* the real templates embedded in the fixtures */
        const char *files[] = {"models/qwen2-tiny-f16.gguf", "models/qwen3-tiny-f16.gguf", "models/qwen35-tiny-f16.gguf"};
        const eng_chat_kind want[] = {ENG_CHAT_QWEN25, ENG_CHAT_QWEN3, ENG_CHAT_QWEN35};
        for (int i = 0; i < 3; i++) {
            eng_model *m;
            dp_err err = {0};
            assert_int_equal(eng_model_load(tu_fixture(files[i]), &m, &err), DP_OK);
            assert_int_equal(eng_model_chat_kind(m), want[i]);
            eng_model_free(m);
        }
    }
}

/* Every seeded output rests on splitmix64: pin its reference values (state 0). */
static void test_splitmix64_reference_values(void **state) {
    (void)state;
    uint64_t s = 0;
    assert_true(dp_splitmix64(&s) == 0xe220a8397b1dcdafull);
    assert_true(dp_splitmix64(&s) == 0x6e789e6aa1b965f4ull);
    assert_true(dp_splitmix64(&s) == 0x06c45d188009454full);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_splitmix64_reference_values),
        cmocka_unit_test(test_greedy_is_argmax_with_ties_to_lowest_id),
        cmocka_unit_test(test_argmax_matches_the_plain_loop),
        cmocka_unit_test(test_same_seed_same_tokens_and_truncation_respected),
        cmocka_unit_test(test_repeat_penalty_divides_positive_and_multiplies_negative),
        cmocka_unit_test(test_chat_rendering_per_family),
        cmocka_unit_test(test_chat_template_detection),
    };
    return cmocka_run_group_tests_name("sampler_chat", tests, NULL, NULL);
}
