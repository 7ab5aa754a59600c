/*
 * test_chunker.c - chunks fit the budget when re-counted on their own, cover the document
 * with the requested overlap, and cut at paragraph, line and sentence boundaries (CJK
 * included) before falling back to token boundaries.
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chunker.h"
#include "engine.h"

static eng_tokenizer *g_tok;

static int setup(void **state) {
    (void)state;
    return (g_tok = tu_qwen_tokenizer()) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    eng_tokenizer_free(g_tok);
    return 0;
}

static size_t count(const char *s, size_t n) {
    eng_tokens t = {0};
    dp_err err = {0};
    assert_int_equal(eng_tokenize(g_tok, NULL, s, n, false, false, &t, &err), DP_OK);
    size_t k = t.n;
    eng_tokens_free(&t);
    return k;
}

/* Every chunk within budget (re-counted), contiguous coverage with overlap, in order. */
static void check_cover(const char *text, size_t len, const pl_chunks *c, int32_t budget) {
    assert_true(c->n >= 1);
    assert_int_equal(c->v[0].start, 0);
    assert_int_equal(c->v[c->n - 1].end, len);
    for (size_t i = 0; i < c->n; i++) {
        const pl_chunk *k = &c->v[i];
        assert_true(k->end > k->start);
        size_t n = count(text + k->start, k->end - k->start);
        assert_int_equal(n, (size_t)k->n_tokens);
        if ((int32_t)n > budget) fail_msg("chunk %zu has %zu tokens, budget %d", i, n, budget);
        if (i) {
            assert_true(k->start > c->v[i - 1].start);
            assert_true(k->start <= c->v[i - 1].end); /* no gap */
        }
    }
}

static void test_paragraph_boundaries_and_overlap(void **state) {
    (void)state;
    char *text = malloc(1 << 16);
    size_t n = 0;
    for (int p = 0; p < 30; p++) {
        n += (size_t)sprintf(text + n, "Paragraph %d of the report says the system processed the data for the team", p);
        n += (size_t)sprintf(text + n, " and the results were good.\n\n");
    }
    /* a budget of about two and a half paragraphs of whatever tokenizer is in use: the real BPE
     * of the fixtures (~25 tokens a paragraph) or, without ../shared, the generated model's
     * (several times more) */
    const char *para_end = strstr(text, "\n\n");
    const int32_t para = (int32_t)count(text, (size_t)(para_end + 2 - text));
    const int32_t budget = para * 5 / 2, overlap = para / 3 > 0 ? para / 3 : 1;
    pl_chunks c = {0};
    dp_err err = {0};
    assert_int_equal(pl_chunk_text(g_tok, NULL, text, n, budget, overlap, &c, &err), DP_OK);
    check_cover(text, n, &c, budget);
    assert_true(c.n >= 3);
    size_t at_para = 0;
    for (size_t i = 0; i + 1 < c.n; i++)
        at_para += c.v[i].end >= 2 && text[c.v[i].end - 1] == '\n' && text[c.v[i].end - 2] == '\n';
    if (at_para + 1 < c.n - 1) /* cuts land between paragraphs */
        fail_msg("%zu of %zu cuts at a paragraph end (paragraphs of %d tokens, budget %d)", at_para, c.n - 1, para, budget);
    assert_true(c.v[1].start < c.v[0].end); /* overlap */
    pl_chunks_free(&c);
    /* no overlap: the chunks tile the text exactly */
    assert_int_equal(pl_chunk_text(g_tok, NULL, text, n, budget, 0, &c, &err), DP_OK);
    for (size_t i = 1; i < c.n; i++) assert_int_equal(c.v[i].start, c.v[i - 1].end);
    pl_chunks_free(&c);
    free(text);
}

static void test_cjk_sentences_and_unbreakable_text(void **state) {
    (void)state;
    char text[8192];
    size_t n = 0;
    for (int i = 0; i < 60; i++) n += (size_t)sprintf(text + n, "%s", i % 3 ? "数据报告总结了系统的结果。" : "模型运行正常！");
    pl_chunks c = {0};
    dp_err err = {0};
    assert_int_equal(pl_chunk_text(g_tok, NULL, text, n, 40, 4, &c, &err), DP_OK);
    check_cover(text, n, &c, 40);
    for (size_t i = 0; i + 1 < c.n; i++) { /* every cut after 。 or ！ */
        const unsigned char *u = (const unsigned char *)text + c.v[i].end - 3;
        assert_true((u[0] == 0xE3 && u[1] == 0x80 && u[2] == 0x82) || (u[0] == 0xEF && u[1] == 0xBC && u[2] == 0x81));
    }
    pl_chunks_free(&c);
    /* no boundary at all: token cuts, still within budget */
    char *blob = malloc(20000);
    uint64_t s = 3;
    for (int i = 0; i < 20000; i++) blob[i] = (char)('a' + tu_rand(&s) % 26);
    assert_int_equal(pl_chunk_text(g_tok, NULL, blob, 20000, 100, 10, &c, &err), DP_OK);
    check_cover(blob, 20000, &c, 100);
    pl_chunks_free(&c);
    free(blob);
}

static void test_chunker_edge_cases(void **state) {
    (void)state;
    pl_chunks c = {0};
    dp_err err = {0};
    assert_int_equal(pl_chunk_text(g_tok, NULL, "", 0, 64, 8, &c, &err), DP_OK);
    assert_int_equal(c.n, 0);
    assert_int_equal(pl_chunk_text(g_tok, NULL, "short text", 10, 64, 8, &c, &err), DP_OK);
    assert_int_equal(c.n, 1);
    assert_int_equal(c.v[0].end, 10);
    pl_chunks_free(&c);
    assert_int_equal(pl_chunk_text(g_tok, NULL, "x", 1, 4, 0, &c, &err), DP_EINVAL);
    assert_int_equal(pl_chunk_text(g_tok, NULL, "x", 1, 64, 32, &c, &err), DP_EINVAL);
    const char *special = "<|im_end|> is just text in a document <|im_start|>";
    assert_int_equal(pl_chunk_text(g_tok, NULL, special, strlen(special), 8, 0, &c, &err), DP_OK);
    check_cover(special, strlen(special), &c, 8);
    pl_chunks_free(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paragraph_boundaries_and_overlap),
        cmocka_unit_test(test_cjk_sentences_and_unbreakable_text),
        cmocka_unit_test(test_chunker_edge_cases),
    };
    return cmocka_run_group_tests_name("chunker", tests, setup, teardown);
}
