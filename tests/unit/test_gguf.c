/*
 * test_gguf.c - the GGUF reader against one handcrafted broken file per bug class
 * (docs/model-formats.md §1.6), truncations and byte flips of a valid
 * file, the writer's round trip, and the fixture models.
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "gguf_writer.h"
#include "quant.h"

/* ---- Handcrafted files ------------------------------------------------------------------ */

enum variant {
    V_OK,
    V_BAD_MAGIC, V_VERSION_0, V_VERSION_1, V_VERSION_FUTURE, V_VERSION_SWAPPED,
    V_N_TENSORS_NEG, V_N_KV_NEG, V_N_TENSORS_TOO_MANY,
    V_KEY_SIZE_HUGE, V_KEY_EMPTY, V_KV_BAD_TYPE, V_KV_DUPLICATE,
    V_ALIGN_INT32, V_ALIGN_ZERO, V_ALIGN_NOT_POW2, V_ALIGN_TOO_BIG,
    V_ARRAY_NESTED, V_ARRAY_COUNT_HUGE, V_ARRAY_COUNT_PAST_END, V_STR_LEN_PAST_END, V_STR_LEN_HUGE,
    V_BOOL_BAD,
    V_NAME_TOO_LONG, V_NAME_EMPTY, V_NAME_NUL, V_NAME_DUPLICATE,
    V_N_DIMS_5, V_N_DIMS_0, V_NE_NEG, V_NE_ZERO, V_NE_OVERFLOW, V_BYTES_OVERFLOW,
    V_TYPE_BAD, V_TYPE_IQ, V_TYPE_REMOVED, V_NE0_NOT_BLOCK,
    V_OFFSET_NEG, V_OFFSET_GAP, V_OFFSET_OVERLAP, V_OFFSET_MISALIGNED,
    V_DATA_SHORT, V_TRUNC_KV, V_TRUNC_TENSOR_INFO,
    V_COUNT
};

/* Builds a small valid file (3 KVs, an F32 and a Q8_0 tensor) with one defect. */
static void build(tu_bytes *b, int v) {
    memset(b, 0, sizeof(*b));
    tb_u32(b, v == V_BAD_MAGIC ? 0x46554748u : 0x46554747u);
    uint32_t ver = 3;
    if (v == V_VERSION_0) ver = 0;
    if (v == V_VERSION_1) ver = 1;
    if (v == V_VERSION_FUTURE) ver = 4;
    if (v == V_VERSION_SWAPPED) ver = 0x03000000u;
    tb_u32(b, ver);
    tb_u64(b, v == V_N_TENSORS_NEG ? (uint64_t)-1 : v == V_N_TENSORS_TOO_MANY ? 1000000 : 2);
    int n_kv = v == V_KV_DUPLICATE ? 4 : 3;
    tb_u64(b, v == V_N_KV_NEG ? (uint64_t)-1 : (uint64_t)n_kv);
    /* kv 0: general.architecture = "qwen3" */
    if (v == V_KEY_SIZE_HUGE) tb_u64(b, (uint64_t)-1);
    else if (v == V_KEY_EMPTY) tb_str(b, "");
    else tb_str(b, "general.architecture");
    tb_u32(b, v == V_KV_BAD_TYPE ? 99 : 8);
    if (v == V_STR_LEN_PAST_END) tb_u64(b, 100000);
    else if (v == V_STR_LEN_HUGE) tb_u64(b, 1ull << 63);
    else tb_str(b, "qwen3");
    if (v == V_TRUNC_KV) return;
    /* kv 1: general.alignment */
    tb_str(b, "general.alignment");
    if (v == V_ALIGN_INT32) { tb_u32(b, 5); tb_u32(b, 32); }
    else { tb_u32(b, 4); tb_u32(b, v == V_ALIGN_ZERO ? 0 : v == V_ALIGN_NOT_POW2 ? 48 : v == V_ALIGN_TOO_BIG ? 1u << 30 : 32); }
    /* kv 2: test.values, array of INT32 (or defective) */
    tb_str(b, "test.values");
    if (v == V_BOOL_BAD) {
        tb_u32(b, 7);
        tb_u8(b, 2);
    } else {
        tb_u32(b, 9);
        tb_u32(b, v == V_ARRAY_NESTED ? 9 : 5);
        tb_u64(b, v == V_ARRAY_COUNT_HUGE ? (1ull << 62) : v == V_ARRAY_COUNT_PAST_END ? 1000000 : 3);
        tb_u32(b, 1); tb_u32(b, 2); tb_u32(b, 3);
    }
    if (v == V_KV_DUPLICATE) {
        tb_str(b, "general.architecture");
        tb_u32(b, 8);
        tb_str(b, "llama");
    }
    /* tensor 0: a.weight, F32 [32, 2] */
    char longname[80];
    memset(longname, 'n', 64);
    longname[64] = '\0';
    if (v == V_NAME_TOO_LONG) tb_str(b, longname);
    else if (v == V_NAME_EMPTY) tb_str(b, "");
    else if (v == V_NAME_NUL) { tb_u64(b, 3); tb_raw(b, "a\0b", 3); }
    else tb_str(b, "a.weight");
    if (v == V_TRUNC_TENSOR_INFO) return;
    tb_u32(b, v == V_N_DIMS_5 ? 5 : v == V_N_DIMS_0 ? 0 : 2);
    if (v == V_N_DIMS_5) for (int i = 0; i < 5; i++) tb_u64(b, 1);
    if (v != V_N_DIMS_5 && v != V_N_DIMS_0) {
        if (v == V_NE_OVERFLOW) { tb_u64(b, 4ull * 0x7FFFFFFF * 32); tb_u64(b, 4ull * 0x7FFFFFFF); }
        else {
            tb_u64(b, v == V_NE_NEG ? (uint64_t)-1 : v == V_NE_ZERO ? 0 : 32);
            tb_u64(b, 2);
        }
    }
    tb_u32(b, v == V_TYPE_BAD ? 99 : v == V_TYPE_IQ ? 23 : v == V_TYPE_REMOVED ? 4 : 0);
    tb_u64(b, v == V_OFFSET_NEG ? (uint64_t)-1 : 0);
    /* tensor 1: b.weight, Q8_0 [32] (or defective) */
    tb_str(b, v == V_NAME_DUPLICATE ? "a.weight" : "b.weight");
    tb_u32(b, v == V_BYTES_OVERFLOW ? 2 : 1);
    if (v == V_BYTES_OVERFLOW) { tb_u64(b, 1ull << 40); tb_u64(b, 8000000); } /* elements fit int64, bytes do not */
    else tb_u64(b, v == V_NE0_NOT_BLOCK ? 33 : 32);
    tb_u32(b, 8);
    uint64_t off1 = 256;
    if (v == V_OFFSET_GAP) off1 = 288;
    if (v == V_OFFSET_OVERLAP) off1 = 0;
    if (v == V_OFFSET_MISALIGNED) off1 = 260;
    tb_u64(b, off1);
    tb_pad(b, 32);
    for (int i = 0; i < 64; i++) tb_f32(b, (float)i);
    uint8_t q8[34] = {0};
    q8[1] = 0x3c; /* d = 1.0 as f16 */
    for (int i = 0; i < 32; i++) q8[2 + i] = (uint8_t)(i - 16);
    tb_raw(b, q8, v == V_DATA_SHORT ? 33 : 34);
}

static const struct { int v; dp_status st; const char *msg; } k_cases[] = {
    {V_BAD_MAGIC, DP_EFORMAT, "bad magic"},
    {V_VERSION_0, DP_EFORMAT, "version 0 is not supported"},
    {V_VERSION_1, DP_EFORMAT, "version 1 is obsolete"},
    {V_VERSION_FUTURE, DP_EFORMAT, "version 4 is not supported"},
    {V_VERSION_SWAPPED, DP_EFORMAT, "byte-swapped"},
    {V_N_TENSORS_NEG, DP_EFORMAT, "tensor count -1 is impossible"},
    {V_N_KV_NEG, DP_EFORMAT, "metadata count -1 is impossible"},
    {V_N_TENSORS_TOO_MANY, DP_EFORMAT, "tensor count 1000000 is impossible"},
    {V_KEY_SIZE_HUGE, DP_EFORMAT, "the key of metadata entry 0 has length"},
    {V_KEY_EMPTY, DP_EFORMAT, "empty key"},
    {V_KV_BAD_TYPE, DP_EFORMAT, "value type 99 but must be in [0, 12]"},
    {V_KV_DUPLICATE, DP_EFORMAT, "duplicate key 'general.architecture'"},
    {V_ALIGN_INT32, DP_EFORMAT, "general.alignment has type INT32 but must be UINT32"},
    {V_ALIGN_ZERO, DP_EFORMAT, "general.alignment is 0 but must be a power of two"},
    {V_ALIGN_NOT_POW2, DP_EFORMAT, "general.alignment is 48 but must be a power of two"},
    {V_ALIGN_TOO_BIG, DP_EFORMAT, "general.alignment is 1073741824"},
    {V_ARRAY_NESTED, DP_EFORMAT, "nested arrays are refused"},
    {V_ARRAY_COUNT_HUGE, DP_EFORMAT, "array has 4611686018427387904 elements"},
    {V_ARRAY_COUNT_PAST_END, DP_EFORMAT, "array of 1000000 INT32 elements needs at least 4000000 bytes"},
    {V_STR_LEN_PAST_END, DP_EFORMAT, "has length 100000 but only"},
    {V_STR_LEN_HUGE, DP_EFORMAT, "has length 9223372036854775808 but must be <="},
    {V_BOOL_BAD, DP_EFORMAT, "bool value 2 must be 0 or 1"},
    {V_NAME_TOO_LONG, DP_EFORMAT, "name of 64 bytes is too long"},
    {V_NAME_EMPTY, DP_EFORMAT, "tensor 0 has an empty name"},
    {V_NAME_NUL, DP_EFORMAT, "name contains a NUL byte"},
    {V_NAME_DUPLICATE, DP_EFORMAT, "duplicate tensor name 'a.weight'"},
    {V_N_DIMS_5, DP_EFORMAT, "n_dims is 5 but must be in [1, 4]"},
    {V_N_DIMS_0, DP_EFORMAT, "n_dims is 0 but must be in [1, 4]"},
    {V_NE_NEG, DP_EFORMAT, "ne[0] is -1 but must be in [1, 2^63-1]"},
    {V_NE_ZERO, DP_EFORMAT, "ne[0] is 0 but must be in [1, 2^63-1]"},
    {V_NE_OVERFLOW, DP_EFORMAT, "element count overflows at ne[1]"},
    {V_BYTES_OVERFLOW, DP_EFORMAT, "byte size of"},
    {V_TYPE_BAD, DP_EUNSUPPORTED, "tensor 'a.weight' has type type 99 (99), which this engine does not support"},
    {V_TYPE_IQ, DP_EUNSUPPORTED, "tensor 'a.weight' has type IQ4_XS (23), which this engine does not support"},
    {V_TYPE_REMOVED, DP_EUNSUPPORTED, "Q4_2 (removed) (4)"},
    {V_NE0_NOT_BLOCK, DP_EFORMAT, "ne[0] = 33 is not a multiple of the Q8_0 block size 32"},
    {V_OFFSET_NEG, DP_EFORMAT, "tensor 'a.weight' has data offset 18446744073709551615 but must be 0"},
    {V_OFFSET_GAP, DP_EFORMAT, "tensor 'b.weight' has data offset 288 but must be 256"},
    {V_OFFSET_OVERLAP, DP_EFORMAT, "tensor 'b.weight' has data offset 0 but must be 256"},
    {V_OFFSET_MISALIGNED, DP_EFORMAT, "tensor 'b.weight' has data offset 260 but must be 256"},
    {V_DATA_SHORT, DP_EFORMAT, "tensor 'b.weight' data"},
    {V_TRUNC_KV, DP_EFORMAT, "tensor count 2 is impossible"}, /* caught before reading on */
    {V_TRUNC_TENSOR_INFO, DP_EFORMAT, "file ends inside"},
};

static void test_gguf_valid_handcrafted_file_reads_back(void **state) {
    (void)state;
    tu_bytes b;
    build(&b, V_OK);
    eng_gguf *g = NULL;
    dp_err err = {0};
    assert_int_equal(eng_gguf_open_buffer(b.p, b.n, "ok.gguf", &g, &err), DP_OK);
    assert_int_equal(eng_gguf_n_kv(g), 3);
    assert_int_equal(eng_gguf_n_tensors(g), 2);
    eng_gguf_str s;
    assert_int_equal(eng_gguf_get_str(g, "general.architecture", &s, &err), DP_OK);
    assert_true(eng_gguf_str_eq(s, "qwen3"));
    const eng_gguf_kv *arr;
    assert_int_equal(eng_gguf_get_arr(g, "test.values", ENG_GGUF_TYPE_INT32, &arr, &err), DP_OK);
    int64_t x;
    assert_true(eng_gguf_kv_int(arr, 2, &x));
    assert_int_equal(x, 3);
    assert_false(eng_gguf_kv_int(arr, 3, &x));
    /* type confusion is an error, not a cast (model-formats.md §1.6 rule 4) */
    assert_int_equal(eng_gguf_get_arr(g, "test.values", ENG_GGUF_TYPE_FLOAT32, &arr, &err), DP_EFORMAT);
    assert_non_null(strstr(err.msg, "array of INT32 but must be an array of FLOAT32"));
    uint32_t u;
    assert_int_equal(eng_gguf_get_u32(g, "general.architecture", &u, &err), DP_EFORMAT);
    assert_int_equal(eng_gguf_get_u32(g, "missing.key", &u, &err), DP_ENOENT);
    assert_non_null(strstr(err.msg, "missing.key"));
    const eng_gguf_tensor *t = eng_gguf_find_tensor(g, "b.weight");
    assert_non_null(t);
    assert_int_equal(t->type, ENG_TYPE_Q8_0);
    assert_int_equal(t->nbytes, 34);
    float deq[32];
    assert_int_equal(eng_dequantize_row(t->type, t->data, deq, 32), DP_OK);
    assert_true(deq[0] == -16.0f && deq[31] == 15.0f);
    t = eng_gguf_find_tensor(g, "a.weight");
    assert_int_equal(t->ne[1], 2);
    assert_true(((const float *)t->data)[63] == 63.0f);
    assert_null(eng_gguf_find_tensor(g, "c.weight"));
    eng_gguf_close(g);
    tb_free(&b);
}

static void test_gguf_each_broken_file_gives_its_error(void **state) {
    (void)state;
    assert_true(sizeof(k_cases) / sizeof(k_cases[0]) >= 40);
    for (size_t i = 0; i < sizeof(k_cases) / sizeof(k_cases[0]); i++) {
        tu_bytes b;
        build(&b, k_cases[i].v);
        eng_gguf *g = NULL;
        dp_err err = {0};
        dp_status st = eng_gguf_open_buffer(b.p, b.n, "bad.gguf", &g, &err);
        if (st != k_cases[i].st || !strstr(err.msg, k_cases[i].msg) || strncmp(err.msg, "bad.gguf: ", 10) != 0)
            fail_msg("variant %d: got %s '%s', want %s containing '%s'", k_cases[i].v, dp_status_name(st), err.msg,
                     dp_status_name(k_cases[i].st), k_cases[i].msg);
        assert_null(g);
        tb_free(&b);
    }
    /* an empty file */
    eng_gguf *g = NULL;
    dp_err err = {0};
    assert_int_equal(eng_gguf_open_buffer("", 0, "empty.gguf", &g, &err), DP_EFORMAT);
    assert_non_null(strstr(err.msg, "too short"));
}

static void test_gguf_every_truncation_is_refused_cleanly(void **state) {
    (void)state;
    tu_bytes b;
    build(&b, V_OK);
    for (size_t n = 0; n < b.n; n++) {
        uint8_t *copy = malloc(n ? n : 1); /* exact-size copy so ASan sees any over-read */
        memcpy(copy, b.p, n);
        eng_gguf *g = NULL;
        dp_err err = {0};
        dp_status st = eng_gguf_open_buffer(copy, n, "trunc.gguf", &g, &err);
        if (st != DP_EFORMAT) fail_msg("truncated at %zu: %s", n, dp_status_name(st));
        free(copy);
    }
    tb_free(&b);
}

static void test_gguf_random_byte_flips_never_crash(void **state) {
    (void)state;
    tu_bytes b;
    build(&b, V_OK);
    uint64_t seed = 12345;
    int ok = 0, refused = 0;
    for (int i = 0; i < 2000; i++) {
        uint8_t *copy = malloc(b.n);
        memcpy(copy, b.p, b.n);
        int flips = 1 + (int)(tu_rand(&seed) % 3);
        for (int k = 0; k < flips; k++) copy[tu_rand(&seed) % b.n] ^= (uint8_t)(1 + tu_rand(&seed) % 255);
        eng_gguf *g = NULL;
        dp_err err = {0};
        if (eng_gguf_open_buffer(copy, b.n, "flip.gguf", &g, &err) == DP_OK) {
            ok++;
            for (int64_t t = 0; t < eng_gguf_n_tensors(g); t++) { /* views must stay in bounds */
                const eng_gguf_tensor *ti = eng_gguf_tensor_at(g, t);
                assert_true((const uint8_t *)ti->data + ti->nbytes <= copy + b.n);
            }
            eng_gguf_close(g);
        } else {
            refused++;
            assert_true(err.msg[0] != '\0');
        }
        free(copy);
    }
    assert_true(ok > 0 && refused > 0);
    tb_free(&b);
}

/* ---- Writer round trip ------------------------------------------------------------------ */

static void test_gguf_writer_round_trips_every_type(void **state) {
    (void)state;
    eng_gguf_writer *w;
    assert_int_equal(eng_gguf_writer_init(&w), DP_OK);
    eng_gguf_writer_set_u8(w, "t.u8", 200);
    eng_gguf_writer_set_i8(w, "t.i8", -100);
    eng_gguf_writer_set_u16(w, "t.u16", 60000);
    eng_gguf_writer_set_i16(w, "t.i16", -30000);
    eng_gguf_writer_set_u32(w, "t.u32", 4000000000u);
    eng_gguf_writer_set_i32(w, "t.i32", -2000000000);
    eng_gguf_writer_set_u64(w, "t.u64", 1ull << 60);
    eng_gguf_writer_set_i64(w, "t.i64", -(1ll << 60));
    eng_gguf_writer_set_f32(w, "t.f32", 1.5f);
    eng_gguf_writer_set_f64(w, "t.f64", -2.25);
    eng_gguf_writer_set_bool(w, "t.bool", true);
    eng_gguf_writer_set_str(w, "t.str", "héllo");
    eng_gguf_writer_set_str(w, "t.str", "replaced"); /* same key: replaced in place */
    int32_t arr[4] = {1, -2, 3, -4};
    eng_gguf_writer_set_arr(w, "t.arr", ENG_GGUF_TYPE_INT32, arr, 4);
    const char *strs[3] = {"a", "", "ccc"};
    eng_gguf_writer_set_arr_str(w, "t.strs", strs, NULL, 3);
    eng_gguf_writer_set_u32(w, "general.alignment", 64);
    float f32[64];
    for (int i = 0; i < 64; i++) f32[i] = (float)i * 0.5f;
    uint8_t q8[2 * 34];
    eng_quantize_row(ENG_TYPE_Q8_0, f32, q8, 64);
    uint16_t f16[64];
    eng_quantize_row(ENG_TYPE_F16, f32, f16, 64);
    int64_t ne2[2] = {32, 2}, ne1[1] = {64};
    assert_int_equal(eng_gguf_writer_add_tensor(w, "x.f32", ENG_TYPE_F32, 2, ne2, f32), DP_OK);
    assert_int_equal(eng_gguf_writer_add_tensor(w, "x.q8", ENG_TYPE_Q8_0, 1, ne1, q8), DP_OK);
    assert_int_equal(eng_gguf_writer_add_tensor(w, "x.f16", ENG_TYPE_F16, 1, ne1, f16), DP_OK);
    assert_int_equal(eng_gguf_writer_add_tensor(w, "x.f16", ENG_TYPE_F16, 1, ne1, f16), DP_EEXIST);
    int64_t bad[1] = {33};
    assert_int_equal(eng_gguf_writer_add_tensor(w, "x.bad", ENG_TYPE_Q8_0, 1, bad, q8), DP_EINVAL);
    dp_err err = {0};
    const char *path = tu_tmp("rt.gguf");
    assert_int_equal(eng_gguf_writer_write(w, path, NULL, NULL, &err), DP_OK);
    eng_gguf_writer_free(w);

    eng_gguf *g;
    assert_int_equal(eng_gguf_open(path, &g, &err), DP_OK);
    assert_int_equal(eng_gguf_alignment(g), 64);
    assert_int_equal(eng_gguf_n_kv(g), 15);
    int64_t v;
    uint32_t u;
    float f;
    bool bo;
    eng_gguf_str s;
    assert_int_equal(eng_gguf_get_i64(g, "t.u8", &v, &err), DP_OK); assert_int_equal(v, 200);
    assert_int_equal(eng_gguf_get_i64(g, "t.i8", &v, &err), DP_OK); assert_int_equal(v, -100);
    assert_int_equal(eng_gguf_get_i64(g, "t.u16", &v, &err), DP_OK); assert_int_equal(v, 60000);
    assert_int_equal(eng_gguf_get_i64(g, "t.i16", &v, &err), DP_OK); assert_int_equal(v, -30000);
    assert_int_equal(eng_gguf_get_u32(g, "t.u32", &u, &err), DP_OK); assert_int_equal(u, 4000000000u);
    assert_int_equal(eng_gguf_get_i64(g, "t.i32", &v, &err), DP_OK); assert_int_equal(v, -2000000000);
    assert_int_equal(eng_gguf_get_i64(g, "t.u64", &v, &err), DP_OK); assert_true(v == (1ll << 60));
    assert_int_equal(eng_gguf_get_i64(g, "t.i64", &v, &err), DP_OK); assert_true(v == -(1ll << 60));
    assert_int_equal(eng_gguf_get_u32(g, "t.i8", &u, &err), DP_EFORMAT); /* negative for u32 */
    assert_int_equal(eng_gguf_get_f32(g, "t.f32", &f, &err), DP_OK); assert_true(f == 1.5f);
    assert_int_equal(eng_gguf_get_f32(g, "t.f64", &f, &err), DP_OK); assert_true(f == -2.25f);
    assert_int_equal(eng_gguf_get_bool(g, "t.bool", &bo, &err), DP_OK); assert_true(bo);
    assert_int_equal(eng_gguf_get_str(g, "t.str", &s, &err), DP_OK); assert_true(eng_gguf_str_eq(s, "replaced"));
    const eng_gguf_kv *kv;
    assert_int_equal(eng_gguf_get_arr(g, "t.strs", ENG_GGUF_TYPE_STRING, &kv, &err), DP_OK);
    assert_int_equal(kv->n, 3);
    assert_true(eng_gguf_str_eq(kv->strs[0], "a") && eng_gguf_str_eq(kv->strs[1], "") && eng_gguf_str_eq(kv->strs[2], "ccc"));
    assert_int_equal(eng_gguf_get_arr(g, "t.arr", ENG_GGUF_TYPE_INT32, &kv, &err), DP_OK);
    assert_true(eng_gguf_kv_int(kv, 3, &v) && v == -4);
    const eng_gguf_tensor *t = eng_gguf_find_tensor(g, "x.f32");
    assert_memory_equal(t->data, f32, sizeof(f32));
    assert_int_equal(((uintptr_t)t->data - (uintptr_t)eng_gguf_tensor_at(g, 0)->data) % 64, 0);
    t = eng_gguf_find_tensor(g, "x.q8");
    assert_memory_equal(t->data, q8, sizeof(q8));
    assert_int_equal(t->offset % 64, 0);
    t = eng_gguf_find_tensor(g, "x.f16");
    assert_memory_equal(t->data, f16, sizeof(f16));
    eng_gguf_close(g);
}

static dp_status fill_rows(void *ud, int64_t idx, const eng_gguf_tensor *t, int64_t row0, int64_t n_rows, void *dst,
                           dp_err *err) {
    (void)ud; (void)idx; (void)err;
    float *d = dst;
    for (int64_t r = 0; r < n_rows; r++)
        for (int64_t i = 0; i < t->ne[0]; i++) d[r * t->ne[0] + i] = (float)((row0 + r) * 1000 + i);
    return DP_OK;
}

static void test_gguf_writer_streams_rows_through_fill_callback(void **state) {
    (void)state;
    eng_gguf_writer *w;
    assert_int_equal(eng_gguf_writer_init(&w), DP_OK);
    int64_t ne[2] = {64, 300000}; /* 73 MiB: more than one chunk of the writer's buffer */
    assert_int_equal(eng_gguf_writer_add_tensor(w, "big", ENG_TYPE_F32, 2, ne, NULL), DP_OK);
    dp_err err = {0};
    assert_int_equal(eng_gguf_writer_write(w, tu_tmp("big.gguf"), NULL, NULL, &err), DP_EINVAL);
    assert_int_equal(eng_gguf_writer_write(w, tu_tmp("big.gguf"), fill_rows, NULL, &err), DP_OK);
    eng_gguf_writer_free(w);
    eng_gguf *g;
    assert_int_equal(eng_gguf_open(tu_tmp("big.gguf"), &g, &err), DP_OK);
    const float *d = eng_gguf_tensor_at(g, 0)->data;
    assert_true(d[0] == 0.0f && d[64 * 299999 + 63] == (float)(299999 * 1000 + 63));
    assert_true(d[64 * 150000 + 5] == (float)(150000 * 1000 + 5));
    eng_gguf_close(g);
}

/* ---- Fixture models ----------------------------------------------------------------------- */

static void test_gguf_reads_every_fixture_model(void **state) {
    (void)state;
    TU_NEED_FIXTURES();
    const char *models[] = {"qwen2-tiny-f16", "qwen3-tiny-f16", "qwen35-tiny-f16", "qwen35-tiny-q8_0",
                            "qwen35-k256-q4_k_m", "qwen35-k256-q5_k_m"};
    const int n_tensors[] = {50, 46, 108, 108, 108, 108};
    for (size_t i = 0; i < 6; i++) {
        char rel[128];
        snprintf(rel, sizeof(rel), "models/%s.gguf", models[i]);
        eng_gguf *g;
        dp_err err = {0};
        assert_int_equal(eng_gguf_open(tu_fixture(rel), &g, &err), DP_OK);
        assert_int_equal(eng_gguf_n_tensors(g), n_tensors[i]);
        const eng_gguf_kv *toks;
        assert_int_equal(eng_gguf_get_arr(g, "tokenizer.ggml.tokens", ENG_GGUF_TYPE_STRING, &toks, &err), DP_OK);
        assert_int_equal(toks->n, 151936);
        assert_true(eng_gguf_str_eq(toks->strs[151645], "<|im_end|>"));
        eng_gguf_close(g);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gguf_valid_handcrafted_file_reads_back),
        cmocka_unit_test(test_gguf_each_broken_file_gives_its_error),
        cmocka_unit_test(test_gguf_every_truncation_is_refused_cleanly),
        cmocka_unit_test(test_gguf_random_byte_flips_never_crash),
        cmocka_unit_test(test_gguf_writer_round_trips_every_type),
        cmocka_unit_test(test_gguf_writer_streams_rows_through_fill_callback),
        cmocka_unit_test(test_gguf_reads_every_fixture_model),
    };
    return cmocka_run_group_tests_name("gguf", tests, NULL, NULL);
}
