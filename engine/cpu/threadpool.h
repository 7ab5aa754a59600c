/*
 * threadpool.h - a persistent pool that runs one task on all its threads at once.
 *
 * The kernels split their own work from (ith, nth), so a step of the forward pass is one
 * eng_pool_run(): the caller takes part as thread 0 and the call returns when every thread
 * has finished. Workers spin briefly before sleeping, because a decode step issues hundreds of
 * short tasks and a futex wake per task would cost more than the work.
 */
#ifndef ENG_THREADPOOL_H
#define ENG_THREADPOOL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "status.h"

typedef struct eng_pool eng_pool;
typedef void (*eng_task_fn)(void *ctx, int ith, int nth);

/* n_threads >= 1 (1 = run everything on the caller). */
dp_status eng_pool_new(int n_threads, eng_pool **out, dp_err *err);
void eng_pool_free(eng_pool *p);
int eng_pool_size(const eng_pool *p);
/* Runs fn(ctx, i, n) for i in [0, n) concurrently; returns when all are done. Not reentrant. */
void eng_pool_run(eng_pool *p, eng_task_fn fn, void *ctx);

/* Work items [0, total) that the threads of one task claim in runs rather than in fixed
 * slices: each claim takes 1/(2 nth) of what is left, but at least min_run items, so the runs
 * shrink as the work runs out and a thread that fell behind (a VM's stolen time, a slower
 * core) leaves its share to the others. The counter starts at 0 (zeroed with the task).
 * Returns the run's length, 0 when nothing is left; *first: its first item. */
int64_t eng_claim_run(atomic_llong *next, int64_t total, int nth, int64_t min_run, int64_t *first);

/* The same, an item at a time: for (int64_t i; eng_claim_item(&it, &i);) ... */
typedef struct eng_claim {
    atomic_llong *next;
    int64_t total, min_run, at, end;
    int nth;
} eng_claim;
#define ENG_CLAIM(next, total, nth, min_run) ((eng_claim){(next), (total), (min_run), 0, 0, (nth)})
static inline bool eng_claim_item(eng_claim *it, int64_t *item) {
    if (it->at == it->end) {
        const int64_t n = eng_claim_run(it->next, it->total, it->nth, it->min_run, &it->at);
        if (n == 0) return false;
        it->end = it->at + n;
    }
    *item = it->at++;
    return true;
}

#endif /* ENG_THREADPOOL_H */
