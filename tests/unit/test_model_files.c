/*
 * test_model_files.c - model info and memory math, make-test-model's layout against the real
 * (fixture) files, determinism, and quantize's per-tensor mix against llama-quantize's.
 */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "gguf_writer.h"
#include "quant.h"
#include "quantize.h"
#include "platform.h"
#include "sha256.h"

static void file_sha(const char *path, char hex[65]) {
    char *data;
    size_t n;
    dp_err err = {0};
    assert_int_equal(dp_file_read_all(path, (size_t)1 << 30, &data, &n, &err), DP_OK);
    uint8_t d[32];
    dp_sha256_digest(data, n, d);
    dp_sha256_hex(d, hex);
    free(data);
}

static void test_memory_estimate_matches_spec_for_qwen35_4b(void **state) {
    (void)state; /* metadata-only file with the real 4B hyper-parameters (model-formats.md §0, 8) */
    eng_gguf_writer *w;
    assert_int_equal(eng_gguf_writer_init(&w), DP_OK);
    eng_gguf_writer_set_str(w, "general.architecture", "qwen35");
    eng_gguf_writer_set_u32(w, "qwen35.block_count", 32);
    eng_gguf_writer_set_u32(w, "qwen35.embedding_length", 2560);
    eng_gguf_writer_set_u32(w, "qwen35.feed_forward_length", 9216);
    eng_gguf_writer_set_u32(w, "qwen35.attention.head_count", 16);
    eng_gguf_writer_set_u32(w, "qwen35.attention.head_count_kv", 4);
    eng_gguf_writer_set_u32(w, "qwen35.attention.key_length", 256);
    eng_gguf_writer_set_u32(w, "qwen35.attention.value_length", 256);
    eng_gguf_writer_set_u32(w, "qwen35.rope.dimension_count", 64);
    eng_gguf_writer_set_u32(w, "qwen35.ssm.conv_kernel", 4);
    eng_gguf_writer_set_u32(w, "qwen35.ssm.state_size", 128);
    eng_gguf_writer_set_u32(w, "qwen35.ssm.group_count", 16);
    eng_gguf_writer_set_u32(w, "qwen35.ssm.time_step_rank", 32);
    eng_gguf_writer_set_u32(w, "qwen35.ssm.inner_size", 4096);
    eng_gguf_writer_set_u32(w, "qwen35.full_attention_interval", 4);
    dp_err err = {0};
    assert_int_equal(eng_gguf_writer_write(w, tu_tmp("4b-meta.gguf"), NULL, NULL, &err), DP_OK);
    eng_gguf_writer_free(w);
    eng_gguf *g;
    assert_int_equal(eng_gguf_open(tu_tmp("4b-meta.gguf"), &g, &err), DP_OK);
    eng_model_info m;
    assert_int_equal(eng_model_info_load(g, &m, &err), DP_OK);
    assert_int_equal(m.n_attn_layers, 8);
    assert_int_equal(m.n_rec_layers, 24);
    assert_true(m.is_recurrent[0] && m.is_recurrent[2] && !m.is_recurrent[3] && !m.is_recurrent[31]);
    eng_mem_estimate e;
    eng_model_mem_estimate(&m, 8192, 64, 512, &e);
    assert_int_equal(e.kv_per_token, 32768);          /* 32 KiB per token */
    assert_int_equal(e.rec_per_seq, 52690944);        /* 50.25 MiB per sequence */
    assert_int_equal(e.recurrent, 52690944ull * 64);  /* a batch of 64: ~3.1 GiB */
    assert_int_equal(e.kv_cache, 32768ull * 8192 * 64);
    eng_gguf_close(g);
}

static void test_model_info_refuses_bad_hyperparameters(void **state) {
    (void)state;
    /* f: the key is written as a float (fv), else as a u32 (val) */
    const struct {
        const char *key;
        uint32_t val;
        bool f;
        float fv;
        const char *msg;
    } bad[] = {
        {"qwen3.block_count", 513, false, 0, "qwen3.block_count' is 513 but must be in [0, 512]"},
        {"qwen3.attention.head_count_kv", 3, false, 0, "head_count 4 is not a multiple of head_count_kv 3"},
        {"qwen3.attention.head_count", 0, false, 0, "qwen3.attention.head_count' is 0 but must be in [1, 4096]"},
        {"qwen3.rope.freq_base", 0, true, 0.0f, "'qwen3.rope.freq_base' is 0 but must be a finite number > 0"},
        {"qwen3.rope.freq_base", 0, true, NAN, "but must be a finite number > 0"}, /* (how NaN prints varies) */
        {"qwen3.rope.freq_base", 0, true, INFINITY, "but must be a finite number > 0"},
        {"qwen3.attention.layer_norm_rms_epsilon", 0, true, -0.5f,
         "'qwen3.attention.layer_norm_rms_epsilon' is -0.5 but must be a finite number >= 0"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        eng_gguf_writer *w;
        assert_int_equal(eng_gguf_writer_init(&w), DP_OK);
        eng_gguf_writer_set_str(w, "general.architecture", "qwen3");
        eng_gguf_writer_set_u32(w, "qwen3.block_count", 2);
        eng_gguf_writer_set_u32(w, "qwen3.embedding_length", 64);
        eng_gguf_writer_set_u32(w, "qwen3.feed_forward_length", 128);
        eng_gguf_writer_set_u32(w, "qwen3.attention.head_count", 4);
        if (bad[i].f)
            eng_gguf_writer_set_f32(w, bad[i].key, bad[i].fv);
        else
            eng_gguf_writer_set_u32(w, bad[i].key, bad[i].val);
        dp_err err = {0};
        assert_int_equal(eng_gguf_writer_write(w, tu_tmp("bad-hp.gguf"), NULL, NULL, &err), DP_OK);
        eng_gguf_writer_free(w);
        eng_gguf *g;
        assert_int_equal(eng_gguf_open(tu_tmp("bad-hp.gguf"), &g, &err), DP_OK);
        eng_model_info m;
        assert_int_equal(eng_model_info_load(g, &m, &err), DP_EFORMAT);
        if (!strstr(err.msg, bad[i].msg)) fail_msg("got '%s', want '%s'", err.msg, bad[i].msg);
        eng_gguf_close(g);
    }
}

static void write_test_model(eng_arch arch, uint32_t layers, const char *path, int threads) {
    eng_test_model_params p;
    eng_test_model_defaults(&p, arch);
    p.n_layer = layers;
    dp_err err = {0};
    if (eng_test_model_write(&p, path, threads, &err)) fail_msg("%s", err.msg);
}

static void test_test_model_is_deterministic_across_thread_counts(void **state) {
    (void)state;
    char a[65], b[65], c[65];
    write_test_model(ENG_ARCH_QWEN35, 4, tu_tmp("d1.gguf"), 1);
    write_test_model(ENG_ARCH_QWEN35, 4, tu_tmp("d2.gguf"), 3);
    file_sha(tu_tmp("d1.gguf"), a);
    file_sha(tu_tmp("d2.gguf"), b);
    assert_string_equal(a, b);
    eng_test_model_params p;
    eng_test_model_defaults(&p, ENG_ARCH_QWEN35);
    p.seed = 43;
    dp_err err = {0};
    assert_int_equal(eng_test_model_write(&p, tu_tmp("d3.gguf"), 2, &err), DP_OK);
    file_sha(tu_tmp("d3.gguf"), c);
    assert_string_not_equal(a, c);
}

/* The test model's tensor names, shapes (up to the sizes) and metadata keys are those of the
 * llama.cpp-converted fixture of the same architecture. */
static void test_test_model_layout_matches_real_files(void **state) {
    (void)state;
    TU_NEED_FIXTURES();
    const struct { eng_arch arch; const char *fixture; uint32_t layers; } c[] = {
        {ENG_ARCH_QWEN2, "models/qwen2-tiny-f16.gguf", 4},
        {ENG_ARCH_QWEN3, "models/qwen3-tiny-f16.gguf", 4},
        {ENG_ARCH_QWEN35, "models/qwen35-tiny-f16.gguf", 8},
    };
    for (size_t k = 0; k < 3; k++) {
        write_test_model(c[k].arch, c[k].layers, tu_tmp("layout.gguf"), 2);
        eng_gguf *ours, *real;
        dp_err err = {0};
        assert_int_equal(eng_gguf_open(tu_tmp("layout.gguf"), &ours, &err), DP_OK);
        assert_int_equal(eng_gguf_open(tu_fixture(c[k].fixture), &real, &err), DP_OK);
        assert_int_equal(eng_gguf_n_tensors(ours), eng_gguf_n_tensors(real));
        for (int64_t i = 0; i < eng_gguf_n_tensors(real); i++) {
            const eng_gguf_tensor *r = eng_gguf_tensor_at(real, i);
            const eng_gguf_tensor *o = eng_gguf_find_tensor(ours, r->name);
            if (!o) fail_msg("%s: tensor '%s' missing from the test model", c[k].fixture, r->name);
            assert_int_equal(o->n_dims, r->n_dims);
            if (r->n_dims == 1) assert_true(o->type == ENG_TYPE_F32);
        }
        for (int64_t i = 0; i < eng_gguf_n_kv(real); i++) {
            const eng_gguf_kv *kv = eng_gguf_kv_at(real, i);
            char key[256];
            snprintf(key, sizeof(key), "%.*s", (int)kv->key.len, kv->key.ptr);
            const eng_gguf_kv *mine = eng_gguf_find(ours, key);
            if (!mine) fail_msg("%s: key '%s' missing from the test model", c[k].fixture, key);
            if (mine->type != kv->type || mine->arr_type != kv->arr_type)
                fail_msg("key '%s': type %s/%s, real file %s/%s", key, eng_gguf_type_name(mine->type),
                         eng_gguf_type_name(mine->arr_type), eng_gguf_type_name(kv->type),
                         eng_gguf_type_name(kv->arr_type));
        }
        eng_model_info mi;
        assert_int_equal(eng_model_info_load(ours, &mi, &err), DP_OK);
        assert_int_equal(mi.arch, c[k].arch);
        assert_int_equal(mi.n_layer, c[k].layers);
        eng_gguf_close(ours);
        eng_gguf_close(real);
    }
}

static void test_test_model_shapes_have_real_sizes(void **state) {
    (void)state;
    eng_test_model_params p;
    assert_int_equal(eng_test_model_shape(&p, "qwen3-4b"), DP_OK);
    assert_int_equal(p.n_layer, 36);
    assert_int_equal(p.n_embd, 2560);
    assert_int_equal(p.n_head, 32);
    assert_int_equal(p.n_head_kv, 8);
    assert_int_equal(p.head_dim, 128);
    assert_int_equal(p.n_ff, 9728);
    assert_int_equal(p.n_vocab, 151936);
    assert_int_equal(eng_test_model_shape(&p, "qwen35-4b"), DP_OK);
    assert_int_equal(p.n_layer, 32);
    assert_int_equal(p.n_ff, 9216);
    assert_int_equal(p.head_dim, 256);
    assert_int_equal(p.n_rot, 64);
    assert_int_equal(p.ssm_dt_rank, 32);
    assert_int_equal(p.n_vocab, 248320);
    assert_int_equal(eng_test_model_shape(&p, "qwen9-9b"), DP_EINVAL);
    /* a shrunken 4B-shape keeps its proportions and writes a valid qwen35 file */
    eng_test_model_shape(&p, "qwen35-4b");
    p.n_layer = 4;
    p.n_embd = 256;
    p.n_ff = 512;
    p.n_vocab = 2048;
    dp_err err = {0};
    assert_int_equal(eng_test_model_write(&p, tu_tmp("shape.gguf"), 2, &err), DP_OK);
    eng_gguf *g;
    assert_int_equal(eng_gguf_open(tu_tmp("shape.gguf"), &g, &err), DP_OK);
    const eng_gguf_tensor *t = eng_gguf_find_tensor(g, "blk.0.attn_qkv.weight");
    assert_int_equal(t->ne[1], 2 * 16 * 128 + 4096);
    t = eng_gguf_find_tensor(g, "blk.3.attn_q.weight");
    assert_int_equal(t->ne[1], 16 * 256 * 2);
    t = eng_gguf_find_tensor(g, "token_embd.weight");
    assert_int_equal(t->ne[1], 2048);
    eng_gguf_close(g);
}

static void test_test_model_pads_a_large_vocabulary(void **state) {
    (void)state; /* regression: padding to a real vocabulary size once overfilled a hash table */
    eng_test_model_params p;
    eng_test_model_defaults(&p, ENG_ARCH_QWEN35);
    p.n_vocab = 248320;
    p.n_embd = 32;
    p.n_layer = 4;
    dp_err err = {0};
    assert_int_equal(eng_test_model_write(&p, tu_tmp("bigvocab.gguf"), 2, &err), DP_OK);
    eng_gguf *g;
    assert_int_equal(eng_gguf_open(tu_tmp("bigvocab.gguf"), &g, &err), DP_OK);
    eng_model_info m;
    assert_int_equal(eng_model_info_load(g, &m, &err), DP_OK);
    assert_int_equal(m.n_tokens, 248320);
    assert_int_equal(m.n_vocab, 248320);
    const eng_gguf_kv *toks;
    assert_int_equal(eng_gguf_get_arr(g, "tokenizer.ggml.tokens", ENG_GGUF_TYPE_STRING, &toks, &err), DP_OK);
    assert_true(eng_gguf_str_eq(toks->strs[248319], "[PAD248319]"));
    assert_true(eng_gguf_str_eq(toks->strs[m.eos_id], "<|im_end|>"));
    eng_gguf_close(g);
}

static void test_test_model_vocab_from_copies_the_tokenizer(void **state) {
    (void)state;
    TU_NEED_FIXTURES();
    eng_test_model_params p;
    eng_test_model_defaults(&p, ENG_ARCH_QWEN3);
    p.vocab_from = tu_fixture("models/qwen3-tiny-f16.gguf");
    dp_err err = {0};
    assert_int_equal(eng_test_model_write(&p, tu_tmp("vf.gguf"), 2, &err), DP_OK);
    eng_gguf *g;
    assert_int_equal(eng_gguf_open(tu_tmp("vf.gguf"), &g, &err), DP_OK);
    eng_model_info m;
    assert_int_equal(eng_model_info_load(g, &m, &err), DP_OK);
    assert_int_equal(m.n_tokens, 151936);
    assert_int_equal(m.n_vocab, 151936);
    assert_int_equal(m.n_merges, 151387);
    assert_int_equal(m.eos_id, 151645);
    eng_gguf_close(g);
    p.vocab_from = "/nonexistent.gguf";
    assert_int_equal(eng_test_model_write(&p, tu_tmp("vf2.gguf"), 2, &err), DP_ENOENT);
    assert_non_null(strstr(err.msg, "--vocab-from"));
}

/* Our quantizer picks, tensor by tensor, the types llama-quantize chose for the fixture. */
static void test_quantize_mix_matches_llama_quantize(void **state) {
    (void)state;
    TU_NEED_FIXTURES();
    const struct { const char *file; eng_ftype ft; } c[] = {
        {"models/qwen35-k256-q4_k_m.gguf", ENG_FTYPE_Q4_K_M},
        {"models/qwen35-k256-q5_k_m.gguf", ENG_FTYPE_Q5_K_M},
        {"models/qwen35-tiny-q8_0.gguf", ENG_FTYPE_Q8_0},
    };
    for (size_t k = 0; k < 3; k++) {
        eng_gguf *g;
        dp_err err = {0};
        assert_int_equal(eng_gguf_open(tu_fixture(c[k].file), &g, &err), DP_OK);
        eng_model_info m;
        assert_int_equal(eng_model_info_load(g, &m, &err), DP_OK);
        int n_v = 0, i_v = 0;
        for (int64_t i = 0; i < eng_gguf_n_tensors(g); i++) {
            const char *nm = eng_gguf_tensor_at(g, i)->name;
            n_v += strstr(nm, ".attn_v.weight") || strstr(nm, ".attn_qkv.weight");
        }
        for (int64_t i = 0; i < eng_gguf_n_tensors(g); i++) {
            const eng_gguf_tensor *t = eng_gguf_tensor_at(g, i);
            unsigned layer = 0;
            sscanf(t->name, "blk.%u.", &layer);
            int src = t->n_dims == 1 || strstr(t->name, "ssm_conv1d") ? ENG_TYPE_F32 : ENG_TYPE_F16;
            int want = eng_quantize_tensor_type(c[k].ft, t->name, t->n_dims, t->ne[0], src, (int)layer,
                                                (int)m.n_layer, i_v, n_v, m.tied_embeddings);
            i_v += strstr(t->name, ".attn_v.weight") || strstr(t->name, ".attn_qkv.weight");
            if (want != t->type)
                fail_msg("%s: %s is %s in the llama.cpp file, we would pick %s", c[k].file, t->name,
                         eng_type_name(t->type), eng_type_name(want));
        }
        eng_gguf_close(g);
    }
}

static void test_quantize_writes_loadable_files_of_each_type(void **state) {
    (void)state;
    eng_test_model_params p;
    eng_test_model_defaults(&p, ENG_ARCH_QWEN3);
    p.n_embd = 256;
    p.n_ff = 512;
    p.n_layer = 8;
    p.weight_type = ENG_TYPE_F32;
    dp_err err = {0};
    assert_int_equal(eng_test_model_write(&p, tu_tmp("src.gguf"), 2, &err), DP_OK);
    const struct { eng_ftype ft; int base; double bound; } c[] = {
        {ENG_FTYPE_Q8_0, ENG_TYPE_Q8_0, 0.0075}, {ENG_FTYPE_Q4_0, ENG_TYPE_Q4_0, 0.095},
        {ENG_FTYPE_Q4_K_M, ENG_TYPE_Q4_K, 0.085}, {ENG_FTYPE_Q5_K_M, ENG_TYPE_Q5_K, 0.045},
        {ENG_FTYPE_Q6_K, ENG_TYPE_Q6_K, 0.023},
    };
    eng_gguf *src;
    assert_int_equal(eng_gguf_open(tu_tmp("src.gguf"), &src, &err), DP_OK);
    for (size_t k = 0; k < 5; k++) {
        char a[65], b[65];
        assert_int_equal(eng_quantize_file(tu_tmp("src.gguf"), tu_tmp("q.gguf"), c[k].ft, 1, NULL, NULL, &err), DP_OK);
        file_sha(tu_tmp("q.gguf"), a);
        assert_int_equal(eng_quantize_file(tu_tmp("src.gguf"), tu_tmp("q.gguf"), c[k].ft, 3, NULL, NULL, &err), DP_OK);
        file_sha(tu_tmp("q.gguf"), b);
        assert_string_equal(a, b); /* thread count does not change the bytes */
        eng_gguf *q;
        assert_int_equal(eng_gguf_open(tu_tmp("q.gguf"), &q, &err), DP_OK);
        uint32_t ft;
        assert_int_equal(eng_gguf_get_u32(q, "general.file_type", &ft, &err), DP_OK);
        assert_int_equal(ft, c[k].ft);
        const eng_gguf_tensor *t = eng_gguf_find_tensor(q, "blk.1.ffn_up.weight");
        assert_int_equal(t->type, c[k].base);
        t = eng_gguf_find_tensor(q, "blk.1.attn_norm.weight");
        assert_int_equal(t->type, ENG_TYPE_F32);
        t = eng_gguf_find_tensor(q, "token_embd.weight"); /* tied: the output rule */
        assert_int_equal(t->type, c[k].ft == ENG_FTYPE_Q8_0 ? ENG_TYPE_Q8_0 : ENG_TYPE_Q6_K);
        if (c[k].ft == ENG_FTYPE_Q4_K_M) {
            assert_int_equal(eng_gguf_find_tensor(q, "blk.0.ffn_down.weight")->type, ENG_TYPE_Q6_K);
            assert_int_equal(eng_gguf_find_tensor(q, "blk.1.ffn_down.weight")->type, ENG_TYPE_Q4_K);
            assert_int_equal(eng_gguf_find_tensor(q, "blk.7.attn_v.weight")->type, ENG_TYPE_Q6_K);
        }
        const eng_gguf_tensor *o = eng_gguf_find_tensor(src, "blk.1.ffn_up.weight");
        t = eng_gguf_find_tensor(q, "blk.1.ffn_up.weight");
        int64_t n = t->ne[0];
        float *x = malloc((size_t)n * 4), *y = malloc((size_t)n * 4);
        double se = 0, sx = 0;
        for (int64_t r = 0; r < t->ne[1]; r++) {
            eng_dequantize_row(o->type, (const uint8_t *)o->data + (size_t)r * eng_row_size(o->type, n), x, n);
            eng_dequantize_row(t->type, (const uint8_t *)t->data + (size_t)r * eng_row_size(t->type, n), y, n);
            for (int64_t i = 0; i < n; i++) {
                se += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
                sx += (double)x[i] * x[i];
            }
        }
        free(x);
        free(y);
        assert_true(sqrt(se / sx) < c[k].bound);
        eng_gguf_close(q);
    }
    eng_gguf_close(src);
    assert_int_equal(eng_ftype_from_name("Q4_K_M"), ENG_FTYPE_Q4_K_M);
    assert_int_equal(eng_ftype_from_name("q3_k_s"), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memory_estimate_matches_spec_for_qwen35_4b),
        cmocka_unit_test(test_model_info_refuses_bad_hyperparameters),
        cmocka_unit_test(test_test_model_is_deterministic_across_thread_counts),
        cmocka_unit_test(test_test_model_layout_matches_real_files),
        cmocka_unit_test(test_test_model_shapes_have_real_sizes),
        cmocka_unit_test(test_test_model_pads_a_large_vocabulary),
        cmocka_unit_test(test_test_model_vocab_from_copies_the_tokenizer),
        cmocka_unit_test(test_quantize_mix_matches_llama_quantize),
        cmocka_unit_test(test_quantize_writes_loadable_files_of_each_type),
    };
    return cmocka_run_group_tests_name("model_files", tests, NULL, NULL);
}
