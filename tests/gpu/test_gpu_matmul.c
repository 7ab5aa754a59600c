/*
 * test_gpu_matmul.c - the CUDA backend's matmul against a double-precision reference on the
 * CPU-dequantized weights, for every weight type it runs (the f16 tensor-core kernel, and the
 * f32 one for F32 weights), at token counts inside one 32-token tile and across tiles; and its
 * batch invariance: a token's results are bit-identical whatever else is in the call. Row counts that do not fill a thread block, K of an odd number of super-blocks,
 * and the widest rows of a 4B model are among the shapes. Skips without a CUDA device.
 */
#include "gputest.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "quant.h"



static void check_type(int type, int N, int K, int n_tok) {
    uint64_t s = 1234 + (uint64_t)type * 77 + (uint64_t)n_tok;
    float *wf = malloc((size_t)N * K * 4), *wd = malloc((size_t)N * K * 4);
    float *x = malloc((size_t)n_tok * K * 4), *y = malloc((size_t)n_tok * N * 4);
    const size_t rb = eng_row_size(type, K);
    uint8_t *wq = malloc(rb * (size_t)N);
    for (int64_t i = 0; i < (int64_t)N * K; i++) wf[i] = tu_randn(&s) * 0.5f;
    for (int64_t i = 0; i < (int64_t)n_tok * K; i++) x[i] = tu_randn(&s);
    for (int r = 0; r < N; r++) {
        if (type == ENG_TYPE_F32) memcpy(wq + rb * r, wf + (size_t)r * K, rb);
        else assert_int_equal(eng_quantize_row(type, wf + (size_t)r * K, wq + rb * r, K), DP_OK);
        assert_int_equal(eng_dequantize_row(type, wq + rb * r, wd + (size_t)r * K, K), DP_OK);
    }
    dp_err err = {0};
    if (gpu_matmul_host(g_dev, type, wq, N, K, x, n_tok, y, &err)) fail_msg("%s: %s", eng_type_name(type), err.msg);
    /* F32 weights: f32 throughout, f32 rounding only; the others: f16 activations (and weights
     * unless F16), about 2^-11 of each product */
    const double rel = type == ENG_TYPE_F32 ? 3e-5 : 2e-3;
    double worst = 0;
    for (int t = 0; t < n_tok; t++)
        for (int r = 0; r < N; r++) {
            double ref = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                const double p = (double)wd[(size_t)r * K + k] * x[(size_t)t * K + k];
                ref += p;
                mag += fabs(p);
            }
            const double d = fabs(y[(size_t)t * N + r] - ref) / (mag + 1e-30);
            if (d > worst) worst = d;
            if (d > rel)
                fail_msg("%s, %d tokens: y[%d][%d] = %.6g, reference %.6g (error %.2g of the magnitude %.4g)",
                         eng_type_name(type), n_tok, t, r, (double)y[(size_t)t * N + r], ref, d, mag);
        }
    print_message("  %-5s %2d tokens: worst error %.2g of the magnitude\n", eng_type_name(type), n_tok, worst);
    free(wf);
    free(wd);
    free(x);
    free(y);
    free(wq);
}

static void test_gpu_matmul_matches_reference_for_every_type_and_path(void **state) {
    (void)state;
    SKIP_WITHOUT_GPU();
    const int types[] = {ENG_TYPE_F32,  ENG_TYPE_F16,  ENG_TYPE_BF16, ENG_TYPE_Q8_0, ENG_TYPE_Q4_0, ENG_TYPE_Q4_1,
                         ENG_TYPE_Q5_0, ENG_TYPE_Q5_1, ENG_TYPE_Q4_K, ENG_TYPE_Q5_K, ENG_TYPE_Q6_K};
    const int toks[] = {1, 3, 8, 9, 40};
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        for (size_t j = 0; j < sizeof(toks) / sizeof(toks[0]); j++) check_type(types[i], 67, 768, toks[j]);
}

/* Token t's row of y alone, among 9 and among 40 tokens (another tile), at every position. */
static void test_gpu_matmul_is_batch_invariant(void **state) {
    (void)state;
    SKIP_WITHOUT_GPU();
    const int types[] = {ENG_TYPE_F32, ENG_TYPE_F16, ENG_TYPE_Q8_0, ENG_TYPE_Q4_K, ENG_TYPE_Q6_K};
    enum { N = 70, K = 512, T = 40 };
    uint64_t s = 99;
    float *wf = malloc(N * K * 4), *x = malloc(T * K * 4), *all = malloc(T * N * 4), *some = malloc(9 * N * 4);
    float one[N];
    for (int i = 0; i < N * K; i++) wf[i] = tu_randn(&s);
    for (int i = 0; i < T * K; i++) x[i] = tu_randn(&s);
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        const int type = types[i];
        const size_t rb = eng_row_size(type, K);
        uint8_t *wq = malloc(rb * N);
        for (int r = 0; r < N; r++) {
            if (type == ENG_TYPE_F32) memcpy(wq + rb * r, wf + (size_t)r * K, rb);
            else assert_int_equal(eng_quantize_row(type, wf + (size_t)r * K, wq + rb * r, K), DP_OK);
        }
        dp_err err = {0};
        if (gpu_matmul_host(g_dev, type, wq, N, K, x, T, all, &err)) fail_msg("%s", err.msg);
        for (int t = 0; t < T; t++) {
            if (gpu_matmul_host(g_dev, type, wq, N, K, x + (size_t)t * K, 1, one, &err)) fail_msg("%s", err.msg);
            if (memcmp(one, all + (size_t)t * N, sizeof(one)))
                fail_msg("%s: token %d alone differs from the same token among %d", eng_type_name(type), t, T);
        }
        /* tokens 31..39 as a batch of 9: their positions in the tile all change */
        if (gpu_matmul_host(g_dev, type, wq, N, K, x + 31 * K, 9, some, &err)) fail_msg("%s", err.msg);
        if (memcmp(some, all + 31 * N, 9 * N * sizeof(float)))
            fail_msg("%s: tokens 31..39 differ between a batch of 9 and one of 40", eng_type_name(type));
        free(wq);
    }
    free(wf);
    free(x);
    free(all);
    free(some);
}

static void test_gpu_matmul_handles_wide_rows_and_many_tokens(void **state) {
    (void)state;
    SKIP_WITHOUT_GPU();
    /* K of an FFN down projection, and a prompt-sized batch */
    check_type(ENG_TYPE_Q4_K, 33, 9728, 130);
    check_type(ENG_TYPE_Q6_K, 130, 2560, 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpu_matmul_matches_reference_for_every_type_and_path),
        cmocka_unit_test(test_gpu_matmul_is_batch_invariant),
        cmocka_unit_test(test_gpu_matmul_handles_wide_rows_and_many_tokens),
    };
    return cmocka_run_group_tests_name("gpu_matmul", tests, gpu_setup, NULL);
}
