/*
 * stage_write.c - the writer stage, the only thread that touches outputs and the checkpoint.
 *
 * Documents arrive in completion order and leave in listing order (a reorder buffer keyed by
 * seq). Each one appends its records to the results or errors sink and one line to the
 * ledger. Every COMMIT_RECORDS records or COMMIT_MS milliseconds, and at the end, it commits
 * (docs/operations.md): write and fdatasync every sink, then replace checkpoint.json atomically (the
 * rename is the commit point), then status.json. A failed write or sync stops the run (exit
 * 74); the checkpoint on disk still describes a consistent prefix, so the next run resumes.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exit_codes.h"
#include "iofault.h"
#include "run_internal.h"
#include "sha256.h"
#include "sink.h"
#include "say.h"
#include "utf8.h"

#define COMMIT_RECORDS 256
#define COMMIT_MS 2000

typedef struct writer {
    pl_run *r;
    size_t commit_records; /* COMMIT_RECORDS, or DOCPIPE_COMMIT_RECORDS for crash tests that want many commits */
    pl_sink *results, *errors, *ledger; /* opened (created or cut back) by run.c */
    pl_unit **buf;       /* reorder buffer (unsorted; small) */
    size_t n_buf, cap_buf;
    uint64_t next_seq;
    size_t uncommitted;  /* records since the last commit */
    uint64_t t_commit;
    dp_err err;
} writer;

/* Folder-safe relative path: every part kept only if it is a plain name ("", ".", ".." and
 * anything with a control character, backslash or colon is rewritten), so nothing can escape
 * the output folder whatever the input file was called. A path the cleaning changed (or cut)
 * gets "~" and 8 hex digits of the raw path's SHA-256 appended, so two names that clean to the
 * same text ("new\nline.txt", "new_line.txt") still get two files. */
void pl_safe_relpath(const char *rel, char *out, size_t cap) {
    size_t o = 0;
    const char *p = rel;
    while (*p && o + 8 < cap) {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.')) {
            if (o + 2 < cap) out[o++] = '_';
        } else {
            for (size_t i = 0; i < n && i < 200 && o + 8 < cap; i++) {
                unsigned char c = (unsigned char)p[i];
                out[o++] = (c < 0x20 || c == 0x7f || c == '\\' || c == ':' || (i == 0 && c == '.')) ? '_' : (char)c;
            }
        }
        if (!e) break;
        if (o + 8 < cap) out[o++] = '/';
        p = e + 1;
    }
    out[o] = 0;
    if (strcmp(out, rel) && cap > 10) {
        uint8_t d[32];
        char hex[65];
        dp_sha256_digest(rel, strlen(rel), d);
        dp_sha256_hex(d, hex);
        if (o + 10 > cap) o = cap - 10;
        snprintf(out + o, cap - o, "~%.8s", hex);
    }
}

static dp_status write_doc_file(writer *w, const pl_unit *u, const char *content, size_t len) {
    const char *root = w->r->job.outputs.per_document_dir;
    char rel[2048], path[4096 + 2048];
    pl_safe_relpath(u->out_rel, rel, sizeof(rel));
    snprintf(path, sizeof(path), "%s/%s.jsonl", root, rel);
    char *slash = strrchr(path, '/');
    *slash = 0;
    dp_status st = dp_mkdir_p(path, &w->err);
    *slash = '/';
    if (!st) st = pl_write_atomic(path, content, len, &w->err);
    return st;
}

/* A result's text as SQLite TEXT wants it: valid UTF-8 (malloc'ed; NULL out of memory). */
static char *utf8_copy(const char *s, size_t n, size_t *len) {
    uint8_t *o = malloc(3 * n + 1);
    if (!o) return NULL;
    *len = dp_utf8_repair((const uint8_t *)(s ? s : ""), s ? n : 0, o, NULL);
    o[*len] = 0;
    return (char *)o;
}

/* outputs.sqlite: the document with its chunks (and vectors) and results, replacing what the
 * database held for its path, in the transaction the next commit ends. */
static dp_status db_put(writer *w, const pl_unit *u) {
    pl_run *r = w->r;
    const bool embed = r->job.task == JOB_TASK_EMBED;
    const char *error = u->err_code;
    for (size_t i = 0; i < u->n_res && !error; i++) error = u->res[i].err_code;
    const pl_db_doc doc = {u->path, strncmp(u->sha, "stat:", 5) ? u->sha : "", u->size, u->format, error,
                           u->n_pages};
    int64_t doc_id = 0;
    dp_status st = pl_db_put_document(r->db, &doc, &doc_id, &w->err);
    for (size_t i = 0; i < u->n_res && !st; i++) {
        const pl_result *res = &u->res[i];
        int64_t chunk_id = 0;
        if (!res->level && res->span.text) {
            const pl_span *sp = &res->span;
            json_t *hp = pl_span_headings(sp);
            char *hs = json_dumps(hp, JSON_COMPACT | JSON_ENCODE_ANY);
            json_decref(hp);
            if (!hs) return dp_err_set(&w->err, DP_ENOMEM, "out of memory");
            const pl_db_chunk c = {res->index, sp->text, sp->len, sp->byte_start, sp->byte_end, sp->line_start,
                                   sp->line_end, u->n_pages ? res->page_first : 0, u->n_pages ? res->page_last : 0,
                                   hs, sp->n_tokens, res->vec, res->dim};
            st = pl_db_put_chunk(r->db, doc_id, &c, &chunk_id, &w->err);
            free(hs);
        }
        if (st || embed) continue; /* an embedding job's result is the chunk's vector */
        char cid[64];
        pl_custom_id(r, u, res, cid);
        size_t len = 0;
        char *text = res->err_code ? NULL : utf8_copy(res->text, res->len, &len);
        if (!res->err_code && !text) return dp_err_set(&w->err, DP_ENOMEM, "out of memory");
        const pl_db_result dr = {cid, chunk_id, res->level ? "reduce" : pl_chunk_stage(r), res->final, text, len,
                                 res->err_code ? NULL : res->finish, res->err_code, res->n_prompt, res->n_gen};
        st = pl_db_put_result(r->db, doc_id, &dr, &w->err);
        free(text);
    }
    return st;
}

static dp_status emit(writer *w, pl_unit *u) {
    pl_run *r = w->r;
    dp_status st = DP_OK;
    if (u->skipped && r->db && (st = pl_db_seen(r->db, u->path, &w->err))) return st;
    if (u->skipped) {
        dp_mutex_lock(&r->mu);
        r->n_docs_skipped++;
        r->n_failed_before += u->failed_before;
        r->n_docs_done++;
        dp_mutex_unlock(&r->mu);
        return DP_OK;
    }
    dp_buf doc;
    dp_buf_init(&doc, (size_t)1 << 31);
    int64_t n_rec = 0, n_err = 0;
    if (u->err_code) {
        char *line = pl_record_doc_error(r, u);
        if (!line) return dp_err_set(&w->err, DP_ENOMEM, "out of memory");
        st = pl_sink_add(w->errors, line, strlen(line), &w->err);
        dp_buf_append(&doc, line, strlen(line));
        dp_buf_append(&doc, "\n", 1);
        free(line);
        n_err++;
    }
    for (size_t i = 0; i < u->n_res && !st; i++) {
        char *line = pl_record_line(r, u, &u->res[i]);
        if (!line) return dp_err_set(&w->err, DP_ENOMEM, "out of memory");
        /* with outputs.intermediate, the main file holds each document's answer only */
        pl_sink *to = u->res[i].err_code ? w->errors
                      : r->inter_path && !u->res[i].final ? &r->inter : w->results;
        st = pl_sink_add(to, line, strlen(line), &w->err);
        dp_buf_append(&doc, line, strlen(line));
        dp_buf_append(&doc, "\n", 1);
        free(line);
        if (u->res[i].err_code) n_err++;
        else n_rec++;
    }
    if (!st && r->job.outputs.per_document_dir) st = write_doc_file(w, u, (const char *)doc.data, doc.len);
    if (!st && r->db) st = db_put(w, u);
    dp_buf_free(&doc);
    /* an unreadable file has no content hash: it is retried next run rather than remembered */
    if (!st && u->sha[0]) {
        char *line = pl_ledger_line(u->path, u->sha, n_err == 0, n_rec, n_err);
        if (!line) return dp_err_set(&w->err, DP_ENOMEM, "out of memory");
        st = pl_sink_add(w->ledger, line, strlen(line), &w->err);
        free(line);
    }
    if (st) return st;
    w->uncommitted += (size_t)(n_rec + n_err) + 1;
    r->ck.records += (uint64_t)n_rec;
    r->ck.errors += (uint64_t)n_err;
    if (n_err) r->ck.docs_failed++;
    else r->ck.docs_ok++;
    dp_mutex_lock(&r->mu);
    r->n_docs_done++;
    r->n_records += (uint64_t)n_rec;
    r->n_error_records += (uint64_t)n_err;
    if (n_err) r->n_docs_failed++;
    dp_mutex_unlock(&r->mu);
    return DP_OK;
}

static dp_status write_status(writer *w, bool final) {
    pl_run *r = w->r;
    char now[32];
    dp_time_format(dp_time_wall(), false, now);
    dp_mutex_lock(&r->mu);
    json_t *o = json_pack("{s:s, s:s, s:{s:I, s:I, s:I, s:I}, s:{s:I, s:I, s:I, s:I}, s:{s:I, s:I}, s:b}",
                          "job", r->job.file, "updated", now, "requests", "total",
                          (json_int_t)(r->ck.records + r->ck.errors), "completed", (json_int_t)r->ck.records, "failed",
                          (json_int_t)r->ck.errors, "skipped", (json_int_t)r->n_docs_skipped, "documents", "ok",
                          (json_int_t)r->ck.docs_ok, "failed", (json_int_t)r->ck.docs_failed, "this_run",
                          (json_int_t)(r->n_docs_done - r->n_docs_skipped), "skipped_this_run",
                          (json_int_t)r->n_docs_skipped, "tokens", "prompt", (json_int_t)r->n_prompt_tokens,
                          "generated", (json_int_t)r->n_gen_tokens, "complete", final);
    dp_mutex_unlock(&r->mu);
    char *s = o ? json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    if (!s) return dp_err_set(&w->err, DP_ENOMEM, "out of memory");
    size_t n = strlen(s);
    s[n] = '\n';
    dp_status st = pl_write_atomic(r->status_path, s, n + 1, &w->err);
    free(s);
    return st;
}

static dp_status commit(writer *w, bool final) {
    pl_run *r = w->r;
    dp_status st;
    if ((st = pl_sink_flush(w->results, &w->err)) || (st = pl_sink_flush(w->errors, &w->err)) ||
        (r->inter_path && (st = pl_sink_flush(&r->inter, &w->err))) || (st = pl_sink_flush(w->ledger, &w->err)))
        return st;
    if (r->inter_path) {
        r->ck.inter_bytes = pl_sink_size(&r->inter);
        pl_sink_sha256(&r->inter, r->ck.inter_sha256);
    }
    r->ck.results_bytes = pl_sink_size(w->results);
    r->ck.errors_bytes = pl_sink_size(w->errors);
    r->ck.ledger_bytes = pl_sink_size(w->ledger);
    pl_sink_sha256(w->results, r->ck.results_sha256);
    pl_sink_sha256(w->errors, r->ck.errors_sha256);
    pl_sink_sha256(w->ledger, r->ck.ledger_sha256);
    r->ck.complete = final;
    r->ck.work_seconds = r->work_seconds_before + (double)(dp_time_ns() - r->t_work0) / 1e9;
    r->ck.commits++;
    if (r->db) {
        /* the database's COMMIT, holding this checkpoint, is the commit point when there is one;
         * a complete listing first removes the documents the inputs no longer have */
        uint64_t gone = 0;
        if (final && (st = pl_db_sweep(r->db, r->job.outputs.sqlite_keep_deleted, &gone, &w->err))) {
            r->ck.commits--;
            return st;
        }
        char *js = pl_checkpoint_json(&r->ck);
        st = js ? pl_db_commit(r->db, js, &w->err) : dp_err_set(&w->err, DP_ENOMEM, "out of memory");
        free(js);
        if (st) {
            r->ck.commits--;
            return st;
        }
        if (gone)
            pl_say(PL_SAY_INFO, "sqlite", NULL, "%llu document%s no longer in the inputs %s %s",
                   (unsigned long long)gone, gone == 1 ? "" : "s",
                   r->job.outputs.sqlite_keep_deleted ? "marked deleted in" : "removed from", r->job.outputs.sqlite);
    }
    if ((st = pl_checkpoint_write(r->checkpoint_path, &r->ck, &w->err))) return st;
    w->uncommitted = 0;
    w->t_commit = dp_time_ns();
    if ((st = write_status(w, final))) return st;
    pl_run_metrics(r, -1);
    return DP_OK;
}

static dp_status take(writer *w, pl_unit *u) {
    if (w->n_buf == w->cap_buf) {
        size_t cap = w->cap_buf ? 2 * w->cap_buf : 64;
        pl_unit **v = realloc(w->buf, cap * sizeof(*v));
        if (!v) return dp_err_set(&w->err, DP_ENOMEM, "out of memory");
        w->buf = v;
        w->cap_buf = cap;
    }
    w->buf[w->n_buf++] = u;
    for (bool found = true; found;) {
        found = false;
        for (size_t i = 0; i < w->n_buf; i++) {
            if (w->buf[i]->seq != w->next_seq) continue;
            pl_unit *x = w->buf[i];
            w->buf[i] = w->buf[--w->n_buf];
            dp_status st = emit(w, x);
            pl_unit_free(w->r, x);
            if (st) return st;
            w->next_seq++;
            found = true;
            break;
        }
    }
    return DP_OK;
}

void *pl_stage_write(void *arg) {
    pl_run *r = arg;
    writer w = {.r = r};
    dp_status st = DP_OK;
    w.results = &r->results, w.errors = &r->errors, w.ledger = &r->ledger_sink;
    const char *env = getenv("DOCPIPE_COMMIT_RECORDS");
    w.commit_records = env && atoi(env) > 0 ? (size_t)atoi(env) : COMMIT_RECORDS;
    w.t_commit = dp_time_ns();
    bool drained = false;
    for (;;) {
        void *p = NULL;
        dp_status q = pl_queue_pop_wait(r->q_done, &p, 200);
        if (q == DP_OK) {
            if ((st = take(&w, p))) break;
        } else if (q == DP_EOF) {
            drained = true;
            break;
        } else if (q != DP_EBUSY) {
            break; /* aborted: a failure elsewhere; commit what is complete */
        }
        if (w.uncommitted >= w.commit_records ||
            (w.uncommitted && dp_time_ns() - w.t_commit >= (uint64_t)COMMIT_MS * 1000000ull)) {
            if ((st = commit(&w, false))) break;
        }
    }
    if (st) {
        pl_run_fail(r, st, &w.err, pl_exit_for_write(st));
    } else {
        /* complete: every listed document was written (a stop or failure leaves some out) */
        const bool complete = drained && !r->stopping && w.n_buf == 0 && w.next_seq == r->n_docs_listed;
        if ((st = commit(&w, complete))) pl_run_fail(r, st, &w.err, pl_exit_for_write(st));
    }
    for (size_t i = 0; i < w.n_buf; i++) pl_unit_free(r, w.buf[i]);
    free(w.buf);
    dp_mutex_lock(&r->mu);
    r->writer_done = true;
    dp_mutex_unlock(&r->mu);
    return NULL;
}
