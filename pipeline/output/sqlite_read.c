/*
 * sqlite_read.c - the read side of outputs.sqlite (sqlite_read.h).
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dynbuf.h"
#include "sqlite_read.h"
#include "sqlite_sink.h"

struct pl_db_reader {
    sqlite3 *db;
    char *path;
};

static dp_status rd_fail(pl_db_reader *r, dp_err *err, const char *what) {
    return dp_err_set(err, DP_EIO, "%s: %s: %s", r->path, what, sqlite3_errmsg(r->db));
}

/* One docpipe_meta value into out (cap bytes); false when absent. */
static bool meta(pl_db_reader *r, const char *key, char *out, size_t cap) {
    sqlite3_stmt *s = NULL;
    bool ok = false;
    if (sqlite3_prepare_v2(r->db, "SELECT value FROM docpipe_meta WHERE key = ?1", -1, &s, NULL) == SQLITE_OK) {
        sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
        if (sqlite3_step(s) == SQLITE_ROW && sqlite3_column_text(s, 0)) {
            snprintf(out, cap, "%s", (const char *)sqlite3_column_text(s, 0));
            ok = true;
        }
    }
    sqlite3_finalize(s);
    return ok;
}

dp_status pl_db_reader_open(const char *path, pl_db_reader **out, pl_db_meta *m, dp_err *err) {
    *out = NULL;
    memset(m, 0, sizeof(*m));
    pl_db_reader *r = calloc(1, sizeof(*r));
    if (!r || !(r->path = strdup(path))) {
        free(r);
        return dp_err_set(err, DP_ENOMEM, "out of memory");
    }
    dp_status st = DP_OK;
    if (sqlite3_open_v2(path, &r->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
        st = dp_err_set(err, DP_ENOENT, "%s: cannot open: %s", path, r->db ? sqlite3_errmsg(r->db) : "out of memory");
        goto fail;
    }
    sqlite3_busy_timeout(r->db, 5000);
    sqlite3_stmt *s = NULL;
    int version = -1;
    if (sqlite3_prepare_v2(r->db, "PRAGMA user_version", -1, &s, NULL) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
        version = sqlite3_column_int(s, 0);
    sqlite3_finalize(s);
    char path_buf[4096], size[32] = "0", mtime[32] = "0", dim[16] = "0", norm[8] = "0";
    if (version < 0) {
        st = dp_err_set(err, DP_EFORMAT, "%s: not an SQLite database", path);
    } else if (version != PL_DB_SCHEMA_VERSION) {
        st = dp_err_set(err, DP_EFORMAT, "%s: schema version %d, this docpipe reads version %d", path, version,
                        PL_DB_SCHEMA_VERSION);
    } else if (!meta(r, "task", m->task, sizeof(m->task)) || !meta(r, "model_sha256", m->model_sha256, 65) ||
               !meta(r, "model_path", path_buf, sizeof(path_buf)) || !meta(r, "dimension", dim, sizeof(dim))) {
        st = dp_err_set(err, DP_EFORMAT, "%s: not a docpipe database (docpipe_meta is incomplete)", path);
    } else {
        meta(r, "pooling", m->pooling, sizeof(m->pooling));
        meta(r, "model_size", size, sizeof(size));
        meta(r, "model_mtime", mtime, sizeof(mtime));
        meta(r, "normalized", norm, sizeof(norm));
        m->model_path = strdup(path_buf);
        m->model_size = strtoull(size, NULL, 10);
        m->model_mtime = strtoll(mtime, NULL, 10);
        m->dim = atoi(dim);
        m->normalized = !strcmp(norm, "1");
        if (!m->model_path) st = dp_err_set(err, DP_ENOMEM, "out of memory");
    }
    if (st) goto fail;
    *out = r;
    return DP_OK;
fail:
    pl_db_meta_free(m);
    pl_db_reader_close(r);
    return st;
}

void pl_db_meta_free(pl_db_meta *m) {
    free(m->model_path);
    m->model_path = NULL;
}

void pl_db_reader_close(pl_db_reader *r) {
    if (!r) return;
    sqlite3_close(r->db);
    free(r->path);
    free(r);
}

dp_status pl_db_load_vectors(pl_db_reader *r, int32_t dim, float **rows, int64_t **ids, size_t *n, dp_err *err) {
    *rows = NULL, *ids = NULL, *n = 0;
    sqlite3_stmt *s = NULL;
    int64_t count = 0;
    if (sqlite3_prepare_v2(r->db, "SELECT count(*) FROM embeddings e JOIN chunks c ON c.id = e.chunk_id JOIN "
                                  "documents d ON d.id = c.document_id WHERE d.status != 'deleted'", -1, &s, NULL) !=
            SQLITE_OK || sqlite3_step(s) != SQLITE_ROW) {
        sqlite3_finalize(s);
        return rd_fail(r, err, "counting vectors");
    }
    count = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    float *v = malloc((size_t)(count ? count : 1) * (size_t)dim * sizeof(float));
    int64_t *id = malloc((size_t)(count ? count : 1) * sizeof(int64_t));
    if (!v || !id) {
        free(v);
        free(id);
        return dp_err_set(err, DP_ENOMEM, "out of memory for %lld vectors", (long long)count);
    }
    if (sqlite3_prepare_v2(r->db, "SELECT e.chunk_id, e.vector FROM embeddings e JOIN chunks c ON c.id = e.chunk_id "
                                  "JOIN documents d ON d.id = c.document_id WHERE d.status != 'deleted'", -1, &s,
                           NULL) != SQLITE_OK) {
        free(v);
        free(id);
        return rd_fail(r, err, "reading vectors");
    }
    size_t k = 0;
    dp_status st = DP_OK;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW && k < (size_t)count) {
        const int bytes = sqlite3_column_bytes(s, 1);
        const uint8_t *b = sqlite3_column_blob(s, 1);
        if (bytes != 4 * dim || !b) {
            st = dp_err_set(err, DP_EFORMAT, "%s: chunk %lld has a vector of %d bytes, not %d (a damaged database)",
                            r->path, (long long)sqlite3_column_int64(s, 0), bytes, 4 * dim);
            break;
        }
        float *row = v + k * (size_t)dim;
        const uint32_t one = 1;
        uint8_t host_le;
        memcpy(&host_le, &one, 1);
        if (host_le) memcpy(row, b, (size_t)bytes); /* stored little-endian */
        else for (int32_t i = 0; i < dim; i++) {
            const uint32_t u = (uint32_t)b[4 * i] | (uint32_t)b[4 * i + 1] << 8 | (uint32_t)b[4 * i + 2] << 16 |
                               (uint32_t)b[4 * i + 3] << 24;
            memcpy(&row[i], &u, 4);
        }
        id[k++] = sqlite3_column_int64(s, 0);
    }
    if (!st && rc != SQLITE_DONE && rc != SQLITE_ROW) st = rd_fail(r, err, "reading vectors");
    sqlite3_finalize(s);
    if (st) {
        free(v);
        free(id);
        return st;
    }
    *rows = v, *ids = id, *n = k;
    return DP_OK;
}

dp_status pl_db_fts(pl_db_reader *r, const char *text, size_t limit, int64_t **ids, size_t *n, dp_err *err) {
    *ids = NULL, *n = 0;
    /* the words, each quoted (FTS5 syntax in a question is not meant as syntax), any of them */
    dp_buf q;
    dp_buf_init(&q, 1 << 20);
    for (const unsigned char *p = (const unsigned char *)text; *p;) {
        while (*p && !(*p >= 0x80 || (*p >= '0' && *p <= '9') || ((*p | 0x20) >= 'a' && (*p | 0x20) <= 'z'))) p++;
        const unsigned char *a = p;
        while (*p >= 0x80 || (*p >= '0' && *p <= '9') || ((*p | 0x20) >= 'a' && (*p | 0x20) <= 'z')) p++;
        if (p > a) {
            if (q.len) dp_buf_append(&q, " OR ", 4);
            dp_buf_append(&q, "\"", 1);
            dp_buf_append(&q, a, (size_t)(p - a));
            dp_buf_append(&q, "\"", 1);
        }
    }
    if (!q.len) {
        dp_buf_free(&q);
        return DP_OK;
    }
    dp_buf_append(&q, "", 1);
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(r->db, "SELECT f.rowid FROM chunks_fts f JOIN chunks c ON c.id = f.rowid JOIN documents d "
                                  "ON d.id = c.document_id WHERE chunks_fts MATCH ?1 AND d.status != 'deleted' "
                                  "ORDER BY f.rank LIMIT ?2", -1, &s, NULL) != SQLITE_OK) {
        dp_buf_free(&q);
        return rd_fail(r, err, "full-text search");
    }
    sqlite3_bind_text(s, 1, (const char *)q.data, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, (sqlite3_int64)limit);
    int64_t *v = malloc((limit ? limit : 1) * sizeof(int64_t));
    dp_status st = v ? DP_OK : dp_err_set(err, DP_ENOMEM, "out of memory");
    int rc = SQLITE_DONE;
    while (!st && (rc = sqlite3_step(s)) == SQLITE_ROW && *n < limit) v[(*n)++] = sqlite3_column_int64(s, 0);
    if (!st && rc != SQLITE_DONE && rc != SQLITE_ROW) st = rd_fail(r, err, "full-text search");
    sqlite3_finalize(s);
    dp_buf_free(&q);
    if (st) {
        free(v);
        *n = 0;
        return st;
    }
    *ids = v;
    return DP_OK;
}

static char *col_dup(sqlite3_stmt *s, int i) {
    const unsigned char *t = sqlite3_column_text(s, i);
    return strdup(t ? (const char *)t : "");
}

dp_status pl_db_chunk_get(pl_db_reader *r, int64_t chunk_id, pl_db_hit *h, dp_err *err) {
    memset(h, 0, sizeof(*h));
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(r->db, "SELECT d.path, c.heading_path, c.text, c.chunk_index, c.line_start, c.line_end, "
                                  "coalesce(c.page_start, 0), coalesce(c.page_end, 0) FROM chunks c JOIN documents d "
                                  "ON d.id = c.document_id WHERE c.id = ?1", -1, &s, NULL) != SQLITE_OK)
        return rd_fail(r, err, "reading a chunk");
    sqlite3_bind_int64(s, 1, chunk_id);
    dp_status st = DP_OK;
    if (sqlite3_step(s) == SQLITE_ROW) {
        h->path = col_dup(s, 0), h->heading_path = col_dup(s, 1), h->text = col_dup(s, 2);
        h->chunk_index = sqlite3_column_int(s, 3);
        h->line_start = sqlite3_column_int(s, 4), h->line_end = sqlite3_column_int(s, 5);
        h->page_start = sqlite3_column_int(s, 6), h->page_end = sqlite3_column_int(s, 7);
        if (!h->path || !h->heading_path || !h->text) st = dp_err_set(err, DP_ENOMEM, "out of memory");
    } else {
        st = dp_err_set(err, DP_ENOENT, "%s: no chunk %lld", r->path, (long long)chunk_id);
    }
    sqlite3_finalize(s);
    if (st) pl_db_hit_free(h);
    return st;
}

void pl_db_hit_free(pl_db_hit *h) {
    free(h->path);
    free(h->heading_path);
    free(h->text);
    memset(h, 0, sizeof(*h));
}
