/*
 * iofault.h - fault injection at the writer's I/O points, for the crash and disk-full tests
 * (docs/testing.md, the crash harness). Off unless the environment asks:
 *
 *   DOCPIPE_FAULT=OP:N:ACTION   OP: write | sync | rename | truncate | any
 *                               N: the N-th such operation of the process (1-based)
 *                               ACTION: kill (SIGKILL self, before the operation), ENOSPC, EIO
 *                               (the operation fails with that error, and so does every later one
 *                               of that kind, like a full disk; persist until the process ends)
 *
 * Every durable write docpipe does (sinks, checkpoint, status, ledger) passes through
 * pl_io_point first, so op mode of the kill -9 harness can stop the process between any two
 * of them.
 *
 *   DOCPIPE_PAUSE_AFTER_LISTING=PATH   the reader, once the inputs are listed, creates PATH and
 *                               waits while it exists (at most 60 s, or until a stop signal):
 *                               a test changes the folder between listing and reading.
 */
#ifndef PL_IOFAULT_H
#define PL_IOFAULT_H

#include "status.h"

/* DP_OK, or the injected error (filled into err with path) for this operation. */
dp_status pl_io_point(const char *op, const char *path, dp_err *err);
/* The pause point of DOCPIPE_PAUSE_AFTER_LISTING (nothing when it is not set). */
void pl_pause_after_listing(void);
/* Operations counted so far (tests print it to size op-mode sweeps). */
long pl_io_count(void);

#endif /* PL_IOFAULT_H */
