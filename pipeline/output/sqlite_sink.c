/*
 * sqlite_sink.c - the SQLite sink (sqlite_sink.h). The schema below is documented in
 * docs/output.md; changing it means a new PL_DB_SCHEMA_VERSION.
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "iofault.h"
#include "platform.h"
#include "sqlite_sink.h"

static const char k_schema[] =
    "CREATE TABLE docpipe_meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;\n"
    "CREATE TABLE documents(\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  path TEXT NOT NULL UNIQUE,\n"
    "  sha256 TEXT NOT NULL,\n"
    "  size INTEGER NOT NULL,\n"
    "  format TEXT,\n"
    "  status TEXT NOT NULL CHECK (status IN ('ok', 'failed', 'deleted')),\n"
    "  error TEXT,\n"
    "  pages INTEGER,\n"
    "  updated_at TEXT NOT NULL);\n"
    "CREATE TABLE chunks(\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  document_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,\n"
    "  chunk_index INTEGER NOT NULL,\n"
    "  text TEXT NOT NULL,\n"
    "  byte_start INTEGER NOT NULL, byte_end INTEGER NOT NULL,\n"
    "  line_start INTEGER NOT NULL, line_end INTEGER NOT NULL,\n"
    "  page_start INTEGER, page_end INTEGER,\n"
    "  heading_path TEXT NOT NULL,\n"
    "  tokens INTEGER NOT NULL,\n"
    "  UNIQUE(document_id, chunk_index));\n"
    "CREATE TABLE embeddings(\n"
    "  chunk_id INTEGER PRIMARY KEY REFERENCES chunks(id) ON DELETE CASCADE,\n"
    "  model_sha256 TEXT NOT NULL,\n"
    "  dim INTEGER NOT NULL,\n"
    "  vector BLOB NOT NULL CHECK (length(vector) = 4 * dim));\n"
    "CREATE TABLE results(\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  document_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,\n"
    "  chunk_id INTEGER REFERENCES chunks(id) ON DELETE CASCADE,\n"
    "  custom_id TEXT NOT NULL UNIQUE,\n"
    "  stage TEXT NOT NULL,\n"
    "  final INTEGER NOT NULL,\n"
    "  content TEXT,\n"
    "  finish_reason TEXT,\n"
    "  error TEXT,\n"
    "  prompt_tokens INTEGER, completion_tokens INTEGER);\n"
    "CREATE INDEX chunks_by_document ON chunks(document_id);\n"
    "CREATE INDEX results_by_document ON results(document_id);\n"
    "CREATE VIRTUAL TABLE chunks_fts USING fts5(text, content='chunks', content_rowid='id');\n"
    "CREATE TRIGGER chunks_fts_insert AFTER INSERT ON chunks BEGIN\n"
    "  INSERT INTO chunks_fts(rowid, text) VALUES (new.id, new.text);\n"
    "END;\n"
    "CREATE TRIGGER chunks_fts_delete AFTER DELETE ON chunks BEGIN\n"
    "  INSERT INTO chunks_fts(chunks_fts, rowid, text) VALUES ('delete', old.id, old.text);\n"
    "END;\n";

enum { S_DEL_DOC, S_INS_DOC, S_SEEN, S_INS_CHUNK, S_INS_EMB, S_INS_RES, S_SET_META, S_COUNT };
static const char *const k_stmt[S_COUNT] = {
    "DELETE FROM documents WHERE path = ?1",
    "INSERT INTO documents(path, sha256, size, format, status, error, pages, updated_at) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))",
    "INSERT OR IGNORE INTO temp.seen(path) VALUES (?1)",
    "INSERT INTO chunks(document_id, chunk_index, text, byte_start, byte_end, line_start, line_end, page_start, "
    "page_end, heading_path, tokens) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    "INSERT INTO embeddings(chunk_id, model_sha256, dim, vector) VALUES (?1, ?2, ?3, ?4)",
    "INSERT INTO results(document_id, chunk_id, custom_id, stage, final, content, finish_reason, error, "
    "prompt_tokens, completion_tokens) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    "INSERT OR REPLACE INTO docpipe_meta(key, value) VALUES (?1, ?2)",
};

struct pl_db {
    sqlite3 *db;
    char *path;
    char model_sha256[65];
    sqlite3_stmt *st[S_COUNT];
    bool in_tx;
    float *le;              /* scratch: a vector as little-endian bytes */
    size_t le_cap;
};

static dp_status db_fail(pl_db *d, dp_err *err, const char *what) {
    const int code = sqlite3_extended_errcode(d->db);
    const int prim = code & 0xff;
    const dp_status st = prim == SQLITE_BUSY || prim == SQLITE_LOCKED ? DP_EBUSY
                         : prim == SQLITE_FULL                        ? DP_ENOSPC
                         : prim == SQLITE_NOMEM                       ? DP_ENOMEM
                         : prim == SQLITE_CORRUPT || prim == SQLITE_NOTADB ? DP_EFORMAT
                                                                          : DP_EIO;
    if (st == DP_EBUSY)
        return dp_err_set(err, st, "%s: %s: the database is locked by another process (waited for it; close the "
                          "program that holds it, e.g. an open sqlite3 transaction)", d->path, what);
    return dp_err_set(err, st, "%s: %s: %s", d->path, what, sqlite3_errmsg(d->db));
}

static dp_status exec(pl_db *d, const char *sql, dp_err *err) {
    if (sqlite3_exec(d->db, sql, NULL, NULL, NULL) != SQLITE_OK) return db_fail(d, err, sql);
    return DP_OK;
}

/* One value of docpipe_meta (malloc'ed), NULL when absent. */
static char *meta_get(pl_db *d, const char *key) {
    sqlite3_stmt *s = NULL;
    char *v = NULL;
    if (sqlite3_prepare_v2(d->db, "SELECT value FROM docpipe_meta WHERE key = ?1", -1, &s, NULL) == SQLITE_OK) {
        sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
        if (sqlite3_step(s) == SQLITE_ROW && sqlite3_column_text(s, 0))
            v = strdup((const char *)sqlite3_column_text(s, 0));
    }
    sqlite3_finalize(s);
    return v;
}

static dp_status meta_set(pl_db *d, const char *key, const char *value, dp_err *err) {
    sqlite3_stmt *s = d->st[S_SET_META];
    sqlite3_reset(s);
    sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, value, -1, SQLITE_STATIC);
    return sqlite3_step(s) == SQLITE_DONE ? DP_OK : db_fail(d, err, "writing docpipe_meta");
}

static int user_version(pl_db *d) {
    sqlite3_stmt *s = NULL;
    int v = -1;
    if (sqlite3_prepare_v2(d->db, "PRAGMA user_version", -1, &s, NULL) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
        v = sqlite3_column_int(s, 0);
    sqlite3_finalize(s);
    return v;
}

static bool has_tables(pl_db *d) {
    sqlite3_stmt *s = NULL;
    bool any = false;
    if (sqlite3_prepare_v2(d->db, "SELECT 1 FROM sqlite_schema LIMIT 1", -1, &s, NULL) == SQLITE_OK)
        any = sqlite3_step(s) == SQLITE_ROW;
    sqlite3_finalize(s);
    return any;
}

/* A new database: the schema and what it is for, in one transaction. */
static dp_status create(pl_db *d, const pl_db_info *in, dp_err *err) {
    dp_status st = exec(d, "BEGIN IMMEDIATE", err);
    if (st) return st;
    char v[64];
    snprintf(v, sizeof(v), "PRAGMA user_version = %d", PL_DB_SCHEMA_VERSION);
    if ((st = exec(d, k_schema, err)) || (st = exec(d, v, err))) goto fail;
    if (sqlite3_prepare_v2(d->db, k_stmt[S_SET_META], -1, &d->st[S_SET_META], NULL) != SQLITE_OK) {
        st = db_fail(d, err, "preparing");
        goto fail;
    }
    char dim[16], size[24], mtime[24];
    snprintf(dim, sizeof(dim), "%d", in->dim);
    snprintf(size, sizeof(size), "%llu", (unsigned long long)in->model_size);
    snprintf(mtime, sizeof(mtime), "%lld", (long long)in->model_mtime);
    if ((st = meta_set(d, "task", in->task, err)) || (st = meta_set(d, "model_sha256", in->model_sha256, err)) ||
        (st = meta_set(d, "model_path", in->model_path, err)) || (st = meta_set(d, "model_size", size, err)) ||
        (st = meta_set(d, "model_mtime", mtime, err)) || (st = meta_set(d, "dimension", dim, err)) ||
        (in->pooling && (st = meta_set(d, "pooling", in->pooling, err))) ||
        (st = meta_set(d, "normalized", in->normalized ? "1" : "0", err)) || (st = exec(d, "COMMIT", err)))
        goto fail;
    return DP_OK;
fail:
    sqlite3_exec(d->db, "ROLLBACK", NULL, NULL, NULL);
    return st;
}

/* An existing database: this schema, and for vectors the same model and dimension. */
static dp_status check(pl_db *d, const pl_db_info *in, dp_err *err) {
    const int v = user_version(d);
    if (v != PL_DB_SCHEMA_VERSION)
        return dp_err_set(err, DP_EFORMAT, "%s: schema version %d, this docpipe writes version %d (a database of "
                          "another docpipe version or another program; give outputs.sqlite a new file)", d->path, v,
                          PL_DB_SCHEMA_VERSION);
    char *task = meta_get(d, "task"), *model = meta_get(d, "model_sha256"), *dim = meta_get(d, "dimension");
    dp_status st = DP_OK;
    if (!task || !model || !dim)
        st = dp_err_set(err, DP_EFORMAT, "%s: not a docpipe database (docpipe_meta lacks task, model_sha256 or "
                        "dimension)", d->path);
    else if (strcmp(task, in->task))
        st = dp_err_set(err, DP_EFORMAT, "%s: written by a task: %s job, this job is task: %s (use another file)",
                        d->path, task, in->task);
    else if (!strcmp(in->task, "embed") && (strcmp(model, in->model_sha256) || atoi(dim) != in->dim))
        st = dp_err_set(err, DP_EFORMAT, "%s: its vectors come from another embedding model (sha256 %.16s..., "
                        "dimension %s; this model: %.16s..., dimension %d), and vectors of two models cannot be "
                        "compared: re-embed into a new file, or use the model it was made with", d->path, model, dim,
                        in->model_sha256, in->dim);
    free(task);
    free(model);
    free(dim);
    return st;
}

dp_status pl_db_open(const char *path, const pl_db_info *info, int busy_ms, pl_db **out, dp_err *err) {
    *out = NULL;
    pl_db *d = calloc(1, sizeof(*d));
    if (!d || !(d->path = strdup(path))) {
        free(d);
        return dp_err_set(err, DP_ENOMEM, "out of memory");
    }
    snprintf(d->model_sha256, sizeof(d->model_sha256), "%s", info->model_sha256);
    dp_status st = DP_OK;
    if (sqlite3_open_v2(path, &d->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL) !=
        SQLITE_OK) {
        st = d->db ? db_fail(d, err, "cannot open") : dp_err_set(err, DP_ENOMEM, "out of memory");
        goto fail;
    }
    sqlite3_busy_timeout(d->db, busy_ms);
    sqlite3_extended_result_codes(d->db, 1);
    /* WAL: readers (docpipe query, a search service) never block the nightly writer, nor it them */
    if ((st = exec(d, "PRAGMA journal_mode = WAL", err)) || (st = exec(d, "PRAGMA synchronous = FULL", err)) ||
        (st = exec(d, "PRAGMA foreign_keys = ON", err)))
        goto fail;
    if (!has_tables(d) && user_version(d) == 0) st = create(d, info, err);
    else st = check(d, info, err);
    /* the write lock, once, now: a database another process holds is refused before any work */
    if (!st && !(st = exec(d, "BEGIN IMMEDIATE", err))) st = exec(d, "COMMIT", err);
    if (st) goto fail;
    if ((st = exec(d, "CREATE TEMP TABLE seen(path TEXT PRIMARY KEY) WITHOUT ROWID", err))) goto fail;
    for (int i = 0; i < S_COUNT; i++)
        if (!d->st[i] && sqlite3_prepare_v3(d->db, k_stmt[i], -1, SQLITE_PREPARE_PERSISTENT, &d->st[i], NULL) !=
                             SQLITE_OK) {
            st = db_fail(d, err, "preparing statements");
            goto fail;
        }
    *out = d;
    return DP_OK;
fail:
    pl_db_close(d);
    return st;
}

dp_status pl_db_stored_checkpoint(pl_db *db, char **json, dp_err *err) {
    (void)err;
    *json = meta_get(db, "checkpoint");
    return DP_OK;
}

static dp_status begin(pl_db *d, dp_err *err) {
    if (d->in_tx) return DP_OK;
    dp_status st = exec(d, "BEGIN IMMEDIATE", err);
    d->in_tx = !st;
    return st;
}

static void bind_text_or_null(sqlite3_stmt *s, int i, const char *t) {
    if (t) sqlite3_bind_text(s, i, t, -1, SQLITE_STATIC);
    else sqlite3_bind_null(s, i);
}

static dp_status step(pl_db *d, sqlite3_stmt *s, const char *what, dp_err *err) {
    const int rc = sqlite3_step(s);
    sqlite3_reset(s);
    return rc == SQLITE_DONE ? DP_OK : db_fail(d, err, what);
}

dp_status pl_db_put_document(pl_db *d, const pl_db_doc *doc, int64_t *id, dp_err *err) {
    dp_status st = begin(d, err);
    if (st) return st;
    sqlite3_stmt *s = d->st[S_DEL_DOC]; /* a changed document: its old chunks, vectors, results go with it */
    sqlite3_bind_text(s, 1, doc->path, -1, SQLITE_STATIC);
    if ((st = step(d, s, "replacing a document", err))) return st;
    s = d->st[S_INS_DOC];
    sqlite3_bind_text(s, 1, doc->path, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, doc->sha256 ? doc->sha256 : "", -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, (sqlite3_int64)doc->size);
    bind_text_or_null(s, 4, doc->format);
    sqlite3_bind_text(s, 5, doc->error ? "failed" : "ok", -1, SQLITE_STATIC);
    bind_text_or_null(s, 6, doc->error);
    if (doc->pages) sqlite3_bind_int(s, 7, doc->pages);
    else sqlite3_bind_null(s, 7);
    if ((st = step(d, s, "storing a document", err))) return st;
    *id = sqlite3_last_insert_rowid(d->db);
    return pl_db_seen(d, doc->path, err);
}

dp_status pl_db_put_chunk(pl_db *d, int64_t doc_id, const pl_db_chunk *c, int64_t *chunk_id, dp_err *err) {
    sqlite3_stmt *s = d->st[S_INS_CHUNK];
    sqlite3_bind_int64(s, 1, doc_id);
    sqlite3_bind_int(s, 2, c->index);
    sqlite3_bind_text(s, 3, c->text ? c->text : "", (int)c->len, SQLITE_STATIC);
    sqlite3_bind_int64(s, 4, (sqlite3_int64)c->byte_start);
    sqlite3_bind_int64(s, 5, (sqlite3_int64)c->byte_end);
    sqlite3_bind_int(s, 6, c->line_start);
    sqlite3_bind_int(s, 7, c->line_end);
    if (c->page_start) sqlite3_bind_int(s, 8, c->page_start), sqlite3_bind_int(s, 9, c->page_end);
    else sqlite3_bind_null(s, 8), sqlite3_bind_null(s, 9);
    sqlite3_bind_text(s, 10, c->heading_path ? c->heading_path : "[]", -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 11, c->tokens);
    dp_status st = step(d, s, "storing a chunk", err);
    if (st) return st;
    *chunk_id = sqlite3_last_insert_rowid(d->db);
    if (!c->vec) return DP_OK;
    /* float32 little-endian, whatever the host: the layout sqlite-vec and numpy.frombuffer read */
    const size_t n = (size_t)c->dim;
    if (n > d->le_cap) {
        float *p = realloc(d->le, n * sizeof(float));
        if (!p) return dp_err_set(err, DP_ENOMEM, "out of memory");
        d->le = p, d->le_cap = n;
    }
    uint8_t *b = (uint8_t *)d->le;
    for (size_t k = 0; k < n; k++) {
        uint32_t u;
        memcpy(&u, &c->vec[k], 4);
        b[4 * k] = (uint8_t)u, b[4 * k + 1] = (uint8_t)(u >> 8), b[4 * k + 2] = (uint8_t)(u >> 16),
        b[4 * k + 3] = (uint8_t)(u >> 24);
    }
    s = d->st[S_INS_EMB];
    sqlite3_bind_int64(s, 1, *chunk_id);
    sqlite3_bind_text(s, 2, d->model_sha256, -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 3, c->dim);
    sqlite3_bind_blob(s, 4, b, (int)(4 * n), SQLITE_STATIC);
    return step(d, s, "storing a vector", err);
}

dp_status pl_db_put_result(pl_db *d, int64_t doc_id, const pl_db_result *r, dp_err *err) {
    sqlite3_stmt *s = d->st[S_INS_RES];
    sqlite3_bind_int64(s, 1, doc_id);
    if (r->chunk_id) sqlite3_bind_int64(s, 2, r->chunk_id);
    else sqlite3_bind_null(s, 2);
    sqlite3_bind_text(s, 3, r->custom_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 4, r->stage, -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 5, r->final);
    if (r->content) sqlite3_bind_text(s, 6, r->content, (int)r->len, SQLITE_STATIC);
    else sqlite3_bind_null(s, 6);
    bind_text_or_null(s, 7, r->finish_reason);
    bind_text_or_null(s, 8, r->error);
    sqlite3_bind_int(s, 9, r->prompt_tokens);
    sqlite3_bind_int(s, 10, r->completion_tokens);
    return step(d, s, "storing a result", err);
}

dp_status pl_db_seen(pl_db *d, const char *path, dp_err *err) {
    sqlite3_stmt *s = d->st[S_SEEN];
    sqlite3_bind_text(s, 1, path, -1, SQLITE_STATIC);
    return step(d, s, "recording a document", err);
}

dp_status pl_db_sweep(pl_db *d, bool keep, uint64_t *n, dp_err *err) {
    *n = 0;
    dp_status st = begin(d, err);
    if (st) return st;
    const char *sql = keep ? "UPDATE documents SET status = 'deleted', updated_at = strftime('%Y-%m-%dT%H:%M:%SZ', "
                             "'now') WHERE status != 'deleted' AND path NOT IN (SELECT path FROM temp.seen)"
                           : "DELETE FROM documents WHERE path NOT IN (SELECT path FROM temp.seen)";
    if ((st = exec(d, sql, err))) return st;
    *n = (uint64_t)sqlite3_changes(d->db);
    return DP_OK;
}

dp_status pl_db_commit(pl_db *d, const char *checkpoint_json, dp_err *err) {
    dp_status st = begin(d, err);
    if (!st && checkpoint_json) st = meta_set(d, "checkpoint", checkpoint_json, err);
    if (!st) st = pl_io_point("sync", d->path, err); /* the crash and disk-full harnesses stop here */
    if (!st) st = exec(d, "COMMIT", err);
    if (st) { /* nothing of this transaction stays: the checkpoint on disk still describes the database */
        sqlite3_exec(d->db, "ROLLBACK", NULL, NULL, NULL);
    }
    d->in_tx = false;
    return st;
}

void pl_db_close(pl_db *d) {
    if (!d) return;
    for (int i = 0; i < S_COUNT; i++) sqlite3_finalize(d->st[i]);
    if (d->db) {
        if (d->in_tx) sqlite3_exec(d->db, "ROLLBACK", NULL, NULL, NULL);
        sqlite3_close(d->db);
    }
    free(d->le);
    free(d->path);
    free(d);
}
