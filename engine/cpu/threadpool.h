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

#include "status.h"

typedef struct eng_pool eng_pool;
typedef void (*eng_task_fn)(void *ctx, int ith, int nth);

/* n_threads >= 1 (1 = run everything on the caller). */
dp_status eng_pool_new(int n_threads, eng_pool **out, dp_err *err);
void eng_pool_free(eng_pool *p);
int eng_pool_size(const eng_pool *p);
/* Runs fn(ctx, i, n) for i in [0, n) concurrently; returns when all are done. Not reentrant. */
void eng_pool_run(eng_pool *p, eng_task_fn fn, void *ctx);

#endif /* ENG_THREADPOOL_H */
