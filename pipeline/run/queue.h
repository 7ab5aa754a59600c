/*
 * queue.h - a bounded, blocking FIFO between pipeline stages (after FFmpeg's threadmessage
 * and zstd's pool): one mutex, two condition variables, and a sticky error that wakes every
 * waiter.
 *
 *   producers: pl_queue_push (blocks while full) ... pl_queue_close
 *   consumers: while (pl_queue_pop(q, &item) == DP_OK) use(item);   // DP_EOF once drained
 *   anyone:    pl_queue_abort(q, err) -> every waiter returns err now
 *
 * Ownership: a successful push hands the item to the queue; a pop hands it to the caller.
 * Items still inside when the queue is freed go to the free callback.
 */
#ifndef PL_QUEUE_H
#define PL_QUEUE_H

#include <stddef.h>

#include "status.h"

typedef struct pl_queue pl_queue;
typedef void (*pl_queue_free_fn)(void *item);

/* capacity >= 1. free_item (optional) releases items left behind. Free with pl_queue_free(). */
dp_status pl_queue_new(size_t capacity, pl_queue_free_fn free_item, pl_queue **out);
/* Frees the queue and, with free_item, every item still inside. No thread may be waiting. */
void pl_queue_free(pl_queue *q);
/* Appends item, waiting while the queue is full. DP_EOF after close (the caller keeps item);
 * the abort status after an abort (the caller keeps item). */
dp_status pl_queue_push(pl_queue *q, void *item);
/* Takes the oldest item, waiting while empty. DP_EOF once closed and drained; the abort
 * status after an abort. */
dp_status pl_queue_pop(pl_queue *q, void **item);
/* Like pl_queue_pop without waiting: DP_EBUSY when the queue is empty but still open. */
dp_status pl_queue_try_pop(pl_queue *q, void **item);
/* Waits at most ms milliseconds for an item (DP_EBUSY on timeout). */
dp_status pl_queue_pop_wait(pl_queue *q, void **item, int ms);
/* No more pushes: consumers drain what is left, then see DP_EOF. Idempotent. */
void pl_queue_close(pl_queue *q);
/* Stops everything: every current and future push/pop returns err (a negative status). The
 * first abort's status sticks. Items inside stay until pl_queue_free. */
void pl_queue_abort(pl_queue *q, dp_status err); /* q may be NULL */
size_t pl_queue_len(pl_queue *q);

#endif /* PL_QUEUE_H */
