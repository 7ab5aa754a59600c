/*
 * state.h - what the state directory holds between runs (docs/operations.md, what a run guarantees):
 *
 *   job.lock          flock'ed by the running process ("pid N" inside, for messages only)
 *   checkpoint.json   the commit record: fingerprints, every sink's committed size and the
 *                     sha256 of those bytes, counts, and a checksum of itself; replaced
 *                     atomically, its rename is the commit point
 *   ledger.jsonl      one line per finished document {path, sha256, status, records}; a sink
 *                     like the outputs, cut back to its committed size on resume
 *   model-hash.json   the model file's sha256 keyed by its size, mtime and inode (hashing a
 *                     2.7 GB file every night costs seconds)
 *
 * Every file read here is untrusted input: parsed strictly, errors name the file. A state that
 * was edited or damaged is detected (checksum, sink hashes) and refused, never acted on: acting
 * on it would cut committed results or process documents twice.
 */
#ifndef PL_STATE_H
#define PL_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

typedef struct pl_fingerprint {
    char model[65];     /* sha256 of the model file */
    char templates[65]; /* sha256 of system, template and reduce_template */
    char settings[65];  /* sha256 of everything else that changes results: generation, chunking, context */
} pl_fingerprint;

typedef struct pl_checkpoint {
    pl_fingerprint fp;
    char *results_path, *errors_path; /* absolute */
    bool gzip;
    uint64_t results_bytes, errors_bytes, ledger_bytes;
    /* sha256 (hex) of each sink's committed bytes; empty in a version 1 checkpoint (written
     * before docpipe recorded them), which is then trusted as it stands */
    char results_sha256[65], errors_sha256[65], ledger_sha256[65];
    /* outputs.intermediate (NULL when the job has none): path relative as results_path */
    char *inter_path;
    uint64_t inter_bytes;
    char inter_sha256[65];
    uint64_t docs_ok, docs_failed, records, errors; /* all runs together */
    int64_t runs;       /* runs started on this state */
    double work_seconds; /* time the runs spent working, all together (for the next run's ETA) */
    bool complete;      /* the last run finished its whole listing */
    uint64_t commits;   /* commits on this state; outputs.sqlite stores the checkpoint of each */
} pl_checkpoint;

/* DP_ENOENT when there is none; DP_EFORMAT (message names the file) when it is damaged:
 * not JSON, a field missing, or its checksum does not match its content. */
dp_status pl_checkpoint_read(const char *path, pl_checkpoint *c, dp_err *err);
dp_status pl_checkpoint_write(const char *path, const pl_checkpoint *c, dp_err *err);
/* The same from and to text (the database sink stores the checkpoint of its commit); name is
 * for messages. pl_checkpoint_json's text ends without a newline; free() it (NULL: no memory). */
dp_status pl_checkpoint_parse(const char *data, size_t len, const char *name, pl_checkpoint *c, dp_err *err);
char *pl_checkpoint_json(const pl_checkpoint *c);
void pl_checkpoint_free(pl_checkpoint *c);

/* The documents finished in earlier runs: (path, sha256) -> ok or failed. */
typedef struct pl_ledger pl_ledger;
typedef enum pl_ledger_status { PL_LEDGER_NONE = 0, PL_LEDGER_OK = 1, PL_LEDGER_FAILED = 2 } pl_ledger_status;

/* Reads the first `committed` bytes of path (the rest is uncommitted and ignored). With
 * sha256 (hex, non-empty), those bytes must hash to it (DP_EFORMAT otherwise). */
dp_status pl_ledger_load(const char *path, uint64_t committed, const char *sha256, pl_ledger **out, dp_err *err);
void pl_ledger_free(pl_ledger *l);
pl_ledger_status pl_ledger_get(const pl_ledger *l, const char *path, const char *sha256);
size_t pl_ledger_count(const pl_ledger *l, pl_ledger_status st);
/* The ledger line for a document (no newline); free() it. */
char *pl_ledger_line(const char *path, const char *sha256, bool ok, int64_t records, int64_t errors);

/* The shard count of STATE/manifest.json (written by `docpipe plan --shards N`); DP_ENOENT
 * when there is none. */
dp_status pl_manifest_shards(const char *path, uint32_t *n, dp_err *err);

/* The sha256 of a file's bytes (hex). */
dp_status pl_file_sha256(const char *path, char out[65], dp_err *err);
/* The sha256 of the model file, from state_dir's cache when size, mtime and inode still match. */
dp_status pl_model_sha256(const char *model_path, const char *state_dir, char out[65], dp_err *err);

#endif /* PL_STATE_H */
