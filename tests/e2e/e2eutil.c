/*
 * e2eutil.c - see e2eutil.h.
 */
#include "e2eutil.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <zlib.h>

const char *e2e_model(const char *arch) {
    static char path[2][4096];
    const int k = !strcmp(arch, "qwen3");
    if (!path[k][0]) {
        snprintf(path[k], sizeof(path[k]), "%s/model-%s.gguf", tu_tmpdir(), arch);
        /* hidden 64, 2 layers: milliseconds per document, so crash trials stay cheap */
        int rc = tu_run(NULL, "make-test-model --arch %s --hidden 64 --ffn 128 --layers %d --head-dim 32 --heads 2 "
                        "--kv-heads 1 %s --out '%s'", arch, k ? 2 : 4,
                        k ? "" : "--ssm-dim 16 --ssm-k-heads 2 --ssm-v-heads 2", path[k]);
        if (rc != 0) fail_msg("make-test-model failed (%d): %s", rc, tu_last_stderr());
    }
    return path[k];
}

void e2e_write_job(const char *path, const char *model, const char *input, const char *extra) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "model:\n  path: %s\n  context: 256\n  threads: 1\n  max_sequences: 4\ninputs:\n  - path: %s\n%s",
            model, input, extra);
    fclose(f);
}

int e2e_sh(const char *fmt, ...) {
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

bool e2e_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

json_t *e2e_load_records(const char *path, size_t *n_lines) {
    gzFile g = gzopen(path, "rb");
    if (!g) fail_msg("%s: cannot open", path);
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap);
    int r;
    while ((r = gzread(g, buf + n, (unsigned)(cap - n))) > 0) {
        n += (size_t)r;
        if (n == cap) buf = realloc(buf, cap *= 2);
    }
    gzclose(g);
    json_t *map = json_object();
    size_t lines = 0;
    for (size_t p = 0; p < n;) {
        char *nl = memchr(buf + p, '\n', n - p);
        if (!nl) fail_msg("%s: last line has no newline (torn write)", path);
        json_error_t je;
        json_t *o = json_loadb(buf + p, (size_t)(nl - (buf + p)), JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
        if (!o || !json_is_object(o)) fail_msg("%s: line %zu is not a JSON object: %s", path, lines + 1, je.text);
        const char *cid = json_string_value(json_object_get(o, "custom_id"));
        if (!cid) fail_msg("%s: line %zu has no custom_id", path, lines + 1);
        if (json_object_get(map, cid)) fail_msg("%s: custom_id %s appears twice (duplicated result)", path, cid);
        json_object_set_new(map, cid, o);
        lines++;
        p = (size_t)(nl - buf) + 1;
    }
    free(buf);
    if (n_lines) *n_lines = lines;
    return map;
}

const char *e2e_text(json_t *rec) {
    json_t *ch = json_array_get(json_object_get(json_object_get(json_object_get(rec, "response"), "body"), "choices"), 0);
    const char *t = json_string_value(json_object_get(json_object_get(ch, "message"), "content"));
    return t ? t : "";
}

void e2e_check_records(json_t *recs, int context, int max_tokens) {
    const char *cid;
    json_t *o;
    json_object_foreach(recs, cid, o) {
        json_t *m = json_object_get(o, "meta");
        if (!json_is_string(json_object_get(m, "source_path")) || !json_is_string(json_object_get(m, "doc_sha256")) ||
            !json_is_string(json_object_get(m, "stage")) || !json_is_string(json_object_get(m, "model_sha256")) ||
            (!json_is_string(json_object_get(m, "template_sha256")) &&
             strcmp(json_string_value(json_object_get(m, "stage")), "embed")))
            fail_msg("%s: meta incomplete", cid);
        json_t *e = json_object_get(o, "error");
        if (json_is_object(e)) {
            if (!json_is_string(json_object_get(e, "code"))) fail_msg("%s: error without code", cid);
            continue;
        }
        json_t *u = json_object_get(json_object_get(json_object_get(o, "response"), "body"), "usage");
        json_int_t pt = json_integer_value(json_object_get(u, "prompt_tokens"));
        json_int_t ct = json_integer_value(json_object_get(u, "completion_tokens"));
        if (pt <= 0 || pt + max_tokens > context)
            fail_msg("%s: prompt of %lld tokens + max_tokens %d exceeds the context %d", cid, (long long)pt,
                     max_tokens, context);
        if (ct < 0 || ct > max_tokens) fail_msg("%s: %lld completion tokens > max_tokens", cid, (long long)ct);
    }
}

json_t *e2e_texts(json_t *recs) {
    json_t *t = json_object();
    const char *cid;
    json_t *o;
    json_object_foreach(recs, cid, o) {
        /* an embedding record's "text" is its vector */
        json_t *data = json_object_get(json_object_get(json_object_get(o, "response"), "body"), "data");
        json_object_set_new(t, cid, data ? json_deep_copy(data) : json_string(e2e_text(o)));
    }
    return t;
}
