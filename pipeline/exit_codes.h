/*
 * exit_codes.h - the process exit codes of design.md, the public contract with cron, systemd,
 * Slurm and Kubernetes. Only main() turns a status into one of these.
 */
#ifndef PL_EXIT_CODES_H
#define PL_EXIT_CODES_H

enum {
    PL_EXIT_OK = 0,          /* every request succeeded */
    PL_EXIT_PARTIAL = 3,     /* finished, some documents failed */
    PL_EXIT_USAGE = 64,      /* bad command line */
    PL_EXIT_DATAERR = 65,    /* job file invalid */
    PL_EXIT_NOINPUT = 66,    /* no input */
    PL_EXIT_SOFTWARE = 70,   /* internal failure: out of memory, a result the engine refused */
    PL_EXIT_CANTCREAT = 73,  /* cannot create output */
    PL_EXIT_IOERR = 74,      /* I/O error (fsync, disk full) */
    PL_EXIT_TEMPFAIL = 75,   /* interrupted or locked: run again to resume */
    PL_EXIT_CONFIG = 78,     /* model missing or invalid, fingerprint changed */
};

#endif /* PL_EXIT_CODES_H */
