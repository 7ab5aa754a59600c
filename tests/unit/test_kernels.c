/*
 * test_kernels.c - every SIMD vec-dot kernel against its scalar reference, the activation
 * quantizers and the grouped attention loops. (The thread pool: test_threadpool.c.)
 */
#include "testutil.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(_M_X64)
#include <xmmintrin.h> /* _mm_getcsr */
#endif

#include "backend.h"
#include "cpu/kernels.h"
#include "cpu/threadpool.h"
#include "platform.h"
#include "quant.h"

static void test_simd_vec_dots_match_scalar_reference(void **state) {
    (void)state;
    print_message("  kernels in use: %s\n", eng_cpu_kernel_name());
    const int types[] = {ENG_TYPE_F32, ENG_TYPE_F16, ENG_TYPE_BF16, ENG_TYPE_Q8_0, ENG_TYPE_Q4_0, ENG_TYPE_Q4_K,
                         ENG_TYPE_Q5_K, ENG_TYPE_Q6_K, ENG_TYPE_Q4_1, ENG_TYPE_Q5_0, ENG_TYPE_Q5_1};
    const int64_t K = 2560;
    float *w = malloc(K * 4), *x = malloc(K * 4);
    uint8_t *wq = malloc(K * 4), *xq = malloc(K * 4);
    uint64_t s = 17;
    for (int trial = 0; trial < 20; trial++) {
        for (int64_t i = 0; i < K; i++) {
            w[i] = tu_randn(&s) * (trial % 3 ? 1.0f : 0.01f);
            x[i] = tu_randn(&s) * (trial % 4 ? 3.0f : 1e-3f);
        }
        if (trial == 5) memset(x, 0, K * 4); /* all-zero activations */
        for (size_t k = 0; k < sizeof(types) / sizeof(types[0]); k++) {
            const int t = types[k], act = eng_act_type(t);
            assert_int_equal(eng_quantize_row(t, w, wq, K), DP_OK);
            eng_act_quantize(act, x, xq, K);
            const float ref = eng_vec_dot_ref(t)(K, wq, xq);
            const float fast = eng_vec_dot_best(t)(K, wq, xq);
            /* integer block sums are exact; only the float summation order may differ */
            float wd[2560], xd[2560];
            eng_dequantize_row(t, wq, wd, K);
            if (act == ENG_TYPE_F32) memcpy(xd, x, sizeof(xd));
            else eng_dequantize_row(act, xq, xd, K);
            double mag = 0;
            for (int64_t i = 0; i < K; i++) mag += fabs((double)wd[i] * xd[i]);
            if (act == ENG_TYPE_Q8_1) /* the min term uses s = d * sum(q) rounded to F16, as llama.cpp does */
                for (int64_t i = 0; i < K / 32; i++) {
                    const eng_f16 *wm = (const eng_f16 *)(const void *)(wq + (size_t)i * eng_row_size(t, 32));
                    const eng_block_q8_1 *xb = (const eng_block_q8_1 *)(const void *)xq + i;
                    mag += fabs((double)eng_f16_to_f32(wm[1]) * eng_f16_to_f32(xb->s)) * (1.0 / 1024) / 1e-5;
                }
            if (fabs((double)fast - ref) > 1e-5 * mag + 1e-30)
                fail_msg("%s trial %d: simd %.9g vs reference %.9g (sum |w x| %.3g)", eng_type_name(t), trial,
                         (double)fast, (double)ref, mag);
            /* and the reference equals the dot of the dequantized rows */
            double exact = 0;
            for (int64_t i = 0; i < K; i++) exact += (double)wd[i] * xd[i];
            if (fabs(exact - ref) > 1e-5 * mag + 1e-30)
                fail_msg("%s trial %d: reference %.9g vs dequantized dot %.9g", eng_type_name(t), trial, (double)ref,
                         exact);
        }
    }
    free(w);
    free(x);
    free(wq);
    free(xq);
}

/* The dots that fetch ahead (one-sequence decode) give the plain dot's bits, whatever they
 * fetch: nothing, an unaligned address, a row of another size; with an odd block count too. */
static void test_fetching_dots_match_plain_dots_bit_for_bit(void **state) {
    (void)state;
    const int types[] = {ENG_TYPE_Q4_K, ENG_TYPE_Q5_K, ENG_TYPE_Q6_K, ENG_TYPE_Q8_0, ENG_TYPE_Q4_0};
    const int64_t Ks[] = {768, 2560};
    float *w = malloc(2560 * 4), *x = malloc(2560 * 4);
    uint8_t *wq = malloc(2560 * 4), *xq = malloc(2560 * 4), *far = malloc(8192);
    memset(far, 0x5a, 8192);
    uint64_t s = 29;
    int checked = 0;
    for (size_t k = 0; k < sizeof(types) / sizeof(types[0]); k++) {
        const eng_vec_dot_pf_fn pf = eng_vec_dot_pf_best(types[k]);
        if (!pf) continue;
        for (size_t ki = 0; ki < 2; ki++) {
            const int64_t K = Ks[ki];
            for (int trial = 0; trial < 8; trial++) {
                for (int64_t i = 0; i < K; i++) w[i] = tu_randn(&s), x[i] = tu_randn(&s) * 2;
                assert_int_equal(eng_quantize_row(types[k], w, wq, K), DP_OK);
                eng_act_quantize(eng_act_type(types[k]), x, xq, K);
                const float plain = eng_vec_dot_best(types[k])(K, wq, xq);
                const void *fetch[] = {NULL, far, far + 7, far + 4096 - 33, wq};
                for (size_t f = 0; f < sizeof(fetch) / sizeof(fetch[0]); f++) {
                    const float got = pf(K, wq, xq, fetch[f]);
                    if (memcmp(&got, &plain, sizeof got))
                        fail_msg("%s K=%lld fetch %zu: %.9g vs plain dot %.9g", eng_type_name(types[k]), (long long)K,
                                 f, (double)got, (double)plain);
                }
                checked++;
            }
        }
    }
    print_message("  fetching dots checked: %d rows%s\n", checked, checked ? "" : " (this CPU has none)");
    free(w);
    free(x);
    free(wq);
    free(xq);
    free(far);
}

/* The four-row dots (one-sequence decode) give each row its single-row dot's bits: rows of
 * different scales, block counts odd and even, rows packed or apart, any fetch address. */
static void with_avx2_too(void (*check)(void));

static void four_row_dots_check(void) {
    const int types[] = {ENG_TYPE_Q4_K, ENG_TYPE_Q5_K, ENG_TYPE_Q6_K, ENG_TYPE_Q8_0, ENG_TYPE_Q4_0};
    const int64_t Ks[] = {256, 768, 2560};
    float *w = malloc(2560 * 4), *x = malloc(2560 * 4);
    uint8_t *wq = malloc(4 * 2 * 2560), *xq = malloc(2560 * 4), *far = malloc(16384);
    memset(far, 0x5a, 16384);
    uint64_t s = 31;
    int checked = 0;
    for (size_t k = 0; k < sizeof(types) / sizeof(types[0]); k++) {
        const eng_vec_dot4r_fn d4 = eng_vec_dot4r_best(types[k]);
        if (!d4) continue;
        for (size_t ki = 0; ki < sizeof(Ks) / sizeof(Ks[0]); ki++) {
            const int64_t K = Ks[ki];
            const size_t rs = eng_row_size(types[k], K);
            for (int trial = 0; trial < 6; trial++) {
                const size_t rb = trial & 1 ? rs : rs + 64 + 8 * (size_t)trial; /* packed, or apart */
                for (int r = 0; r < 4; r++) {
                    const float mag = r == 2 ? 1e-3f : (float)(r + 1);
                    for (int64_t i = 0; i < K; i++) w[i] = tu_randn(&s) * mag;
                    assert_int_equal(eng_quantize_row(types[k], w, wq + (size_t)r * rb, K), DP_OK);
                }
                for (int64_t i = 0; i < K; i++) x[i] = tu_randn(&s) * 3;
                eng_act_quantize(eng_act_type(types[k]), x, xq, K);
                float plain[4];
                for (int r = 0; r < 4; r++) plain[r] = eng_vec_dot_best(types[k])(K, wq + (size_t)r * rb, xq);
                const void *fetch[] = {NULL, far, far + 7, far + 8192 - 33, wq};
                for (size_t f = 0; f < sizeof(fetch) / sizeof(fetch[0]); f++) {
                    float got[4];
                    d4(K, wq, rb, xq, fetch[f], got);
                    for (int r = 0; r < 4; r++)
                        if (memcmp(&got[r], &plain[r], sizeof got[r]))
                            fail_msg("%s K=%lld row %d fetch %zu: %.9g vs row dot %.9g", eng_type_name(types[k]),
                                     (long long)K, r, f, (double)got[r], (double)plain[r]);
                }
                checked++;
            }
        }
    }
    print_message("  four-row dots checked: %d groups (%s)\n", checked, checked ? eng_cpu_kernel_name() : "this CPU has none");
    free(w);
    free(x);
    free(wq);
    free(xq);
    free(far);
}
static void test_four_row_dots_match_row_dots_bit_for_bit(void **state) {
    (void)state;
    with_avx2_too(four_row_dots_check);
}

static void test_four_row_kernels_match_single_row_reference(void **state) {
    (void)state;
    const int types[] = {ENG_TYPE_Q8_0, ENG_TYPE_Q4_K, ENG_TYPE_Q6_K, ENG_TYPE_Q5_K, ENG_TYPE_F16,
                         ENG_TYPE_Q4_0, ENG_TYPE_Q5_0, ENG_TYPE_Q4_1, ENG_TYPE_Q5_1};
    const int64_t K = 1024;
    float w[1024], x[4][1024];
    uint8_t wq[4096], xq[4][4096];
    uint64_t s = 99;
    int tested = 0;
    for (size_t k = 0; k < sizeof(types) / sizeof(types[0]); k++) {
        const int t = types[k], act = eng_act_type(t);
        eng_vec_dot4_fn f4 = eng_vec_dot4_best(t);
        if (!f4) continue;
        tested++;
        for (int trial = 0; trial < 10; trial++) {
            for (int64_t i = 0; i < K; i++) w[i] = tu_randn(&s);
            eng_quantize_row(t, w, wq, K);
            const size_t stride = eng_act_row_size(act, K);
            uint8_t *rows = malloc(4 * stride);
            for (int j = 0; j < 4; j++) {
                for (int64_t i = 0; i < K; i++) x[j][i] = tu_randn(&s) * (float)(j + 1);
                eng_act_quantize(act, x[j], rows + j * stride, K);
            }
            float out[4];
            f4(K, wq, rows, stride, out);
            for (int j = 0; j < 4; j++) {
                /* bit-identical to the 1-row kernel: a token's result cannot depend on its batch */
                float one = eng_vec_dot_best(t)(K, wq, rows + j * stride);
                if (memcmp(&one, &out[j], 4) != 0)
                    fail_msg("%s row %d: 4-row kernel %.9g differs from the 1-row kernel %.9g", eng_type_name(t), j,
                             (double)out[j], (double)one);
                float ref = eng_vec_dot_ref(t)(K, wq, rows + j * stride);
                if (fabsf(out[j] - ref) > 1e-4f * (fabsf(ref) + 10.0f))
                    fail_msg("%s row %d: 4-row kernel %.7g, reference %.7g", eng_type_name(t), j, (double)out[j],
                             (double)ref);
            }
            free(rows);
        }
    }
    print_message("  %d weight types have a 4-row kernel on this CPU\n", tested);
    (void)xq;
}

/* The GEMM must give every token the bits the 1-row kernel gives it (batch invariance), for
 * partial row tiles, every token remainder and sub-ranges of rows; on AMX machines both GEMMs
 * (AMX, and AVX-512 with AMX disabled), with token counts of one, two and three 16-token groups.
 * 133 rows: the AMX GEMM takes one group's rows in panels of 1, 2, 4, 4... tiles, so the full
 * range ends in a partial panel with a partial tile, and [16, 133) in a panel of one partial tile. */
static int gemm_bit_identity_on(const int64_t *Ks, size_t n_k, const int *counts, size_t n_counts, int T) {
    const int types[] = {ENG_TYPE_Q4_K, ENG_TYPE_Q5_K, ENG_TYPE_Q6_K, ENG_TYPE_Q8_0, ENG_TYPE_Q4_0, ENG_TYPE_Q5_0, ENG_TYPE_F16};
    const int N = 133;
    uint64_t s = 4242;
    int tested = 0;
    for (size_t ti = 0; ti < sizeof(types) / sizeof(types[0]); ti++) {
        const int t = types[ti], act = eng_act_type(t);
        eng_gemm_fn gemm = eng_gemm_best(t);
        if (!gemm) continue;
        tested++;
        for (size_t ki = 0; ki < n_k; ki++) {
            const int64_t K = Ks[ki];
            if (K % eng_type_get(t)->blck) continue;
            const size_t rb = eng_row_size(t, K), xs = eng_act_row_size(act, K);
            uint8_t *wq = malloc(rb * N), *xq = malloc(xs * T), *xg = malloc(xs * T);
            float *f = malloc(K * sizeof(float)), *y = malloc((size_t)T * N * sizeof(float));
            void *ws = malloc(eng_gemm_ws_size(K, T));
            for (int r = 0; r < N; r++) {
                for (int64_t i = 0; i < K; i++) f[i] = tu_randn(&s) * (r % 5 ? 1.0f : 0.02f);
                assert_int_equal(eng_quantize_row(t, f, wq + rb * r, K), DP_OK);
            }
            for (int j = 0; j < T; j++) {
                for (int64_t i = 0; i < K; i++) f[i] = tu_randn(&s) * (float)(1 + j % 3);
                eng_act_quantize(act, f, xq + xs * j, K);
            }
            const int64_t ranges[][2] = {{0, N}, {16, N}, {5, 21}};
            for (int ri = 0; ri < 3; ri++)
                for (size_t ni = 0; ni < n_counts; ni++) {
                    const int n_tok = counts[ni];
                    const int64_t r0 = ranges[ri][0], r1 = ranges[ri][1];
                    for (size_t i = 0; i < (size_t)T * N; i++) y[i] = -12345.0f;
                    /* the GEMM may read the activations in a form of its own */
                    memcpy(xg, xq, xs * T);
                    if (eng_gemm_prep_best(t)) eng_gemm_prep_best(t)(xg, xs, n_tok, K);
                    gemm(K, wq, rb, r0, r1, xg, xs, n_tok, y, N, ws);
                    for (int j = 0; j < T; j++)
                        for (int r = 0; r < N; r++) {
                            const float got = y[(size_t)j * N + r];
                            if (j >= n_tok || r < r0 || r >= r1) {
                                if (got != -12345.0f) fail_msg("%s: wrote outside rows [%d,%d) x %d tokens", eng_type_name(t), (int)r0, (int)r1, n_tok);
                                continue;
                            }
                            const float one = eng_vec_dot_best(t)(K, wq + rb * r, xq + xs * j);
                            if (memcmp(&one, &got, 4) != 0)
                                fail_msg("%s K=%d row %d token %d of %d: GEMM %.9g, 1-row kernel %.9g", eng_type_name(t),
                                         (int)K, r, j, n_tok, (double)got, (double)one);
                            const float ref = eng_vec_dot_ref(t)(K, wq + rb * r, xq + xs * j);
                            if (fabsf(got - ref) > 1e-4f * (fabsf(ref) + 10.0f))
                                fail_msg("%s row %d token %d: GEMM %.7g, reference %.7g", eng_type_name(t), r, j,
                                         (double)got, (double)ref);
                        }
                }
            free(wq);
            free(xq);
            free(xg);
            free(f);
            free(y);
            free(ws);
        }
    }
    return tested;
}

static int gemm_bit_identity(void) {
    const int64_t Ks[] = {256, 2560, 96}; /* 96: an odd number of Q8_0 blocks */
    const int counts[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 13, 16, 17, 31, 32, 33, 40};
    return gemm_bit_identity_on(Ks, 3, counts, sizeof(counts) / sizeof(counts[0]), 40);
}

/* A long K: the AMX GEMM takes its 16-token groups in passes whose packed activations fit L2
 * (about 1 MB; 424 KB a group at K = 24576), here 5 groups as passes of 2, 2 and 1. */
static void test_gemm_long_k_in_passes_bit_for_bit(void **state) {
    (void)state;
    const int64_t Ks[] = {24576};
    const int counts[] = {33, 80};
    print_message("  %d weight types (%s)\n", gemm_bit_identity_on(Ks, 1, counts, 2, 80), eng_cpu_kernel_name());
}

static void test_gemm_matches_single_row_kernel_bit_for_bit(void **state) {
    (void)state;
    const bool amx = eng_cpu_amx();
    int tested = gemm_bit_identity();
    print_message("  %d weight types have a GEMM kernel on this CPU (%s)\n", tested, eng_cpu_kernel_name());
    if (amx) {
        eng_cpu_disable_amx(true);
        tested = gemm_bit_identity();
        print_message("  and %d with AMX disabled (%s)\n", tested, eng_cpu_kernel_name());
        eng_cpu_disable_amx(false);
    }
    /* the AVX2 GEMM and dots too, on machines that would otherwise run AVX-512 */
    if (strncmp(eng_cpu_kernel_name(), "avx512", 6) == 0) {
        eng_cpu_disable_avx512(true);
        tested = gemm_bit_identity();
        print_message("  and %d with AVX-512 disabled (%s)\n", tested, eng_cpu_kernel_name());
        eng_cpu_disable_avx512(false);
    }
}

/* Runs a check with the kernels this CPU picks, then again with AVX-512 disabled, so that
 * AVX-512 machines test the AVX2 kernels too. */
static void with_avx2_too(void (*check)(void)) {
    for (int pass = 0; pass < 2; pass++) {
        eng_cpu_disable_avx512(pass == 1);
        check();
    }
    eng_cpu_disable_avx512(false);
}

/* The SIMD activation quantizers write the reference's bytes: ties, repeated maxima of both
 * signs, zeros. */
static void q8_k_quantizer_check(void) {
    const int64_t K = 1024;
    float x[1024];
    eng_block_q8_k fast[4], ref[4];
    uint64_t s = 7;
    for (int trial = 0; trial < 200; trial++) {
        for (int64_t i = 0; i < K; i++) x[i] = tu_randn(&s) * (trial % 7 ? 2.0f : 1e-6f);
        if (trial % 5 == 1) /* exact ties: multiples of max / 254 land on .5 */
            for (int64_t i = 0; i < K; i++) x[i] = (float)((int)(tu_randn(&s) * 60)) * 0.5f;
        if (trial % 5 == 2) x[17] = -(x[300] = 40.0f); /* same magnitude, both signs: the first wins */
        if (trial % 11 == 3) memset(x + 256, 0, 256 * sizeof(float));
        memset(fast, 0x5a, sizeof(fast));
        memset(ref, 0x5a, sizeof(ref));
        eng_act_quantize(ENG_TYPE_Q8_K, x, fast, K);
        eng_quantize_row(ENG_TYPE_Q8_K, x, ref, K);
        for (int b = 0; b < 4; b++)
            if (memcmp(&fast[b], &ref[b], sizeof(fast[b])) != 0)
                fail_msg("trial %d block %d: Q8_K activation bytes differ from the reference", trial, b);
    }
}

static void test_q8_k_activation_quantizer_matches_reference(void **state) {
    (void)state;
    with_avx2_too(q8_k_quantizer_check);
}

/* Q8_0 and Q8_1 (the activations of Q4_0/Q5_0/Q8_0 and Q4_1/Q5_1 weights): the dispatched
 * quantizer writes the scalar path's bytes, d and Q8_1's s included. Tiny blocks put d among the
 * F16 subnormals; a zero block has d = 0 and all q 0. */
static void q8_0_quantizer_check(void) {
    enum { K = 1024, NB = K / 32 };
    float x[K];
    eng_block_q8_0 fast0[NB], ref0[NB];
    eng_block_q8_1 fast1[NB], ref1[NB];
    uint64_t s = 11;
    for (int trial = 0; trial < 200; trial++) {
        for (int i = 0; i < K; i++)
            x[i] = tu_randn(&s) * (trial % 7 ? 3.0f : trial % 2 ? 1e-6f : 1e-3f);
        if (trial % 5 == 1) /* exact ties: half-integers with the block maximum 127 */
            for (int i = 0; i < K; i++)
                x[i] = i % 32 == 5 ? 127.0f : (float)((int)(tu_randn(&s) * 60)) + 0.5f;
        if (trial % 5 == 2) x[3] = -(x[20] = 40.0f);
        if (trial % 11 == 3) memset(x + 64, 0, 32 * sizeof(float));
        eng_cpu_force_scalar(true);
        eng_act_quantize(ENG_TYPE_Q8_0, x, ref0, K);
        eng_act_quantize(ENG_TYPE_Q8_1, x, ref1, K);
        eng_cpu_force_scalar(false);
        memset(fast0, 0x5a, sizeof(fast0));
        memset(fast1, 0x5a, sizeof(fast1));
        eng_act_quantize(ENG_TYPE_Q8_0, x, fast0, K);
        eng_act_quantize(ENG_TYPE_Q8_1, x, fast1, K);
        if (memcmp(fast0, ref0, sizeof(fast0)) != 0)
            fail_msg("trial %d: Q8_0 activation bytes differ from the scalar path", trial);
        if (memcmp(fast1, ref1, sizeof(fast1)) != 0)
            fail_msg("trial %d: Q8_1 activation bytes differ from the scalar path", trial);
    }
}

static void test_q8_0_activation_quantizer_matches_reference(void **state) {
    (void)state;
    with_avx2_too(q8_0_quantizer_check);
}

/* RoPE as model-formats.md §4.3 states it, in double: NORMAL pairs (2i, 2i+1) with Llama 3.1 frequency
 * divisors, and NEOX pairs (i, i + n_rot/2) without, leaving dims past n_rot alone; n_head heads hd
 * apart, 3 tokens at pos. */
static void rope_check(eng_backend *be, int hd, int n_rot, int n_head, const int32_t pos[3], float tol) {
    enum { T = 3 };
    const int ld = n_head * hd;
    float *x = malloc((size_t)T * ld * sizeof(float)), *want = malloc((size_t)T * ld * sizeof(float));
    float *div = malloc((size_t)n_rot / 2 * sizeof(float));
    assert_non_null(x);
    assert_non_null(want);
    assert_non_null(div);
    for (int i = 0; i < n_rot / 2; i++)
        div[i] = (float)(1 << (i % 4));
    for (int neox = 0; neox < 2; neox++) {
        for (int t = 0; t < T; t++)
            for (int i = 0; i < ld; i++)
                x[t * ld + i] = want[t * ld + i] = (float)(i % 13 + 1) * (t % 2 ? -0.5f : 0.25f) / (float)(1 + i / hd);
        for (int t = 0; t < T; t++)
            for (int h = 0; h < n_head; h++)
                for (int i = 0; i < n_rot / 2; i++) {
                    double th = pos[t] * pow(10000.0, -2.0 * i / n_rot);
                    if (!neox) th /= div[i];
                    const int a = t * ld + h * hd + (neox ? i : 2 * i), b = a + (neox ? n_rot / 2 : 1);
                    const double x0 = x[a], x1 = x[b];
                    want[a] = (float)(x0 * cos(th) - x1 * sin(th));
                    want[b] = (float)(x0 * sin(th) + x1 * cos(th));
                }
        be->ops->rope(be, x, ld, T, n_head, hd, n_rot, pos, 10000.0f, neox, neox ? NULL : div);
        for (int t = 0; t < T; t++)
            for (int i = 0; i < ld; i++)
                if (fabsf(x[t * ld + i] - want[t * ld + i]) > tol * (1.0f + fabsf(want[t * ld + i])))
                    fail_msg("rope hd %d n_rot %d %s pos %d dim %d: %.6f, want %.6f", hd, n_rot,
                             neox ? "neox" : "normal", pos[t], i, (double)x[t * ld + i], (double)want[t * ld + i]);
    }
    free(x);
    free(want);
    free(div);
}

/* Also the largest rotary width a file may give (its head size, up to 4096), more angles than
 * the backend computes at once; there the float recurrence for the angles (ggml's, kept for
 * llama.cpp's bits) drifts from the double angles by ~i ulps, so the bound is looser. */
static void test_rope_pairs_and_frequency_divisors(void **state) {
    (void)state;
    eng_backend *be;
    dp_err err = {0};
    assert_int_equal(eng_backend_cpu_new(1, false, &be, &err), DP_OK);
    rope_check(be, 12, 8, 1, (const int32_t[3]){0, 5, 1000}, 2e-4f);
    rope_check(be, 4096, 4096, 2, (const int32_t[3]){0, 3, 40}, 2e-3f);
    rope_check(be, 1200, 1000, 1, (const int32_t[3]){7, 0, 2}, 2e-3f);
    be->ops->free(be);
}

/* matmul_n: several weights on one input give each output the bits of its own matmul, for the
 * GEMM's token counts and the row dots', with 2 threads so that runs cross from one weight into
 * the next; weights that cannot share the quantized input (Q8_0's activations differ from the
 * K-quants') go one by one. */
static void test_matmul_n_matches_matmul_per_weight(void **state) {
    (void)state;
    enum { K = 512, NW = 4, T = 17 };
    const int types[NW] = {ENG_TYPE_Q4_K, ENG_TYPE_Q6_K, ENG_TYPE_Q4_K, ENG_TYPE_Q8_0};
    const int rows[NW] = {200, 37, 16, 50};
    eng_backend *be;
    dp_err err = {0};
    assert_int_equal(eng_backend_cpu_new(2, false, &be, &err), DP_OK);
    assert_non_null(be->ops->matmul_n);
    uint64_t s = 99;
    eng_weight w[NW];
    float *x = malloc(sizeof(float) * K * T), *f = malloc(sizeof(float) * K);
    for (int i = 0; i < K * T; i++) x[i] = tu_randn(&s);
    for (int i = 0; i < NW; i++) {
        const size_t rb = eng_row_size(types[i], K);
        uint8_t *d = malloc(rb * (size_t)rows[i]);
        for (int r = 0; r < rows[i]; r++) {
            for (int k = 0; k < K; k++) f[k] = tu_randn(&s);
            assert_int_equal(eng_quantize_row(types[i], f, d + rb * (size_t)r, K), DP_OK);
        }
        w[i] = (eng_weight){d, types[i], K, rows[i], rb, "w"};
    }
    const int counts[] = {1, 2, 3, 5, 16, 17};
    const int sets[][2] = {{0, 3}, {0, 4}, {1, 2}}; /* (first weight, how many) */
    for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++)
        for (size_t si = 0; si < sizeof(sets) / sizeof(sets[0]); si++) {
            const int nt = counts[ci], w0 = sets[si][0], n = sets[si][1];
            const eng_weight *wp[NW];
            float *one[NW], *all[NW];
            int ld[NW];
            for (int i = 0; i < n; i++) {
                wp[i] = &w[w0 + i];
                ld[i] = rows[w0 + i] + 3; /* a stride wider than the rows */
                one[i] = malloc(sizeof(float) * (size_t)ld[i] * nt);
                all[i] = malloc(sizeof(float) * (size_t)ld[i] * nt);
                for (int j = 0; j < ld[i] * nt; j++) one[i][j] = all[i][j] = -7.0f;
                be->ops->matmul(be, wp[i], x, K, nt, one[i], ld[i]);
            }
            be->ops->matmul_n(be, n, wp, x, K, nt, all, ld);
            assert_int_equal(be->ops->sync(be, &err), DP_OK);
            for (int i = 0; i < n; i++) {
                if (memcmp(one[i], all[i], sizeof(float) * (size_t)ld[i] * nt) != 0)
                    fail_msg("%d tokens, weights %d..%d: weight %d's output differs from its own matmul", nt, w0, w0 + n - 1, w0 + i);
                free(one[i]);
                free(all[i]);
            }
        }
    for (int i = 0; i < NW; i++) free((void *)w[i].data);
    free(x);
    free(f);
    be->ops->free(be);
}

static void test_q8_0_activation_rounds_half_to_even(void **state) {
    (void)state; /* llama.cpp's x86 path: q = round_half_even(x * 127 / amax) */
    float x[32] = {0};
    x[0] = 127.0f;
    x[1] = 2.5f;  /* 2.5 * 127/127 = 2.5 -> 2 */
    x[2] = 3.5f;  /* -> 4 */
    x[3] = -2.5f; /* -> -2 */
    eng_block_q8_0 b;
    eng_act_quantize(ENG_TYPE_Q8_0, x, &b, 32);
    assert_int_equal(b.qs[1], 2);
    assert_int_equal(b.qs[2], 4);
    assert_int_equal(b.qs[3], -2);
    assert_int_equal(eng_act_type(ENG_TYPE_Q4_K), ENG_TYPE_Q8_K);
    assert_int_equal(eng_act_type(ENG_TYPE_Q8_0), ENG_TYPE_Q8_0);
    assert_int_equal(eng_act_type(ENG_TYPE_Q5_0), ENG_TYPE_Q8_0);
    assert_int_equal(eng_act_type(ENG_TYPE_Q4_1), ENG_TYPE_Q8_1);
    assert_int_equal(eng_act_type(ENG_TYPE_Q5_1), ENG_TYPE_Q8_1);
    assert_int_equal(eng_act_type(ENG_TYPE_F16), ENG_TYPE_F16);
    /* Q8_1 carries s = d * sum(q) for the min term */
    eng_block_q8_1 b1;
    eng_act_quantize(ENG_TYPE_Q8_1, x, &b1, 32);
    int sum = 0;
    for (int j = 0; j < 32; j++) sum += b1.qs[j];
    assert_true(eng_f16_to_f32(b1.s) == eng_f16_to_f32(eng_f32_to_f16((float)sum * eng_f16_to_f32(b1.d))));
}

/* Attention's online softmax over a row of n scores in tiles of T: each tile's weights, scaled by
 * the factors of the tiles after it, over the final sum. */
static double softmax_tiles(eng_softmax_tile_fn f, const float *a, float *w, int n, int T) {
    float m = -INFINITY;
    double l = 0;
    for (int p0 = 0; p0 < n; p0 += T) {
        const int k = n - p0 < T ? n - p0 : T;
        memcpy(w + p0, a + p0, sizeof(float) * (size_t)k);
        const float c = f(w + p0, k, 0.125f, &m, &l);
        if (p0 == 0) assert_true(c == 0.0f);
        for (int p = 0; p < p0; p++) w[p] *= c;
    }
    for (int p = 0; p < n; p++) w[p] = (float)(w[p] / l);
    return l;
}

/* The fast online softmax, SwiGLU and sigmoid gate (polynomial exp) stay within a few ulp of the
 * libm references, over odd lengths, extreme inputs and a -inf score, and give the same bits on a
 * second call (they must be deterministic for batch invariance); the softmax read tile by tile
 * equals the softmax of the whole row. */
static void exp_ops_check(void) {
    const eng_softmax_tile_fn sm = eng_softmax_tile_best(false), sm_ref = eng_softmax_tile_best(true);
    const eng_swiglu_fn sw = eng_swiglu_best(false), sw_ref = eng_swiglu_best(true);
    const eng_mul_sigmoid_fn ms = eng_mul_sigmoid_best(false), ms_ref = eng_mul_sigmoid_best(true);
    const eng_silu_fn si = eng_silu_best(false), si_ref = eng_silu_best(true);
    uint64_t s = 99;
    enum { N = 1037 };
    static float a[N], b[N], c[N], d[N], u[N];
    for (int n = 1; n <= N; n += n < 40 ? 1 : 331) {
        for (int i = 0; i < n; i++) {
            a[i] = tu_randn(&s) * (i % 7 == 3 ? 40.0f : 4.0f);
            u[i] = tu_randn(&s);
        }
        if (n > 5) a[5] = -INFINITY; /* a masked-out score */
        double mx = -INFINITY, sum = 0;
        for (int i = 0; i < n; i++) mx = 0.125 * a[i] > mx ? 0.125 * a[i] : mx;
        for (int i = 0; i < n; i++) sum += exp(0.125 * a[i] - mx);
        for (int T = 256; T >= 37; T -= 219) {
            const double l = softmax_tiles(sm, a, b, n, T), l_ref = softmax_tiles(sm_ref, a, c, n, T);
            assert_true(fabs(l - l_ref) <= 1e-6 * l_ref);
            for (int i = 0; i < n; i++) {
                if (fabsf(b[i] - c[i]) > 1e-6f * c[i] + 1e-30f)
                    fail_msg("softmax n=%d T=%d [%d]: %.9g, reference %.9g", n, T, i, (double)b[i], (double)c[i]);
                const double want = exp(0.125 * a[i] - mx) / sum;
                if (fabs(c[i] - want) > 4e-6 * want + 1e-30)
                    fail_msg("tiled softmax n=%d T=%d [%d]: %.9g, whole row %.9g", n, T, i, (double)c[i], want);
            }
            softmax_tiles(sm, a, d, n, T);
            assert_memory_equal(b, d, sizeof(float) * (size_t)n);
        }
        for (int i = 0; i < n; i++) a[i] = isinf(a[i]) ? -90.0f : a[i] * 3.0f; /* silu and sigmoid of large |x| */
        sw(a, u, b, n);
        sw_ref(a, u, c, n);
        for (int i = 0; i < n; i++)
            if (fabsf(b[i] - c[i]) > 4e-7f * fabsf(c[i]) + 1e-30f)
                fail_msg("swiglu n=%d [%d] x=%g: %.9g, reference %.9g", n, i, (double)a[i], (double)b[i], (double)c[i]);
        memcpy(b, u, sizeof(float) * (size_t)n);
        memcpy(c, u, sizeof(float) * (size_t)n);
        ms(b, a, n);
        ms_ref(c, a, n);
        for (int i = 0; i < n; i++)
            if (fabsf(b[i] - c[i]) > 4e-7f * fabsf(c[i]) + 1e-30f)
                fail_msg("sigmoid gate n=%d [%d] g=%g: %.9g, reference %.9g", n, i, (double)a[i], (double)b[i], (double)c[i]);
        si(a, b, n);
        si_ref(a, c, n);
        for (int i = 0; i < n; i++)
            if (fabsf(b[i] - c[i]) > 4e-7f * fabsf(c[i]) + 1e-30f)
                fail_msg("silu n=%d [%d] x=%g: %.9g, reference %.9g", n, i, (double)a[i], (double)b[i], (double)c[i]);
        /* in place, and from an odd start (a thread's slice): the same bits per element */
        memcpy(d, a, sizeof(float) * (size_t)n);
        si(d + n / 3, d + n / 3, n - n / 3);
        si(d, d, n / 3);
        assert_memory_equal(b, d, sizeof(float) * (size_t)n);
    }
}

static void test_exp_ops_match_reference(void **state) {
    (void)state;
    with_avx2_too(exp_ops_check);
}

/* Grouped-query attention loops (F16 and F32 caches): close to the exact path, per head the
 * same bits whatever the group size or the split of the rows into calls, and where the CPU has
 * widened kernels (AVX-512) the same bits from a block widened to floats first. 20 and 24 take
 * the kernels' paths for head sizes that are not a multiple of 8 and 16. */
/* a * b + c rounded once, as the fma instruction does. The C library's fmaf is not that
 * everywhere (mingw-w64's differs from the instruction in about a quarter of random cases),
 * so on x86 the instruction itself; the kernels this checks exist only there. */
#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
__attribute__((target("fma"))) static float fma_once(float a, float b, float c) {
    return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c)));
}
#else
static float fma_once(float a, float b, float c) { return fmaf(a, b, c); }
#endif

static void grouped_attention_check(void) {
    const int hds[] = {128, 80, 64, 24, 20};
    const int types[] = {ENG_TYPE_F16, ENG_TYPE_F32};
    enum { NMAX = 77, GMAX = 6, HMAX = 128 };
    float q[GMAX * HMAX], kf[NMAX * HMAX], w[GMAX * NMAX];
    uint16_t kh[NMAX * HMAX];
    uint64_t r = 99;
    for (int i = 0; i < NMAX * HMAX; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        kf[i] = (float)((int)(r >> 40) % 2001 - 1000) / 500.0f;
        kh[i] = eng_f32_to_f16(kf[i]);
    }
    for (int i = 0; i < GMAX * HMAX; i++) q[i] = sinf((float)i * 0.37f);
    for (int i = 0; i < GMAX * NMAX; i++) w[i] = 0.5f + 0.5f * cosf((float)i * 0.11f);
    /* ti 2: the kernels a Q8_0 cache's widened rows go through, over the same floats */
    for (size_t ti = 0; ti < 3; ti++)
        for (size_t hi = 0; hi < sizeof(hds) / sizeof(hds[0]); hi++) {
            const int type = types[ti < 2 ? ti : 1], hd = hds[hi];
            const void *k = type == ENG_TYPE_F16 ? (const void *)kh : (const void *)kf;
            const size_t esz = type == ENG_TYPE_F16 ? 2 : 4, kst = (size_t)hd * esz;
            const eng_kv_dots_fn fast = ti == 2 ? eng_kv_dots_q8_0(false) : eng_kv_dots_best(type, false),
                                 exact = eng_kv_dots_best(type, true);
            const eng_kv_mix_fn mfast = ti == 2 ? eng_kv_mix_q8_0(false) : eng_kv_mix_best(type, false),
                                mexact = eng_kv_mix_best(type, true);
            for (int G = 1; G <= GMAX; G++) {
                float s[GMAX * NMAX], se[GMAX * NMAX], s1[NMAX], a[GMAX * HMAX] = {0}, ae[GMAX * HMAX] = {0};
                fast(q, (size_t)hd, G, k, kst, NMAX, hd, s, NMAX);
                exact(q, (size_t)hd, G, k, kst, NMAX, hd, se, NMAX);
                mfast(a, (size_t)hd, G, w, NMAX, k, kst, NMAX, hd);
                mexact(ae, (size_t)hd, G, w, NMAX, k, kst, NMAX, hd);
                for (int g = 0; g < G; g++) {
                    for (int p = 0; p < NMAX; p++)
                        if (fabsf(s[g * NMAX + p] - se[g * NMAX + p]) > 1e-4f * (1 + fabsf(se[g * NMAX + p])))
                            fail_msg("dots type %d hd %d G %d head %d row %d: %g vs %g", type, hd, G, g, p,
                                     s[g * NMAX + p], se[g * NMAX + p]);
                    for (int j = 0; j < hd; j++)
                        if (fabsf(a[g * hd + j] - ae[g * hd + j]) > 1e-4f * (1 + fabsf(ae[g * hd + j])))
                            fail_msg("mix type %d hd %d G %d head %d dim %d: %g vs %g", type, hd, G, g, j,
                                     a[g * hd + j], ae[g * hd + j]);
                    /* head g alone, rows in two calls (13 + the rest): the same bits */
                    fast(q + g * hd, (size_t)hd, 1, k, kst, 13, hd, s1, NMAX);
                    fast(q + g * hd, (size_t)hd, 1, (const uint8_t *)k + 13 * kst, kst, NMAX - 13, hd, s1 + 13, NMAX);
                    if (memcmp(s1, s + g * NMAX, sizeof(s1)))
                        fail_msg("dots type %d hd %d: head %d differs alone from in a group of %d", type, hd, g, G);
                    float a1[HMAX] = {0};
                    mfast(a1, (size_t)hd, 1, w + g * NMAX, NMAX, k, kst, 13, hd);
                    mfast(a1, (size_t)hd, 1, w + g * NMAX + 13, NMAX, (const uint8_t *)k + 13 * kst, kst, NMAX - 13, hd);
                    if (memcmp(a1, a + g * hd, (size_t)hd * sizeof(float)))
                        fail_msg("mix type %d hd %d: head %d differs alone from in a group of %d", type, hd, g, G);
                }
                /* K in panels, as an F16 cache keeps it where these kernels exist: this head is the
                 * second of two in each panel, and the other head and the lanes past the last
                 * position hold NaNs, which no score may read */
                const eng_kv_dots_fn pdots = eng_kv_dots_panels(false), wdots = eng_kv_dots_widened(false);
                const eng_kv_mix_fn wmix = eng_kv_mix_widened(false);
                if (type != ENG_TYPE_F16 || !pdots || !wdots || !wmix) continue;
                enum { W = ENG_KT_PANEL, NPAN = (NMAX + W - 1) / W };
                static uint16_t kp[NPAN * 2 * HMAX * W];
                for (size_t i = 0; i < sizeof(kp) / sizeof(kp[0]); i++) kp[i] = 0x7e00;
                for (int p = 0; p < NMAX; p++)
                    for (int d = 0; d < hd; d++) kp[((size_t)(p / W) * 2 * hd + hd + d) * W + p % W] = kh[p * hd + d];
                const uint16_t *kh1 = kp + (size_t)hd * W;
                const size_t pst = (size_t)2 * hd * W * 2; /* bytes from panel to panel */
                float kw[NMAX * HMAX], kt[NPAN * HMAX * W], sp[GMAX * NMAX], sw[GMAX * NMAX], aw[GMAX * HMAX] = {0};
                for (int p = 0; p < NMAX; p++) eng_f16_to_f32_row(kh + (size_t)p * hd, kw + (size_t)p * hd, hd);
                for (int i = 0; i < NPAN; i++)
                    eng_f16_to_f32_row(kh1 + i * pst / 2, kt + (size_t)i * hd * W, (int64_t)hd * W);
                pdots(q, (size_t)hd, G, kh1, pst, NMAX, hd, sp, NMAX);
                wdots(q, (size_t)hd, G, kt, (size_t)hd * W * 4, NMAX, hd, sw, NMAX);
                wmix(aw, (size_t)hd, G, w, NMAX, kw, (size_t)hd * 4, NMAX, hd);
                /* these kernels' order: each score one fma chain over the dimensions in order */
                for (int g = 0; g < G; g++)
                    for (int p = 0; p < NMAX; p++) {
                        float c = 0;
                        for (int d = 0; d < hd; d++) c = fma_once(q[g * hd + d], kw[p * hd + d], c);
                        if (memcmp(&c, &sp[g * NMAX + p], sizeof c))
                            fail_msg("hd %d G %d head %d row %d: %.9g, one fma chain gives %.9g", hd, G, g, p,
                                     (double)sp[g * NMAX + p], (double)c);
                    }
                if (memcmp(sw, sp, (size_t)G * NMAX * sizeof(float)))
                    fail_msg("hd %d G %d: the widened panels score differently from the halves", hd, G);
                if (memcmp(aw, a, (size_t)G * hd * sizeof(float)))
                    fail_msg("hd %d G %d: the widened V rows mix differently from the halves", hd, G);
                /* V in slabs of 16 dimensions (NMAX + 3 rows to a slab, so the slab stride is not the
                 * rows'), the positions in one call and in two: the same bits as the halves */
                const eng_kv_mix_fn smix = eng_kv_mix_slabs(false);
                if (smix && hd % ENG_KV_SLAB == 0) {
                    enum { SR = NMAX + 3 };
                    static float vs[HMAX / ENG_KV_SLAB * SR * ENG_KV_SLAB];
                    for (int p = 0; p < NMAX; p++)
                        for (int d = 0; d < hd; d++)
                            vs[((size_t)(d / ENG_KV_SLAB) * SR + p) * ENG_KV_SLAB + d % ENG_KV_SLAB] = kw[p * hd + d];
                    const size_t sst = (size_t)SR * ENG_KV_SLAB * sizeof(float);
                    float as[GMAX * HMAX] = {0}, as2[GMAX * HMAX] = {0};
                    smix(as, (size_t)hd, G, w, NMAX, vs, sst, NMAX, hd);
                    if (memcmp(as, a, (size_t)G * hd * sizeof(float)))
                        fail_msg("hd %d G %d: V in slabs mixes differently from the halves", hd, G);
                    smix(as2, (size_t)hd, G, w, NMAX, vs, sst, 29, hd);
                    smix(as2, (size_t)hd, G, w + 29, NMAX, vs + 29 * ENG_KV_SLAB, sst, NMAX - 29, hd);
                    if (memcmp(as2, a, (size_t)G * hd * sizeof(float)))
                        fail_msg("hd %d G %d: V in slabs, rows in two calls, mixes differently", hd, G);
                }
                /* each head alone, the positions in two calls split at a panel: the same bits */
                for (int g = 0; g < G; g++) {
                    pdots(q + g * hd, (size_t)hd, 1, kh1, pst, W, hd, s1, NMAX);
                    pdots(q + g * hd, (size_t)hd, 1, kh1 + pst / 2, pst, NMAX - W, hd, s1 + W, NMAX);
                    if (memcmp(s1, sp + g * NMAX, sizeof(s1)))
                        fail_msg("panels hd %d: head %d differs alone from in a group of %d", hd, g, G);
                }
            }
        }
}

static void test_grouped_attention_loops(void **state) {
    (void)state;
    with_avx2_too(grouped_attention_check);
}

/* A Q8_0 cache's rows scored and mixed as stored: the same bits as the widened-row kernels over
 * eng_q8_0_to_f32_row's floats, whatever the group size or the split of the rows into calls, with
 * this head the second of two in each cache row (the first head's blocks hold NaN scales, which
 * no result may read). */
static void q8_0_rows_attention_check(void) {
    const eng_kv_dots_fn dots = eng_kv_dots_q8_0_rows(false), wdots = eng_kv_dots_q8_0(false);
    const eng_kv_mix_fn mix = eng_kv_mix_q8_0_rows(false), wmix = eng_kv_mix_q8_0(false);
    assert_null(eng_kv_dots_q8_0_rows(true));
    assert_null(eng_kv_mix_q8_0_rows(true));
    if (!dots || !mix) {
        print_message("no kernels for a Q8_0 cache's rows here: every block is widened first\n");
        return;
    }
    const int hds[] = {128, 64, 32};
    enum { NMAX = 77, GMAX = 9, HMAX = 128 }; /* 9: the AVX-512 kernels take up to 8 heads a pass */
    const size_t bsz = sizeof(eng_block_q8_0);
    static uint8_t kq[NMAX * 2 * HMAX / 32 * sizeof(eng_block_q8_0)];
    float q[GMAX * HMAX], w[GMAX * NMAX], x[2 * HMAX], kw[NMAX * HMAX];
    uint64_t r = 7;
    for (int i = 0; i < GMAX * HMAX; i++) q[i] = sinf((float)i * 0.29f);
    for (int i = 0; i < GMAX * NMAX; i++) w[i] = 0.5f + 0.5f * cosf((float)i * 0.13f);
    for (size_t hi = 0; hi < sizeof(hds) / sizeof(hds[0]); hi++) {
        const int hd = hds[hi];
        const size_t row = 2 * (size_t)hd / 32 * bsz, head = (size_t)hd / 32 * bsz;
        for (int p = 0; p < NMAX; p++) {
            for (int i = 0; i < 2 * hd; i++) x[i] = tu_randn(&r) * (float)(1 + p % 5);
            eng_quantize_row_q8_0(x, kq + (size_t)p * row, 2 * hd);
            for (int b = 0; b < hd / 32; b++) ((eng_block_q8_0 *)(void *)(kq + (size_t)p * row))[b].d = 0x7e00;
            eng_q8_0_to_f32_row(kq + (size_t)p * row + head, kw + (size_t)p * hd, hd);
        }
        const uint8_t *k = kq + head;
        for (int G = 1; G <= GMAX; G++) {
            float s[GMAX * NMAX], sw[GMAX * NMAX], s1[NMAX], a[GMAX * HMAX] = {0}, aw[GMAX * HMAX] = {0};
            dots(q, (size_t)hd, G, k, row, NMAX, hd, s, NMAX);
            wdots(q, (size_t)hd, G, kw, (size_t)hd * 4, NMAX, hd, sw, NMAX);
            mix(a, (size_t)hd, G, w, NMAX, k, row, NMAX, hd);
            wmix(aw, (size_t)hd, G, w, NMAX, kw, (size_t)hd * 4, NMAX, hd);
            if (memcmp(s, sw, (size_t)G * NMAX * sizeof(float)))
                fail_msg("hd %d G %d: Q8_0 rows score differently as stored and widened", hd, G);
            if (memcmp(a, aw, (size_t)G * hd * sizeof(float)))
                fail_msg("hd %d G %d: Q8_0 rows mix differently as stored and widened", hd, G);
            for (int g = 0; g < G; g++) { /* head g alone, rows in two calls (13 + the rest) */
                dots(q + g * hd, (size_t)hd, 1, k, row, 13, hd, s1, NMAX);
                dots(q + g * hd, (size_t)hd, 1, k + 13 * row, row, NMAX - 13, hd, s1 + 13, NMAX);
                if (memcmp(s1, s + g * NMAX, sizeof(s1)))
                    fail_msg("Q8_0 rows hd %d: head %d scores differently alone than in a group of %d", hd, g, G);
                float a1[HMAX] = {0};
                mix(a1, (size_t)hd, 1, w + g * NMAX, NMAX, k, row, 13, hd);
                mix(a1, (size_t)hd, 1, w + g * NMAX + 13, NMAX, k + 13 * row, row, NMAX - 13, hd);
                if (memcmp(a1, a + g * hd, (size_t)hd * sizeof(float)))
                    fail_msg("Q8_0 rows hd %d: head %d mixes differently alone than in a group of %d", hd, g, G);
            }
        }
    }
}

static void test_q8_0_rows_attention_matches_widened_bits(void **state) {
    (void)state;
    with_avx2_too(q8_0_rows_attention_check);
}

/* The delta rule's one-token step, the fast kernel against the reference over several steps (the
 * state carries its rounding on): state rows and outputs within a relative 1e-5, for the model's
 * dk = dv = 128, a row count that is not a multiple of the kernel's four, and a dk that takes the
 * reference's path. */
static void delta_step_check(void) {
    const int shapes[][2] = {{128, 128}, {64, 7}, {40, 9}};
    uint64_t r = 77;
    for (size_t si = 0; si < sizeof(shapes) / sizeof(shapes[0]); si++) {
        const int dk = shapes[si][0], dv = shapes[si][1];
        float *S0 = malloc((size_t)dk * dv * sizeof(float)), *S1 = malloc((size_t)dk * dv * sizeof(float));
        float *kqv = malloc((size_t)(2 * dk + dv) * sizeof(float)), *o0 = malloc((size_t)dv * sizeof(float)),
              *o1 = malloc((size_t)dv * sizeof(float));
        for (int i = 0; i < dk * dv; i++) S0[i] = S1[i] = 0.1f * tu_randn(&r);
        for (int step = 0; step < 5; step++) {
            for (int i = 0; i < 2 * dk + dv; i++) kqv[i] = 0.2f * tu_randn(&r);
            const float decay = 0.9f + 0.01f * (float)step, beta = 0.3f + 0.1f * (float)step;
            eng_delta_step_ref(S0, kqv, kqv + 2 * dk, kqv + dk, decay, beta, dk, dv, o0);
            eng_delta_step_best()(S1, kqv, kqv + 2 * dk, kqv + dk, decay, beta, dk, dv, o1);
            for (int j = 0; j < dv; j++)
                if (fabsf(o0[j] - o1[j]) > 1e-5f * (fabsf(o0[j]) + 1.0f))
                    fail_msg("dk %d dv %d step %d: o[%d] %.9g, reference %.9g", dk, dv, step, j, (double)o1[j], (double)o0[j]);
            for (int i = 0; i < dk * dv; i++)
                if (fabsf(S0[i] - S1[i]) > 1e-5f * (fabsf(S0[i]) + 1.0f))
                    fail_msg("dk %d dv %d step %d: S[%d] %.9g, reference %.9g", dk, dv, step, i, (double)S1[i], (double)S0[i]);
        }
        free(S0);
        free(S1);
        free(kqv);
        free(o0);
        free(o1);
    }
}

/* The F16 cache's row conversion against the scalar one, over the bit patterns where they could
 * part: every sign, exponent and top mantissa bits with the low bits at and around the rounding
 * points of normal and subnormal halves, overflow to inf, and NaNs with payloads. */
/* The Q8_0 KV cache's widening: every scale (all 65536 half bit patterns, infinities and NaNs
 * among them) times every quant value, against the scalar dequantization bit for bit. */
static void test_q8_0_to_f32_row_matches_dequantize_bits(void **state) {
    (void)state;
    enum { NB = 65536 * 8 }; /* 8 blocks per scale: each quant value -128..127 once */
    eng_block_q8_0 *b = malloc(NB * sizeof *b);
    float *fast = malloc((size_t)NB * 32 * sizeof *fast), *ref = malloc((size_t)NB * 32 * sizeof *ref);
    assert_non_null(b);
    assert_non_null(fast);
    assert_non_null(ref);
    for (int i = 0; i < NB; i++) {
        b[i].d = (eng_f16)(i / 8);
        for (int j = 0; j < 32; j++) b[i].qs[j] = (int8_t)(32 * (i % 8) + j - 128);
    }
    eng_q8_0_to_f32_row(b, fast, (int64_t)NB * 32);
    assert_int_equal(eng_dequantize_row(ENG_TYPE_Q8_0, b, ref, (int64_t)NB * 32), DP_OK);
    for (size_t i = 0; i < (size_t)NB * 32; i++)
        if (memcmp(&fast[i], &ref[i], 4) != 0)
            fail_msg("block %zu value %zu: %.9g, scalar %.9g", i / 32, i % 32, (double)fast[i], (double)ref[i]);
    free(b);
    free(fast);
    free(ref);
}

static void test_f32_to_f16_row_matches_scalar_bits(void **state) {
    (void)state;
    static const uint16_t lows[] = {0x0000, 0x0001, 0x0FFF, 0x1000, 0x1001, 0x1FFF, 0x2000, 0x3000,
                                    0x5A5A, 0x7FFF, 0x8000, 0x8001, 0xC000, 0xFFFF};
    enum { NL = sizeof lows / sizeof lows[0], N = 65536 * NL + 3 }; /* + 3: the scalar tail */
    float *x = malloc(N * sizeof *x);
    uint16_t *y = malloc(N * sizeof *y);
    assert_non_null(x);
    assert_non_null(y);
    for (uint32_t hi = 0; hi < 65536; hi++)
        for (int l = 0; l < NL; l++) {
            const uint32_t b = hi << 16 | lows[l];
            memcpy(x + (size_t)hi * NL + l, &b, 4);
        }
    for (int i = 65536 * NL; i < N; i++) x[i] = 1.0f / (float)(i - 65536 * NL + 3);
    eng_f32_to_f16_row(x, y, N);
    int bad = 0;
    for (int i = 0; i < N && bad < 5; i++)
        if (y[i] != eng_f32_to_f16(x[i])) {
            uint32_t b;
            memcpy(&b, x + i, 4);
            print_error("f32 %08x: row %04x, scalar %04x\n", b, y[i], eng_f32_to_f16(x[i]));
            bad++;
        }
    free(x);
    free(y);
    assert_int_equal(bad, 0);
}

static void test_delta_step_matches_reference(void **state) {
    (void)state;
    with_avx2_too(delta_step_check);
}

/* The chunk-wise delta rule, the fast kernel against the reference over three chunks (the state
 * carries on): outputs and state within a relative 1e-4, for the model's dk = dv = 128 at a full
 * chunk, a short one and a single token, a shape under 128, and one the fast kernels leave to the
 * portable form. Keys and queries are unit vectors and beta in (0, 1), as the model feeds it,
 * so (I + A) is well conditioned and the two orders of summation agree closely. Twice: slowly
 * forgetting gates, and fast ones (down to -4 a token, so a chunk's decays pass through the
 * subnormal range, which the fast kernels flush to zero); the kernels leave the floating-point
 * control register (flush modes) as they found it. */
static void delta_chunk_check(void) {
    const int shapes[][3] = {{128, 128, 64}, {128, 128, 17}, {128, 128, 1}, {64, 32, 40}, {40, 24, 23}};
    uint64_t rs = 91;
    for (int fast = 0; fast < 2; fast++)
        for (size_t si = 0; si < sizeof(shapes) / sizeof(shapes[0]); si++) {
            const int dk = shapes[si][0], dv = shapes[si][1], c = shapes[si][2], C = ENG_DELTA_CHUNK;
            float *S0 = malloc((size_t)dk * dv * sizeof(float)), *S1 = malloc((size_t)dk * dv * sizeof(float));
            float *x = malloc((size_t)C * (2 * dk + dv) * sizeof(float));
            float *O0 = malloc((size_t)C * dv * sizeof(float)), *O1 = malloc((size_t)C * dv * sizeof(float));
            float *ws = malloc(ENG_DELTA_CHUNK_WS(C, dk, dv) * sizeof(float));
            const float *q[ENG_DELTA_CHUNK], *k[ENG_DELTA_CHUNK], *v[ENG_DELTA_CHUNK];
            float beta[ENG_DELTA_CHUNK], g[ENG_DELTA_CHUNK];
            assert_non_null(ws);
            for (int i = 0; i < dk * dv; i++)
                S0[i] = S1[i] = 0.1f * tu_randn(&rs);
            for (int chunk = 0; chunk < 3; chunk++) {
                for (int r = 0; r < c; r++) {
                    float *qr = x + (size_t)r * (2 * dk + dv), *kr = qr + dk, *vr = kr + dk;
                    double nq = 0, nk = 0;
                    for (int i = 0; i < dk; i++) {
                        qr[i] = tu_randn(&rs);
                        kr[i] = tu_randn(&rs);
                        nq += (double)qr[i] * qr[i];
                        nk += (double)kr[i] * kr[i];
                    }
                    for (int i = 0; i < dk; i++) {
                        qr[i] = (float)(qr[i] / sqrt(nq * dk));
                        kr[i] = (float)(kr[i] / sqrt(nk));
                    }
                    for (int j = 0; j < dv; j++)
                        vr[j] = tu_randn(&rs);
                    q[r] = qr;
                    k[r] = kr;
                    v[r] = vr;
                    beta[r] = 0.05f + 0.9f * (float)((r * 37 + chunk * 11) % 64) / 64.0f;
                    g[r] = fast ? -0.5f - 3.5f * (float)((r * 13 + chunk * 5) % 32) / 32.0f
                                : -0.002f - 0.2f * (float)((r * 13 + chunk * 5) % 32) / 32.0f;
                }
                eng_delta_chunk_ref(c, q, k, v, beta, g, S0, dk, dv, O0, ws);
#if defined(__x86_64__) || defined(_M_X64)
                const unsigned csr = _mm_getcsr();
#endif
                eng_delta_chunk_best()(c, q, k, v, beta, g, S1, dk, dv, O1, ws);
#if defined(__x86_64__) || defined(_M_X64)
                assert_int_equal(_mm_getcsr(), csr);
#endif
                for (int i = 0; i < c * dv; i++)
                    if (fabsf(O0[i] - O1[i]) > 1e-4f * (fabsf(O0[i]) + 1.0f))
                        fail_msg("gates %s dk %d dv %d c %d chunk %d: O[%d][%d] %.9g, reference %.9g",
                                 fast ? "fast" : "slow", dk, dv, c, chunk, i / dv, i % dv, (double)O1[i],
                                 (double)O0[i]);
                for (int i = 0; i < dk * dv; i++)
                    if (fabsf(S0[i] - S1[i]) > 1e-4f * (fabsf(S0[i]) + 1.0f))
                        fail_msg("gates %s dk %d dv %d c %d chunk %d: S[%d] %.9g, reference %.9g",
                                 fast ? "fast" : "slow", dk, dv, c, chunk, i, (double)S1[i], (double)S0[i]);
            }
            free(S0);
            free(S1);
            free(x);
            free(O0);
            free(O1);
            free(ws);
        }
}

/* The exact matmul's four-row dot: each row's result is eng_dot_f32's bits, at every length
 * (whole groups of 8 and tails) and row stride. */
static void test_exact_four_row_dot_matches_row_dot_bit_for_bit(void **state) {
    (void)state;
    static const int64_t lens[] = {1, 7, 8, 9, 31, 64, 100, 1541};
    static float a[4 * 1548], b[1548];
    uint64_t s = 7;
    for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
        const int64_t n = lens[k];
        const size_t lda = (size_t)n + 3;
        for (size_t i = 0; i < 4 * lda; i++) a[i] = tu_randn(&s) * (float)(1 + (i % 5) * 1000);
        for (int64_t i = 0; i < n; i++) b[i] = tu_randn(&s);
        float out[4];
        eng_dot_f32_x4(a, lda, b, n, out);
        for (int r = 0; r < 4; r++) {
            const float one = eng_dot_f32(a + (size_t)r * lda, b, n);
            if (memcmp(&one, &out[r], 4))
                fail_msg("n %lld row %d: %.9g, row by row %.9g", (long long)n, r, (double)out[r], (double)one);
        }
    }
}

static void test_delta_chunk_matches_reference(void **state) {
    (void)state;
    with_avx2_too(delta_chunk_check);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_simd_vec_dots_match_scalar_reference),
        cmocka_unit_test(test_four_row_kernels_match_single_row_reference),
        cmocka_unit_test(test_fetching_dots_match_plain_dots_bit_for_bit),
        cmocka_unit_test(test_four_row_dots_match_row_dots_bit_for_bit),
        cmocka_unit_test(test_gemm_matches_single_row_kernel_bit_for_bit),
        cmocka_unit_test(test_gemm_long_k_in_passes_bit_for_bit),
        cmocka_unit_test(test_q8_k_activation_quantizer_matches_reference),
        cmocka_unit_test(test_q8_0_activation_quantizer_matches_reference),
        cmocka_unit_test(test_rope_pairs_and_frequency_divisors),
        cmocka_unit_test(test_matmul_n_matches_matmul_per_weight),
        cmocka_unit_test(test_q8_0_activation_rounds_half_to_even),
        cmocka_unit_test(test_grouped_attention_loops),
        cmocka_unit_test(test_q8_0_rows_attention_matches_widened_bits),
        cmocka_unit_test(test_exp_ops_match_reference),
        cmocka_unit_test(test_f32_to_f16_row_matches_scalar_bits),
        cmocka_unit_test(test_q8_0_to_f32_row_matches_dequantize_bits),
        cmocka_unit_test(test_delta_step_matches_reference),
        cmocka_unit_test(test_delta_chunk_matches_reference),
        cmocka_unit_test(test_exact_four_row_dot_matches_row_dot_bit_for_bit),
    };
    return cmocka_run_group_tests_name("kernels", tests, NULL, NULL);
}
