/*
 * test_threadpool.c - the CPU backend's thread pool and its claimed work runs: every slice and
 * item run exactly once at 1-4 threads, sleeping threads are woken for every task, and a
 * held-up thread's share goes to the others. Its
 * own binary so that the TSan job (label threads) runs these, not the kernel checks, which take
 * minutes under TSan and have no threads.
 */
#include "testutil.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "cpu/threadpool.h"
#include "platform.h"

typedef struct pool_ctx {
    _Atomic long sum;
    int *hits;
    int n;
} pool_ctx;

static void task(void *arg, int ith, int nth) {
    pool_ctx *c = arg;
    for (int i = c->n * ith / nth; i < c->n * (ith + 1) / nth; i++) {
        c->hits[i]++;
        atomic_fetch_add(&c->sum, i);
    }
}

static void test_thread_pool_runs_every_slice_once(void **state) {
    (void)state;
    for (int threads = 1; threads <= 4; threads++) {
        eng_pool *p;
        dp_err err = {0};
        assert_int_equal(eng_pool_new(threads, &p, &err), DP_OK);
        assert_int_equal(eng_pool_size(p), threads);
        pool_ctx c = {0};
        c.n = 1000;
        c.hits = calloc(1000, sizeof(int));
        for (int round = 0; round < 2000; round++) eng_pool_run(p, task, &c); /* first task right after creation */
        for (int i = 0; i < 1000; i++) assert_int_equal(c.hits[i], 2000);
        assert_int_equal(atomic_load(&c.sum), 2000L * 999 * 1000 / 2);
        free(c.hits);
        eng_pool_free(p);
    }
}

typedef struct claim_ctx {
    atomic_llong next;
    _Atomic int *hits;
    int64_t total, min_run;
    _Atomic long items[4]; /* per thread */
    _Atomic int short_runs; /* runs under min_run that did not end the work */
} claim_ctx;

static void claim_task(void *arg, int ith, int nth) {
    claim_ctx *c = arg;
    int64_t first, n;
    while ((n = eng_claim_run(&c->next, c->total, nth, c->min_run, &first)) > 0) {
        if (n < c->min_run && first + n != c->total) atomic_fetch_add(&c->short_runs, 1);
        for (int64_t i = first; i < first + n; i++) atomic_fetch_add(&c->hits[i], 1);
        atomic_fetch_add(&c->items[ith], (long)n);
        /* thread 1 is "held up": the others must take over its share */
        if (ith == 1) dp_sleep_ms(20);
    }
}

/* Work claimed in runs (eng_claim_run, eng_claim_item): every item exactly once whatever the
 * thread count, runs of at least min_run items but the last, and a thread that is held up
 * ends up with less than an even share. */
static void test_claimed_runs_cover_every_item_once(void **state) {
    (void)state;
    for (int threads = 1; threads <= 4; threads++)
        for (int64_t total = 0; total <= 700; total += 233) {
            eng_pool *p;
            dp_err err = {0};
            assert_int_equal(eng_pool_new(threads, &p, &err), DP_OK);
            claim_ctx c = {0};
            c.total = total;
            c.min_run = 3;
            c.hits = calloc((size_t)total + 1, sizeof(*c.hits));
            eng_pool_run(p, claim_task, &c);
            for (int64_t i = 0; i < total; i++) assert_int_equal(atomic_load(&c.hits[i]), 1);
            assert_int_equal(atomic_load(&c.short_runs), 0);
            if (threads >= 2 && total >= 400) assert_true(atomic_load(&c.items[1]) < total / threads);
            free(c.hits);
            eng_pool_free(p);
        }
    atomic_llong next = 0;
    eng_claim it = ENG_CLAIM(&next, 10, 2, 1);
    int64_t i, want = 0;
    while (eng_claim_item(&it, &i)) assert_int_equal(i, want++);
    assert_int_equal(want, 10);
}

typedef struct sleepy_ctx {
    _Atomic int runs[4]; /* per thread */
    int slow;            /* the thread that takes long over its part, or -1 */
} sleepy_ctx;

static void sleepy_task(void *arg, int ith, int nth) {
    sleepy_ctx *c = arg;
    (void)nth;
    if (ith == c->slow) dp_sleep_ms(5);
    atomic_fetch_add(&c->runs[ith], 1);
}

/* The paths where a thread sleeps instead of polling: tasks posted after the workers have gone
 * to sleep (a pause longer than their spin), a task the caller waits on asleep (a worker slower
 * than the spin), and both in a row, mixed with tasks posted back to back. A lost wake-up hangs
 * here; a task run twice or not at all shows in the counts. */
static void test_thread_pool_wakes_sleeping_threads(void **state) {
    (void)state;
    for (int threads = 2; threads <= 4; threads++) {
        eng_pool *p;
        dp_err err = {0};
        assert_int_equal(eng_pool_new(threads, &p, &err), DP_OK);
        sleepy_ctx c = {0};
        int want = 0;
        for (int round = 0; round < 24; round++) {
            c.slow = round % 3 == 1 ? threads - 1 : -1;
            if (round % 2 == 0) dp_sleep_ms(5); /* longer than the workers' spin: they sleep */
            eng_pool_run(p, sleepy_task, &c);
            want++;
            for (int b = 0; b < round % 4; b++, want++) eng_pool_run(p, sleepy_task, &c);
            for (int t = 0; t < threads; t++) assert_int_equal(atomic_load(&c.runs[t]), want);
        }
        eng_pool_free(p);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_thread_pool_runs_every_slice_once),
        cmocka_unit_test(test_claimed_runs_cover_every_item_once),
        cmocka_unit_test(test_thread_pool_wakes_sleeping_threads),
    };
    return cmocka_run_group_tests_name("threadpool", tests, NULL, NULL);
}
