/*
 * test_gpu_model.c - whole models on the CUDA backend against the CPU backend's exact path
 * (f32 math on dequantized weights):
 *  - every fixture model (qwen2, qwen3, and qwen35 in F16, Q8_0, Q4_K_M, Q5_K_M; llama.cpp's
 *    files), a prompt (the GEMM path) then greedy steps (the matrix-vector path), logits
 *    compared at every step;
 *  - generated qwen3 and qwen35 models quantized to Q4_K_M, four sequences stepping together
 *    past a KV block boundary, two of them continuing from a shared prefix (KV blocks copied
 *    on write; the DeltaNet state copied);
 *  - the chunk-wise DeltaNet of prompt pieces against the token-by-token form (F32 weights, so
 *    the products stay in f32 and nothing amplifies the forms' rounding differences);
 *  - batch invariance: a sequence's logits are bit-identical alone and among four others (their
 *    prompts mixing the chunk-wise and the token-by-token forms in one step);
 *  - device selection: auto picks the GPU, and the CPU for --exact, which cuda refuses; a
 *    context far larger than the GPU fails with DP_ENOMEM and a budget fitted from the GPU's
 *    free memory succeeds.
 * Skips without a CUDA device (and the fixture part without ../shared/fixtures).
 */
#include "gputest.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"



static eng_context *context(eng_model *m, dp_device dev, bool exact, uint32_t n_ctx, uint32_t n_seq) {
    eng_context_params cp = eng_context_default_params();
    cp.device = dev;
    cp.exact = exact;
    cp.n_ctx = n_ctx;
    cp.n_seq_max = n_seq;
    cp.n_threads = 2;
    eng_context *c = NULL;
    dp_err err = {0};
    if (eng_context_new(m, &cp, &c, &err)) fail_msg("context (%s): %s", dev == DP_DEVICE_CUDA ? "cuda" : "cpu", err.msg);
    return c;
}

/* Largest |gpu - cpu| over the logits rows of the last decode; fails past tol, or when the
 * argmax differs where the CPU's top two are more than 10*tol apart. */
static double compare_logits(eng_context *g, eng_context *c, int32_t V, double tol, const char *what) {
    assert_int_equal(eng_n_logits(g), eng_n_logits(c));
    double worst = 0;
    for (int32_t j = 0; j < eng_n_logits(c); j++) {
        const float *lg = eng_get_logits(g, j), *lc = eng_get_logits(c, j);
        float top = -INFINITY, second = -INFINITY;
        for (int32_t v = 0; v < V; v++) {
            const double d = fabs((double)lg[v] - lc[v]);
            if (d > worst) worst = d;
            if (lc[v] > top) second = top, top = lc[v];
            else if (lc[v] > second) second = lc[v];
        }
        if (worst > tol) fail_msg("%s, row %d: logits differ by %.4g (bound %.3g)", what, j, worst, tol);
        if (top - second > 10 * tol && eng_argmax(lg, V) != eng_argmax(lc, V))
            fail_msg("%s, row %d: argmax %d on the GPU, %d on the CPU", what, j, eng_argmax(lg, V), eng_argmax(lc, V));
    }
    return worst;
}

/* Largest |a - b| over the logits rows of the last decode. */
static double max_delta(eng_context *a, eng_context *b, int32_t V) {
    double worst = 0;
    for (int32_t j = 0; j < eng_n_logits(a) && j < eng_n_logits(b); j++)
        for (int32_t v = 0; v < V; v++) {
            const double d = fabs((double)eng_get_logits(a, j)[v] - eng_get_logits(b, j)[v]);
            if (d > worst) worst = d;
        }
    return worst;
}

static void decode_both(eng_context *g, eng_context *c, const eng_batch *b) {
    dp_err err = {0};
    if (eng_decode(g, b, &err)) fail_msg("gpu decode: %s", err.msg);
    if (eng_decode(c, b, &err)) fail_msg("cpu decode: %s", err.msg);
}

/* Bounds on |gpu - cpu exact|: the GPU's prompt GEMMs round activations (and weights other than
 * F16/F32) to f16, about 2^-11 per product; the CPU's fast path rounds activations to 8 bits for
 * quantized weights, so it is the looser of the two. */
#define GPU_TOL 0.25
#define GPU_TOL_FLOOR 0.02

/* A fixture model: a 40-token prompt (the GEMM path) then 12 greedy steps (the matrix-vector
 * path) on the GPU, the CPU's exact path and the CPU's fast path. The GPU stays within
 * GPU_TOL of the exact logits and no further from them than the CPU's fast path (or
 * GPU_TOL_FLOOR). */
static void run_fixture(const char *name) {
    char path[256];
    snprintf(path, sizeof(path), "models/%s.gguf", name);
    const char *full = tu_fixture(path);
    eng_model *m;
    dp_err err = {0};
    if (eng_model_load(full, &m, &err)) fail_msg("%s: %s", name, err.msg);
    const int32_t V = (int32_t)eng_model_get_info(m)->n_vocab;
    eng_context *g = context(m, DP_DEVICE_CUDA, false, 512, 1), *c = context(m, DP_DEVICE_CPU, true, 512, 1);
    eng_context *f = context(m, DP_DEVICE_CPU, false, 512, 1);
    int32_t tok[40], pos[40], seq[40];
    for (int i = 0; i < 40; i++) tok[i] = (i * 131 + 7) % V, pos[i] = i, seq[i] = 0;
    double worst = 0, worst_fast = 0;
    for (int step = -1; step < 12; step++) {
        int32_t t = step < 0 ? 0 : eng_argmax(eng_get_logits(c, 0), V), p = 40 + step, s = 0;
        eng_batch one = {1, &t, &p, &s, NULL}, prompt = {40, tok, pos, seq, NULL};
        const eng_batch *b = step < 0 ? &prompt : &one;
        decode_both(g, c, b);
        if (eng_decode(f, b, &err)) fail_msg("cpu fast decode: %s", err.msg);
        const double dg = compare_logits(g, c, V, GPU_TOL, name), df = max_delta(f, c, V);
        if (dg > (df > GPU_TOL_FLOOR ? df : GPU_TOL_FLOOR))
            fail_msg("%s, %s: the GPU is %.4g from the exact logits, the CPU's fast path %.4g", name,
                     step < 0 ? "prompt" : "decode step", dg, df);
        if (dg > worst) worst = dg;
        if (df > worst_fast) worst_fast = df;
    }
    print_message("  %-20s worst |logit delta| from the exact path over the prompt and 12 steps: GPU %.3g, CPU "
                  "fast path %.3g\n", name, worst, worst_fast);
    eng_context_free(g);
    eng_context_free(c);
    eng_context_free(f);
    eng_model_free(m);
}

static void test_gpu_fixture_models_match_cpu(void **state) {
    (void)state;
    SKIP_WITHOUT_GPU();
    TU_NEED_FIXTURES();
    const char *const names[] = {"qwen2-tiny-f16", "qwen3-tiny-f16", "qwen35-tiny-f16", "qwen35-tiny-q8_0",
                                 "qwen35-k256-q4_k_m", "qwen35-k256-q5_k_m"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) run_fixture(names[i]);
}

/* A generated model of arch at test size, quantized to Q4_K_M (built once per arch). */
static const char *quantized(eng_arch arch) {
    static char out[2][512];
    char *o = out[arch == ENG_ARCH_QWEN35];
    if (o[0]) return o;
    eng_test_model_params p;
    eng_test_model_defaults(&p, arch);
    p.n_embd = 256, p.n_ff = 512, p.n_head = 8, p.head_dim = 64;
    if (arch == ENG_ARCH_QWEN35) p.ssm_d_state = 128; /* DeltaNet heads of 128 x 128, as Qwen3.5-4B */
    else p.n_head_kv = 2;
    dp_err err = {0};
    const char *f16 = tu_tmp(arch == ENG_ARCH_QWEN35 ? "gpu-qwen35-f16.gguf" : "gpu-qwen3-f16.gguf");
    if (eng_test_model_write(&p, f16, 2, &err)) fail_msg("%s", err.msg);
    snprintf(o, 512, "%s", tu_tmp(arch == ENG_ARCH_QWEN35 ? "gpu-qwen35-q4_k_m.gguf" : "gpu-qwen3-q4_k_m.gguf"));
    if (eng_quantize_file(f16, o, ENG_FTYPE_Q4_K_M, 2, NULL, NULL, &err)) fail_msg("%s", err.msg);
    return o;
}

static void paged_batched(eng_arch arch) {
    eng_model *m;
    dp_err err = {0};
    if (eng_model_load(quantized(arch), &m, &err)) fail_msg("%s", err.msg);
    const int32_t V = (int32_t)eng_model_get_info(m)->n_vocab;
    eng_context *g = context(m, DP_DEVICE_CUDA, false, 1024, 4), *c = context(m, DP_DEVICE_CPU, true, 1024, 4);
    /* sequences 0 and 1: their own prompts of 250 and 300 tokens (the GEMM path; 300 spans a
     * block boundary); sequence 2: a prompt of 250 shared by copy with sequence 3 */
    enum { P = 300 };
    int32_t tok[P], pos[P], seq[P];
    const int lens[3] = {250, 300, 250};
    for (int s = 0; s < 3; s++) {
        for (int i = 0; i < lens[s]; i++) tok[i] = (i * 97 + 13 * s + 1) % V, pos[i] = i, seq[i] = s;
        eng_batch b = {lens[s], tok, pos, seq, NULL};
        decode_both(g, c, &b);
        compare_logits(g, c, V, GPU_TOL, "prompt");
    }
    eng_seq_copy(g, 2, 3);
    eng_seq_copy(c, 2, 3);
    /* 20 steps of all four together (the matrix-vector path), every row's logits wanted; the
     * copies write past position 255 into blocks they first share */
    int32_t cur[4] = {3, 5, 7, 11}, len[4] = {250, 300, 250, 250};
    int8_t want[4] = {1, 1, 1, 1};
    double worst = 0;
    for (int step = 0; step < 20; step++) {
        int32_t p4[4], s4[4] = {0, 1, 2, 3};
        for (int s = 0; s < 4; s++) p4[s] = len[s]++;
        eng_batch b = {4, cur, p4, s4, want};
        decode_both(g, c, &b);
        const double w = compare_logits(g, c, V, GPU_TOL, "batched step");
        if (w > worst) worst = w;
        for (int s = 0; s < 4; s++) cur[s] = eng_argmax(eng_get_logits(c, s), V);
    }
    print_message("  Q4_K_M %s, 4 sequences x 20 steps: worst |logit delta| %.3g\n",
                  arch == ENG_ARCH_QWEN35 ? "qwen35" : "qwen3", worst);
    eng_context_free(g);
    eng_context_free(c);
    eng_model_free(m);
}

static void test_gpu_paged_batched_decode_matches_cpu(void **state) {
    (void)state;
    SKIP_WITHOUT_GPU();
    paged_batched(ENG_ARCH_QWEN3);
    paged_batched(ENG_ARCH_QWEN35);
}

/* The chunk-wise DeltaNet of prompt pieces against the token-by-token form on the same device:
 * a 150-token prompt (9 full chunks and a partial one) then 4 greedy steps, on a generated
 * qwen35 model with 128 x 128 heads (the shape of Qwen3.5-4B) and F32 weights, whose products
 * stay in f32 on the GPU (an f16 rounding would amplify the forms' last-bit differences). */
static void test_gpu_deltanet_chunked_prompt_matches_recurrent(void **state) {
    (void)state;
    SKIP_WITHOUT_GPU();
    eng_test_model_params p;
    eng_test_model_defaults(&p, ENG_ARCH_QWEN35);
    p.n_embd = 256, p.n_ff = 512, p.n_head = 8, p.head_dim = 64, p.ssm_d_state = 128, p.n_vocab = 2048;
    p.weight_type = ENG_TYPE_F32;
    eng_model *m;
    dp_err err = {0};
    const char *path = tu_tmp("gpu-qwen35-f32.gguf");
    if (eng_test_model_write(&p, path, 2, &err)) fail_msg("%s", err.msg);
    if (eng_model_load(path, &m, &err)) fail_msg("%s", err.msg);
    const int32_t V = (int32_t)eng_model_get_info(m)->n_vocab;
    eng_context *ctx[2];
    for (int i = 0; i < 2; i++) {
        eng_context_params cp = eng_context_default_params();
        cp.device = DP_DEVICE_CUDA;
        cp.n_ctx = 256;
        cp.n_seq_max = 1;
        cp.deltanet_mode = i == 0 ? 1 : 2; /* token by token, chunk-wise */
        if (eng_context_new(m, &cp, &ctx[i], &err)) fail_msg("context: %s", err.msg);
    }
    enum { P = 150 };
    int32_t tok[P], pos[P], seq[P];
    for (int i = 0; i < P; i++) tok[i] = (i * 71 + 5) % V, pos[i] = i, seq[i] = 0;
    eng_batch b = {P, tok, pos, seq, NULL};
    double worst = 0, top = 0;
    for (int step = 0; step <= 4; step++) {
        for (int i = 0; i < 2; i++)
            if (eng_decode(ctx[i], &b, &err)) fail_msg("decode: %s", err.msg);
        for (int32_t v = 0; v < V; v++) {
            const double d = fabs((double)eng_get_logits(ctx[0], 0)[v] - eng_get_logits(ctx[1], 0)[v]);
            if (d > worst) worst = d;
            if (fabs((double)eng_get_logits(ctx[0], 0)[v]) > top) top = fabs((double)eng_get_logits(ctx[0], 0)[v]);
        }
        tok[0] = eng_argmax(eng_get_logits(ctx[0], 0), V), pos[0] = P + step;
        b.n = 1;
    }
    print_message("  chunk-wise vs token by token, 150-token prompt and 4 steps: max |logit delta| %.3g (max |logit| %.3g)\n",
                  worst, top);
    if (worst > 1e-4 * (1.0 + top)) fail_msg("chunk-wise DeltaNet differs from the recurrence by %.4g", worst);
    eng_context_free(ctx[0]);
    eng_context_free(ctx[1]);
    eng_model_free(m);
}

/* Sequence 0's logits, bit for bit, decoded alone and among four others whose prompts share its
 * steps (prompt tokens of all five in one call, then every step together). */
static void batch_invariant(eng_arch arch) {
    eng_model *m;
    dp_err err = {0};
    if (eng_model_load(quantized(arch), &m, &err)) fail_msg("%s", err.msg);
    const int32_t V = (int32_t)eng_model_get_info(m)->n_vocab;
    enum { P = 20, STEPS = 8, S = 5 };
    float *alone = malloc((size_t)(STEPS + 1) * V * sizeof(float));
    for (int run = 0; run < 2; run++) {
        const int n_seq = run == 0 ? 1 : S;
        eng_context *g = context(m, DP_DEVICE_CUDA, false, 256, (uint32_t)n_seq);
        int32_t tok[S * P], pos[S * P], seq[S * P], cur[S], len[S];
        int n = 0;
        for (int s = 0; s < n_seq; s++) { /* prompts of 20, 13, 16, 19, 22 tokens */
            len[s] = s == 0 ? P : 10 + 3 * s;
            for (int i = 0; i < len[s]; i++) tok[n] = (i * 53 + 17 * s + 3) % V, pos[n] = i, seq[n] = s, n++;
        }
        int8_t want[S * P] = {0};
        for (int s = 0, at = 0; s < n_seq; at += len[s], s++) want[at + len[s] - 1] = 1;
        eng_batch b = {n, tok, pos, seq, want};
        if (eng_decode(g, &b, &err)) fail_msg("%s", err.msg);
        for (int step = 0; step <= STEPS; step++) {
            const float *l0 = eng_get_logits(g, 0);
            if (run == 0) memcpy(alone + (size_t)step * V, l0, (size_t)V * sizeof(float));
            else if (memcmp(alone + (size_t)step * V, l0, (size_t)V * sizeof(float)))
                fail_msg("%s: sequence 0's logits at step %d differ alone and among %d sequences",
                         arch == ENG_ARCH_QWEN35 ? "qwen35" : "qwen3", step, S);
            if (step == STEPS) break;
            for (int s = 0; s < n_seq; s++) cur[s] = eng_argmax(eng_get_logits(g, s), V), pos[s] = len[s]++, seq[s] = s;
            int8_t all[S] = {1, 1, 1, 1, 1};
            eng_batch one = {n_seq, cur, pos, seq, all};
            if (eng_decode(g, &one, &err)) fail_msg("%s", err.msg);
        }
        eng_context_free(g);
    }
    free(alone);
    eng_model_free(m);
}

static void test_gpu_results_are_batch_invariant(void **state) {
    (void)state;
    SKIP_WITHOUT_GPU();
    batch_invariant(ENG_ARCH_QWEN3);
    batch_invariant(ENG_ARCH_QWEN35);
}

static void test_gpu_device_selection_and_memory(void **state) {
    (void)state;
    SKIP_WITHOUT_GPU();
    eng_model *m;
    dp_err err = {0};
    if (eng_model_load(quantized(ENG_ARCH_QWEN35), &m, &err)) fail_msg("%s", err.msg);
    eng_context *c = context(m, DP_DEVICE_AUTO, false, 256, 1);
    if (strncmp(eng_context_backend_name(c), "cuda", 4))
        fail_msg("auto chose '%s' with a GPU present", eng_context_backend_name(c));
    eng_context_free(c);
    /* far more KV cache than any GPU holds: a clean DP_ENOMEM, not a crash */
    eng_context_params cp = eng_context_default_params();
    cp.device = DP_DEVICE_CUDA;
    cp.n_ctx = 1u << 20;
    cp.n_seq_max = 4096;
    assert_int_equal(eng_context_new(m, &cp, &c, &err), DP_ENOMEM);
    print_message("  too large: %s\n", err.msg);
    /* a request whose full KV cache is several times the GPU, fitted to its free memory, gets a
     * pool that fits (its recurrent state, 256 x 0.8 MiB, is counted first) */
    cp.n_ctx = 131072;
    cp.n_seq_max = 256;
    cp.n_ubatch = 512;
    assert_int_equal(eng_context_fit_budget(m, &cp, 0, &err), DP_OK);
    assert_true(cp.n_kv_blocks > 0);
    if (eng_context_new(m, &cp, &c, &err)) fail_msg("fitted context: %s", err.msg);
    print_message("  fitted: %d KV blocks\n", eng_kv_blocks_total(c));
    eng_context_free(c);
    /* the exact path is the CPU's: auto takes the CPU, cuda refuses */
    c = context(m, DP_DEVICE_AUTO, true, 256, 1);
    if (strncmp(eng_context_backend_name(c), "cpu", 3))
        fail_msg("auto --exact chose '%s'", eng_context_backend_name(c));
    eng_context_free(c);
    cp = eng_context_default_params();
    cp.device = DP_DEVICE_CUDA;
    cp.exact = true;
    assert_int_equal(eng_context_new(m, &cp, &c, &err), DP_EUNSUPPORTED);
    print_message("  cuda --exact: %s\n", err.msg);
    eng_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpu_fixture_models_match_cpu),
        cmocka_unit_test(test_gpu_paged_batched_decode_matches_cpu),
        cmocka_unit_test(test_gpu_deltanet_chunked_prompt_matches_recurrent),
        cmocka_unit_test(test_gpu_results_are_batch_invariant),
        cmocka_unit_test(test_gpu_device_selection_and_memory),
    };
    return cmocka_run_group_tests_name("gpu_model", tests, gpu_setup, NULL);
}
