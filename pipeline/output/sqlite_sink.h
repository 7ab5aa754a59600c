/*
 * sqlite_sink.h - outputs.sqlite: documents, chunks, embeddings and generation results in one
 * SQLite database that a retrieval system can query as it stands (docs/output.md, "The SQLite
 * database", is the schema's documentation; PRAGMA user_version is its version).
 *
 * Exactly once, like the JSONL sinks: everything written between two commits is one
 * transaction, and the transaction also stores the checkpoint it belongs to. The database's
 * COMMIT happens before checkpoint.json is replaced, so after a crash between the two the
 * database holds the newer checkpoint and the run adopts it (run.c): the database never holds
 * a document the checkpoint does not, nor misses one it does.
 *
 * Always current: a document is stored by path; storing it again (it changed) replaces its
 * chunks, vectors and results in the same transaction; pl_db_sweep removes (or marks) the
 * documents a complete run did not see.
 *
 *   pl_db_open(path, &info, 10000, &db, &err);
 *   pl_db_put_document(db, &doc, &id, &err); pl_db_put_chunk(db, id, &chunk, &err); ...
 *   pl_db_commit(db, checkpoint_json, &err);
 */
#ifndef PL_SQLITE_SINK_H
#define PL_SQLITE_SINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

#define PL_DB_SCHEMA_VERSION 1

typedef struct pl_db pl_db;

/* What the database is for: a database written by another embedding model (or for another
 * dimension) is refused, as vectors of two models cannot be compared. */
typedef struct pl_db_info {
    const char *model_sha256;  /* of the model file */
    const char *model_path;    /* as the job names it (docpipe query's default model) */
    uint64_t model_size;       /* with model_mtime: query trusts a file that still matches */
    int64_t model_mtime;
    const char *task;          /* "embed" or "generate" */
    int32_t dim;               /* embedding dimension (task embed), else 0 */
    const char *pooling;       /* "last", "mean", "cls" (task embed), else NULL */
    bool normalized;
} pl_db_info;

/* Opens (creating when absent) the database for writing: WAL mode, foreign keys on, every
 * commit durable (synchronous FULL). A new database gets the schema and info; an existing one
 * must have this schema version and, for an embedding job, the same model and dimension.
 * busy_ms: how long to wait for another process's lock. DP_EFORMAT (names the file and what
 * differs), DP_EBUSY (locked), DP_EIO. Nothing is changed when it refuses. */
dp_status pl_db_open(const char *path, const pl_db_info *info, int busy_ms, pl_db **out, dp_err *err);
/* The checkpoint stored by the last commit (a JSON text to free()), or NULL when none. */
dp_status pl_db_stored_checkpoint(pl_db *db, char **json, dp_err *err);

typedef struct pl_db_doc {
    const char *path;          /* meta.source_path */
    const char *sha256;        /* "" when not read */
    uint64_t size;
    const char *format;        /* (optional) */
    const char *error;         /* (optional) the document's error code: status "failed" */
    int32_t pages;             /* 0: not paged */
} pl_db_doc;

typedef struct pl_db_chunk {
    int32_t index;
    const char *text;
    size_t len;
    uint64_t byte_start, byte_end;
    int32_t line_start, line_end, page_start, page_end; /* pages 0: not paged */
    const char *heading_path;  /* a JSON array */
    int32_t tokens;
    const float *vec;          /* (optional) the chunk's embedding, dim floats */
    int32_t dim;
} pl_db_chunk;

typedef struct pl_db_result {
    const char *custom_id;
    int64_t chunk_id;          /* 0: not tied to one chunk (a reduce) */
    const char *stage;
    bool final;
    const char *content;       /* (optional) */
    size_t len;
    const char *finish_reason;
    const char *error;         /* (optional) the error code */
    int32_t prompt_tokens, completion_tokens;
} pl_db_result;

/* Stores a document (replacing the one at its path, with its chunks, vectors and results) in
 * the open transaction (one is begun when none is); *id its row. */
dp_status pl_db_put_document(pl_db *db, const pl_db_doc *d, int64_t *id, dp_err *err);
dp_status pl_db_put_chunk(pl_db *db, int64_t doc_id, const pl_db_chunk *c, int64_t *chunk_id, dp_err *err);
dp_status pl_db_put_result(pl_db *db, int64_t doc_id, const pl_db_result *r, dp_err *err);
/* A document this run listed but did not store (unchanged since an earlier run): kept by the sweep. */
dp_status pl_db_seen(pl_db *db, const char *path, dp_err *err);
/* After a complete listing: every document neither stored nor seen by this process is deleted
 * (with its chunks, vectors and results), or with keep marked status "deleted". *n: how many. */
dp_status pl_db_sweep(pl_db *db, bool keep, uint64_t *n, dp_err *err);
/* Commits the open transaction (none: an empty one) with the checkpoint it belongs to. */
dp_status pl_db_commit(pl_db *db, const char *checkpoint_json, dp_err *err);
/* Rolls back what is not committed and closes. */
void pl_db_close(pl_db *db);

#endif /* PL_SQLITE_SINK_H */
