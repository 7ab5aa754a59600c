/*
 * test_weight_types.c - every weight type the engine accepts, in every role a weight plays, and
 * the edge shapes a file may declare, on every instruction-set path this CPU has: the fast
 * path's logits against the exact path's (weights dequantized row by row with
 * eng_dequantize_row, all math in f32).
 *
 * The roles: the layers' projections, token_embd as a lookup only (untied F16 head), token_embd
 * as the tied output head, and a separate output.weight. Widths are not multiples of 256 where
 * the type allows it (96, 160: a kernel that assumes whole 256-value steps reads past the row, as
 * the dequantizing dots did on Qwen2.5-0.5B's width 896). A prompt of several tokens runs the
 * GEMMs, the decode steps after it the one-token dots, and two sequences in one step the GEMMs
 * again with rows of different positions.
 *
 * The bound is relative to the largest logit and follows the activation rounding of the type
 * (Q8 blocks, F16, BF16, or none); a kernel reading the wrong bytes gives errors of the size of
 * the logits themselves, and NaN or all-equal logits fail on their own.
 */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "gguf.h"
#include "quant.h"
#include "cpu/kernels.h"

typedef struct isa {
    const char *name;
    bool scalar, no_avx512, no_amx;
} isa;

static const isa k_isas[] = {
    {"scalar", true, true, true},
    {"avx2", false, true, true},
    {"avx512", false, false, true},
    {"amx", false, false, false},
};

static bool isa_present(const isa *a) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    if (!strcmp(a->name, "avx2")) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (!strcmp(a->name, "avx512"))
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx512vnni");
    if (!strcmp(a->name, "amx")) return eng_cpu_amx();
#endif
    return a->scalar;
}

static void isa_select(const isa *a) {
    eng_cpu_force_scalar(a->scalar);
    eng_cpu_disable_avx512(a->no_avx512);
    eng_cpu_disable_amx(a->no_amx);
}

typedef enum role { ROLE_LAYERS, ROLE_EMBD_LOOKUP, ROLE_TIED_HEAD, ROLE_UNTIED_HEAD, ROLE_N } role;
static const char *const k_role[] = {"layers", "token_embd lookup", "tied head", "untied head"};

static bool is_k(int t) { return eng_type_get(t)->blck == 256; }

/* Relative bound on |fast - exact| / max|exact| for a type's activation rounding. */
static double bound(int t) {
    switch (t) {
    case ENG_TYPE_F32: return 1e-4;
    case ENG_TYPE_F16: return 5e-3;
    case ENG_TYPE_BF16: return 3e-2;
    default: return 6e-2; /* 8-bit activation blocks */
    }
}

#define N_PROMPT 12
#define N_STEPS 3

/* Logits of a fixed prompt, decode steps after it, and a two-sequence step: out[(N_STEPS + 3) * V]. */
static void run(const char *path, bool exact, const isa *a, float *out, int32_t *V_out) {
    dp_err err = {0};
    eng_model *m;
    eng_context *c;
    if (eng_model_load(path, &m, &err)) fail_msg("load: %s", err.msg);
    eng_context_params cp = eng_context_default_params();
    cp.n_ctx = 64;
    cp.n_seq_max = 2;
    cp.n_threads = 2;
    cp.exact = exact;
    cp.device = DP_DEVICE_CPU;
    if (a) isa_select(a);
    if (eng_context_new(m, &cp, &c, &err)) fail_msg("context: %s", err.msg);
    const int32_t V = (int32_t)eng_model_get_info(m)->n_vocab;
    *V_out = V;
    int32_t tok[N_PROMPT];
    for (int i = 0; i < N_PROMPT; i++) tok[i] = (i * 131 + 17) % V;
    int row = 0;
    if (eng_decode_sequence(c, 0, tok, N_PROMPT, 0, &err)) fail_msg("prompt: %s", err.msg);
    memcpy(out + (size_t)row++ * V, eng_get_logits(c, 0), (size_t)V * sizeof(float));
    for (int s = 0; s < N_STEPS; s++) {
        int32_t t = (s * 71 + 3) % V;
        if (eng_decode_sequence(c, 0, &t, 1, N_PROMPT + s, &err)) fail_msg("step: %s", err.msg);
        memcpy(out + (size_t)row++ * V, eng_get_logits(c, 0), (size_t)V * sizeof(float));
    }
    /* seq 1 starts while seq 0 goes on: rows of two positions in one GEMM */
    int32_t bt[3] = {tok[0], tok[1], 5 % V}, bp[3] = {0, 1, N_PROMPT + N_STEPS}, bs[3] = {1, 1, 0};
    int8_t want[3] = {0, 1, 1};
    eng_batch b = {3, bt, bp, bs, want};
    if (eng_decode(c, &b, &err)) fail_msg("batch: %s", err.msg);
    memcpy(out + (size_t)row++ * V, eng_get_logits(c, 0), (size_t)V * sizeof(float));
    memcpy(out + (size_t)row++ * V, eng_get_logits(c, 1), (size_t)V * sizeof(float));
    eng_context_free(c);
    eng_model_free(m);
}

/* Writes the model of p, runs it on the exact path and on every instruction-set path this CPU
 * has, and fails where a fast path's logits leave the exact ones by more than tol of the largest. */
static void compare_paths(const eng_test_model_params *p, const char *file, const char *label, double tol) {
    const char *path = tu_tmp(file);
    dp_err err = {0};
    if (eng_test_model_write(p, path, 2, &err)) fail_msg("make: %s", err.msg);
    int32_t V = 0;
    const size_t rows = N_STEPS + 3;
    float *ex = malloc(rows * 4096 * sizeof(float)), *fa = malloc(rows * 4096 * sizeof(float));
    assert_non_null(ex);
    assert_non_null(fa);
    isa_select(&k_isas[0]);
    run(path, true, NULL, ex, &V);
    assert_true((size_t)V <= 4096);
    double emax = 0;
    for (size_t i = 0; i < rows * (size_t)V; i++) emax = fmax(emax, fabs(ex[i]));
    assert_true(emax > 0 && isfinite(emax));
    for (size_t ia = 0; ia < sizeof(k_isas) / sizeof(k_isas[0]); ia++) {
        if (!isa_present(&k_isas[ia])) continue;
        run(path, false, &k_isas[ia], fa, &V);
        double d = 0;
        for (size_t i = 0; i < rows * (size_t)V; i++) {
            if (!isfinite(fa[i])) fail_msg("%s, %s: logit %zu is %g", label, k_isas[ia].name, i, fa[i]);
            d = fmax(d, fabs((double)fa[i] - ex[i]));
        }
        if (d / emax > tol)
            fail_msg("%s, %s path: max |fast - exact| %.3g = %.3g of the largest logit (bound %.3g)", label,
                     k_isas[ia].name, d, d / emax, tol);
        print_message("  %-30s %-7s max |fast - exact| / max|logit| = %.2e\n", label, k_isas[ia].name, d / emax);
    }
    isa_select(&k_isas[sizeof(k_isas) / sizeof(k_isas[0]) - 1]);
    free(ex);
    free(fa);
}

static void check(int type, role r) {
    eng_test_model_params p;
    eng_test_model_defaults(&p, ENG_ARCH_QWEN2);
    const bool k = is_k(type);
    /* K-quants need rows of 256; the others get widths that are not multiples of 256 */
    p.n_embd = k ? 256 : 96;
    p.n_head = 4;
    p.n_head_kv = 2;
    p.head_dim = k ? 64 : 24;
    p.n_ff = k ? 512 : 160;
    p.weight_type = r == ROLE_LAYERS ? type : ENG_TYPE_F16;
    p.embd_type = r == ROLE_EMBD_LOOKUP || r == ROLE_TIED_HEAD ? type : ENG_TYPE_F16;
    p.output_type = r == ROLE_EMBD_LOOKUP ? ENG_TYPE_F16 : r == ROLE_UNTIED_HEAD ? type : -1;
    p.seed = 7 + (uint64_t)type;
    char name[64], label[64];
    snprintf(name, sizeof(name), "wt-%s-%d.gguf", eng_type_name(type), (int)r);
    snprintf(label, sizeof(label), "%s as %s", eng_type_name(type), k_role[r]);
    /* in the layers every projection rounds its input; in a head role only the head does */
    const int act_from = r == ROLE_EMBD_LOOKUP ? ENG_TYPE_F16 : type;
    compare_paths(&p, name, label, bound(act_from) * (r == ROLE_LAYERS ? 1.0 : 0.5) + bound(ENG_TYPE_F16));
}

#define TYPE_TEST(T)                                                                   \
    static void test_##T(void **state) {                                               \
        (void)state;                                                                   \
        for (int r = 0; r < ROLE_N; r++) check(ENG_TYPE_##T, (role)r);                 \
    }
TYPE_TEST(F32)
TYPE_TEST(F16)
TYPE_TEST(BF16)
TYPE_TEST(Q4_0)
TYPE_TEST(Q4_1)
TYPE_TEST(Q5_0)
TYPE_TEST(Q5_1)
TYPE_TEST(Q8_0)
TYPE_TEST(Q2_K)
TYPE_TEST(Q3_K)
TYPE_TEST(Q4_K)
TYPE_TEST(Q5_K)
TYPE_TEST(Q6_K)

/* make-test-model refuses a K-quant at a width that is not a multiple of 256, naming the tensor */
/* The edges of the shapes a file may declare (model_info.c accepts head sizes and rotary widths
 * up to 4096): heads of 2 and of 4096 values (a rotary width of 4096 overran RoPE's stack table
 * once), 16 query heads on one KV head over a width of 72 (vector tails), a head over the AVX2 slab mix's limit and not
 * a multiple of 16, a qwen35 attention head of 1024, and Gated DeltaNet states off the tiled kernel's shapes (8: not a
 * multiple of its width; 264: over its largest). Under the sanitizers this is where an array sized for the shapes seen
 * so far shows itself. F16 weights; the bound is the F16 layers' one above with room for heads of 8 values, whose few
 * products average out less of the activations' rounding. */
static void test_edge_shapes(void **state) {
    (void)state;
    static const struct {
        const char *name;
        eng_arch arch;
        uint32_t embd, head, head_kv, hd, rot, d_state, interval;
    } k_shapes[] = {
        {"qwen3 head 4096 rot 4096", ENG_ARCH_QWEN3, 64, 1, 1, 4096, 4096, 0, 0},
        {"qwen3 4/2 heads of 2", ENG_ARCH_QWEN3, 64, 4, 2, 2, 2, 0, 0},
        {"qwen3 16 heads on 1, width 72", ENG_ARCH_QWEN3, 72, 16, 1, 16, 16, 0, 0},
        {"qwen2 head 520 rot 256", ENG_ARCH_QWEN2, 64, 2, 1, 520, 256, 0, 0},
        {"qwen35 head 1024 state 264", ENG_ARCH_QWEN35, 64, 2, 1, 1024, 0, 264, 0},
        {"qwen35 head 8 state 8", ENG_ARCH_QWEN35, 64, 2, 1, 8, 0, 8, 0},
        {"qwen35 every layer attention", ENG_ARCH_QWEN35, 64, 2, 1, 32, 0, 0, 1},
        {"qwen35 no attention layer", ENG_ARCH_QWEN35, 64, 2, 1, 32, 0, 0, 5},
    };
    for (size_t i = 0; i < sizeof(k_shapes) / sizeof(k_shapes[0]); i++) {
        eng_test_model_params p;
        eng_test_model_defaults(&p, k_shapes[i].arch);
        p.n_embd = k_shapes[i].embd;
        p.n_head = k_shapes[i].head;
        p.n_head_kv = k_shapes[i].head_kv;
        p.head_dim = k_shapes[i].hd;
        p.n_rot = k_shapes[i].rot;
        if (k_shapes[i].d_state) p.ssm_d_state = k_shapes[i].d_state;
        if (k_shapes[i].interval) p.full_attn_interval = k_shapes[i].interval;
        p.seed = 40 + i;
        char name[32];
        snprintf(name, sizeof(name), "shape-%zu.gguf", i);
        compare_paths(&p, name, k_shapes[i].name, 3 * bound(ENG_TYPE_F16));
    }
}

static void test_refuses_bad_width(void **state) {
    (void)state;
    eng_test_model_params p;
    eng_test_model_defaults(&p, ENG_ARCH_QWEN2);
    p.n_embd = 96;
    p.weight_type = ENG_TYPE_Q4_K;
    dp_err err = {0};
    assert_int_equal(eng_test_model_write(&p, tu_tmp("bad.gguf"), 1, &err), DP_EINVAL);
    assert_non_null(strstr(err.msg, "not a multiple of Q4_K's block of 256"));
}

/* Overwrites every float of tensor name in the model file at path with v. */
static void poke_f32(const char *path, const char *name, float v) {
    eng_gguf *g;
    dp_err err = {0};
    if (eng_gguf_open(path, &g, &err)) fail_msg("%s", err.msg);
    const eng_gguf_tensor *t = eng_gguf_find_tensor(g, name);
    assert_non_null(t);
    assert_int_equal(t->type, ENG_TYPE_F32);
    const long off = (long)(eng_gguf_data_offset(g) + t->offset);
    const size_t n = t->nbytes / 4;
    eng_gguf_close(g);
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    assert_int_equal(fseek(f, off, SEEK_SET), 0);
    for (size_t i = 0; i < n; i++) assert_int_equal(fwrite(&v, 4, 1, f), 1);
    fclose(f);
}

/* Never silently wrong: logits that are not finite, or all equal, fail the step with
 * DP_ENUMERIC naming the sequence and position; the per-layer check names the layer. */
static void expect_decode_fails(const char *path, bool check_layers, const char *want) {
    eng_model *m;
    eng_context *c;
    dp_err err = {0};
    if (eng_model_load(path, &m, &err)) fail_msg("load: %s", err.msg);
    eng_context_params cp = eng_context_default_params();
    cp.n_ctx = 64;
    cp.n_threads = 2;
    cp.device = DP_DEVICE_CPU;
    cp.check_layers = check_layers;
    if (eng_context_new(m, &cp, &c, &err)) fail_msg("context: %s", err.msg);
    const int32_t tok[3] = {1, 2, 3};
    assert_int_equal(eng_decode_sequence(c, 0, tok, 3, 0, &err), DP_ENUMERIC);
    if (!strstr(err.msg, want)) fail_msg("message '%s' lacks '%s'", err.msg, want);
    eng_context_free(c);
    eng_model_free(m);
}

static void test_step_checks_refuse_bad_logits(void **state) {
    (void)state;
    eng_test_model_params p;
    eng_test_model_defaults(&p, ENG_ARCH_QWEN2);
    dp_err err = {0};
    const char *nan = tu_tmp("nan.gguf"), *zero = tu_tmp("zero.gguf"), *layer = tu_tmp("layer.gguf");
    assert_int_equal(eng_test_model_write(&p, nan, 1, &err), 0);
    assert_int_equal(eng_test_model_write(&p, zero, 1, &err), 0);
    assert_int_equal(eng_test_model_write(&p, layer, 1, &err), 0);
    poke_f32(nan, "output_norm.weight", NAN);
    expect_decode_fails(nan, false, "after position 2 of sequence 0 are not finite");
    poke_f32(zero, "output_norm.weight", 0.0f); /* a head that multiplies zeros: flat logits */
    expect_decode_fails(zero, false, "are all 0");
    poke_f32(layer, "blk.1.ffn_norm.weight", INFINITY);
    expect_decode_fails(layer, true, "layer 1's output is not finite");
    /* in docpipe batch the refused step becomes error records, and the exit says some failed */
    const char *in = tu_tmp("req.jsonl"), *out = tu_tmp("out.jsonl");
    const char req[] = "{\"custom_id\": \"a\", \"method\": \"POST\", \"url\": \"/v1/completions\", "
                       "\"body\": {\"prompt\": \"hello\", \"max_tokens\": 4}}\n";
    tu_write_file(in, req, sizeof(req) - 1);
    assert_int_equal(tu_run(NULL, "batch -m '%s' -i '%s' -o '%s' --errors '%s' -c 256 -t 2 --device cpu", nan, in, out,
                            out), 3);
    char got[4096] = {0};
    FILE *f = fopen(out, "rb");
    assert_non_null(f);
    assert_true(fread(got, 1, sizeof(got) - 1, f) > 0);
    fclose(f);
    assert_non_null(strstr(got, "\"engine_error\""));
    assert_non_null(strstr(got, "not finite"));
    /* and generate exits non-zero with the reason */
    assert_int_not_equal(tu_run(NULL, "generate -m '%s' -p hello -n 4 -t 2 --device cpu", nan), 0);
    if (!strstr(tu_last_stderr(), "not finite")) fail_msg("generate said: %s", tu_last_stderr());
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_F32),
        cmocka_unit_test(test_F16),
        cmocka_unit_test(test_BF16),
        cmocka_unit_test(test_Q4_0),
        cmocka_unit_test(test_Q4_1),
        cmocka_unit_test(test_Q5_0),
        cmocka_unit_test(test_Q5_1),
        cmocka_unit_test(test_Q8_0),
        cmocka_unit_test(test_Q2_K),
        cmocka_unit_test(test_Q3_K),
        cmocka_unit_test(test_Q4_K),
        cmocka_unit_test(test_Q5_K),
        cmocka_unit_test(test_Q6_K),
        cmocka_unit_test(test_edge_shapes),
        cmocka_unit_test(test_refuses_bad_width),
        cmocka_unit_test(test_step_checks_refuse_bad_logits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
