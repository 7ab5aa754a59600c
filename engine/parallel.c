/*
 * parallel.c - eng_parallel_for: one thread per slice, the caller runs the first slice.
 * Threads share nothing but ctx, which fn must only read or write at its own indices.
 */
#include "parallel.h"

#include "platform.h"

typedef struct slice {
    eng_range_fn fn;
    void *ctx;
    int64_t lo, hi;
} slice;

static void *run_slice(void *arg) {
    slice *s = arg;
    s->fn(s->ctx, s->lo, s->hi);
    return NULL;
}

dp_status eng_parallel_for(int n_threads, int64_t n, eng_range_fn fn, void *ctx, dp_err *err) {
    enum { MAX_THREADS = 256 };
    if (n <= 0) return DP_OK;
    if (n_threads > MAX_THREADS) n_threads = MAX_THREADS;
    if (n_threads > n) n_threads = (int)n;
    if (n_threads <= 1) {
        fn(ctx, 0, n);
        return DP_OK;
    }
    slice s[MAX_THREADS];
    dp_thread th[MAX_THREADS];
    int started = 1;
    dp_status st = DP_OK;
    for (int i = 0; i < n_threads; i++) {
        s[i] = (slice){fn, ctx, n * i / n_threads, n * (i + 1) / n_threads};
    }
    for (int i = 1; i < n_threads; i++, started++) {
        st = dp_thread_create(&th[i], run_slice, &s[i], err);
        if (st) break;
    }
    run_slice(&s[0]);
    /* slices whose thread could not start run here, so the loop still completes */
    for (int i = started; i < n_threads; i++) run_slice(&s[i]);
    for (int i = 1; i < started; i++) dp_thread_join(&th[i]);
    return DP_OK;
}
