/*
 * vector_scan.c - scores of stored vectors against a query (engine.h, eng_scorer): the
 * retrieval side of embeddings. One dot product per row with this CPU's SIMD kernel (the one
 * attention uses for f32 keys), rows split over the pool's threads. A scan of 100,000 rows of
 * 1,024 floats reads 400 MB, so it is bound by memory bandwidth; the threads are there to keep
 * several streams of loads in flight.
 */
#include <stdlib.h>

#include "engine.h"
#include "kernels.h"
#include "platform.h"
#include "threadpool.h"

struct eng_scorer {
    eng_pool *pool;
    eng_kv_dot_fn dot;
};

typedef struct scan {
    const eng_scorer *s;
    const float *q, *rows;
    size_t n;
    int dim;
    float *scores;
} scan;

static void scan_task(void *ctx, int ith, int nth) {
    const scan *t = ctx;
    const size_t a = t->n * (size_t)ith / (size_t)nth, b = t->n * (size_t)(ith + 1) / (size_t)nth;
    for (size_t i = a; i < b; i++) t->scores[i] = t->s->dot(t->q, t->rows + i * (size_t)t->dim, t->dim);
}

dp_status eng_scorer_new(int n_threads, eng_scorer **out, dp_err *err) {
    eng_scorer *s = calloc(1, sizeof(*s));
    if (!s) return dp_err_set(err, DP_ENOMEM, "out of memory");
    dp_status st = eng_pool_new(n_threads > 0 ? n_threads : dp_cpu_count(), &s->pool, err);
    if (st) {
        free(s);
        return st;
    }
    s->dot = eng_kv_dot_best(ENG_TYPE_F32, false);
    *out = s;
    return DP_OK;
}

void eng_scorer_dot(eng_scorer *s, const float *q, const float *rows, size_t n, int dim, float *scores) {
    scan t = {s, q, rows, n, dim, scores};
    if (n < 1024) scan_task(&t, 0, 1); /* too little to wake the threads for */
    else eng_pool_run(s->pool, scan_task, &t);
}

void eng_scorer_free(eng_scorer *s) {
    if (!s) return;
    eng_pool_free(s->pool);
    free(s);
}
