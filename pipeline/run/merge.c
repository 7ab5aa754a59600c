/*
 * merge.c - `docpipe merge JOB.yaml`: the outputs of a sharded run (part-I-of-N files beside
 * outputs.jsonl) into the paths a single run would have written.
 *
 * Every document of STATE/manifest.json must have a result or an error record in some part
 * (by source path and content hash); records are deduplicated by custom_id, a successful one
 * winning over an error and a later attempt over an earlier one. The merged files replace the
 * job's outputs atomically. Missing documents: exit 75 naming them (rerun those shards: they
 * resume). Records keep shard order, then their order within the part.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "exit_codes.h"
#include "layout.h"
#include "run.h"
#include "say.h"
#include "sink.h"
#include "job.h"
#include "platform.h"

static const char *or_empty(const char *s) { return s ? s : ""; }

typedef struct merged {
    json_t *by_id;     /* custom_id -> {"line": string, "ok": bool, "order": n} */
    json_t *order;     /* custom_ids in first-seen order */
    json_t *docs;      /* "path\nsha" -> true */
} merged;

/* Reads a .jsonl or .jsonl.gz file whole (gzopen reads plain files too). */
static char *read_maybe_gz(const char *path, size_t *len) {
    gzFile g = gzopen(path, "rb");
    if (!g) return NULL;
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap + 1);
    int r;
    while (buf && (r = gzread(g, buf + n, (unsigned)(cap - n))) > 0) {
        n += (size_t)r;
        if (n == cap) {
            char *b = realloc(buf, 2 * cap + 1);
            if (!b) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = b, cap *= 2;
        }
    }
    gzclose(g);
    if (buf) buf[n] = 0;
    *len = n;
    return buf;
}

static int add_part(merged *m, const char *path, bool required) {
    if (!dp_path_exists(path)) {
        if (!required) return 0;
        fprintf(stderr, "docpipe merge: %s is missing\n", path);
        return -1;
    }
    size_t len = 0;
    char *data = read_maybe_gz(path, &len);
    if (!data) {
        fprintf(stderr, "docpipe merge: cannot read %s\n", path);
        return PL_EXIT_IOERR;
    }
    int lineno = 0;
    for (size_t p = 0; p < len;) {
        char *nl = memchr(data + p, '\n', len - p);
        lineno++;
        if (!nl) break; /* an unterminated tail was never committed: its shard will redo it */
        json_error_t je;
        json_t *o = json_loadb(data + p, (size_t)(nl - (data + p)), JSON_ALLOW_NUL, &je);
        const char *cid = json_string_value(json_object_get(o, "custom_id"));
        if (!cid) {
            fprintf(stderr, "docpipe merge: %s:%d: not a record (%s)\n", path, lineno, o ? "no custom_id" : je.text);
            json_decref(o);
            free(data);
            return PL_EXIT_DATAERR;
        }
        const bool ok = !json_is_object(json_object_get(o, "error"));
        json_t *meta = json_object_get(o, "meta");
        char key[8192];
        snprintf(key, sizeof(key), "%s\n%s", or_empty(json_string_value(json_object_get(meta, "source_path"))),
                 or_empty(json_string_value(json_object_get(meta, "doc_sha256"))));
        json_object_set_new(m->docs, key, json_true());
        json_t *prev = json_object_get(m->by_id, cid);
        /* a success wins over an error; otherwise the later attempt wins */
        if (!prev || ok || !json_is_true(json_object_get(prev, "ok"))) {
            if (!prev) json_array_append_new(m->order, json_string(cid));
            json_object_set_new(m->by_id, cid, json_pack("{s:s%, s:b}", "line", data + p,
                                                         (size_t)(nl - (data + p)), "ok", ok));
        }
        json_decref(o);
        p = (size_t)(nl - data) + 1;
    }
    free(data);
    return 0;
}

static dp_status write_out(const char *path, const char *data, size_t len, bool gz, dp_err *err) {
    if (!gz) return pl_write_atomic(path, data, len, err);
    uint8_t *buf = NULL;
    size_t n = 0;
    if (len > 0x7fffffffu || pl_gzip_member((const uint8_t *)data, len, &buf, &n))
        return dp_err_set(err, DP_ENOMEM, "%s: cannot compress %zu bytes", path, len);
    dp_status st = pl_write_atomic(path, buf, n, err);
    free(buf);
    return st;
}

int pl_merge_job(const char *job_path) {
    job_spec j;
    dp_err err = {0};
    dp_status st = job_load(job_path, &j, &err);
    if (st) {
        fprintf(stderr, "docpipe merge: %s\n", dp_err_msg(&err));
        return st == DP_ENOENT ? PL_EXIT_NOINPUT : PL_EXIT_DATAERR;
    }
    char mpath[4200], ck[4200];
    const pl_layout_job lj = {j.state_dir, j.outputs.jsonl, j.outputs.gzip, NULL, NULL};
    pl_layout_path(&lj, 0, 0, PL_FILE_MANIFEST, mpath, sizeof(mpath));
    pl_layout_path(&lj, 0, 0, PL_FILE_CHECKPOINT, ck, sizeof(ck));
    json_error_t je;
    json_t *man = json_load_file(mpath, 0, &je);
    json_t *docs = json_object_get(man, "documents");
    const json_int_t n = json_integer_value(json_object_get(man, "shards"));
    int rc = 0;
    if (!man || !json_is_array(docs) || n < 1 || n > 65536) { /* (--shards takes 1..65536) */
        fprintf(stderr, "docpipe merge: %s: %s (run docpipe plan %s --shards N first)\n", mpath,
                man ? "damaged manifest" : je.text, job_path);
        rc = man ? PL_EXIT_DATAERR : PL_EXIT_NOINPUT;
    } else if (dp_path_exists(ck)) {
        /* the job's output paths belong to a single (unsharded) run: never overwrite them */
        fprintf(stderr, "docpipe merge: %s exists: %s belongs to an unsharded run of this job; move it (and its "
                "state) away first\n", ck, j.outputs.jsonl);
        rc = PL_EXIT_CANTCREAT;
    }
    merged res = {json_object(), json_array(), json_object()}, errs = {json_object(), json_array(), json_object()};
    char od[4096];
    dp_path_dir(j.outputs.jsonl, od, sizeof(od));
    int missing_parts = 0;
    for (json_int_t i = 0; i < n && !rc; i++) {
        char p[4400];
        pl_layout_path(&lj, (uint32_t)i, (uint32_t)n, PL_FILE_RESULTS, p, sizeof(p));
        int r1 = add_part(&res, p, true);
        pl_layout_path(&lj, (uint32_t)i, (uint32_t)n, PL_FILE_ERRORS, p, sizeof(p));
        int r2 = r1 < 0 ? 0 : add_part(&errs, p, false);
        if (r1 < 0) missing_parts++;
        else if (r1 || r2) rc = r1 ? r1 : r2;
    }
    /* every manifest document has a record */
    size_t n_missing = 0;
    if (!rc) {
        size_t k;
        json_t *d;
        json_array_foreach(docs, k, d) {
            char key[8192];
            snprintf(key, sizeof(key), "%s\n%s", or_empty(json_string_value(json_object_get(d, "path"))),
                     or_empty(json_string_value(json_object_get(d, "sha256"))));
            if (json_object_get(res.docs, key) || json_object_get(errs.docs, key)) continue;
            if (n_missing++ < 20)
                fprintf(stderr, "docpipe merge: no record for %s (shard %lld)\n",
                        json_string_value(json_object_get(d, "path")), (long long)json_integer_value(json_object_get(d, "shard")));
        }
        if (n_missing || missing_parts) {
            fprintf(stderr, "docpipe merge: incomplete: %zu documents without a record, %d part files missing; run "
                    "those shards again (they resume) and merge again\n", n_missing, missing_parts);
            rc = PL_EXIT_TEMPFAIL;
        }
    }
    size_t n_ok = 0, n_err = 0;
    if (!rc) {
        /* an error record whose custom_id later succeeded (in another attempt) is dropped */
        dp_buf out, eout;
        dp_buf_init(&out, (size_t)1 << 40);
        dp_buf_init(&eout, (size_t)1 << 40);
        merged *sets[2] = {&res, &errs};
        for (int s = 0; s < 2; s++) {
            size_t k;
            json_t *cid;
            json_array_foreach(sets[s]->order, k, cid) {
                const char *id = json_string_value(cid);
                json_t *e = json_object_get(sets[s]->by_id, id);
                const bool ok = json_is_true(json_object_get(e, "ok"));
                if (s == 1 && json_object_get(res.by_id, id)) continue;
                const char *line = json_string_value(json_object_get(e, "line"));
                dp_buf *b = ok ? &out : &eout;
                dp_buf_append(b, line, strlen(line));
                dp_buf_append(b, "\n", 1);
                if (ok) n_ok++;
                else n_err++;
            }
        }
        char p[4400];
        pl_layout_path(&lj, 0, 0, PL_FILE_RESULTS, p, sizeof(p));
        st = dp_mkdir_p(od, &err);
        if (!st) st = write_out(p, out.data ? (const char *)out.data : "", out.len, j.outputs.gzip, &err);
        pl_layout_path(&lj, 0, 0, PL_FILE_ERRORS, p, sizeof(p));
        if (!st) st = pl_write_atomic(p, eout.data ? (const char *)eout.data : "", eout.len, &err);
        char now[32];
        dp_time_format(dp_time_wall(), false, now);
        json_t *sj = json_pack("{s:s, s:s, s:I, s:{s:I, s:I, s:I}, s:I, s:b}", "job", j.file, "updated", now, "shards",
                               (json_int_t)n, "requests", "total", (json_int_t)(n_ok + n_err), "completed",
                               (json_int_t)n_ok, "failed", (json_int_t)n_err, "documents",
                               (json_int_t)json_array_size(docs), "complete", true);
        char *s = json_dumps(sj, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        json_decref(sj);
        pl_layout_path(&lj, 0, 0, PL_FILE_STATUS, p, sizeof(p));
        if (!st) st = s ? pl_write_atomic(p, s, strlen(s), &err) : DP_ENOMEM;
        free(s);
        dp_buf_free(&out);
        dp_buf_free(&eout);
        if (st) {
            fprintf(stderr, "docpipe merge: %s\n", dp_err_msg(&err));
            rc = PL_EXIT_IOERR;
        } else {
            printf("merged %lld shards: %zu documents, %zu results, %zu errors into %s%s\n", (long long)n,
                   json_array_size(docs), n_ok, n_err, j.outputs.jsonl, j.outputs.gzip ? ".gz" : "");
            rc = n_err ? PL_EXIT_PARTIAL : PL_EXIT_OK;
        }
    }
    json_decref(res.by_id), json_decref(res.order), json_decref(res.docs);
    json_decref(errs.by_id), json_decref(errs.order), json_decref(errs.docs);
    json_decref(man);
    job_spec_free(&j);
    return rc;
}
