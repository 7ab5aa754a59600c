/*
 * exit_codes.h - how a command ended, and the one table that turns that into the process exit
 * code of docs/errors.md (exit_codes.c), the public contract with cron, systemd, Slurm and
 * Kubernetes.
 *
 * Commands, the run and its stages return and compare outcomes (pl_exit) and never write an
 * exit code's number; main() turns the outcome into the number with pl_exit_code(), as do the
 * two places that must report the number itself (the run's summary line and the metrics
 * file) and the signal handler's hard exit. The rules from a failed status to an outcome that
 * hold wherever the status arises live here too (pl_exit_for_write).
 */
#ifndef PL_EXIT_CODES_H
#define PL_EXIT_CODES_H

#include "status.h"

typedef enum pl_exit {
    PL_EXIT_OK = 0,    /* every request succeeded (must stay 0: `if (rc)` means "failed") */
    PL_EXIT_PARTIAL,   /* finished, some documents failed */
    PL_EXIT_USAGE,     /* bad command line */
    PL_EXIT_DATAERR,   /* job file (or other input data) invalid, state damaged */
    PL_EXIT_NOINPUT,   /* no input */
    PL_EXIT_SOFTWARE,  /* internal failure: out of memory, a result the engine refused */
    PL_EXIT_OSERR,     /* the system refused a thread or a process */
    PL_EXIT_CANTCREAT, /* cannot create output */
    PL_EXIT_IOERR,     /* I/O error (fsync, disk full) */
    PL_EXIT_TEMPFAIL,  /* interrupted or locked: run again to resume */
    PL_EXIT_CONFIG,    /* model missing or invalid, fingerprint changed */
    PL_EXIT_COUNT
} pl_exit;

/* The process exit code of an outcome (an unknown value is an internal failure, 70). */
int pl_exit_code(int outcome);

/* A file of the outputs or the state could not be created or written: the same situation
 * gives the same code wherever it happens (docs/errors.md). Permissions, and a file that is
 * someone else's, are 73; the storage failing (full, I/O error, fsync) is 74. */
static inline int pl_exit_for_write(dp_status st) {
    return st == DP_ENOMEM                    ? PL_EXIT_SOFTWARE
           : st == DP_EACCES || st == DP_EEXIST ? PL_EXIT_CANTCREAT
           : st == DP_EBUSY                     ? PL_EXIT_TEMPFAIL /* a database another process holds: later */
                                                : PL_EXIT_IOERR;
}

#endif /* PL_EXIT_CODES_H */
