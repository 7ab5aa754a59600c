/*
 * run.h - `docpipe run`, `plan` and `status`: a job file through the stages of docs/architecture.md.
 *
 *   reader ─► [queue] ─► chunker ─► [queue] ─► inference ─► [queue] ─► writer
 *
 * Each stage is a thread; the queues are bounded, so memory does not grow with the number of
 * documents. The main thread supervises: progress, stop signals, the exit code.
 */
#ifndef PL_RUN_H
#define PL_RUN_H

#include <stdbool.h>
#include <stdint.h>

typedef struct pl_run_opts {
    bool restart;       /* move old outputs and state aside, start clean */
    int device;         /* -1: the job's; else an dp_device */
    bool quiet;         /* no progress, only errors and the summary */
    int progress;       /* -1 auto (updating line on a terminal), 0 plain lines, 1 updating line */
    uint32_t shard_i, shard_n; /* --shard I/N (shard_n = 0: not given) */
    uint32_t shards;    /* --shards N: the count for JOB_COMPLETION_INDEX (0: from the manifest) */
    uint64_t mem;       /* --mem: memory budget for weights + KV cache + state (0: what is available) */
    bool retry_failed;  /* --retry-failed: documents that failed before are tried again */
    const char *model;  /* -m: instead of model.path (NULL: the job's) */
    uint32_t threads;   /* -t: instead of model.threads (0: the job's) */
    uint32_t context;   /* -c: instead of model.context (0: the job's) */
} pl_run_opts;

/* Runs the job; returns the exit code of docs/errors.md. */
int pl_run_job(const char *job_path, const pl_run_opts *o);
/* Lists, reads and chunks without generating; prints counts and an estimated time. shards > 0
 * also writes STATE/manifest.json assigning every document to one of that many shards. */
int pl_plan_job(const char *job_path, bool bench, uint32_t shards);
/* Combines the part-I-of-N outputs of a sharded run into the job's own output paths. */
int pl_merge_job(const char *job_path);
/* Done, failed, skipped and pending documents from the state folder, without the model. */
int pl_status_job(const char *job_path);

#endif /* PL_RUN_H */
