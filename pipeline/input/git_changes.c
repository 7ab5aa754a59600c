/*
 * git_changes.c - changed files of a git work tree (git_changes.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "git_changes.h"
#include "platform.h"

#define GIT_TIMEOUT_MS 60000
#define GIT_MAX_OUT ((size_t)64 << 20)

/* Runs git with argv (after "git -C folder"); its stdout in *out. *code: its exit status. */
static dp_status git(const char *folder, const char *const *args, char **out, size_t *n, int *code, char *tail,
                     size_t tail_cap, dp_err *err) {
    const char *argv[16] = {"git", "-C", folder};
    size_t k = 3;
    for (size_t i = 0; args[i] && k < 15; i++) argv[k++] = args[i];
    argv[k] = NULL;
    dp_status st = dp_process_run(argv, NULL, 0, GIT_TIMEOUT_MS, GIT_MAX_OUT, out, n, tail, tail_cap, code, err);
    if (st == DP_ENOENT) return dp_err_set(err, DP_ENOENT, "changed_since needs git (apt-get install git)");
    return st;
}

static int by_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Appends the NUL-separated names of buf to out. */
static dp_status add_names(const char *buf, size_t n, pl_changed *out, size_t *cap) {
    for (size_t a = 0; a < n;) {
        const char *z = memchr(buf + a, 0, n - a);
        const size_t e = z ? (size_t)(z - buf) : n;
        if (e > a) {
            if (out->n == *cap) {
                *cap = *cap ? 2 * *cap : 64;
                char **v = realloc(out->paths, *cap * sizeof(char *));
                if (!v) return DP_ENOMEM;
                out->paths = v;
            }
            if (!(out->paths[out->n] = malloc(e - a + 1))) return DP_ENOMEM;
            memcpy(out->paths[out->n], buf + a, e - a);
            out->paths[out->n++][e - a] = 0;
        }
        a = e + 1;
    }
    return DP_OK;
}

dp_status pl_git_changed(const char *folder, const char *ref, pl_changed *out, dp_err *err) {
    memset(out, 0, sizeof(*out));
    char *o = NULL, tail[512] = "";
    size_t n = 0, cap = 0;
    int code = 0;
    dp_status st = git(folder, (const char *const[]){"rev-parse", "--is-inside-work-tree", NULL}, &o, &n, &code, tail,
                       sizeof(tail), err);
    if (st) return st;
    const bool inside = code == 0 && n >= 4 && !memcmp(o, "true", 4);
    free(o);
    if (!inside) return dp_err_set(err, DP_EINVAL, "%s is not a git work tree (changed_since needs one)", folder);
    /* a leading '-' would be read as an option: a ref never starts with one */
    if (ref[0] == '-') return dp_err_set(err, DP_EINVAL, "changed_since: '%s' is not a revision", ref);
    char spec[600];
    snprintf(spec, sizeof(spec), "%s^{commit}", ref);
    st = git(folder, (const char *const[]){"rev-parse", "--verify", "--quiet", spec, NULL}, &o, &n, &code, tail,
             sizeof(tail), err);
    free(o);
    if (st) return st;
    if (code != 0)
        return dp_err_set(err, DP_EINVAL, "changed_since: unknown revision '%s' in %s (a branch, tag or commit of "
                          "that repository)", ref, folder);
    st = git(folder, (const char *const[]){"diff", "--name-only", "-z", "--relative", "--no-renames", ref, "--", NULL},
             &o, &n, &code, tail, sizeof(tail), err);
    if (!st && code != 0) st = dp_err_set(err, DP_EIO, "git diff in %s failed: %s", folder, tail);
    if (!st && add_names(o, n, out, &cap)) st = dp_err_set(err, DP_ENOMEM, "out of memory");
    free(o);
    o = NULL;
    if (!st)
        st = git(folder, (const char *const[]){"ls-files", "--others", "--exclude-standard", "-z", NULL}, &o, &n, &code,
                 tail, sizeof(tail), err);
    if (!st && code != 0) st = dp_err_set(err, DP_EIO, "git ls-files in %s failed: %s", folder, tail);
    if (!st && add_names(o, n, out, &cap)) st = dp_err_set(err, DP_ENOMEM, "out of memory");
    free(o);
    if (st) {
        pl_changed_free(out);
        return st;
    }
    qsort(out->paths, out->n, sizeof(char *), by_str);
    return DP_OK;
}

bool pl_changed_has(const pl_changed *c, const char *rel) {
    size_t lo = 0, hi = c->n;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        const int k = strcmp(c->paths[mid], rel);
        if (!k) return true;
        if (k < 0) lo = mid + 1;
        else hi = mid;
    }
    return false;
}

void pl_changed_free(pl_changed *c) {
    for (size_t i = 0; i < c->n; i++) free(c->paths[i]);
    free(c->paths);
    memset(c, 0, sizeof(*c));
}
