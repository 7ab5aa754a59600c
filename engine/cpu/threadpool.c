/*
 * threadpool.c - see threadpool.h.
 *
 * DESIGN: a generation counter announces a new task; workers spin on it for a while, then
 * sleep on a condvar. `pending` counts workers still running the current task; the caller
 * spins (then sleeps) until it reaches zero. All task fields are written before the
 * generation is bumped (release) and read after it is seen (acquire). One task at a time.
 *
 * The mutex and the condvars are touched only when a thread sleeps: a sleeper announces itself
 * (sleepers, waiting) before its last look at the condition, and whoever changes the condition
 * looks for sleepers after changing it, both sequentially consistent, so at least one of the
 * two sees the other (a missed wake-up would need each to miss the other's write). A decode
 * step runs hundreds of tasks; locking the mutex for each one, as this pool once did, made
 * the caller and a worker that had just finished collide on it, and strace counted ~100
 * futex calls a 16-sequence qwen35 step.
 */
#include "threadpool.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "platform.h"

/* How long a thread polls before it sleeps: longer than the gaps between the ops of a step
 * (a step's sampling and bookkeeping included), since waking a sleeping thread takes a futex
 * call and, on a VM whose idle vCPU the host has halted, 50-150 us. */
#define SPIN_NS 2000000
#define SPIN_CHECK 64 /* polls between looks at the clock */

struct eng_pool {
    int n;                    /* threads including the caller */
    dp_thread *threads;       /* [n - 1] */
    dp_mutex mu;              /* protects sleeping on cv/done_cv */
    dp_cond cv;               /* workers sleep here */
    dp_cond done_cv;          /* the caller sleeps here */
    _Atomic unsigned gen;     /* bumped per task */
    _Atomic int pending;      /* workers still busy with the task */
    _Atomic int quit;
    _Atomic int sleepers;     /* workers asleep on cv (or about to be) */
    _Atomic int waiting;      /* 1 while the caller sleeps on done_cv (or is about to) */
    eng_task_fn fn;           /* current task (written before gen) */
    void *ctx;
};

typedef struct worker_arg {
    eng_pool *p;
    int ith;
} worker_arg;

static bool task_posted(const eng_pool *p, unsigned seen) {
    return atomic_load_explicit(&p->gen, memory_order_acquire) != seen || atomic_load_explicit(&p->quit, memory_order_acquire);
}
static bool pool_idle(const eng_pool *p, unsigned unused) {
    (void)unused;
    return atomic_load_explicit(&p->pending, memory_order_acquire) == 0;
}

/* Polls until done(p, arg) or for SPIN_NS; false if it gave up. */
static bool spin_until(const eng_pool *p, bool (*done)(const eng_pool *, unsigned), unsigned arg) {
    uint64_t t0 = 0;
    for (int polls = 1;; polls++) {
        if (done(p, arg)) return true;
        dp_cpu_relax();
        if (polls % SPIN_CHECK) continue;
        if (!t0) t0 = dp_time_ns();
        else if (dp_time_ns() - t0 >= SPIN_NS) return false;
    }
}

static void *worker(void *arg) {
    worker_arg *w = arg;
    eng_pool *p = w->p;
    const int ith = w->ith;
    free(w);
    /* gen starts at 0 and only eng_pool_run bumps it; reading it here instead would miss a
     * task posted before this thread got to run. */
    unsigned seen = 0;
    for (;;) {
        if (!spin_until(p, task_posted, seen)) {
            dp_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleepers, 1);
            while (atomic_load(&p->gen) == seen && !atomic_load(&p->quit)) dp_cond_wait(&p->cv, &p->mu);
            atomic_fetch_sub(&p->sleepers, 1);
            dp_mutex_unlock(&p->mu);
        }
        if (atomic_load_explicit(&p->quit, memory_order_acquire)) return NULL;
        /* the next bump waits for this worker to finish the task: gen holds still until then */
        seen = atomic_load_explicit(&p->gen, memory_order_acquire);
        p->fn(p->ctx, ith, p->n);
        if (atomic_fetch_sub(&p->pending, 1) == 1 && atomic_load(&p->waiting)) {
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
    atomic_fetch_add(&p->gen, 1);
    if (atomic_load(&p->sleepers)) { /* under the mutex: a sleeper holds it from its last look until it waits */
        dp_mutex_lock(&p->mu);
        dp_cond_broadcast(&p->cv);
        dp_mutex_unlock(&p->mu);
    }
    fn(ctx, 0, p->n);
    if (spin_until(p, pool_idle, 0)) return;
    dp_mutex_lock(&p->mu);
    atomic_store(&p->waiting, 1);
    while (atomic_load(&p->pending) > 0) dp_cond_wait(&p->done_cv, &p->mu);
    atomic_store(&p->waiting, 0);
    dp_mutex_unlock(&p->mu);
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
