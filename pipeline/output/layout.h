/*
 * layout.h - the names of everything a job keeps on disk, spelled in this one place: its state
 * folder (state.h says what each file holds) and its output files, for a whole run or for one
 * shard of a sharded run (docs/operations.md):
 *
 *   STATE/job.lock, checkpoint.json, ledger.jsonl, model-hash.json   a whole run
 *   STATE/manifest.json                                             documents -> shards (plan --shards)
 *   STATE/shard-I-of-N/job.lock, checkpoint.json, ...               shard I's own state
 *   OUT/results.jsonl[.gz], OUT/errors.jsonl, OUT/status.json        a whole run (OUT: outputs.jsonl's folder)
 *   OUT/part-I-of-N.jsonl[.gz], part-I-of-N.errors.jsonl, part-I-of-N.status.json   shard I's
 *   METRICS_DIR/[part-I-of-N.]NAME                                  outputs.metrics
 *   INTERMEDIATE[.gz]                                               outputs.intermediate (whole runs)
 */
#ifndef PL_LAYOUT_H
#define PL_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

typedef struct pl_layout {
    char *state_dir;  /* STATE, or STATE/shard-I-of-N */
    char *lock, *checkpoint, *ledger;
    char *manifest;   /* the job's STATE/manifest.json (also for a shard) */
    char *results, *errors, *status;
    char *metrics;      /* NULL without outputs.metrics */
    char *intermediate; /* NULL without outputs.intermediate */
} pl_layout;

/* The job's outputs as its file names them (outputs.jsonl, gzip, metrics, intermediate). */
typedef struct pl_layout_job {
    const char *state_dir;
    const char *jsonl;
    bool gzip;
    const char *metrics;      /* or NULL */
    const char *intermediate; /* or NULL */
} pl_layout_job;

/* The paths of the whole run (shard_n 0) or of shard shard_i of shard_n. DP_ENOMEM only. */
dp_status pl_layout_make(const pl_layout_job *j, uint32_t shard_i, uint32_t shard_n, pl_layout *out);
void pl_layout_free(pl_layout *l);

/* One of those paths into buf (cap bytes): for commands that read a single file. DP_ENOMEM, or
 * DP_ERANGE when buf is too small. */
typedef enum pl_layout_file {
    PL_FILE_STATE_DIR, PL_FILE_LOCK, PL_FILE_CHECKPOINT, PL_FILE_LEDGER, PL_FILE_MANIFEST,
    PL_FILE_RESULTS, PL_FILE_ERRORS, PL_FILE_STATUS,
} pl_layout_file;
dp_status pl_layout_path(const pl_layout_job *j, uint32_t shard_i, uint32_t shard_n, pl_layout_file f, char *buf,
                         size_t cap);

/* The model file's cached hash in a state folder (state.c). */
#define PL_MODEL_HASH_FILE "model-hash.json"

#endif /* PL_LAYOUT_H */
