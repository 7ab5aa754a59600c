/*
 * job_schema.c - the job file schema: every key, its type, default and range, and the
 * validation that turns a job_node tree into a job_spec. docs/job-file.md documents exactly
 * the keys of k_fields (a test checks that every key listed here appears there).
 *
 * DESIGN: one table drives parsing, defaults and range checks; fields live at offsets in
 * job_spec (or in job_input for the entries of `inputs`). Errors name the file, the line and
 * column of the offending node, the key path, what was found and what is allowed; unknown keys
 * get a "did you mean" from the table.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job.h"
#include "dynbuf.h"
#include "job_yaml.h"
#include "platform.h"

typedef enum ftype { F_STR, F_PATH, F_INT, F_SIZE, F_FLOAT, F_BOOL, F_ENUM, F_STRLIST, F_TEMPLATE, F_RFORMAT } ftype;

typedef struct field {
    const char *section;     /* "model", ..., "" for top level, "inputs[]" for input entries */
    const char *key;
    ftype type;
    size_t off;              /* into job_spec, or job_input for "inputs[]" */
    bool required;
    const char *def;         /* default as text (parsed like a value), NULL = none */
    double min, max;         /* numbers */
    const char *enums;       /* F_ENUM: "a|b|c", the value stored is the index */
} field;

#define S(m) offsetof(job_spec, m)
_Static_assert(offsetof(job_input, n_include) == offsetof(job_input, include) + sizeof(char **), "list, count");
_Static_assert(offsetof(job_input, n_exclude) == offsetof(job_input, exclude) + sizeof(char **), "list, count");
_Static_assert(offsetof(job_spec, generation.n_stop) == offsetof(job_spec, generation.stop) + sizeof(char **),
               "list, count");
#define I(m) offsetof(job_input, m)

static const field k_fields[] = {
    {"model", "path", F_PATH, S(model.path), true, NULL, 0, 0, NULL},
    {"model", "device", F_ENUM, S(model.device), false, "auto", 0, 0, "cpu|cuda|auto"}, /* dp_device order */
    {"model", "context", F_INT, S(model.context), false, "8192", 64, 1048576, NULL},
    {"model", "threads", F_INT, S(model.threads), false, "0", 0, 1024, NULL},
    {"model", "max_sequences", F_INT, S(model.max_sequences), false, "8", 1, 4096, NULL},
    {"model", "kv_type", F_ENUM, S(model.kv_type), false, "f16", 0, 0, "f16|q8_0"},
    {"model", "sha256", F_STR, S(model.sha256), false, NULL, 0, 0, NULL},
    {"inputs[]", "path", F_PATH, I(path), true, NULL, 0, 0, NULL},
    {"inputs[]", "include", F_STRLIST, I(include), false, "**/*", 0, 0, NULL},
    {"inputs[]", "exclude", F_STRLIST, I(exclude), false, NULL, 0, 0, NULL},
    {"inputs[]", "max_file_size", F_SIZE, I(max_file_size), false, "64MiB", 1, 4294967296.0, NULL},
    {"inputs[]", "follow_symlinks", F_BOOL, I(follow_symlinks), false, "false", 0, 0, NULL},
    {"inputs[]", "links_outside", F_BOOL, I(links_outside), false, "false", 0, 0, NULL},
    {"inputs[]", "jsonl_field", F_STR, I(jsonl_field), false, "text", 0, 0, NULL},
    {"inputs[]", "changed_since", F_STR, I(changed_since), false, NULL, 0, 0, NULL},
    {"prompts", "system", F_TEMPLATE, S(prompts.system), false, NULL, 0, 0, NULL},
    {"prompts", "template", F_TEMPLATE, S(prompts.template_), true, NULL, 0, 0, NULL},
    {"prompts", "reduce_template", F_TEMPLATE, S(prompts.reduce_template), false, NULL, 0, 0, NULL},
    {"generation", "max_tokens", F_INT, S(generation.max_tokens), false, "512", 1, 131072, NULL},
    {"generation", "temperature", F_FLOAT, S(generation.temperature), false, "0", 0, 5, NULL},
    {"generation", "top_k", F_INT, S(generation.top_k), false, "40", 0, 1000000, NULL},
    {"generation", "top_p", F_FLOAT, S(generation.top_p), false, "0.95", 0, 1, NULL},
    {"generation", "min_p", F_FLOAT, S(generation.min_p), false, "0.05", 0, 1, NULL},
    {"generation", "repeat_penalty", F_FLOAT, S(generation.repeat_penalty), false, "1.0", 0.1, 10, NULL},
    {"generation", "repeat_last_n", F_INT, S(generation.repeat_last_n), false, "64", -1, 1048576, NULL},
    {"generation", "presence_penalty", F_FLOAT, S(generation.presence_penalty), false, "0", -2, 2, NULL},
    {"generation", "frequency_penalty", F_FLOAT, S(generation.frequency_penalty), false, "0", -2, 2, NULL},
    {"generation", "seed", F_INT, S(generation.seed), false, "42", 0, 4294967295.0, NULL},
    {"generation", "thinking", F_BOOL, S(generation.thinking), false, "false", 0, 0, NULL},
    {"generation", "stop", F_STRLIST, S(generation.stop), false, NULL, 0, 16, NULL},
    {"generation", "response_format", F_RFORMAT, S(generation.response), false, NULL, 0, 0, NULL},
    {"generation", "grammar_file", F_PATH, S(generation.grammar_file), false, NULL, 0, 0, NULL},
    {"chunking", "max_tokens", F_INT, S(chunking.max_tokens), false, "0", 0, 1048576, NULL},
    {"chunking", "overlap", F_INT, S(chunking.overlap), false, "64", 0, 65536, NULL},
    {"chunking", "mode", F_ENUM, S(chunking.mode), false, "map-reduce", 0, 0, "map-reduce|per-chunk"},
    {"outputs", "jsonl", F_PATH, S(outputs.jsonl), true, NULL, 0, 0, NULL},
    {"outputs", "gzip", F_BOOL, S(outputs.gzip), false, "false", 0, 0, NULL},
    {"outputs", "per_document_dir", F_PATH, S(outputs.per_document_dir), false, NULL, 0, 0, NULL},
    {"outputs", "metrics", F_PATH, S(outputs.metrics), false, NULL, 0, 0, NULL},
    {"outputs", "intermediate", F_PATH, S(outputs.intermediate), false, NULL, 0, 0, NULL},
    {"outputs", "sqlite", F_PATH, S(outputs.sqlite), false, NULL, 0, 0, NULL},
    {"outputs", "sqlite_keep_deleted", F_BOOL, S(outputs.sqlite_keep_deleted), false, "false", 0, 0, NULL},
    {"embedding", "pooling", F_ENUM, S(embedding.pooling), false, "auto", 0, 0, "auto|mean|cls|last"},
    {"embedding", "instruction", F_STR, S(embedding.instruction), false, NULL, 0, 0, NULL},
    {"embedding", "normalize", F_BOOL, S(embedding.normalize), false, "true", 0, 0, NULL},
    {"", "task", F_ENUM, S(task), false, "generate", 0, 0, "generate|embed"},
    {"", "state_dir", F_PATH, S(state_dir), false, "state", 0, 0, NULL},
};
#define N_FIELDS (sizeof(k_fields) / sizeof(k_fields[0]))
static const char *const k_sections[] = {"task",     "model",   "inputs",    "prompts",    "generation",
                                         "embedding", "chunking", "outputs", "state_dir", "converters"};

static const char *const k_vars[] = {"content", "content_numbered", "path", "filename", "ext", "chunk_index",
                                     "chunk_count", "date", "doc_sha256"};

size_t job_schema_n_keys(void) { return N_FIELDS; }

void job_schema_key(size_t i, const char **section, const char **key) {
    *section = i < N_FIELDS ? k_fields[i].section : "";
    *key = i < N_FIELDS ? k_fields[i].key : "";
}

bool job_template_var_known(const char *name, size_t len) {
    for (size_t i = 0; i < sizeof(k_vars) / sizeof(k_vars[0]); i++)
        if (strlen(k_vars[i]) == len && !memcmp(k_vars[i], name, len)) return true;
    return false;
}

typedef struct ctx_error {
    int line, col;
    char *msg;
} ctx_error;

#define MAX_REPORTED 32

typedef struct ctx {
    const char *name; /* file name for messages */
    const char *dir;
    dp_err *err;
    ctx_error errors[MAX_REPORTED]; /* every schema error is reported, not only the first */
    int n_errors;
} ctx;

/* Records an error at node n and returns DP_EFORMAT; parsing goes on so that one pass over
 * the file reports all of them (report_errors puts them in file order). */
static dp_status fail(ctx *c, const job_node *n, const char *fmt, ...) DP_PRINTF(3, 4);
static dp_status fail(ctx *c, const job_node *n, const char *fmt, ...) {
    char msg[DP_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (c->n_errors < MAX_REPORTED) c->errors[c->n_errors] = (ctx_error){n ? n->line : 1, n ? n->col : 1, strdup(msg)};
    c->n_errors++;
    return DP_EFORMAT;
}

static int by_position(const void *a, const void *b) {
    const ctx_error *x = a, *y = b;
    return x->line != y->line ? (x->line > y->line) - (x->line < y->line) : (x->col > y->col) - (x->col < y->col);
}

/* err gets "FILE:LINE:COL: message" lines in file order, as many as fit. */
static void report_errors(ctx *c) {
    const int n = c->n_errors < MAX_REPORTED ? c->n_errors : MAX_REPORTED;
    qsort(c->errors, (size_t)n, sizeof(ctx_error), by_position);
    int listed = 0;
    for (int i = 0; i < n; i++) {
        const ctx_error *e = &c->errors[i];
        if (!c->err) break;
        if (i == 0) {
            dp_err_set(c->err, DP_EFORMAT, "%s:%d:%d: %s", c->name, e->line, e->col, e->msg ? e->msg : "out of memory");
            listed++;
            continue;
        }
        size_t have = strlen(c->err->msg);
        int k = snprintf(NULL, 0, "\n%s:%d:%d: %s", c->name, e->line, e->col, e->msg ? e->msg : "");
        if (k < 0 || have + (size_t)k + 32 >= sizeof(c->err->msg)) break;
        snprintf(c->err->msg + have, sizeof(c->err->msg) - have, "\n%s:%d:%d: %s", c->name, e->line, e->col,
                 e->msg ? e->msg : "");
        listed++;
    }
    if (c->err && listed < c->n_errors) {
        size_t have = strlen(c->err->msg);
        snprintf(c->err->msg + have, sizeof(c->err->msg) - have, "\n(%d more errors)", c->n_errors - listed);
    }
    for (int i = 0; i < n; i++) free(c->errors[i].msg);
}

static const char *kind_name(const job_node *n) {
    return n->kind == JOB_NODE_MAP ? "a mapping" : n->kind == JOB_NODE_SEQ ? "a list" : "a value";
}

/* Levenshtein distance, for "did you mean". */
static size_t edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b), prev[64], cur[64];
    if (la > 63 || lb > 63) return 99;
    for (size_t j = 0; j <= lb; j++) prev[j] = j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
            size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
            cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
        memcpy(prev, cur, (lb + 1) * sizeof(size_t));
    }
    return prev[lb];
}

static const char *suggest(const char *section, const char *key) {
    const char *best = NULL;
    size_t bd = 3;
    if (!section) {
        for (size_t i = 0; i < sizeof(k_sections) / sizeof(k_sections[0]); i++) {
            size_t d = edit_distance(key, k_sections[i]);
            if (d < bd) bd = d, best = k_sections[i];
        }
        return best;
    }
    for (size_t i = 0; i < N_FIELDS; i++) {
        if (strcmp(k_fields[i].section, section)) continue;
        size_t d = edit_distance(key, k_fields[i].key);
        if (d < bd) bd = d, best = k_fields[i].key;
    }
    return best;
}

static char *dupstr(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* A path from the job, relative to the job file's folder unless absolute; on Windows written
 * either way ("C:\docs\reports", "C:/docs/reports") and kept with '/' (dp_path_to_slashes). */
static char *resolve(const ctx *c, const char *p) {
    char *r;
    if (dp_path_is_absolute(p) || !c->dir || !c->dir[0]) r = dupstr(p, strlen(p));
    else {
        size_t n = strlen(c->dir) + strlen(p) + 2;
        r = malloc(n);
        if (r) snprintf(r, n, "%s/%s", c->dir, p);
    }
    if (r) dp_path_to_slashes(r);
    return r;
}

/* "64MiB", "100MB", "1G", "4096" -> bytes */
static bool parse_size(const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || v < 0) return false;
    while (*end == ' ') end++;
    double mul = 1;
    if (!*end || !strcmp(end, "B")) mul = 1;
    else if (!strcmp(end, "K") || !strcmp(end, "KiB") || !strcmp(end, "kB") || !strcmp(end, "KB")) mul = 1024;
    else if (!strcmp(end, "M") || !strcmp(end, "MiB") || !strcmp(end, "MB")) mul = 1048576;
    else if (!strcmp(end, "G") || !strcmp(end, "GiB") || !strcmp(end, "GB")) mul = 1073741824.0;
    else return false;
    *out = floor(v * mul);
    return true;
}

static dp_status check_template(ctx *c, const field *f, const job_node *n) {
    const char *s = n->text;
    for (const char *p = strstr(s, "{{"); p; p = strstr(p + 2, "{{")) {
        const char *e = strstr(p + 2, "}}");
        if (!e) return fail(c, n, "%s.%s: '{{' without a closing '}}'", f->section, f->key);
        const char *a = p + 2, *b = e;
        while (a < b && *a == ' ') a++;
        while (b > a && b[-1] == ' ') b--;
        if (!job_template_var_known(a, (size_t)(b - a)))
            return fail(c, n, "%s.%s: unknown variable {{%.*s}} (known: content, content_numbered, path, filename, ext, "
                        "chunk_index, chunk_count, date, doc_sha256)", f->section, f->key, (int)(b - a), a);
    }
    return DP_OK;
}

/* A YAML tree as JSON text: plain scalars that read as null, booleans or JSON numbers are those,
 * every other scalar a string. */
static bool yaml_to_json(const job_node *n, dp_buf *b) {
    bool ok = true;
    if (n->kind == JOB_NODE_MAP || n->kind == JOB_NODE_SEQ) {
        const bool map = n->kind == JOB_NODE_MAP;
        ok = !dp_buf_append(b, map ? "{" : "[", 1);
        for (size_t i = 0; ok && i < n->n; i++) {
            if (i) ok = !dp_buf_append(b, map && i % 2 ? ":" : ",", 1);
            if (ok && map && i % 2 == 0) { /* keys are strings */
                job_node k = *n->items[i];
                k.plain = false;
                ok = yaml_to_json(&k, b);
            } else if (ok) {
                ok = yaml_to_json(n->items[i], b);
            }
        }
        return ok && !dp_buf_append(b, map ? "}" : "]", 1);
    }
    const char *t = n->text;
    if (n->plain) {
        if (!strcmp(t, "null") || !strcmp(t, "~")) return !dp_buf_append(b, "null", 4);
        if (!strcmp(t, "true") || !strcmp(t, "false")) return !dp_buf_append(b, t, n->len);
        /* a JSON number exactly: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
        const char *p = t;
        if (*p == '-') p++;
        bool num = *p >= '0' && *p <= '9';
        if (num && *p == '0') p++;
        else while (*p >= '0' && *p <= '9') p++;
        if (num && *p == '.') {
            num = p[1] >= '0' && p[1] <= '9';
            for (p++; *p >= '0' && *p <= '9'; p++) {}
        }
        if (num && (*p == 'e' || *p == 'E')) {
            p++;
            if (*p == '+' || *p == '-') p++;
            num = *p >= '0' && *p <= '9';
            while (*p >= '0' && *p <= '9') p++;
        }
        if (num && !*p) return !dp_buf_append(b, t, n->len);
    }
    ok = !dp_buf_append(b, "\"", 1);
    for (size_t i = 0; ok && i < n->len; i++) {
        const unsigned char ch = (unsigned char)t[i];
        if (ch == '"' || ch == '\\') ok = !dp_buf_printf(b, "\\%c", ch);
        else if (ch < 0x20) ok = !dp_buf_printf(b, "\\u%04x", ch);
        else ok = !dp_buf_append(b, &t[i], 1);
    }
    return ok && !dp_buf_append(b, "\"", 1);
}

static const job_node *map_get(const job_node *m, const char *key);

/* generation.response_format: {type: text | json_object | json_schema, json_schema: {name, strict,
 * description, schema: {...} | schema_file: PATH}} (OpenAI's shape). The schema itself is checked
 * when the run compiles it (docpipe validate does). */
static dp_status response_format(ctx *c, const job_node *n, job_spec *j) {
    j->generation.rf_line = n->line, j->generation.rf_col = n->col;
    if (n->kind != JOB_NODE_MAP)
        return fail(c, n, "generation.response_format must be a mapping ({type: json_schema, json_schema: {...}}), not %s",
                    kind_name(n));
    for (size_t i = 0; i + 1 < n->n; i += 2)
        if (strcmp(n->items[i]->text, "type") && strcmp(n->items[i]->text, "json_schema"))
            return fail(c, n->items[i], "unknown key '%s' in generation.response_format (type, json_schema)",
                        n->items[i]->text);
    const job_node *t = map_get(n, "type"), *js = map_get(n, "json_schema");
    if (!t || t->kind != JOB_NODE_SCALAR)
        return fail(c, n, "generation.response_format.type is required: text, json_object or json_schema");
    if (!strcmp(t->text, "text")) j->generation.response = JOB_RESPONSE_TEXT;
    else if (!strcmp(t->text, "json_object")) j->generation.response = JOB_RESPONSE_JSON_OBJECT;
    else if (!strcmp(t->text, "json_schema")) j->generation.response = JOB_RESPONSE_JSON_SCHEMA;
    else return fail(c, t, "generation.response_format.type is '%s' but must be text, json_object or json_schema", t->text);
    if (j->generation.response != JOB_RESPONSE_JSON_SCHEMA) {
        if (js) return fail(c, js, "generation.response_format.json_schema goes with type json_schema only");
        return DP_OK;
    }
    if (!js || js->kind != JOB_NODE_MAP)
        return fail(c, js ? js : t, "type json_schema needs json_schema: {name: ..., schema: {...}} (or schema_file: PATH)");
    for (size_t i = 0; i + 1 < js->n; i += 2) {
        const char *k = js->items[i]->text;
        if (strcmp(k, "name") && strcmp(k, "strict") && strcmp(k, "description") && strcmp(k, "schema") &&
            strcmp(k, "schema_file"))
            return fail(c, js->items[i], "unknown key '%s' in generation.response_format.json_schema (name, strict, "
                        "description, schema, schema_file)", k);
    }
    const job_node *sc = map_get(js, "schema"), *sf = map_get(js, "schema_file");
    if (!!sc == !!sf)
        return fail(c, js, "generation.response_format.json_schema needs exactly one of schema (inline) and schema_file");
    if (sf) {
        if (sf->kind != JOB_NODE_SCALAR || !sf->len) return fail(c, sf, "schema_file must be a path");
        j->generation.schema_file = resolve(c, sf->text);
        return j->generation.schema_file ? DP_OK : dp_err_set(c->err, DP_ENOMEM, "out of memory");
    }
    if (sc->kind != JOB_NODE_MAP) return fail(c, sc, "json_schema.schema must be a mapping (a JSON Schema)");
    dp_buf b;
    dp_buf_init(&b, JOB_YAML_MAX_BYTES * 2);
    if (!yaml_to_json(sc, &b)) {
        dp_buf_free(&b);
        return dp_err_set(c->err, DP_ENOMEM, "out of memory");
    }
    j->generation.schema_json = (char *)b.data; /* NUL-terminated by dp_buf */
    return DP_OK;
}

/* Stores value node n into base + f->off. */
static dp_status set_field(ctx *c, const field *f, const job_node *n, uint8_t *base, bool is_default) {
    void *dst = base + f->off;
    if (f->type == F_RFORMAT) return response_format(c, n, (job_spec *)base);
    if (f->type == F_STRLIST) {
        /* a list field is followed by its count (char **x; size_t n_x;) */
        char ***list = dst;
        size_t *count = (size_t *)(base + f->off + sizeof(char **));
        const bool globs = !strcmp(f->section, "inputs[]");
        const job_node *const *items = &n;
        size_t k = 1;
        if (n->kind == JOB_NODE_SEQ) items = (const job_node *const *)n->items, k = n->n;
        else if (n->kind != JOB_NODE_SCALAR)
            return fail(c, n, "%s.%s must be a list of %s, not %s", f->section, f->key,
                        globs ? "glob patterns" : "strings", kind_name(n));
        if (f->max > 0 && (double)k > f->max)
            return fail(c, n, "%s.%s has %zu entries; at most %g", f->section, f->key, k, f->max);
        *list = calloc(k ? k : 1, sizeof(char *));
        if (!*list) return dp_err_set(c->err, DP_ENOMEM, "out of memory");
        for (size_t i = 0; i < k; i++) {
            if (items[i]->kind != JOB_NODE_SCALAR || !items[i]->len)
                return fail(c, items[i], "%s.%s: each entry must be a non-empty %s", f->section, f->key,
                            globs ? "glob pattern" : "string");
            (*list)[i] = dupstr(items[i]->text, items[i]->len);
            *count = i + 1;
        }
        return DP_OK;
    }
    if (n->kind != JOB_NODE_SCALAR)
        return fail(c, n, "%s%s%s must be a value, not %s", f->section, f->section[0] ? "." : "", f->key, kind_name(n));
    const char *t = n->text;
    char full[96]; /* "generation.top_k", or "task" at the top level */
    snprintf(full, sizeof(full), "%s%s%s", f->section, f->section[0] ? "." : "", f->key);
    switch (f->type) {
    case F_STR:
    case F_TEMPLATE:
        if (f->type == F_TEMPLATE) {
            dp_status st = check_template(c, f, n);
            if (st) return st;
        }
        *(char **)dst = dupstr(t, n->len);
        return DP_OK;
    case F_PATH:
        if (!n->len) return fail(c, n, "%s: an empty path", full);
        *(char **)dst = resolve(c, t);
        return DP_OK;
    case F_BOOL:
        if (!strcmp(t, "true") || !strcmp(t, "yes")) *(bool *)dst = true;
        else if (!strcmp(t, "false") || !strcmp(t, "no")) *(bool *)dst = false;
        else return fail(c, n, "%s is '%s' but must be true or false", full, t);
        return DP_OK;
    case F_ENUM: {
        int idx = 0;
        for (const char *e = f->enums; *e; idx++) {
            const char *bar = strchr(e, '|');
            size_t l = bar ? (size_t)(bar - e) : strlen(e);
            if (l == n->len && !memcmp(e, t, l)) {
                *(int *)dst = idx;
                return DP_OK;
            }
            e += l + (bar ? 1 : 0);
        }
        return fail(c, n, "%s is '%s' but must be one of %s", full, t, f->enums);
    }
    case F_INT:
    case F_SIZE:
    case F_FLOAT: {
        double v;
        char *end = NULL;
        if (f->type == F_SIZE) {
            if (!parse_size(t, &v))
                return fail(c, n, "%s is '%s' but must be a size such as 4096, 64KiB, 100MB or 1GiB", full, t);
        } else {
            errno = 0;
            v = strtod(t, &end);
            if (!n->len || end == t || *end || errno || isnan(v))
                return fail(c, n, "%s is '%s' but must be a number", full, t);
            if (f->type == F_INT && v != floor(v))
                return fail(c, n, "%s is %s but must be a whole number", full, t);
        }
        if (v < f->min || v > f->max)
            return fail(c, n, "%s is %s but must be in [%g, %g]", full, t, f->min, f->max);
        if (f->type == F_FLOAT) *(double *)dst = v;
        else *(int64_t *)dst = (int64_t)v;
        return DP_OK;
    }
    default: break;
    }
    (void)is_default;
    return DP_OK;
}

/* Applies the fields of `section` from mapping m (may be NULL: defaults only) to base. A key
 * in error is reported and the others still checked; returns DP_EFORMAT if any was in error. */
static dp_status apply_section(ctx *c, const char *section, const job_node *m, const job_node *where, uint8_t *base) {
    if (m && m->kind != JOB_NODE_MAP)
        return fail(c, m, "%s must be a mapping of keys, not %s", section, kind_name(m));
    const int errors_before = c->n_errors;
    /* unknown or duplicate keys */
    for (size_t i = 0; m && i + 1 < m->n; i += 2) {
        const job_node *k = m->items[i];
        bool known = false;
        for (size_t f = 0; f < N_FIELDS && !known; f++)
            known = !strcmp(k_fields[f].section, section) && !strcmp(k_fields[f].key, k->text);
        if (!known) {
            const char *s = suggest(section, k->text);
            fail(c, k, "unknown key '%s' in %s%s%s%s", k->text, section, s ? " (did you mean '" : "",
                 s ? s : "", s ? "'?)" : "");
            continue;
        }
        for (size_t j = 0; j < i; j += 2)
            if (!strcmp(m->items[j]->text, k->text)) {
                fail(c, k, "key '%s' appears twice in %s (first at line %d)", k->text, section, m->items[j]->line);
                break;
            }
    }
    for (size_t f = 0; f < N_FIELDS; f++) {
        const field *fd = &k_fields[f];
        if (strcmp(fd->section, section)) continue;
        const job_node *v = NULL;
        for (size_t i = 0; m && i + 1 < m->n; i += 2)
            if (!strcmp(m->items[i]->text, fd->key)) v = m->items[i + 1];
        if (v && v->kind == JOB_NODE_SCALAR && v->plain && (!strcmp(v->text, "null") || !strcmp(v->text, "~") ||
                                                           !v->len))
            v = NULL; /* an explicit null means "the default" */
        dp_status st = DP_OK;
        if (!v) {
            if (fd->required)
                fail(c, where, "%s.%s is required", !strcmp(section, "inputs[]") ? "inputs[]" : section, fd->key);
            if (!fd->def) continue;
            job_node dn = {JOB_NODE_SCALAR, where ? where->line : 1, where ? where->col : 1, (char *)fd->def,
                           strlen(fd->def), true, NULL, 0};
            st = set_field(c, fd, &dn, base, true);
        } else {
            st = set_field(c, fd, v, base, false);
        }
        if (st && st != DP_EFORMAT) return st; /* out of memory: nothing more to say */
    }
    return c->n_errors > errors_before ? DP_EFORMAT : DP_OK;
}

/* The defaults of a section that does not apply to the job's task (nothing is required). */
static void apply_defaults(ctx *c, const char *section, uint8_t *base) {
    for (size_t f = 0; f < N_FIELDS; f++) {
        const field *fd = &k_fields[f];
        if (strcmp(fd->section, section) || !fd->def) continue;
        job_node dn = {JOB_NODE_SCALAR, 1, 1, (char *)fd->def, strlen(fd->def), true, NULL, 0};
        set_field(c, fd, &dn, base, true);
    }
}

static const job_node *map_get(const job_node *m, const char *key);

/* A top-level key with a scalar value (task, state_dir); absent or null: its default. */
static dp_status apply_top(ctx *c, const job_node *root, const char *name, job_spec *j) {
    const field *fd = NULL;
    for (size_t f = 0; f < N_FIELDS && !fd; f++)
        if (!k_fields[f].section[0] && !strcmp(k_fields[f].key, name)) fd = &k_fields[f];
    const job_node *v = map_get(root, name);
    if (v && !(v->kind == JOB_NODE_SCALAR && v->plain && (!strcmp(v->text, "null") || !strcmp(v->text, "~") || !v->len)))
        return set_field(c, fd, v, (uint8_t *)j, false);
    if (!fd->def) return DP_OK;
    job_node dn = {JOB_NODE_SCALAR, v ? v->line : root->line, v ? v->col : root->col, (char *)fd->def,
                   strlen(fd->def), true, NULL, 0};
    return set_field(c, fd, &dn, (uint8_t *)j, true);
}

static const job_node *map_get(const job_node *m, const char *key) {
    for (size_t i = 0; m && i + 1 < m->n; i += 2)
        if (m->items[i]->kind == JOB_NODE_SCALAR && !strcmp(m->items[i]->text, key)) return m->items[i + 1];
    return NULL;
}

static const job_node *map_key(const job_node *m, const char *key) {
    for (size_t i = 0; m && i + 1 < m->n; i += 2)
        if (m->items[i]->kind == JOB_NODE_SCALAR && !strcmp(m->items[i]->text, key)) return m->items[i];
    return NULL;
}

/* ${NAME} and ${NAME:-default} in a value, from the environment; $${ is a literal ${. A
 * variable that is not set (and has no default) is an error at the value's position, so
 * `docpipe validate` shows it before a run. */
static dp_status expand_scalar(ctx *c, job_node *n) {
    if (!strstr(n->text, "${")) return DP_OK;
    size_t cap = n->len + 1, len = 0;
    char *out = malloc(cap);
    if (!out) return dp_err_set(c->err, DP_ENOMEM, "out of memory");
    dp_status st = DP_OK;
    for (const char *p = n->text; *p && !st;) {
        const char *piece = p;
        size_t plen = 1;
        char name[128];
        if (p[0] == '$' && p[1] == '$' && p[2] == '{') {
            piece = "${", plen = 2, p += 3;
        } else if (p[0] == '$' && p[1] == '{') {
            const char *e = strchr(p + 2, '}');
            size_t k = 0;
            const char *q = p + 2;
            if (isalpha((unsigned char)*q) || *q == '_')
                while ((isalnum((unsigned char)*q) || *q == '_') && k < sizeof(name) - 1) name[k++] = *q++;
            name[k] = 0;
            const bool has_def = q[0] == ':' && q[1] == '-';
            if (!e || !k || (q != e && !has_def)) {
                st = fail(c, n, "'%.40s': a reference must read ${NAME} or ${NAME:-default} (write $${ for a "
                          "literal ${)", p);
                break;
            }
            const char *v = getenv(name);
            if (v && *v) piece = v, plen = strlen(v);
            else if (has_def) piece = q + 2, plen = (size_t)(e - (q + 2));
            else {
                st = fail(c, n, "environment variable %s is not set or empty (${%s:-default} gives a default)", name,
                          name);
                break;
            }
            p = e + 1;
        } else {
            p++;
        }
        if (len + plen + 1 > cap) {
            cap = 2 * (len + plen + 1);
            char *g = realloc(out, cap);
            if (!g) {
                free(out);
                return dp_err_set(c->err, DP_ENOMEM, "out of memory");
            }
            out = g;
        }
        memcpy(out + len, piece, plen);
        len += plen;
    }
    if (st) {
        free(out);
        return st;
    }
    out[len] = 0;
    free(n->text);
    n->text = out;
    n->len = len;
    return DP_OK;
}

static dp_status expand_env(ctx *c, job_node *n) {
    if (!n) return DP_OK;
    if (n->kind == JOB_NODE_SCALAR) return expand_scalar(c, n);
    for (size_t i = n->kind == JOB_NODE_MAP ? 1 : 0; i < n->n; i += n->kind == JOB_NODE_MAP ? 2 : 1) {
        dp_status st = expand_env(c, n->items[i]);
        if (st && st != DP_EFORMAT) return st;
    }
    return DP_OK;
}

static dp_status build(ctx *c, const job_node *root, job_spec *j) {
    if (!root) return fail(c, NULL, "the job file is empty");
    if (root->kind != JOB_NODE_MAP) return fail(c, root, "the job file must be a mapping of sections, not %s",
                                               kind_name(root));
    for (size_t i = 0; i + 1 < root->n; i += 2) {
        const job_node *k = root->items[i];
        if (k->kind != JOB_NODE_SCALAR) {
            fail(c, k, "section names must be plain words");
            continue;
        }
        bool known = false;
        for (size_t s = 0; s < sizeof(k_sections) / sizeof(k_sections[0]); s++) known |= !strcmp(k->text, k_sections[s]);
        if (!known) {
            const char *s = suggest(NULL, k->text);
            fail(c, k, "unknown section '%s'%s%s%s (sections: task, model, inputs, prompts, generation, embedding, "
                 "chunking, outputs, state_dir, converters)", k->text, s ? " (did you mean '" : "", s ? s : "", s ? "'?)" : "");
            continue;
        }
        for (size_t p = 0; p < i; p += 2)
            if (root->items[p]->kind == JOB_NODE_SCALAR && !strcmp(root->items[p]->text, k->text)) {
                fail(c, k, "section '%s' appears twice (first at line %d)", k->text, root->items[p]->line);
                break;
            }
    }
    dp_status st;
    bool task_known;
    {
        /* the task decides which sections belong: an embedding job has no prompt and generates nothing */
        job_spec probe = {0};
        ctx quiet = {.name = c->name, .dir = c->dir, .err = c->err};
        apply_top(&quiet, root, "task", &probe);
        for (int i = 0; i < quiet.n_errors && i < MAX_REPORTED; i++) free(quiet.errors[i].msg);
        j->task = probe.task;
        task_known = quiet.n_errors == 0; /* else the task's own error is the one to read */
    }
    const bool embed = j->task == JOB_TASK_EMBED;
    const char *secs[] = {"model", "prompts", "generation", "embedding", "chunking", "outputs"};
    for (size_t s = 0; s < 6; s++) {
        const job_node *m = map_get(root, secs[s]);
        const bool wrong = embed ? !strcmp(secs[s], "prompts") || !strcmp(secs[s], "generation")
                                 : !strcmp(secs[s], "embedding");
        if (!task_known && (!strcmp(secs[s], "prompts") || !strcmp(secs[s], "generation") ||
                            !strcmp(secs[s], "embedding"))) {
            continue;
        }
        if (m && wrong) {
            fail(c, map_key(root, secs[s]), embed ? "section '%s' does not apply to task: embed (an embedding job "
                 "has no prompt and generates nothing; remove it, or set task: generate)" :
                 "section '%s' applies to task: embed only (add task: embed at the top of the job)", secs[s]);
            continue;
        }
        if (!m && (!strcmp(secs[s], "model") || (!strcmp(secs[s], "prompts") && !embed) || !strcmp(secs[s], "outputs"))) {
            fail(c, root, "section '%s' is required", secs[s]);
            continue;
        }
        if (wrong) { /* absent and not applicable: defaults only, no required keys */
            apply_defaults(c, secs[s], (uint8_t *)j);
            continue;
        }
        /* a missing required key is reported at the section's name */
        st = apply_section(c, secs[s], m, m ? map_key(root, secs[s]) : root, (uint8_t *)j);
        if (st && st != DP_EFORMAT) return st;
    }
    {
        /* where model.path is written, for "model file missing" messages after parsing */
        const job_node *mp = map_get(map_get(root, "model"), "path");
        j->model.path_line = mp ? mp->line : 1;
        j->model.path_col = mp ? mp->col : 1;
    }
    /* top-level values */
    for (size_t t = 0; t < 2; t++) {
        st = apply_top(c, root, t ? "state_dir" : "task", j);
        if (st && st != DP_EFORMAT) return st;
    }
    const job_node *in = map_get(root, "inputs");
    if (!in) fail(c, root, "section 'inputs' is required (a list of folders)");
    else if (in->kind != JOB_NODE_SEQ || in->n == 0)
        fail(c, in, "inputs must be a non-empty list of folders (- path: docs)");
    else {
        j->inputs = calloc(in->n, sizeof(job_input));
        if (!j->inputs) return dp_err_set(c->err, DP_ENOMEM, "out of memory");
        for (size_t i = 0; i < in->n; i++) {
            const job_node *e = in->items[i];
            job_input *ji = &j->inputs[j->n_inputs++];
            ji->line = e->line;
            ji->col = e->col;
            st = apply_section(c, "inputs[]", e, e, (uint8_t *)ji);
            if (st && st != DP_EFORMAT) return st;
        }
    }
    /* converters: {".ext": [program, arg, ...]} */
    const job_node *cv = map_get(root, "converters");
    if (cv && cv->kind != JOB_NODE_MAP) fail(c, cv, "converters must be a mapping of extensions to commands, not %s",
                                             kind_name(cv));
    else if (cv && cv->n) {
        j->converters = calloc(cv->n / 2, sizeof(*j->converters));
        if (!j->converters) return dp_err_set(c->err, DP_ENOMEM, "out of memory");
        for (size_t i = 0; i + 1 < cv->n; i += 2) {
            const job_node *k = cv->items[i], *v = cv->items[i + 1];
            if (k->len < 2 || k->text[0] != '.' || strchr(k->text + 1, '.') || strchr(k->text, '/')) {
                fail(c, k, "converters: '%s' must be an extension such as .doc", k->text);
                continue;
            }
            if (v->kind != JOB_NODE_SEQ || v->n == 0) {
                fail(c, v, "converters.%s must be a list: the program, then its arguments, e.g. [antiword, "
                     "\"{input}\"]", k->text + 1);
                continue;
            }
            struct job_converter *jc = &j->converters[j->n_converters++];
            jc->line = k->line, jc->col = k->col;
            jc->ext = dupstr(k->text, k->len);
            jc->argv = calloc(v->n + 1, sizeof(char *));
            if (!jc->ext || !jc->argv) return dp_err_set(c->err, DP_ENOMEM, "out of memory");
            for (char *x = jc->ext; *x; x++) *x = (char)tolower((unsigned char)*x);
            for (size_t a = 0; a < v->n; a++) {
                const job_node *arg = v->items[a];
                if (arg->kind != JOB_NODE_SCALAR || (a == 0 && !arg->len)) {
                    fail(c, arg, "converters.%s: each entry must be a string (the first the program)", k->text + 1);
                    break;
                }
                if (!(jc->argv[jc->argc++] = dupstr(arg->text, arg->len)))
                    return dp_err_set(c->err, DP_ENOMEM, "out of memory");
            }
        }
    }
    /* cross-field rules: only between values that parsed */
    if (c->n_errors) return DP_EFORMAT;
    const job_node *gen = map_get(root, "generation"), *ch = map_get(root, "chunking");
    if (j->model.sha256) { /* 64 hex digits, checked here rather than when the run has started */
        size_t n = strlen(j->model.sha256), k = 0;
        while (k < n && strchr("0123456789abcdefABCDEF", j->model.sha256[k])) k++;
        if (n != 64 || k != n)
            fail(c, map_get(map_get(root, "model"), "sha256"), "model.sha256 must be 64 hexadecimal digits "
                 "(sha256sum's output), got '%.80s'", j->model.sha256);
    }
    if (j->chunking.max_tokens && j->chunking.overlap >= j->chunking.max_tokens)
        fail(c, ch ? map_get(ch, "overlap") : root, "chunking.overlap (%lld) must be smaller than "
             "chunking.max_tokens (%lld)", (long long)j->chunking.overlap, (long long)j->chunking.max_tokens);
    if (j->task == JOB_TASK_EMBED) { /* every chunk is a record of its own */
        const job_node *mode = ch ? map_get(ch, "mode") : NULL;
        if (mode && j->chunking.mode != JOB_CHUNK_PER_CHUNK)
            fail(c, mode, "chunking.mode map-reduce combines generated answers; task: embed embeds each chunk "
                 "(per-chunk, the default for it)");
        j->chunking.mode = JOB_CHUNK_PER_CHUNK;
    }
    if (j->task == JOB_TASK_GENERATE && j->generation.max_tokens >= j->model.context)
        fail(c, gen ? map_get(gen, "max_tokens") : root, "generation.max_tokens (%lld) leaves no room for the "
             "prompt in model.context (%lld)", (long long)j->generation.max_tokens, (long long)j->model.context);
    if (j->outputs.intermediate && j->chunking.mode != JOB_CHUNK_MAP_REDUCE)
        fail(c, map_get(map_get(root, "outputs"), "intermediate"), "outputs.intermediate holds the map results of "
             "map-reduce; with chunking.mode per-chunk every record is a result of its own");
    if (j->outputs.intermediate && !strcmp(j->outputs.intermediate, j->outputs.jsonl))
        fail(c, map_get(map_get(root, "outputs"), "intermediate"), "outputs.intermediate must differ from "
             "outputs.jsonl");
    const job_node *pr = map_get(root, "prompts");
    if (j->prompts.template_ && !strstr(j->prompts.template_, "{{content}}") &&
        !strstr(j->prompts.template_, "{{ content }}") && !strstr(j->prompts.template_, "{{content_numbered}}") &&
        !strstr(j->prompts.template_, "{{ content_numbered }}"))
        fail(c, map_get(pr, "template"), "prompts.template must contain {{content}} (or {{content_numbered}})");
    if (j->prompts.reduce_template && !strstr(j->prompts.reduce_template, "{{content}}") &&
        !strstr(j->prompts.reduce_template, "{{ content }}"))
        fail(c, map_get(pr, "reduce_template"), "prompts.reduce_template must contain {{content}}");
    return c->n_errors ? DP_EFORMAT : DP_OK;
}

dp_status job_load_buffer(const char *data, size_t len, const char *name, const char *dir, job_spec *out,
                          dp_err *err) {
    job_node *root = NULL;
    dp_status st = job_yaml_parse(data, len, name, &root, err);
    if (st) return st;
    job_spec j;
    memset(&j, 0, sizeof(j));
    j.file = dupstr(name, strlen(name));
    j.dir = dupstr(dir ? dir : "", dir ? strlen(dir) : 0);
    if (j.dir) dp_path_to_slashes(j.dir); /* what paths are compared and made relative against */
    ctx c = {.name = name, .dir = j.dir, .err = err};
    st = expand_env(&c, root);
    if (!st || st == DP_EFORMAT) st = build(&c, root, &j);
    if (st == DP_EFORMAT) report_errors(&c);
    else
        for (int i = 0; i < c.n_errors && i < MAX_REPORTED; i++) free(c.errors[i].msg);
    job_node_free(root);
    if (st) {
        job_spec_free(&j);
        return st;
    }
    *out = j;
    return DP_OK;
}

dp_status job_load(const char *path, job_spec *out, dp_err *err) {
    char *data;
    size_t len;
    /* opened without blocking and refused unless a regular file: a FIFO named as the job file
     * cannot hang validate or run */
    dp_status st = dp_file_read_doc(path, true, NULL, JOB_YAML_MAX_BYTES, &data, &len, err);
    if (st) return st;
    char dir[4096];
    dp_path_dir(path, dir, sizeof(dir));
    st = job_load_buffer(data, len, path, dir, out, err);
    free(data);
    return st;
}

static void free_list(char **l, size_t n) {
    for (size_t i = 0; i < n; i++) free(l[i]);
    free(l);
}

void job_spec_free(job_spec *j) {
    if (!j) return;
    free(j->file);
    free(j->dir);
    free(j->model.path);
    free(j->model.sha256);
    free(j->generation.schema_json);
    free(j->generation.schema_file);
    free(j->generation.grammar_file);
    for (size_t i = 0; i < j->n_inputs; i++) {
        free(j->inputs[i].path);
        free_list(j->inputs[i].include, j->inputs[i].n_include);
        free_list(j->inputs[i].exclude, j->inputs[i].n_exclude);
        free(j->inputs[i].jsonl_field);
        free(j->inputs[i].changed_since);
    }
    free(j->inputs);
    free(j->prompts.system);
    free(j->prompts.template_);
    free(j->prompts.reduce_template);
    free(j->embedding.instruction);
    free_list(j->generation.stop, j->generation.n_stop);
    free(j->outputs.jsonl);
    free(j->outputs.per_document_dir);
    free(j->outputs.metrics);
    free(j->outputs.intermediate);
    free(j->outputs.sqlite);
    free(j->state_dir);
    for (size_t i = 0; i < j->n_converters; i++) {
        free(j->converters[i].ext);
        free_list(j->converters[i].argv, j->converters[i].argc);
    }
    free(j->converters);
    memset(j, 0, sizeof(*j));
}
