/*
 * test_quant.c - block formats: half/bfloat16 conversion, quantize->dequantize error bounds
 * for every reference quantizer, bit-exact dequantization against llama.cpp's values in
 * dequant-rows.json, and the fixture models' quantized tensors against their originals.
 */
#include "testutil.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "quant.h"

static void test_f16_conversion_round_trips_all_halves(void **state) {
    (void)state;
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = eng_f16_to_f32((eng_f16)h);
        if (isnan(f)) {
            assert_true(isnan(eng_f16_to_f32(eng_f32_to_f16(f))));
            continue;
        }
        if (eng_f32_to_f16(f) != h) fail_msg("half 0x%04x -> %g -> 0x%04x", h, (double)f, eng_f32_to_f16(f));
    }
    assert_int_equal(eng_f32_to_f16(65520.0f), 0x7C00);     /* rounds to inf */
    assert_int_equal(eng_f32_to_f16(65519.0f), 0x7BFF);     /* largest finite */
    assert_int_equal(eng_f32_to_f16(1.0f + 1.0f / 2048), 0x3C00); /* tie to even (down) */
    assert_int_equal(eng_f32_to_f16(1.0f + 3.0f / 2048), 0x3C02); /* tie to even (up) */
    assert_int_equal(eng_f32_to_f16(5.9604645e-8f), 0x0001);  /* smallest subnormal */
    assert_int_equal(eng_f32_to_f16(2.9802322e-8f), 0x0000);  /* half of it: tie to even zero */
    assert_int_equal(eng_f32_to_f16(-0.0f), 0x8000);
}

static void test_bf16_conversion_rounds_to_nearest_even(void **state) {
    (void)state;
    assert_true(eng_bf16_to_f32(eng_f32_to_bf16(1.0f)) == 1.0f);
    assert_int_equal(eng_f32_to_bf16(1.00390625f), 0x3F80);  /* 1 + 2^-8: tie, even down */
    assert_int_equal(eng_f32_to_bf16(1.01171875f), 0x3F82);  /* 1 + 3*2^-8: tie, even up */
    assert_true(isnan(eng_bf16_to_f32(eng_f32_to_bf16(NAN))));
    for (uint32_t h = 0; h < 0x10000; h += 7) {
        float f = eng_bf16_to_f32((eng_bf16)h);
        if (!isnan(f)) assert_int_equal(eng_f32_to_bf16(f), h);
    }
}

static void test_type_table_matches_spec(void **state) {
    (void)state;
    const struct { int id; const char *name; int64_t blck; size_t size; } t[] = {
        {0, "F32", 1, 4}, {1, "F16", 1, 2}, {2, "Q4_0", 32, 18}, {3, "Q4_1", 32, 20}, {6, "Q5_0", 32, 22},
        {7, "Q5_1", 32, 24}, {8, "Q8_0", 32, 34}, {10, "Q2_K", 256, 84}, {11, "Q3_K", 256, 110},
        {12, "Q4_K", 256, 144}, {13, "Q5_K", 256, 176}, {14, "Q6_K", 256, 210}, {15, "Q8_K", 256, 292},
        {30, "BF16", 1, 2},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        const eng_type_traits *tr = eng_type_get(t[i].id);
        assert_non_null(tr);
        assert_string_equal(tr->name, t[i].name);
        assert_int_equal(tr->blck, t[i].blck);
        assert_int_equal(tr->type_size, t[i].size);
        assert_non_null(tr->to_float);
        assert_int_equal(eng_type_from_name(t[i].name), t[i].id);
    }
    assert_int_equal(eng_type_from_name("q4_k"), ENG_TYPE_Q4_K);
    assert_int_equal(eng_type_from_name("IQ4_XS"), -1);
    assert_false(eng_type_is_supported(23));
    assert_false(eng_type_is_supported(99));
    assert_string_equal(eng_type_name(99), "type 99");
    assert_int_equal(eng_row_size(ENG_TYPE_Q4_K, 2560), 10 * 144);
    assert_int_equal(eng_row_size(ENG_TYPE_Q4_K, 100), 0);
    float x[32];
    assert_int_equal(eng_dequantize_row(23, x, x, 32), DP_EUNSUPPORTED);
    assert_int_equal(eng_quantize_row(ENG_TYPE_Q8_1, x, x, 32), DP_EUNSUPPORTED);
}

/* Relative RMS error of quantize -> dequantize on Gaussian data (a third of it 50x smaller,
 * plus zeros), and the max error per element relative to its block's max |x|. The max-error
 * bounds are the formats' resolution: Q8_0 rounds to amax/127 (half a step: 0.0039, plus the
 * half-precision d); Q4_0's d = max/-8 cannot reach +|max| (one full step: 0.125); Q5_0 likewise
 * 0.0625; Q4_1/Q5_1 half a step of (max-min)/15 or /31 over a range <= 2 amax. The K formats
 * fit scales by search, so their bounds are the measured values with ~25% margin; set
 * DP_QUANT_REPORT=1 to print the measurements. */
static void test_quantize_dequantize_error_within_format_bounds(void **state) {
    (void)state;
    const struct { int type; double max_rel_rms; double max_step_frac; } t[] = {
        {ENG_TYPE_F16, 0.0005, 0.001},  {ENG_TYPE_BF16, 0.003, 0.004},  {ENG_TYPE_Q8_0, 0.0075, 0.0045},
        {ENG_TYPE_Q8_K, 0.010, 0.0045}, {ENG_TYPE_Q6_K, 0.023, 0.025},  {ENG_TYPE_Q5_K, 0.045, 0.06},
        {ENG_TYPE_Q5_0, 0.050, 0.065},  {ENG_TYPE_Q5_1, 0.050, 0.035},  {ENG_TYPE_Q4_K, 0.085, 0.10},
        {ENG_TYPE_Q4_0, 0.095, 0.13},   {ENG_TYPE_Q4_1, 0.100, 0.07},   {ENG_TYPE_Q3_K, 0.18, 0.30},
        {ENG_TYPE_Q2_K, 0.45, 0.42},
    };
    enum { N = 256 * 64 };
    float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float));
    uint8_t *q = malloc(N * 4);
    uint64_t seed = 7;
    for (int i = 0; i < N; i++) x[i] = tu_randn(&seed) * (i % 3 == 0 ? 0.02f : 1.0f);
    x[100] = 0;
    for (int i = 512; i < 768; i++) x[i] = 0.0f; /* an all-zero super-block */
    for (size_t k = 0; k < sizeof(t) / sizeof(t[0]); k++) {
        assert_int_equal(eng_quantize_row(t[k].type, x, q, N), DP_OK);
        assert_int_equal(eng_dequantize_row(t[k].type, q, y, N), DP_OK);
        double se = 0, sx = 0, worst = 0;
        const int64_t blck = eng_type_get(t[k].type)->blck > 32 ? 256 : 32;
        for (int64_t b0 = 0; b0 < N; b0 += blck) {
            float amax = 0;
            for (int64_t i = b0; i < b0 + blck; i++) amax = fmaxf(amax, fabsf(x[i]));
            for (int64_t i = b0; i < b0 + blck; i++) {
                double e = (double)y[i] - x[i];
                se += e * e;
                sx += (double)x[i] * x[i];
                if (amax > 0) worst = fmax(worst, fabs(e) / amax);
                else assert_true(y[i] == 0.0f);
            }
        }
        double rel = sqrt(se / sx);
        print_message("  %-5s relative RMS error %.4f, worst error / block max %.4f\n", eng_type_name(t[k].type), rel,
                      worst);
        if (getenv("DP_QUANT_REPORT") == NULL && (rel > t[k].max_rel_rms || worst > t[k].max_step_frac))
            fail_msg("%s: relative RMS error %.4f (bound %.4f), worst error/block max %.4f (bound %.4f)",
                     eng_type_name(t[k].type), rel, t[k].max_rel_rms, worst, t[k].max_step_frac);
    }
    free(x);
    free(y);
    free(q);
}

static void test_q8_k_follows_the_reference_rule(void **state) {
    (void)state; /* model-formats.md §2.4: the largest-magnitude element becomes -127, bsums per 16 */
    float x[256];
    uint64_t seed = 3;
    for (int i = 0; i < 256; i++) x[i] = tu_randn(&seed);
    x[17] = 5.0f;
    eng_block_q8_k b;
    eng_quantize_row(ENG_TYPE_Q8_K, x, &b, 256);
    assert_int_equal(b.qs[17], -127);
    assert_true(b.d == 1.0f / (-127.0f / 5.0f));
    for (int g = 0; g < 16; g++) {
        int s = 0;
        for (int j = 0; j < 16; j++) s += b.qs[16 * g + j];
        assert_int_equal(b.bsums[g], s);
    }
    /* Q8_0: d = amax / 127 stored as half; quants from the unrounded d, ties away from zero */
    eng_block_q8_0 q;
    float y[32] = {0};
    y[0] = 127.0f;
    y[1] = 0.5f;
    y[2] = -0.5f;
    eng_quantize_row(ENG_TYPE_Q8_0, y, &q, 32);
    assert_int_equal(q.qs[0], 127);
    assert_int_equal(q.qs[1], 1);
    assert_int_equal(q.qs[2], -1);
    assert_true(eng_f16_to_f32(q.d) == 1.0f);
}

/* ---- Against llama.cpp ------------------------------------------------------------------ */

static void test_dequantization_is_bit_exact_against_llama_cpp(void **state) {
    (void)state;
    TU_NEED_FIXTURES();
    json_error_t je;
    json_t *root = json_load_file(tu_fixture("dequant-rows.json"), 0, &je);
    assert_non_null(root);
    json_t *tensors = json_object_get(root, "tensors");
    size_t i, n_rows = 0;
    json_t *t;
    json_array_foreach(tensors, i, t) {
        const char *file = json_string_value(json_object_get(t, "file"));
        const char *name = json_string_value(json_object_get(t, "tensor"));
        eng_gguf *g;
        dp_err err = {0};
        assert_int_equal(eng_gguf_open(tu_fixture(file), &g, &err), DP_OK);
        const eng_gguf_tensor *ti = eng_gguf_find_tensor(g, name);
        assert_non_null(ti);
        assert_string_equal(eng_type_name(ti->type), json_string_value(json_object_get(t, "type")));
        assert_int_equal(eng_gguf_data_offset(g) + ti->offset,
                         json_integer_value(json_object_get(t, "data_offset_in_file")));
        const size_t row_bytes = eng_row_size(ti->type, ti->ne[0]);
        float *row = malloc((size_t)ti->ne[0] * sizeof(float));
        const char *key;
        json_t *vals;
        json_object_foreach(json_object_get(t, "rows"), key, vals) {
            long r = strtol(key, NULL, 10);
            assert_int_equal(json_array_size(vals), (size_t)ti->ne[0]);
            assert_int_equal(eng_dequantize_row(ti->type, (const uint8_t *)ti->data + (size_t)r * row_bytes, row,
                                                ti->ne[0]), DP_OK);
            for (int64_t k = 0; k < ti->ne[0]; k++) {
                float want = (float)json_real_value(json_array_get(vals, (size_t)k));
                if (json_is_integer(json_array_get(vals, (size_t)k)))
                    want = (float)json_integer_value(json_array_get(vals, (size_t)k));
                if (memcmp(&want, &row[k], 4) != 0)
                    fail_msg("%s %s row %ld elem %lld: %.9g != llama.cpp %.9g", file, name, r, (long long)k,
                             (double)row[k], (double)want);
            }
            n_rows++;
        }
        free(row);
        eng_gguf_close(g);
    }
    assert_true(n_rows >= 25);
    json_decref(root);
}

/* Max |quantized - original| over a tensor, relative to the original's max |x| per block. */
static double tensor_rel_rms(const eng_gguf_tensor *a, const eng_gguf_tensor *b) {
    const int64_t n = a->ne[0], rows = a->ne[1] * a->ne[2] * a->ne[3];
    float *x = malloc((size_t)n * 4), *y = malloc((size_t)n * 4);
    double se = 0, sx = 0;
    for (int64_t r = 0; r < rows; r++) {
        eng_dequantize_row(a->type, (const uint8_t *)a->data + (size_t)r * eng_row_size(a->type, n), x, n);
        eng_dequantize_row(b->type, (const uint8_t *)b->data + (size_t)r * eng_row_size(b->type, n), y, n);
        for (int64_t i = 0; i < n; i++) {
            se += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
            sx += (double)x[i] * x[i];
        }
    }
    free(x);
    free(y);
    return sqrt(se / (sx > 0 ? sx : 1));
}

static void test_fixture_quantized_tensors_match_their_originals(void **state) {
    (void)state;
    TU_NEED_FIXTURES();
    dp_err err = {0};
    eng_gguf *f16, *q8, *q4, *q5;
    assert_int_equal(eng_gguf_open(tu_fixture("models/qwen35-tiny-f16.gguf"), &f16, &err), DP_OK);
    assert_int_equal(eng_gguf_open(tu_fixture("models/qwen35-tiny-q8_0.gguf"), &q8, &err), DP_OK);
    int checked = 0;
    for (int64_t i = 0; i < eng_gguf_n_tensors(q8); i++) {
        const eng_gguf_tensor *t = eng_gguf_tensor_at(q8, i);
        const eng_gguf_tensor *o = eng_gguf_find_tensor(f16, t->name);
        assert_non_null(o);
        assert_memory_equal(o->ne, t->ne, sizeof(t->ne));
        double rel = tensor_rel_rms(o, t);
        double bound = t->type == ENG_TYPE_Q8_0 ? 0.008 : 0.0;
        if (rel > bound) fail_msg("%s (%s vs %s): relative RMS %.5f > %.5f", t->name, eng_type_name(t->type),
                                  eng_type_name(o->type), rel, bound);
        checked += t->type == ENG_TYPE_Q8_0;
    }
    assert_true(checked >= 50);
    /* The k256 files share one (unshipped) F16 source: Q4_K_M and Q5_K_M must agree to
     * within the sum of their formats' errors. */
    assert_int_equal(eng_gguf_open(tu_fixture("models/qwen35-k256-q4_k_m.gguf"), &q4, &err), DP_OK);
    assert_int_equal(eng_gguf_open(tu_fixture("models/qwen35-k256-q5_k_m.gguf"), &q5, &err), DP_OK);
    for (int64_t i = 0; i < eng_gguf_n_tensors(q4); i++) {
        const eng_gguf_tensor *a = eng_gguf_tensor_at(q4, i);
        const eng_gguf_tensor *b = eng_gguf_find_tensor(q5, a->name);
        assert_non_null(b);
        double rel = tensor_rel_rms(a, b);
        double bound = a->type == ENG_TYPE_F32 ? 0.0 : 0.09 + 0.045;
        if (rel > bound) fail_msg("%s (%s vs %s): relative RMS %.4f > %.4f", a->name, eng_type_name(a->type),
                                  eng_type_name(b->type), rel, bound);
    }
    eng_gguf_close(f16);
    eng_gguf_close(q8);
    eng_gguf_close(q4);
    eng_gguf_close(q5);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f16_conversion_round_trips_all_halves),
        cmocka_unit_test(test_bf16_conversion_rounds_to_nearest_even),
        cmocka_unit_test(test_type_table_matches_spec),
        cmocka_unit_test(test_quantize_dequantize_error_within_format_bounds),
        cmocka_unit_test(test_q8_k_follows_the_reference_rule),
        cmocka_unit_test(test_dequantization_is_bit_exact_against_llama_cpp),
        cmocka_unit_test(test_fixture_quantized_tensors_match_their_originals),
    };
    return cmocka_run_group_tests_name("quant", tests, NULL, NULL);
}
