/*
 * exit_codes.h - the process exit codes of docs/errors.md, the public contract with cron, systemd,
 * Slurm and Kubernetes. Only main() turns a status into one of these.
 */
#ifndef PL_EXIT_CODES_H
#define PL_EXIT_CODES_H

#include "status.h"

enum {
    PL_EXIT_OK = 0,          /* every request succeeded */
    PL_EXIT_PARTIAL = 3,     /* finished, some documents failed */
    PL_EXIT_USAGE = 64,      /* bad command line */
    PL_EXIT_DATAERR = 65,    /* job file invalid */
    PL_EXIT_NOINPUT = 66,    /* no input */
    PL_EXIT_SOFTWARE = 70,   /* internal failure: out of memory, a result the engine refused */
    PL_EXIT_OSERR = 71,      /* the system refused a thread or a process */
    PL_EXIT_CANTCREAT = 73,  /* cannot create output */
    PL_EXIT_IOERR = 74,      /* I/O error (fsync, disk full) */
    PL_EXIT_TEMPFAIL = 75,   /* interrupted or locked: run again to resume */
    PL_EXIT_CONFIG = 78,     /* model missing or invalid, fingerprint changed */
};

/* A file of the outputs or the state could not be created or written: the same situation
 * gives the same code wherever it happens (docs/errors.md). Permissions, and a file that is
 * someone else's, are 73; the storage failing (full, I/O error, fsync) is 74. */
static inline int pl_exit_for_write(dp_status st) {
    return st == DP_ENOMEM ? PL_EXIT_SOFTWARE : st == DP_EACCES || st == DP_EEXIST ? PL_EXIT_CANTCREAT : PL_EXIT_IOERR;
}

#endif /* PL_EXIT_CODES_H */
