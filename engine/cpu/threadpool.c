/*
 * threadpool.c - see threadpool.h.
 *
 * DESIGN: a generation counter announces a new task; workers spin on it for a while, then
 * sleep on a condvar. `pending` counts workers still running the current task; the caller
 * spins (then sleeps) until it reaches zero. All task fields are written before the
 * generation is bumped (release) and read after it is seen (acquire). One task at a time.
 */
#include "threadpool.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "platform.h"

#define SPIN_ITERS 200000 /* ~0.1-0.3 ms: longer than the gaps between the ops of a step */

struct eng_pool {
    int n;                    /* threads including the caller */
    dp_thread *threads;       /* [n - 1] */
    dp_mutex mu;              /* protects sleeping on cv/done_cv */
    dp_cond cv;               /* workers sleep here */
    dp_cond done_cv;          /* the caller sleeps here */
    _Atomic unsigned gen;     /* bumped per task */
    _Atomic int pending;      /* workers still busy with the task */
    _Atomic int quit;
    eng_task_fn fn;           /* current task (written before gen) */
    void *ctx;
};

typedef struct worker_arg {
    eng_pool *p;
    int ith;
} worker_arg;

static void *worker(void *arg) {
    worker_arg *w = arg;
    eng_pool *p = w->p;
    const int ith = w->ith;
    free(w);
    /* gen starts at 0 and only eng_pool_run bumps it; reading it here instead would miss a
     * task posted before this thread got to run. */
    unsigned seen = 0;
    for (;;) {
        unsigned g;
        int spins = 0;
        while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen &&
               !atomic_load_explicit(&p->quit, memory_order_acquire)) {
            if (++spins < SPIN_ITERS) continue;
            dp_mutex_lock(&p->mu);
            while (atomic_load_explicit(&p->gen, memory_order_acquire) == seen &&
                   !atomic_load_explicit(&p->quit, memory_order_acquire))
                dp_cond_wait(&p->cv, &p->mu);
            dp_mutex_unlock(&p->mu);
        }
        if (atomic_load_explicit(&p->quit, memory_order_acquire)) return NULL;
        seen = g;
        p->fn(p->ctx, ith, p->n);
        if (atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel) == 1) {
            dp_mutex_lock(&p->mu);
            dp_cond_signal(&p->done_cv);
            dp_mutex_unlock(&p->mu);
        }
    }
}

dp_status eng_pool_new(int n_threads, eng_pool **out, dp_err *err) {
    if (n_threads < 1) n_threads = 1;
    eng_pool *p = calloc(1, sizeof(*p));
    if (!p) return dp_err_set(err, DP_ENOMEM, "out of memory");
    p->n = n_threads;
    dp_mutex_init(&p->mu);
    dp_cond_init(&p->cv);
    dp_cond_init(&p->done_cv);
    p->threads = calloc((size_t)n_threads, sizeof(dp_thread));
    if (!p->threads) {
        eng_pool_free(p);
        return dp_err_set(err, DP_ENOMEM, "out of memory");
    }
    for (int i = 1; i < n_threads; i++) {
        worker_arg *w = malloc(sizeof(*w));
        if (!w) {
            p->n = i;
            eng_pool_free(p);
            return dp_err_set(err, DP_ENOMEM, "out of memory");
        }
        w->p = p;
        w->ith = i;
        dp_status st = dp_thread_create(&p->threads[i - 1], worker, w, err);
        if (st) {
            free(w);
            p->n = i;
            eng_pool_free(p);
            return st;
        }
    }
    *out = p;
    return DP_OK;
}

void eng_pool_free(eng_pool *p) {
    if (!p) return;
    atomic_store_explicit(&p->quit, 1, memory_order_release);
    dp_mutex_lock(&p->mu);
    dp_cond_broadcast(&p->cv);
    dp_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++) dp_thread_join(&p->threads[i - 1]);
    free(p->threads);
    dp_cond_free(&p->cv);
    dp_cond_free(&p->done_cv);
    dp_mutex_free(&p->mu);
    free(p);
}

int eng_pool_size(const eng_pool *p) { return p->n; }

void eng_pool_run(eng_pool *p, eng_task_fn fn, void *ctx) {
    if (p->n == 1) {
        fn(ctx, 0, 1);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    atomic_store_explicit(&p->pending, p->n - 1, memory_order_relaxed);
    dp_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    dp_cond_broadcast(&p->cv);
    dp_mutex_unlock(&p->mu);
    fn(ctx, 0, p->n);
    int spins = 0;
    while (atomic_load_explicit(&p->pending, memory_order_acquire) > 0) {
        if (++spins < SPIN_ITERS) continue;
        dp_mutex_lock(&p->mu);
        while (atomic_load_explicit(&p->pending, memory_order_acquire) > 0) dp_cond_wait(&p->done_cv, &p->mu);
        dp_mutex_unlock(&p->mu);
    }
}

int64_t eng_claim_run(atomic_llong *next, int64_t total, int nth, int64_t min_run, int64_t *first) {
    long long t0 = atomic_load_explicit(next, memory_order_relaxed), n;
    do {
        if (t0 >= total) return 0;
        n = (total - t0) / (2 * (nth > 0 ? nth : 1));
        if (n < min_run) n = min_run;
        if (n > total - t0) n = total - t0;
    } while (!atomic_compare_exchange_weak_explicit(next, &t0, t0 + n, memory_order_relaxed, memory_order_relaxed));
    *first = t0;
    return n;
}
