/*
 * walk.c - see walk.h. Recursion depth is bounded (64 levels); directory loops through
 * followed links are detected by (device, inode) of the folders on the current path.
 */
#include "walk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "platform.h"

#define WALK_MAX_DEPTH 64

bool pl_glob_match(const char *p, const char *s) {
    for (;;) {
        if (!*p) return !*s;
        if (p[0] == '*' && p[1] == '*') {
            while (*p == '*') p++;
            if (*p == '/') { /* "**" + "/": zero or more whole parts */
                p++;
                for (const char *t = s;; t++) {
                    if ((t == s || t[-1] == '/') && pl_glob_match(p, t)) return true;
                    if (!*t) return false;
                }
            }
            for (const char *t = s;; t++) { /* bare "**": anything, '/' included */
                if (pl_glob_match(p, t)) return true;
                if (!*t) return false;
            }
        }
        if (*p == '*') {
            p++;
            for (const char *t = s;; t++) {
                if (pl_glob_match(p, t)) return true;
                if (!*t || *t == '/') return false;
            }
        }
        if (!*s) return false;
        if (*p == '?') {
            if (*s == '/') return false;
            p++, s++;
            continue;
        }
        if (*p == '[') {
            const char *q = p + 1;
            bool neg = *q == '!' || *q == '^', hit = false;
            if (neg) q++;
            const char *start = q;
            while (*q && (*q != ']' || q == start)) {
                if (q[1] == '-' && q[2] && q[2] != ']') {
                    if ((unsigned char)*s >= (unsigned char)q[0] && (unsigned char)*s <= (unsigned char)q[2]) hit = true;
                    q += 3;
                } else {
                    if (*s == *q) hit = true;
                    q++;
                }
            }
            if (*q != ']') { /* no closing bracket: a literal '[' */
                if (*s != '[') return false;
                p++, s++;
                continue;
            }
            if (hit == neg || *s == '/') return false;
            p = q + 1, s++;
            continue;
        }
        if (*p != *s) return false;
        p++, s++;
    }
}

static bool any_match(const char *const *pats, size_t n, const char *rel) {
    for (size_t i = 0; i < n; i++)
        if (pl_glob_match(pats[i], rel)) return true;
    return false;
}

static dp_status push_file(pl_walk *w, const char *rel, const char *abs, uint64_t size, bool too_large) {
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 256;
        pl_file *f = realloc(w->files, cap * sizeof(*f));
        if (!f) return DP_ENOMEM;
        w->files = f;
        w->cap = cap;
    }
    pl_file *f = &w->files[w->n];
    f->rel = strdup(rel);
    f->abs = strdup(abs);
    if (!f->rel || !f->abs) {
        free(f->rel);
        free(f->abs);
        return DP_ENOMEM;
    }
    f->size = size;
    f->too_large = too_large;
    w->n++;
    return DP_OK;
}

typedef struct dir_id {
    uint64_t dev, ino;
} dir_id;

static dp_status walk(const char *root, const char *rel, const pl_walk_opts *o, pl_walk *w, dir_id *path_ids,
                      int depth, dp_err *err) {
    char dir[4096];
    if (snprintf(dir, sizeof(dir), "%s%s%s", root, rel[0] ? "/" : "", rel) >= (int)sizeof(dir))
        return dp_err_set(err, DP_ERANGE, "path too long under %s", root);
    char **names;
    size_t n;
    dp_status st = dp_dir_list(dir, &names, &n, err);
    if (st) return st;
    for (size_t i = 0; i < n && !st; i++) {
        char crel[4096], cabs[4096];
        if (snprintf(crel, sizeof(crel), "%s%s%s", rel, rel[0] ? "/" : "", names[i]) >= (int)sizeof(crel) ||
            snprintf(cabs, sizeof(cabs), "%s/%s", root, crel) >= (int)sizeof(cabs)) {
            DP_LOG_WARN("skipping a path longer than 4095 bytes under %s", dir);
            continue;
        }
        dp_stat_info si;
        if (dp_stat(cabs, false, &si, NULL)) continue; /* vanished since the listing */
        if (si.kind == DP_KIND_LINK) {
            if (!o->follow_symlinks || dp_stat(cabs, true, &si, NULL)) {
                w->n_skipped_links++;
                continue;
            }
        }
        if (si.kind == DP_KIND_DIR) {
            bool loop = false;
            for (int d = 0; d < depth; d++) loop |= path_ids[d].dev == si.dev && path_ids[d].ino == si.ino;
            if (loop || depth + 1 >= WALK_MAX_DEPTH) {
                DP_LOG_WARN("not descending into %s (%s)", cabs, loop ? "a folder loop" : "too deep");
                continue;
            }
            path_ids[depth] = (dir_id){si.dev, si.ino};
            st = walk(root, crel, o, w, path_ids, depth + 1, err);
            continue;
        }
        if (si.kind != DP_KIND_FILE) {
            w->n_skipped_special++;
            continue;
        }
        if (o->n_include && !any_match(o->include, o->n_include, crel)) continue;
        if (any_match(o->exclude, o->n_exclude, crel)) continue;
        if (push_file(w, crel, cabs, si.size, o->max_file_size && si.size > o->max_file_size))
            st = dp_err_set(err, DP_ENOMEM, "out of memory listing %s", root);
    }
    free(names);
    return st;
}

dp_status pl_walk_dir(const char *root, const pl_walk_opts *o, pl_walk *out, dp_err *err) {
    dp_stat_info si;
    dp_status st = dp_stat(root, true, &si, err);
    if (st) return st;
    if (si.kind != DP_KIND_DIR) return dp_err_set(err, DP_ENOENT, "%s is not a folder", root);
    dir_id ids[WALK_MAX_DEPTH];
    ids[0] = (dir_id){si.dev, si.ino};
    return walk(root, "", o, out, ids, 1, err);
}

void pl_walk_free(pl_walk *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n; i++) {
        free(w->files[i].rel);
        free(w->files[i].abs);
    }
    free(w->files);
    memset(w, 0, sizeof(*w));
}
