/*
 * queue.c - see queue.h.
 *
 * DESIGN: a ring buffer of capacity slots. Fields below `mu` are protected by it. not_full
 * wakes producers, not_empty wakes consumers; close and abort broadcast both, so no waiter can
 * sleep through the end. Signals are sent while holding the mutex, which keeps the reasoning
 * simple (TSan-clean) at a cost that is negligible for document-sized items.
 */
#include "queue.h"

#include <stdbool.h>
#include <stdlib.h>

#include "platform.h"

struct pl_queue {
    dp_mutex mu;
    dp_cond not_full;            /* producers wait here */
    dp_cond not_empty;           /* consumers wait here */
    void **slots;                /* [cap] ring; protected by mu */
    size_t cap, head, len;       /* protected by mu */
    bool closed;                 /* protected by mu */
    dp_status error;             /* sticky abort status, DP_OK when none; protected by mu */
    pl_queue_free_fn free_item;  /* immutable */
};

dp_status pl_queue_new(size_t capacity, pl_queue_free_fn free_item, pl_queue **out) {
    if (capacity == 0) return DP_EINVAL;
    pl_queue *q = calloc(1, sizeof(*q));
    if (!q) return DP_ENOMEM;
    q->slots = calloc(capacity, sizeof(void *));
    if (!q->slots) {
        free(q);
        return DP_ENOMEM;
    }
    q->cap = capacity;
    q->free_item = free_item;
    dp_mutex_init(&q->mu);
    dp_cond_init(&q->not_full);
    dp_cond_init(&q->not_empty);
    *out = q;
    return DP_OK;
}

void pl_queue_free(pl_queue *q) {
    if (!q) return;
    if (q->free_item)
        for (size_t i = 0; i < q->len; i++) q->free_item(q->slots[(q->head + i) % q->cap]);
    free(q->slots);
    dp_cond_free(&q->not_full);
    dp_cond_free(&q->not_empty);
    dp_mutex_free(&q->mu);
    free(q);
}

dp_status pl_queue_push(pl_queue *q, void *item) {
    dp_mutex_lock(&q->mu);
    while (q->len == q->cap && !q->closed && !q->error) dp_cond_wait(&q->not_full, &q->mu);
    dp_status st = q->error ? q->error : q->closed ? DP_EOF : DP_OK;
    if (!st) {
        q->slots[(q->head + q->len) % q->cap] = item;
        q->len++;
        dp_cond_signal(&q->not_empty);
    }
    dp_mutex_unlock(&q->mu);
    return st;
}

/* wait_ms: < 0 forever, 0 not at all, > 0 at most that long */
static dp_status pop(pl_queue *q, void **item, int wait_ms) {
    dp_mutex_lock(&q->mu);
    if (wait_ms < 0) {
        while (q->len == 0 && !q->closed && !q->error) dp_cond_wait(&q->not_empty, &q->mu);
    } else if (wait_ms > 0 && q->len == 0 && !q->closed && !q->error) {
        dp_cond_timedwait_ms(&q->not_empty, &q->mu, wait_ms);
    }
    dp_status st = DP_OK;
    if (q->error) st = q->error;
    else if (q->len == 0) st = q->closed ? DP_EOF : DP_EBUSY; /* closed and drained, or empty for now */
    else {
        *item = q->slots[q->head];
        q->head = (q->head + 1) % q->cap;
        q->len--;
        dp_cond_signal(&q->not_full);
    }
    dp_mutex_unlock(&q->mu);
    return st;
}

dp_status pl_queue_pop(pl_queue *q, void **item) { return pop(q, item, -1); }
dp_status pl_queue_try_pop(pl_queue *q, void **item) { return pop(q, item, 0); }
dp_status pl_queue_pop_wait(pl_queue *q, void **item, int ms) { return pop(q, item, ms > 0 ? ms : 0); }

void pl_queue_close(pl_queue *q) {
    dp_mutex_lock(&q->mu);
    q->closed = true;
    dp_cond_broadcast(&q->not_full);
    dp_cond_broadcast(&q->not_empty);
    dp_mutex_unlock(&q->mu);
}

void pl_queue_abort(pl_queue *q, dp_status err) {
    if (!q) return; /* (plan and status run the reader without the later queues) */
    dp_mutex_lock(&q->mu);
    if (!q->error) q->error = err < 0 ? err : DP_ECANCELED;
    dp_cond_broadcast(&q->not_full);
    dp_cond_broadcast(&q->not_empty);
    dp_mutex_unlock(&q->mu);
}

size_t pl_queue_len(pl_queue *q) {
    dp_mutex_lock(&q->mu);
    size_t n = q->len;
    dp_mutex_unlock(&q->mu);
    return n;
}
