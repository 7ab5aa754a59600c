/*
 * sqlite_read.h - reading an outputs.sqlite database for retrieval (docpipe query): what it
 * was made with, its vectors, full-text matches and chunks. Read-only: a query never blocks the
 * nightly writer (WAL) and never changes the file.
 */
#ifndef PL_SQLITE_READ_H
#define PL_SQLITE_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

typedef struct pl_db_reader pl_db_reader;

typedef struct pl_db_meta {
    char task[16], pooling[16];
    char model_sha256[65];
    char *model_path;            /* as the job named it */
    uint64_t model_size;         /* with model_mtime: the file's identity when it was hashed */
    int64_t model_mtime;
    int32_t dim;
    bool normalized;
} pl_db_meta;

/* Opens path read-only: a docpipe database of this schema version (DP_EFORMAT otherwise, naming
 * what is wrong); *meta filled (free with pl_db_meta_free). */
dp_status pl_db_reader_open(const char *path, pl_db_reader **out, pl_db_meta *meta, dp_err *err);
void pl_db_reader_close(pl_db_reader *r);
void pl_db_meta_free(pl_db_meta *m);

/* Every vector of a live document (not marked deleted): rows[n * dim] and their chunk ids; free()
 * both. Vectors of another dimension are an error (a damaged file). */
dp_status pl_db_load_vectors(pl_db_reader *r, int32_t dim, float **rows, int64_t **ids, size_t *n, dp_err *err);
/* Chunks of live documents matching the words of text (any of them, FTS5 BM25 order), at most
 * limit; *ids malloc'ed (NULL and 0 when text has no word). */
dp_status pl_db_fts(pl_db_reader *r, const char *text, size_t limit, int64_t **ids, size_t *n, dp_err *err);

typedef struct pl_db_hit {
    char *path, *heading_path, *text; /* heading_path: the stored JSON array */
    int32_t chunk_index, line_start, line_end, page_start, page_end; /* pages 0: not paged */
} pl_db_hit;

dp_status pl_db_chunk_get(pl_db_reader *r, int64_t chunk_id, pl_db_hit *out, dp_err *err);
void pl_db_hit_free(pl_db_hit *h);

#endif /* PL_SQLITE_READ_H */
