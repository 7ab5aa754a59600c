/*
 * stage_read.c - the reader stage: lists every input folder (walk.h, stable order), reads each
 * file, hashes it, skips what an earlier run finished (the ledger), and extracts text
 * (extract.h). A .jsonl file is one document per non-empty line. Every problem becomes the
 * document's error record; none stops the run.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "iofault.h"
#include "exit_codes.h"
#include "git_changes.h"
#include "run_internal.h"
#include "sha256.h"
#include "utf8.h"
#include "walk.h"

/* p relative to the job's folder when it lies inside it (as the job wrote it), else as is. */
const char *pl_job_rel(const pl_run *r, const char *p) {
    size_t n = strlen(r->job.dir);
    if (n && !strncmp(p, r->job.dir, n) && p[n] == '/') return p + n + 1;
    return p;
}

/* s with every byte that is not part of valid UTF-8 written as the four characters \xNN, so names
 * that differ only in such bytes stay apart (a\xff.txt, a\xfe.txt). free() it. */
static char *escape_invalid(const char *s, size_t n) {
    char *o = malloc(4 * n + 1);
    if (!o) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        uint32_t c;
        bool ok;
        const size_t m = (uint8_t)s[i] < 0x80 ? (ok = true, 1) : dp_utf8_decode((const uint8_t *)s + i, n - i, &c, &ok);
        if (ok) {
            memcpy(o + k, s + i, m);
            k += m, i += m;
        } else {
            k += (size_t)sprintf(o + k, "\\x%02x", (uint8_t)s[i]);
            i++;
        }
    }
    o[k] = 0;
    return o;
}

/* The source path as records, the ledger and the manifest show it: input folder (as the job
 * names it) + '/' + rel + suffix, bytes that are not UTF-8 escaped. *raw gets the bytes as they
 * are when they differ (NULL otherwise). free() both. */
static char *doc_path(const char *input_disp, const char *rel, const char *line_suffix, char **raw) {
    size_t n = strlen(input_disp) + strlen(rel) + strlen(line_suffix) + 2;
    char *p = malloc(n);
    *raw = NULL;
    if (!p) return NULL;
    snprintf(p, n, "%s/%s%s", input_disp, rel, line_suffix);
    char *shown = escape_invalid(p, strlen(p));
    if (shown && strcmp(shown, p)) *raw = p;
    else free(p);
    return shown;
}

static pl_unit *unit_new(pl_run *r, const char *input_disp, const char *rel, const char *line_suffix,
                         size_t input_index) {
    pl_unit *u = calloc(1, sizeof(*u));
    if (!u) return NULL;
    u->path = doc_path(input_disp, rel, line_suffix, &u->raw_path);
    size_t n;
    /* per-document files mirror the input tree; with several inputs each gets its own folder */
    char pre[32] = "";
    if (r->job.n_inputs > 1) snprintf(pre, sizeof(pre), "input-%zu/", input_index + 1);
    n = strlen(pre) + strlen(rel) + strlen(line_suffix) + 1;
    u->out_rel = malloc(n);
    if (u->out_rel) snprintf(u->out_rel, n, "%s%s%s", pre, rel, line_suffix);
    if (!u->path || !u->out_rel) {
        free(u->path);
        free(u->raw_path);
        free(u->out_rel);
        free(u);
        return NULL;
    }
    const char *slash = strrchr(u->path, '/');
    u->filename = slash ? slash + 1 : u->path;
    const char *dot = strrchr(u->filename, '.');
    u->ext = dot && dot != u->filename ? dot + 1 : "";
    dp_mutex_lock(&r->mu);
    u->seq = r->n_docs_listed++;
    u->next = r->reg.next;
    u->prev = &r->reg;
    r->reg.next->prev = u;
    r->reg.next = u;
    dp_mutex_unlock(&r->mu);
    return u;
}

static void set_key(pl_unit *u) {
    dp_sha256 h;
    uint8_t d[32];
    char hex[65];
    dp_sha256_init(&h);
    const char *p = u->raw_path ? u->raw_path : u->path; /* the name's own bytes: ids never collide */
    dp_sha256_update(&h, p, strlen(p) + 1);
    dp_sha256_update(&h, u->sha, strlen(u->sha));
    dp_sha256_final(&h, d);
    dp_sha256_hex(d, hex);
    memcpy(u->key, hex, 16);
    u->key[16] = 0;
}

static void fail_doc(pl_unit *u, const char *code, const char *fmt, const char *detail) {
    u->err_code = code;
    u->err_stage = "read";
    size_t n = strlen(fmt) + strlen(detail) + 1;
    u->err_msg = malloc(n);
    if (u->err_msg) snprintf(u->err_msg, n, fmt, detail);
}

/* Hands a document to the chunker; false when the run is stopping. */
static bool emit(pl_run *r, pl_unit *u, pl_doc_text *text) {
    pl_doc *d = calloc(1, sizeof(*d));
    if (!d) {
        pl_unit_free(r, u);
        if (text) pl_doc_text_free(text);
        return false;
    }
    d->u = u;
    if (text) d->text = *text;
    u->t_read_ns = dp_time_ns();
    dp_mutex_lock(&r->mu);
    r->n_docs_read++;
    dp_mutex_unlock(&r->mu);
    if (pl_queue_push(r->q_docs, d)) {
        pl_doc_free(d);
        return false;
    }
    return true;
}

static void hash_hex(const void *data, size_t n, char out[65]) {
    uint8_t d[32];
    dp_sha256_digest(data, n, d);
    dp_sha256_hex(d, out);
}

/* The shard of a document: by its content hash, so adding files never moves existing ones; a
 * document read without a hash (too large, unreadable) goes by its path. */
uint32_t pl_shard_of(const char *sha, const char *path, uint32_t n) {
    uint8_t d[32];
    if (sha && sha[0]) {
        uint64_t x = 0;
        for (int i = 0; i < 16; i++) {
            const char c = sha[i];
            x = x << 4 | (uint64_t)(c >= 'a' ? c - 'a' + 10 : c - '0');
        }
        return (uint32_t)(x % n);
    }
    dp_sha256_digest(path, strlen(path), d);
    uint64_t x = 0;
    for (int i = 0; i < 8; i++) x = x << 8 | d[i];
    return (uint32_t)(x % n);
}

/* False when a sharded run leaves this document to another shard. */
static bool mine(const pl_run *r, const char *sha, const char *disp, const char *rel, const char *suffix) {
    if (!r->shard_n) return true;
    char *raw = NULL, *shown = doc_path(disp, rel, suffix, &raw);
    free(raw);
    const bool m = pl_shard_of(sha, shown ? shown : "", r->shard_n) == r->shard_i;
    free(shown);
    return m;
}

static bool skip_done(pl_run *r, pl_unit *u) {
    const pl_ledger_status st = pl_ledger_get(r->ledger, u->path, u->sha);
    if (st == PL_LEDGER_NONE || (st == PL_LEDGER_FAILED && r->retry_failed)) return false;
    u->skipped = true;
    u->failed_before = st == PL_LEDGER_FAILED;
    return true;
}

static bool read_jsonl(pl_run *r, const job_input *in, const char *disp, const pl_file *f, size_t ii,
                       const char *data, size_t len) {
    int lineno = 0;
    for (size_t p = 0; p < len && !r->stopping;) {
        const char *ls = data + p, *nl = memchr(ls, '\n', len - p);
        size_t ll = nl ? (size_t)(nl - ls) : len - p;
        p += ll + (nl ? 1 : 0);
        lineno++;
        size_t tl = ll;
        while (tl && (ls[tl - 1] == '\r' || ls[tl - 1] == ' ' || ls[tl - 1] == '\t')) tl--;
        if (!tl) continue;
        char suffix[32], sha[65];
        snprintf(suffix, sizeof(suffix), "#L%d", lineno);
        hash_hex(ls, ll, sha);
        if (!mine(r, sha, disp, f->rel, suffix)) continue;
        pl_unit *u = unit_new(r, disp, f->rel, suffix, ii);
        if (!u) return false;
        memcpy(u->sha, sha, 65);
        u->size = ll;
        set_key(u);
        if (skip_done(r, u) || r->hash_only) {
            if (!emit(r, u, NULL)) return false;
            continue;
        }
        pl_doc_text t = {0};
        dp_err err = {0};
        pl_doc_error de = pl_extract_jsonl_line(ls, tl, in->jsonl_field, (size_t)in->max_file_size, &t, &err);
        if (de != PL_DOC_OK) {
            fail_doc(u, pl_doc_error_code(de), "%s", dp_err_msg(&err));
            if (!emit(r, u, NULL)) return false;
            continue;
        }
        u->format = "jsonl";
        u->n_replaced = t.n_replaced;
        if (!emit(r, u, &t)) return false;
    }
    return true;
}

/* The job's converter for this file's extension (case-insensitive), or NULL. */
static const struct job_converter *converter_for(const pl_run *r, const char *rel) {
    const char *slash = strrchr(rel, '/'), *dot = strrchr(slash ? slash + 1 : rel, '.');
    if (!dot || dot == (slash ? slash + 1 : rel)) return NULL;
    for (size_t i = 0; i < r->job.n_converters; i++)
        if (!strcasecmp(r->job.converters[i].ext, dot)) return &r->job.converters[i];
    return NULL;
}

/* 5 minutes a document; DOCPIPE_CONVERTER_TIMEOUT_MS (tests) sets another */
static int converter_timeout_ms(void) {
    const char *e = getenv("DOCPIPE_CONVERTER_TIMEOUT_MS");
    const long v = e ? strtol(e, NULL, 10) : 0;
    return v > 0 && v < 86400000 ? (int)v : 300000;
}

static bool read_file(pl_run *r, const job_input *in, const char *disp, const pl_file *f, size_t ii) {
    const struct job_converter *conv = converter_for(r, f->rel); /* the job's converter wins */
    const bool jsonl = !conv && strlen(f->rel) > 6 && !strcmp(f->rel + strlen(f->rel) - 6, ".jsonl");
    char *data = NULL;
    size_t len = 0;
    dp_err err = {0};
    const char *code = NULL;
    char detail[1024];
    const dp_stat_info listed = {DP_KIND_FILE, f->size, f->dev, f->ino, 0};
    if (f->error) {
        code = "input_unreadable";
        snprintf(detail, sizeof(detail), "%s", f->error);
    } else if (f->too_large) {
        code = "too_large";
        snprintf(detail, sizeof(detail), "%llu bytes, more than inputs.max_file_size (%lld)",
                 (unsigned long long)f->size, (long long)in->max_file_size);
    } else if (!jsonl && !conv && !pl_extract_supported(f->rel)) {
        code = "unsupported_format";
        snprintf(detail, sizeof(detail), "no reader for this file type (see docs/job-file.md, inputs)");
    } else if (dp_file_read_doc(f->abs, in->follow_symlinks, &listed, (size_t)in->max_file_size, &data, &len, &err)) {
        code = err.code == DP_ERANGE ? "too_large" : "input_unreadable";
        snprintf(detail, sizeof(detail), "%s", dp_err_msg(&err));
    } else if (jsonl) {
        bool ok = read_jsonl(r, in, disp, f, ii, data, len);
        free(data);
        return ok;
    }
    /* a document that cannot be read has no content hash: it gets its error record by path */
    char sha[65] = "";
    if (!code) hash_hex(data, len, sha);
    if (!mine(r, sha, disp, f->rel, "")) {
        free(data);
        return true;
    }
    pl_unit *u = unit_new(r, disp, f->rel, "", ii);
    if (!u) {
        free(data);
        return false;
    }
    memcpy(u->sha, sha, 65);
    u->size = f->size;
    set_key(u);
    if (code) {
        /* A file that was not read has no content hash; its ledger line holds what the listing saw
         * (size and modification time, "stat:" + both), so an unchanged failure is not retried or
         * reported again; the record's doc_sha256 stays empty. */
        snprintf(u->sha, sizeof(u->sha), "stat:%llu:%lld", (unsigned long long)f->size, (long long)f->mtime_ns);
        if (skip_done(r, u)) return emit(r, u, NULL);
        fail_doc(u, code, "%s", detail);
        return emit(r, u, NULL);
    }
    if (skip_done(r, u) || r->hash_only) {
        free(data);
        return emit(r, u, NULL);
    }
    pl_doc_text t = {0};
    pl_doc_error de = conv ? pl_extract_convert(conv->ext, (const char *const *)conv->argv, conv->argc,
                                                (const uint8_t *)data, len, (size_t)in->max_file_size,
                                                converter_timeout_ms(), &t, &err)
                           : pl_extract_text(f->rel, (const uint8_t *)data, len, (size_t)in->max_file_size, &t, &err);
    free(data);
    if (de != PL_DOC_OK) {
        fail_doc(u, pl_doc_error_code(de), "%s", dp_err_msg(&err));
        return emit(r, u, NULL);
    }
    u->format = t.format;
    u->n_replaced = t.n_replaced;
    return emit(r, u, &t);
}

/* Lists every input; DP_OK with the files in *w. */
dp_status pl_list_inputs(const job_spec *j, pl_walk *w, size_t **input_of, dp_err *err) {
    memset(w, 0, sizeof(*w));
    *input_of = NULL;
    size_t cap = 0;
    for (size_t i = 0; i < j->n_inputs; i++) {
        const job_input *in = &j->inputs[i];
        pl_walk_opts o = {(const char *const *)in->include, in->n_include, (const char *const *)in->exclude,
                          in->n_exclude, in->follow_symlinks, (uint64_t)in->max_file_size, in->links_outside};
        size_t before = w->n;
        dp_status st = pl_walk_dir(in->path, &o, w, err);
        if (st) return st;
        if (in->changed_since) { /* only what changed since the revision (a review of a branch) */
            pl_changed ch;
            if ((st = pl_git_changed(in->path, in->changed_since, &ch, err))) return st;
            size_t k = before;
            for (size_t f = before; f < w->n; f++) {
                if (pl_changed_has(&ch, w->files[f].rel)) w->files[k++] = w->files[f];
                else {
                    free(w->files[f].rel);
                    free(w->files[f].abs);
                    free(w->files[f].error);
                }
            }
            w->n = k;
            pl_changed_free(&ch);
        }
        if (w->n > cap) {
            cap = w->n * 2;
            size_t *v = realloc(*input_of, cap * sizeof(size_t));
            if (!v) return dp_err_set(err, DP_ENOMEM, "out of memory");
            *input_of = v;
        }
        for (size_t k = before; k < w->n; k++) (*input_of)[k] = i;
    }
    return DP_OK;
}

void *pl_stage_read(void *arg) {
    pl_run *r = arg;
    pl_walk w;
    size_t *input_of = NULL;
    dp_err err = {0};
    dp_status st = pl_list_inputs(&r->job, &w, &input_of, &err);
    if (st) {
        pl_run_fail(r, st, &err, PL_EXIT_NOINPUT);
    } else {
        dp_mutex_lock(&r->mu);
        r->n_files = w.n;
        r->listing_done = true;
        dp_mutex_unlock(&r->mu);
        pl_pause_after_listing();
        for (size_t k = 0; k < w.n && !r->stopping; k++) {
            const job_input *in = &r->job.inputs[input_of[k]];
            if (!read_file(r, in, pl_job_rel(r, in->path), &w.files[k], input_of[k])) break;
        }
    }
    pl_walk_free(&w);
    free(input_of);
    pl_queue_close(r->q_docs);
    return NULL;
}
