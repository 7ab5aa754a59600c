/*
 * test_rank.c - retrieval ranking (run/rank.c) against plain references: top-k against a full
 * sort, reciprocal rank fusion against its definition, and the engine's vector scan
 * (eng_scorer) against a scalar dot product.
 */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "rank.h"

static const float *g_scores;

/* best first; a tie: the lower index first */
static int by_score(const void *a, const void *b) {
    const size_t x = *(const size_t *)a, y = *(const size_t *)b;
    if (g_scores[x] != g_scores[y]) return g_scores[x] < g_scores[y] ? 1 : -1;
    return x < y ? -1 : 1;
}

static void test_top_k_matches_sort(void **state) {
    (void)state;
    uint64_t seed = 7;
    for (int trial = 0; trial < 200; trial++) {
        const size_t n = 1 + tu_rand(&seed) % 300, k = 1 + tu_rand(&seed) % 40;
        float *s = malloc(n * sizeof(float));
        size_t *all = malloc(n * sizeof(size_t)), *got = malloc(n * sizeof(size_t));
        for (size_t i = 0; i < n; i++) s[i] = (float)(tu_rand(&seed) % 50) / 7.f; /* many ties */
        for (size_t i = 0; i < n; i++) all[i] = i;
        g_scores = s;
        qsort(all, n, sizeof(size_t), by_score);
        const size_t m = pl_top_k(s, n, k, got);
        assert_int_equal(m, k < n ? k : n);
        assert_memory_equal(got, all, m * sizeof(size_t));
        free(s);
        free(all);
        free(got);
    }
    assert_int_equal(pl_top_k(NULL, 0, 5, NULL), 0);
}

static void test_rrf(void **state) {
    (void)state;
    const int64_t a[] = {10, 20, 30, 40}, b[] = {30, 50, 10};
    const int64_t *lists[2] = {a, b};
    const size_t lens[2] = {4, 3};
    int64_t ids[8];
    double sc[8];
    const size_t n = pl_rrf(lists, lens, 2, 8, ids, sc);
    assert_int_equal(n, 5);
    /* 10: 1/61 + 1/63; 30: 1/63 + 1/61 (the same: 10 was met first); 20: 1/62; 50: 1/62; 40: 1/64 */
    const int64_t want[] = {10, 30, 20, 50, 40};
    assert_memory_equal(ids, want, sizeof(want));
    assert_true(fabs(sc[0] - (1.0 / 61 + 1.0 / 63)) < 1e-12);
    assert_true(fabs(sc[4] - 1.0 / 64) < 1e-12);
    assert_int_equal(pl_rrf(lists, lens, 2, 2, ids, sc), 2);
}

static void test_scorer_matches_scalar(void **state) {
    (void)state;
    const int dims[] = {1, 7, 32, 1024, 1031};
    uint64_t seed = 3;
    eng_scorer *s = NULL;
    dp_err err = {0};
    assert_int_equal(eng_scorer_new(2, &s, &err), DP_OK);
    for (size_t d = 0; d < sizeof(dims) / sizeof(dims[0]); d++) {
        const int dim = dims[d];
        const size_t n = 3000;
        float *rows = malloc(n * (size_t)dim * sizeof(float)), *q = malloc((size_t)dim * sizeof(float));
        float *got = malloc(n * sizeof(float));
        for (size_t i = 0; i < n * (size_t)dim; i++) rows[i] = tu_randn(&seed);
        for (int i = 0; i < dim; i++) q[i] = tu_randn(&seed);
        eng_scorer_dot(s, q, rows, n, dim, got);
        for (size_t r = 0; r < n; r++) {
            double ref = 0, mag = 0;
            for (int i = 0; i < dim; i++) ref += (double)q[i] * rows[r * (size_t)dim + i], mag += fabs((double)q[i] * rows[r * (size_t)dim + i]);
            if (fabs(got[r] - ref) > 1e-5 * (mag + 1)) fail_msg("dim %d row %zu: %g vs %g", dim, r, (double)got[r], ref);
        }
        free(rows);
        free(q);
        free(got);
    }
    eng_scorer_free(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_top_k_matches_sort),
        cmocka_unit_test(test_rrf),
        cmocka_unit_test(test_scorer_matches_scalar),
    };
    return cmocka_run_group_tests_name("rank", tests, NULL, NULL);
}
