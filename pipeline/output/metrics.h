/*
 * metrics.h - the run's figures as a Prometheus text file (outputs.metrics), for
 * node_exporter's textfile collector: written atomically at every commit and at exit, so a
 * scrape never sees half a file. Each run rewrites it; the last successful run's time is
 * carried over from the previous file, so "no successful run in 26 h" can alert.
 */
#ifndef PL_METRICS_H
#define PL_METRICS_H

#include <stdbool.h>
#include <stdint.h>

#include "status.h"

typedef struct pl_metrics {
    const char *job;          /* the job label: the job file's name without .yaml */
    const char *shard;        /* "I/N" or NULL */
    uint64_t docs_ok, docs_failed, docs_skipped; /* this run */
    uint64_t requests, prompt_tokens, generated_tokens;
    uint64_t state_docs_ok, state_docs_failed;   /* every run of the state together */
    double start, end;        /* Unix seconds; end 0 while running */
    double seconds;           /* wall time so far */
    int exit_code;            /* -1 while running */
    double last_success;      /* Unix seconds of the last run that finished its listing (0: none) */
} pl_metrics;

dp_status pl_metrics_write(const char *path, const pl_metrics *m, dp_err *err);
/* docpipe_last_success_timestamp_seconds from an earlier file at path (0 when none). */
double pl_metrics_last_success(const char *path);

#endif /* PL_METRICS_H */
