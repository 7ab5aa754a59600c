/*
 * test_embeddings.c - embedding contexts (eng_context_params.pooling) against llama.cpp's
 * llama-embedding (../shared/fixtures/embeddings/README.md): the same token ids, cosine >= 0.9999
 * and max |delta| <= 1e-3 on every case, on the engine's default path and on the exact one; and
 * the same vector bit for bit whatever else is in the batch.
 */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "engine.h"
#include "platform.h"

typedef struct emb_case {
    char id[32];
    eng_tokens ids;
    float ref[4096];
    size_t n_ref;
} emb_case;

/* Reads the reference file's cases and tokenizes their prompts (add_special and special-token
 * parsing on, as llama-embedding does); checks the token ids against llama.cpp's. */
static size_t load_cases(const char *refs, const eng_model *m, emb_case *cs, size_t cap, char *pooling) {
    json_error_t je;
    json_t *root = json_load_file(tu_fixture(refs), 0, &je);
    if (!root) fail_msg("%s: %s", refs, je.text);
    snprintf(pooling, 16, "%s", json_string_value(json_object_get(root, "pooling")));
    json_t *cases = json_object_get(root, "cases");
    size_t n = 0, i;
    json_t *c;
    json_array_foreach(cases, i, c) {
        if (n == cap) break;
        emb_case *e = &cs[n++];
        memset(e, 0, sizeof(*e));
        snprintf(e->id, sizeof(e->id), "%s", json_string_value(json_object_get(c, "id")));
        char *text = NULL;
        size_t len = 0;
        dp_err err = {0};
        if (dp_file_read_all(tu_fixture(json_string_value(json_object_get(c, "prompt_file"))), 1 << 20, &text, &len,
                             &err))
            fail_msg("%s: %s", e->id, err.msg);
        if (len && text[len - 1] == '\n') len--; /* llama.cpp's -f drops one final newline */
        if (eng_tokenize(eng_model_get_tokenizer(m), NULL, text, len, true, true, &e->ids, &err))
            fail_msg("%s: %s", e->id, err.msg);
        free(text);
        json_t *toks = json_object_get(c, "tokens"), *emb = json_object_get(c, "embedding");
        assert_int_equal(e->ids.n, json_array_size(toks));
        for (size_t k = 0; k < e->ids.n; k++)
            if (e->ids.ids[k] != json_integer_value(json_array_get(toks, k)))
                fail_msg("%s: token %zu is %d, llama.cpp has %lld", e->id, k, e->ids.ids[k],
                         (long long)json_integer_value(json_array_get(toks, k)));
        e->n_ref = json_array_size(emb);
        assert_true(e->n_ref <= 4096);
        for (size_t k = 0; k < e->n_ref; k++) e->ref[k] = (float)json_real_value(json_array_get(emb, k));
    }
    json_decref(root);
    return n;
}

static eng_context *embed_context(eng_model *m, eng_pooling pooling, bool exact, uint32_t n_seq) {
    eng_context_params cp = eng_context_default_params();
    cp.n_ctx = 2048;
    cp.n_seq_max = n_seq;
    cp.n_ubatch = 512;
    cp.n_threads = 2;
    cp.device = DP_DEVICE_CPU;
    cp.exact = exact;
    cp.pooling = pooling;
    eng_context *c = NULL;
    dp_err err = {0};
    if (eng_context_new(m, &cp, &c, &err)) fail_msg("context: %s", err.msg);
    return c;
}

static void check_against_llama(const char *model_rel, const char *refs, eng_pooling fallback) {
    eng_model *m;
    dp_err err = {0};
    if (eng_model_load(tu_fixture(model_rel), &m, &err)) fail_msg("%s: %s", model_rel, err.msg);
    static emb_case cs[8];
    char pooling_name[16];
    const size_t n = load_cases(refs, m, cs, 8, pooling_name);
    assert_true(n >= 6);
    eng_pooling want;
    assert_true(eng_pooling_parse(pooling_name, &want));
    const eng_pooling pooling = eng_model_pooling(m, fallback);
    assert_int_equal(pooling, want); /* from the file's pooling_type, or the fallback the refs were made with */
    const size_t E = eng_model_get_info(m)->n_embd;
    for (int exact = 0; exact < 2; exact++) {
        eng_context *c = embed_context(m, pooling, exact, 1);
        double worst_cos = 1, worst_d = 0;
        for (size_t i = 0; i < n; i++) {
            assert_int_equal(cs[i].n_ref, E);
            eng_seq_clear(c, 0);
            if (eng_decode_sequence(c, 0, cs[i].ids.ids, (int32_t)cs[i].ids.n, 0, &err)) fail_msg("%s", err.msg);
            float v[4096];
            if (eng_get_embedding(c, 0, true, v, &err)) fail_msg("%s", err.msg);
            double dot = 0, na = 0, nb = 0, md = 0;
            for (size_t k = 0; k < E; k++) {
                dot += (double)v[k] * cs[i].ref[k], na += (double)v[k] * v[k], nb += (double)cs[i].ref[k] * cs[i].ref[k];
                md = fmax(md, fabs((double)v[k] - cs[i].ref[k]));
            }
            const double cosv = dot / sqrt(na * nb);
            if (cosv < 0.9999 || md > 1e-3)
                fail_msg("%s %s (%s path): cosine %.6f, max |delta| %.2e against llama-embedding", model_rel, cs[i].id,
                         exact ? "exact" : "default", cosv, md);
            worst_cos = fmin(worst_cos, cosv), worst_d = fmax(worst_d, md);
        }
        print_message("  %s, pooling %s, %s path: worst cosine %.7f, worst max |delta| %.2e over %zu cases\n",
                      model_rel, pooling_name, exact ? "exact" : "default", worst_cos, worst_d, n);
        eng_context_free(c);
    }
    for (size_t i = 0; i < n; i++) eng_tokens_free(&cs[i].ids);
    eng_model_free(m);
}

static void test_last_pooling_matches_llama_embedding(void **state) {
    (void)state;
    TU_NEED_FIXTURES();
    check_against_llama("embeddings/qwen3-tiny-embed-f16.gguf", "embeddings/qwen3-tiny-embed-f16.emb-refs.json",
                        ENG_POOLING_NONE);
}

static void test_mean_pooling_matches_llama_embedding(void **state) {
    (void)state;
    TU_NEED_FIXTURES();
    check_against_llama("models/qwen2-tiny-f16.gguf", "embeddings/qwen2-tiny-f16.emb-mean-refs.json",
                        ENG_POOLING_MEAN);
}

/* Every case alone, then all of them in one call (interleaved in one batch, several steps): the
 * same bits, for each pooling. */
static void test_vectors_do_not_depend_on_the_batch(void **state) {
    (void)state;
    TU_NEED_FIXTURES();
    eng_model *m;
    dp_err err = {0};
    if (eng_model_load(tu_fixture("embeddings/qwen3-tiny-embed-f16.gguf"), &m, &err)) fail_msg("%s", err.msg);
    static emb_case cs[8];
    char pn[16];
    const size_t n = load_cases("embeddings/qwen3-tiny-embed-f16.emb-refs.json", m, cs, 8, pn);
    const size_t E = eng_model_get_info(m)->n_embd;
    for (int p = ENG_POOLING_MEAN; p <= ENG_POOLING_LAST; p++) {
        eng_context *one = embed_context(m, (eng_pooling)p, false, 1), *all = embed_context(m, (eng_pooling)p, false, 8);
        static float alone[8][4096];
        for (size_t i = 0; i < n; i++) {
            eng_seq_clear(one, 0);
            if (eng_decode_sequence(one, 0, cs[i].ids.ids, (int32_t)cs[i].ids.n, 0, &err) ||
                eng_get_embedding(one, 0, false, alone[i], &err))
                fail_msg("%s", err.msg);
        }
        /* round robin: token k of every case that has one, so each step mixes the sequences */
        size_t total = 0, maxn = 0;
        for (size_t i = 0; i < n; i++) total += cs[i].ids.n, maxn = cs[i].ids.n > maxn ? cs[i].ids.n : maxn;
        int32_t *tok = malloc(total * 3 * sizeof(int32_t)), *pos = tok + total, *seq = pos + total;
        size_t t = 0;
        for (size_t k = 0; k < maxn; k++)
            for (size_t i = 0; i < n; i++)
                if (k < cs[i].ids.n) tok[t] = cs[i].ids.ids[k], pos[t] = (int32_t)k, seq[t] = (int32_t)i, t++;
        const eng_batch b = {(int32_t)total, tok, pos, seq, NULL};
        if (eng_decode(all, &b, &err)) fail_msg("%s", err.msg);
        for (size_t i = 0; i < n; i++) {
            float v[4096];
            if (eng_get_embedding(all, (int32_t)i, false, v, &err)) fail_msg("%s", err.msg);
            if (memcmp(v, alone[i], E * sizeof(float)))
                fail_msg("pooling %s, case %s: the vector changes when other sequences share the batch",
                         eng_pooling_name((eng_pooling)p), cs[i].id);
        }
        free(tok);
        eng_context_free(one);
        eng_context_free(all);
    }
    for (size_t i = 0; i < n; i++) eng_tokens_free(&cs[i].ids);
    eng_model_free(m);
}

static void test_embedding_context_refuses_misuse(void **state) {
    (void)state;
    TU_NEED_FIXTURES();
    eng_model *m;
    dp_err err = {0};
    if (eng_model_load(tu_fixture("models/qwen3-tiny-f16.gguf"), &m, &err)) fail_msg("%s", err.msg);
    assert_int_equal(eng_model_pooling(m, ENG_POOLING_MEAN), ENG_POOLING_MEAN); /* no pooling key */
    eng_context *gen = embed_context(m, ENG_POOLING_NONE, false, 1), *cls = embed_context(m, ENG_POOLING_CLS, false, 1);
    float v[4096];
    assert_int_equal(eng_get_embedding(gen, 0, true, v, &err), DP_EINVAL); /* a logits context */
    assert_int_equal(eng_get_embedding(cls, 0, true, v, &err), DP_EINVAL); /* nothing decoded yet */
    const int32_t toks[3] = {10, 20, 30};
    assert_int_equal(eng_decode_sequence(cls, 0, toks, 3, 0, &err), DP_OK);
    assert_int_equal(eng_get_embedding(cls, 0, true, v, &err), DP_OK);
    eng_seq_clear(cls, 0);
    assert_int_equal(eng_get_embedding(cls, 0, true, v, &err), DP_EINVAL); /* cleared */
    eng_context_params cp = eng_context_default_params();
    cp.pooling = (eng_pooling)7;
    eng_context *bad = NULL;
    assert_int_equal(eng_context_new(m, &cp, &bad, &err), DP_EINVAL);
    eng_pooling p;
    assert_false(eng_pooling_parse("max", &p));
    assert_true(eng_pooling_parse("cls", &p) && p == ENG_POOLING_CLS);
    eng_context_free(gen);
    eng_context_free(cls);
    eng_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_last_pooling_matches_llama_embedding),
        cmocka_unit_test(test_mean_pooling_matches_llama_embedding),
        cmocka_unit_test(test_vectors_do_not_depend_on_the_batch),
        cmocka_unit_test(test_embedding_context_refuses_misuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
