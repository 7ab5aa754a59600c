/*
 * state.c - see state.h.
 */
#include "state.h"
#include "layout.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "platform.h"
#include "sha256.h"
#include "sink.h"

#define CHECKPOINT_VERSION 2

/* The checksum covers the checkpoint's content, not its layout: the sha256 of the object
 * without "checksum", dumped compact with sorted keys. */
static bool checksum_of(json_t *o, char out[65]) {
    json_t *c = json_copy(o);
    if (!c) return false;
    json_object_del(c, "checksum");
    char *s = json_dumps(c, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII);
    json_decref(c);
    if (!s) return false;
    uint8_t d[32];
    dp_sha256_digest(s, strlen(s), d);
    free(s);
    dp_sha256_hex(d, out);
    return true;
}

static bool get_hex(json_t *o, const char *key, char out[65]) {
    const char *s = json_string_value(json_object_get(o, key));
    if (!s || strlen(s) != 64 || strspn(s, "0123456789abcdef") != 64) return false;
    memcpy(out, s, 65);
    return true;
}

static bool get_u64(json_t *o, const char *key, uint64_t *out) {
    json_t *v = json_object_get(o, key);
    if (!json_is_integer(v) || json_integer_value(v) < 0) return false;
    *out = (uint64_t)json_integer_value(v);
    return true;
}

dp_status pl_checkpoint_read(const char *path, pl_checkpoint *c, dp_err *err) {
    memset(c, 0, sizeof(*c));
    if (!dp_path_exists(path)) return dp_err_set(err, DP_ENOENT, "%s: no checkpoint", path);
    char *data = NULL;
    size_t len = 0;
    dp_status st = dp_file_read_all(path, (size_t)1 << 20, &data, &len, err);
    if (st) return st;
    st = pl_checkpoint_parse(data, len, path, c, err);
    free(data);
    return st;
}

dp_status pl_checkpoint_parse(const char *data, size_t len, const char *path, pl_checkpoint *c, dp_err *err) {
    memset(c, 0, sizeof(*c));
    json_error_t je;
    json_t *o = json_loadb(data, len, JSON_REJECT_DUPLICATES, &je);
    if (!o) return dp_err_set(err, DP_EFORMAT, "%s:%d:%d: damaged checkpoint: %s", path, je.line, je.column, je.text);
    const char *bad = NULL;
    char sum[65];
    json_t *v = json_object_get(o, "version"), *fp = json_object_get(o, "fingerprint");
    json_t *sk = json_object_get(o, "sinks"), *ct = json_object_get(o, "counts");
    json_t *r = json_object_get(sk, "results"), *e = json_object_get(sk, "errors"), *l = json_object_get(sk, "ledger");
    uint64_t runs = 0;
    const json_int_t ver = json_is_integer(v) ? json_integer_value(v) : 0;
    if (ver != 1 && ver != CHECKPOINT_VERSION) bad = "version (expected 1 or 2)";
    else if (ver >= 2 && (!checksum_of(o, sum) || !json_is_string(json_object_get(o, "checksum")) ||
                          strcmp(json_string_value(json_object_get(o, "checksum")), sum))) {
        json_decref(o);
        return dp_err_set(err, DP_EFORMAT, "%s: damaged checkpoint: its checksum does not match its content (the "
                          "file was edited or corrupted)", path);
    } else if (!get_hex(fp, "model_sha256", c->fp.model) || !get_hex(fp, "templates_sha256", c->fp.templates) ||
             !get_hex(fp, "settings_sha256", c->fp.settings))
        bad = "fingerprint";
    else if (!json_is_string(json_object_get(r, "path")) || !json_is_string(json_object_get(e, "path")) ||
             !get_u64(r, "bytes", &c->results_bytes) || !get_u64(e, "bytes", &c->errors_bytes) ||
             !get_u64(l, "bytes", &c->ledger_bytes) || !json_is_boolean(json_object_get(r, "gzip")) ||
             (ver >= 2 && (!get_hex(r, "sha256", c->results_sha256) || !get_hex(e, "sha256", c->errors_sha256) ||
                           !get_hex(l, "sha256", c->ledger_sha256))))
        bad = "sinks";
    else if (!get_u64(ct, "docs_ok", &c->docs_ok) || !get_u64(ct, "docs_failed", &c->docs_failed) ||
             !get_u64(ct, "records", &c->records) || !get_u64(ct, "errors", &c->errors) ||
             !get_u64(o, "runs", &runs) || !json_is_boolean(json_object_get(o, "complete")))
        bad = "counts";
    if (bad) {
        json_decref(o);
        return dp_err_set(err, DP_EFORMAT, "%s: damaged checkpoint: missing or invalid %s", path, bad);
    }
    json_t *in = json_object_get(sk, "intermediate"); /* (only when the job has one) */
    if (in && (!json_is_string(json_object_get(in, "path")) || !get_u64(in, "bytes", &c->inter_bytes) ||
               !get_hex(in, "sha256", c->inter_sha256))) {
        json_decref(o);
        return dp_err_set(err, DP_EFORMAT, "%s: damaged checkpoint: missing or invalid sinks.intermediate", path);
    }
    if (in && !(c->inter_path = strdup(json_string_value(json_object_get(in, "path"))))) {
        json_decref(o);
        return dp_err_set(err, DP_ENOMEM, "out of memory");
    }
    c->results_path = strdup(json_string_value(json_object_get(r, "path")));
    c->errors_path = strdup(json_string_value(json_object_get(e, "path")));
    c->gzip = json_is_true(json_object_get(r, "gzip"));
    c->runs = (int64_t)runs;
    json_t *ws = json_object_get(o, "work_seconds"); /* (optional: older checkpoints have none) */
    c->work_seconds = json_is_number(ws) && json_number_value(ws) > 0 ? json_number_value(ws) : 0;
    c->complete = json_is_true(json_object_get(o, "complete"));
    uint64_t commits = 0; /* (optional: older checkpoints have none) */
    if (json_object_get(o, "commits") && !get_u64(o, "commits", &commits)) {
        json_decref(o);
        return dp_err_set(err, DP_EFORMAT, "%s: damaged checkpoint: invalid commits", path);
    }
    c->commits = commits;
    json_decref(o);
    if (!c->results_path || !c->errors_path) {
        pl_checkpoint_free(c);
        return dp_err_set(err, DP_ENOMEM, "out of memory");
    }
    return DP_OK;
}

char *pl_checkpoint_json(const pl_checkpoint *c) {
    json_t *o = json_pack("{s:i, s:{s:s, s:s, s:s}, s:{s:{s:s, s:I, s:s, s:b}, s:{s:s, s:I, s:s}, s:{s:I, s:s}}, "
                          "s:{s:I, s:I, s:I, s:I}, s:I, s:b, s:f}",
                          "version", CHECKPOINT_VERSION, "fingerprint", "model_sha256", c->fp.model, "templates_sha256",
                          c->fp.templates, "settings_sha256", c->fp.settings, "sinks", "results", "path",
                          c->results_path, "bytes", (json_int_t)c->results_bytes, "sha256", c->results_sha256,
                          "gzip", c->gzip, "errors", "path", c->errors_path, "bytes", (json_int_t)c->errors_bytes,
                          "sha256", c->errors_sha256, "ledger", "bytes", (json_int_t)c->ledger_bytes, "sha256",
                          c->ledger_sha256, "counts", "docs_ok", (json_int_t)c->docs_ok, "docs_failed",
                          (json_int_t)c->docs_failed, "records", (json_int_t)c->records, "errors",
                          (json_int_t)c->errors, "runs", (json_int_t)c->runs, "complete", c->complete,
                          "work_seconds", (double)(int64_t)(c->work_seconds * 10) / 10);
    if (o && c->inter_path &&
        json_object_set_new(json_object_get(o, "sinks"), "intermediate",
                            json_pack("{s:s, s:I, s:s}", "path", c->inter_path, "bytes", (json_int_t)c->inter_bytes,
                                      "sha256", c->inter_sha256))) {
        json_decref(o);
        o = NULL;
    }
    if (o && json_object_set_new(o, "commits", json_integer((json_int_t)c->commits))) {
        json_decref(o);
        o = NULL;
    }
    char sum[65];
    if (o && (!checksum_of(o, sum) || json_object_set_new(o, "checksum", json_string(sum)))) {
        json_decref(o);
        o = NULL;
    }
    char *s = o ? json_dumps(o, JSON_INDENT(1) | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    return s;
}

dp_status pl_checkpoint_write(const char *path, const pl_checkpoint *c, dp_err *err) {
    char *s = pl_checkpoint_json(c);
    if (!s) return dp_err_set(err, DP_ENOMEM, "%s: out of memory", path);
    size_t n = strlen(s);
    s[n] = '\n'; /* json_dumps leaves room for the NUL we overwrite */
    dp_status st = pl_write_atomic(path, s, n + 1, err);
    free(s);
    return st;
}

void pl_checkpoint_free(pl_checkpoint *c) {
    free(c->results_path);
    free(c->errors_path);
    free(c->inter_path);
    c->results_path = c->errors_path = c->inter_path = NULL;
}

/* ---- Ledger ----------------------------------------------------------------------------- */

typedef struct entry {
    char *key; /* path '\0' sha256 */
    size_t key_len;
    uint8_t status;
} entry;

struct pl_ledger {
    entry *tab;
    size_t cap, n, n_ok, n_failed;
};

static uint64_t hash_key(const char *k, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)k[i]) * 0x100000001b3ull;
    return h;
}

static entry *find(const pl_ledger *l, const char *k, size_t n) {
    if (!l->cap) return NULL;
    for (size_t i = hash_key(k, n) & (l->cap - 1);; i = (i + 1) & (l->cap - 1)) {
        entry *e = &l->tab[i];
        if (!e->key || (e->key_len == n && !memcmp(e->key, k, n))) return e;
    }
}

static dp_status grow(pl_ledger *l) {
    size_t cap = l->cap ? 2 * l->cap : 1024;
    pl_ledger nl = {calloc(cap, sizeof(entry)), cap, 0, 0, 0};
    if (!nl.tab) return DP_ENOMEM;
    for (size_t i = 0; i < l->cap; i++)
        if (l->tab[i].key) *find(&nl, l->tab[i].key, l->tab[i].key_len) = l->tab[i];
    free(l->tab);
    l->tab = nl.tab;
    l->cap = cap;
    return DP_OK;
}

static dp_status put(pl_ledger *l, const char *path, const char *sha, uint8_t status) {
    if (2 * (l->n + 1) > l->cap && grow(l)) return DP_ENOMEM;
    size_t pl = strlen(path), n = pl + 1 + strlen(sha);
    char *k = malloc(n + 1);
    if (!k) return DP_ENOMEM;
    memcpy(k, path, pl + 1);
    memcpy(k + pl + 1, sha, n - pl);
    entry *e = find(l, k, n);
    if (e->key) { /* the same document again (an edit reverted): the latest status wins */
        if (e->status == PL_LEDGER_OK) l->n_ok--; else l->n_failed--;
        free(k);
    } else {
        *e = (entry){k, n, 0};
        l->n++;
    }
    e->status = status;
    if (status == PL_LEDGER_OK) l->n_ok++; else l->n_failed++;
    return DP_OK;
}

dp_status pl_ledger_load(const char *path, uint64_t committed, const char *sha256, pl_ledger **out, dp_err *err) {
    pl_ledger *l = calloc(1, sizeof(*l));
    if (!l) return dp_err_set(err, DP_ENOMEM, "out of memory");
    *out = l;
    if (committed == 0) return DP_OK;
    dp_file f = {.handle = -1};
    dp_status st = dp_file_open(&f, path, DP_FILE_READ, err);
    if (st) return st;
    uint64_t size = 0;
    char *data = NULL;
    if (!(st = dp_file_size(&f, &size, err)) && size < committed)
        st = dp_err_set(err, DP_EIO, "%s: has %llu bytes, the checkpoint says %llu", path, (unsigned long long)size,
                        (unsigned long long)committed);
    if (!st && !(data = malloc(committed + 1))) st = dp_err_set(err, DP_ENOMEM, "%s: out of memory", path);
    if (!st) st = dp_file_pread(&f, data, committed, 0, err);
    dp_file_close(&f, NULL);
    if (!st && sha256 && *sha256) {
        uint8_t d[32];
        char hex[65];
        dp_sha256_digest(data, committed, d);
        dp_sha256_hex(d, hex);
        if (strcmp(hex, sha256))
            st = dp_err_set(err, DP_EFORMAT, "%s: damaged ledger: its first %llu bytes do not match the hash the "
                            "checkpoint recorded (the file was edited or corrupted)", path,
                            (unsigned long long)committed);
    }
    if (st) {
        free(data);
        return st;
    }
    int lineno = 0;
    for (size_t p = 0; p < committed && !st;) {
        const char *ls = data + p, *nl = memchr(ls, '\n', committed - p);
        lineno++;
        if (!nl) {
            st = dp_err_set(err, DP_EFORMAT, "%s:%d: committed line without a newline", path, lineno);
            break;
        }
        json_error_t je;
        json_t *o = json_loadb(ls, (size_t)(nl - ls), 0, &je);
        const char *dp = json_string_value(json_object_get(o, "path"));
        const char *sha = json_string_value(json_object_get(o, "sha256"));
        const char *s = json_string_value(json_object_get(o, "status"));
        if (!dp || !sha || !s || (strcmp(s, "ok") && strcmp(s, "failed")))
            st = dp_err_set(err, DP_EFORMAT, "%s:%d: damaged ledger line", path, lineno);
        else if (put(l, dp, sha, !strcmp(s, "ok") ? PL_LEDGER_OK : PL_LEDGER_FAILED))
            st = dp_err_set(err, DP_ENOMEM, "%s: out of memory", path);
        json_decref(o);
        p = (size_t)(nl - data) + 1;
    }
    free(data);
    return st;
}

void pl_ledger_free(pl_ledger *l) {
    if (!l) return;
    for (size_t i = 0; i < l->cap; i++) free(l->tab[i].key);
    free(l->tab);
    free(l);
}

pl_ledger_status pl_ledger_get(const pl_ledger *l, const char *path, const char *sha256) {
    size_t pl = strlen(path), n = pl + 1 + strlen(sha256);
    char stack[1024], *k = n < sizeof(stack) ? stack : malloc(n + 1);
    if (!k) return PL_LEDGER_NONE;
    memcpy(k, path, pl + 1);
    memcpy(k + pl + 1, sha256, n - pl);
    const entry *e = find(l, k, n);
    if (k != stack) free(k);
    return e && e->key ? (pl_ledger_status)e->status : PL_LEDGER_NONE;
}

size_t pl_ledger_count(const pl_ledger *l, pl_ledger_status st) {
    return st == PL_LEDGER_OK ? l->n_ok : st == PL_LEDGER_FAILED ? l->n_failed : l->n;
}

char *pl_ledger_line(const char *path, const char *sha256, bool ok, int64_t records, int64_t errors) {
    json_t *o = json_pack("{s:s, s:s, s:s, s:I, s:I}", "path", path, "sha256", sha256, "status", ok ? "ok" : "failed",
                          "records", (json_int_t)records, "errors", (json_int_t)errors);
    char *s = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII) : NULL;
    json_decref(o);
    return s;
}

dp_status pl_manifest_shards(const char *path, uint32_t *n, dp_err *err) {
    *n = 0;
    if (!dp_path_exists(path)) return dp_err_set(err, DP_ENOENT, "%s: no manifest", path);
    json_error_t je;
    json_t *o = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    json_t *v = json_object_get(o, "shards");
    dp_status st = DP_OK;
    if (!o) st = dp_err_set(err, DP_EFORMAT, "%s:%d:%d: damaged manifest: %s", path, je.line, je.column, je.text);
    else if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 65536 ||
             !json_is_array(json_object_get(o, "documents")))
        st = dp_err_set(err, DP_EFORMAT, "%s: damaged manifest: shards or documents missing", path);
    else *n = (uint32_t)json_integer_value(v);
    json_decref(o);
    return st;
}

/* ---- Model hash cache ------------------------------------------------------------------- */

dp_status pl_file_sha256(const char *path, char out[65], dp_err *err) {
    dp_map m;
    dp_status st = dp_map_open(&m, path, err);
    if (st) return st;
    uint8_t d[32];
    dp_sha256 h;
    dp_sha256_init(&h);
    dp_sha256_update(&h, m.data, m.size);
    dp_sha256_final(&h, d);
    dp_map_close(&m);
    dp_sha256_hex(d, out);
    return DP_OK;
}

dp_status pl_model_sha256(const char *model_path, const char *state_dir, char out[65], dp_err *err) {
    dp_stat_info si;
    dp_status st = dp_stat(model_path, true, &si, err);
    if (st) return st;
    char cache[4200];
    snprintf(cache, sizeof(cache), "%s/%s", state_dir, PL_MODEL_HASH_FILE);
    char *data = NULL;
    size_t len = 0;
    if (!dp_file_read_all(cache, 1 << 16, &data, &len, NULL)) {
        json_t *o = json_loadb(data, len, 0, NULL);
        uint64_t size = 0, ino = 0, dev = 0, mt = 0;
        const char *p = json_string_value(json_object_get(o, "path"));
        bool hit = p && !strcmp(p, model_path) && get_u64(o, "size", &size) && size == si.size &&
                   get_u64(o, "ino", &ino) && ino == si.ino && get_u64(o, "dev", &dev) && dev == si.dev &&
                   get_u64(o, "mtime_ns", &mt) && (int64_t)mt == si.mtime_ns && get_hex(o, "sha256", out);
        json_decref(o);
        free(data);
        if (hit) return DP_OK;
    }
    if ((st = pl_file_sha256(model_path, out, err))) return st;
    json_t *o = json_pack("{s:s, s:I, s:I, s:I, s:I, s:s}", "path", model_path, "size", (json_int_t)si.size, "ino",
                          (json_int_t)si.ino, "dev", (json_int_t)si.dev, "mtime_ns", (json_int_t)si.mtime_ns,
                          "sha256", out);
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    /* the cache is an optimisation: failing to write it is not an error */
    if (s) pl_write_atomic(cache, s, strlen(s), NULL);
    free(s);
    return DP_OK;
}
