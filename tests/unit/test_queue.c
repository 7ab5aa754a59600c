/*
 * test_queue.c - the bounded queue between stages: FIFO order, back pressure, close drains
 * then EOF, abort wakes every waiter, leftovers freed, and a multi-producer multi-consumer
 * stress where every item arrives exactly once. Runs under TSan in CI (label threads).
 */
#include "testutil.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "platform.h"
#include "queue.h"

static void test_queue_is_fifo_and_counts(void **state) {
    (void)state;
    pl_queue *q;
    assert_int_equal(pl_queue_new(4, NULL, &q), DP_OK);
    int v[4] = {1, 2, 3, 4};
    for (int i = 0; i < 4; i++) assert_int_equal(pl_queue_push(q, &v[i]), DP_OK);
    assert_int_equal(pl_queue_len(q), 4);
    for (int i = 0; i < 4; i++) {
        void *p;
        assert_int_equal(pl_queue_pop(q, &p), DP_OK);
        assert_ptr_equal(p, &v[i]);
    }
    assert_int_equal(pl_queue_len(q), 0);
    pl_queue_free(q);
    assert_int_equal(pl_queue_new(0, NULL, &q), DP_EINVAL);
}

static void test_queue_pop_after_close_drains_then_eof(void **state) {
    (void)state;
    pl_queue *q;
    assert_int_equal(pl_queue_new(8, NULL, &q), DP_OK);
    int a = 1, b = 2;
    pl_queue_push(q, &a);
    pl_queue_push(q, &b);
    pl_queue_close(q);
    pl_queue_close(q); /* idempotent */
    assert_int_equal(pl_queue_push(q, &a), DP_EOF); /* the caller keeps the item */
    void *p;
    assert_int_equal(pl_queue_pop(q, &p), DP_OK);
    assert_ptr_equal(p, &a);
    assert_int_equal(pl_queue_pop(q, &p), DP_OK);
    assert_ptr_equal(p, &b);
    assert_int_equal(pl_queue_pop(q, &p), DP_EOF);
    assert_int_equal(pl_queue_pop(q, &p), DP_EOF);
    pl_queue_free(q);
}

static int g_freed;
static void count_free(void *item) {
    g_freed++;
    free(item);
}

static void test_queue_free_releases_leftover_items(void **state) {
    (void)state;
    pl_queue *q;
    g_freed = 0;
    assert_int_equal(pl_queue_new(8, count_free, &q), DP_OK);
    for (int i = 0; i < 5; i++) assert_int_equal(pl_queue_push(q, malloc(16)), DP_OK);
    void *p;
    assert_int_equal(pl_queue_pop(q, &p), DP_OK);
    free(p);
    pl_queue_abort(q, DP_EIO);
    assert_int_equal(pl_queue_pop(q, &p), DP_EIO); /* abort wins over remaining items */
    pl_queue_free(q);
    assert_int_equal(g_freed, 4);
}

typedef struct blocked {
    pl_queue *q;
    dp_status result;
    _Atomic int started;
} blocked;

static void *blocked_pop(void *arg) {
    blocked *b = arg;
    atomic_store(&b->started, 1);
    void *p;
    b->result = pl_queue_pop(b->q, &p);
    return NULL;
}

static void *blocked_push(void *arg) {
    blocked *b = arg;
    static int x;
    atomic_store(&b->started, 1);
    b->result = pl_queue_push(b->q, &x);
    return NULL;
}

static void wait_started(blocked *b) {
    while (!atomic_load(&b->started)) {
    }
    /* give the thread time to block inside the queue */
    uint64_t t0 = dp_time_ns();
    while (dp_time_ns() - t0 < 20000000) {
    }
}

static void test_queue_abort_wakes_blocked_producers_and_consumers(void **state) {
    (void)state;
    pl_queue *empty, *full;
    assert_int_equal(pl_queue_new(1, NULL, &empty), DP_OK);
    assert_int_equal(pl_queue_new(1, NULL, &full), DP_OK);
    static int y;
    assert_int_equal(pl_queue_push(full, &y), DP_OK);
    blocked c = {empty, DP_OK, 0}, p = {full, DP_OK, 0};
    dp_thread tc, tp;
    assert_int_equal(dp_thread_create(&tc, blocked_pop, &c, NULL), DP_OK);
    assert_int_equal(dp_thread_create(&tp, blocked_push, &p, NULL), DP_OK);
    wait_started(&c);
    wait_started(&p);
    pl_queue_abort(empty, DP_ENOSPC);
    pl_queue_abort(full, DP_ECANCELED);
    dp_thread_join(&tc);
    dp_thread_join(&tp);
    assert_int_equal(c.result, DP_ENOSPC);
    assert_int_equal(p.result, DP_ECANCELED);
    pl_queue_abort(empty, DP_EIO); /* the first status sticks */
    void *x;
    assert_int_equal(pl_queue_pop(empty, &x), DP_ENOSPC);
    pl_queue_free(empty);
    pl_queue_free(full);
}

static void test_queue_close_wakes_blocked_consumer(void **state) {
    (void)state;
    pl_queue *q;
    assert_int_equal(pl_queue_new(2, NULL, &q), DP_OK);
    blocked c = {q, DP_OK, 0};
    dp_thread t;
    assert_int_equal(dp_thread_create(&t, blocked_pop, &c, NULL), DP_OK);
    wait_started(&c);
    pl_queue_close(q);
    dp_thread_join(&t);
    assert_int_equal(c.result, DP_EOF);
    pl_queue_free(q);
}

enum { N_PROD = 4, N_CONS = 3, PER_PROD = 5000, CAP = 7 };

typedef struct stress {
    pl_queue *q;
    _Atomic int seen[N_PROD * PER_PROD];
    _Atomic long sum;
    _Atomic int max_len;
    int base;
} stress;

typedef struct prod_arg {
    stress *s;
    int id;
} prod_arg;

static void *producer(void *arg) {
    prod_arg *a = arg;
    for (int i = 0; i < PER_PROD; i++) {
        int *v = malloc(sizeof(int));
        *v = a->id * PER_PROD + i;
        if (pl_queue_push(a->s->q, v) != DP_OK) {
            free(v);
            break;
        }
        int len = (int)pl_queue_len(a->s->q);
        int m = atomic_load(&a->s->max_len);
        while (len > m && !atomic_compare_exchange_weak(&a->s->max_len, &m, len)) {
        }
    }
    return NULL;
}

static void *consumer(void *arg) {
    stress *s = arg;
    void *p;
    int last[N_PROD];
    for (int i = 0; i < N_PROD; i++) last[i] = -1;
    while (pl_queue_pop(s->q, &p) == DP_OK) {
        int v = *(int *)p;
        free(p);
        atomic_fetch_add(&s->seen[v], 1);
        atomic_fetch_add(&s->sum, v);
        /* FIFO: one consumer sees each producer's items in increasing order */
        assert_true(v % PER_PROD > last[v / PER_PROD] || last[v / PER_PROD] == -1);
        last[v / PER_PROD] = v % PER_PROD;
    }
    return NULL;
}

static void test_queue_many_producers_consumers_every_item_once(void **state) {
    (void)state;
    stress *s = calloc(1, sizeof(*s));
    assert_int_equal(pl_queue_new(CAP, free, &s->q), DP_OK);
    dp_thread tp[N_PROD], tc[N_CONS];
    prod_arg pa[N_PROD];
    for (int i = 0; i < N_CONS; i++) assert_int_equal(dp_thread_create(&tc[i], consumer, s, NULL), DP_OK);
    for (int i = 0; i < N_PROD; i++) {
        pa[i] = (prod_arg){s, i};
        assert_int_equal(dp_thread_create(&tp[i], producer, &pa[i], NULL), DP_OK);
    }
    for (int i = 0; i < N_PROD; i++) dp_thread_join(&tp[i]);
    pl_queue_close(s->q);
    for (int i = 0; i < N_CONS; i++) dp_thread_join(&tc[i]);
    const long n = (long)N_PROD * PER_PROD;
    for (long i = 0; i < n; i++)
        if (atomic_load(&s->seen[i]) != 1) fail_msg("item %ld seen %d times", i, atomic_load(&s->seen[i]));
    assert_int_equal(atomic_load(&s->sum), n * (n - 1) / 2);
    assert_true(atomic_load(&s->max_len) <= CAP); /* back pressure: never more than capacity */
    pl_queue_free(s->q);
    free(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_queue_is_fifo_and_counts),
        cmocka_unit_test(test_queue_pop_after_close_drains_then_eof),
        cmocka_unit_test(test_queue_free_releases_leftover_items),
        cmocka_unit_test(test_queue_abort_wakes_blocked_producers_and_consumers),
        cmocka_unit_test(test_queue_close_wakes_blocked_consumer),
        cmocka_unit_test(test_queue_many_producers_consumers_every_item_once),
    };
    return cmocka_run_group_tests_name("queue", tests, NULL, NULL);
}
