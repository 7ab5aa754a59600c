/*
 * parallel.h - run a loop over [0, n) on several threads, in contiguous slices.
 *
 * For coarse, seconds-long jobs (quantizing, generating test weights): threads are created per
 * call. The inference kernels get a persistent pool of their own (engine/cpu/).
 */
#ifndef ENG_PARALLEL_H
#define ENG_PARALLEL_H

#include <stdint.h>

#include "status.h"

typedef void (*eng_range_fn)(void *ctx, int64_t lo, int64_t hi);

/* Calls fn(ctx, lo, hi) over disjoint slices covering [0, n). n_threads <= 1 runs inline.
 * Results must not depend on the slicing (each index is processed the same way). */
dp_status eng_parallel_for(int n_threads, int64_t n, eng_range_fn fn, void *ctx, dp_err *err);

#endif /* ENG_PARALLEL_H */
