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

static dp_status push_file(pl_walk *w, const char *rel, const char *abs, const dp_stat_info *si, bool too_large,
                           const char *error) {
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 256;
        pl_file *f = realloc(w->files, cap * sizeof(*f));
        if (!f) return DP_ENOMEM;
        w->files = f;
        w->cap = cap;
    }
    pl_file *f = &w->files[w->n];
    memset(f, 0, sizeof(*f));
    f->rel = strdup(rel);
    f->abs = strdup(abs);
    f->error = error ? strdup(error) : NULL;
    if (!f->rel || !f->abs || (error && !f->error)) {
        free(f->rel);
        free(f->abs);
        free(f->error);
        return DP_ENOMEM;
    }
    if (si) f->size = si->size, f->dev = si->dev, f->ino = si->ino, f->mtime_ns = si->mtime_ns;
    f->too_large = too_large;
    w->n++;
    w->n_errors += error != NULL;
    return DP_OK;
}

/* Whether the resolved path lies inside the resolved root. */
static bool inside(const char *root_real, const char *path) {
    char *r = NULL;
    if (dp_path_resolve(path, &r, NULL)) return false;
    const size_t n = strlen(root_real);
    const bool in = !strncmp(r, root_real, n) && (r[n] == '/' || r[n] == 0 || (n == 1 && root_real[0] == '/'));
    free(r);
    return in;
}

typedef struct dir_id {
    uint64_t dev, ino;
} dir_id;

static dp_status walk(const char *root, const char *root_real, const char *rel, const pl_walk_opts *o, pl_walk *w,
                      dir_id *path_ids, int depth, dp_err *err) {
    char dir[4096];
    if (snprintf(dir, sizeof(dir), "%s%s%s", root, rel[0] ? "/" : "", rel) >= (int)sizeof(dir))
        return dp_err_set(err, DP_ERANGE, "path too long under %s", root);
    char **names;
    size_t n;
    dp_err lerr = {0};
    dp_status st = dp_dir_list(dir, &names, &n, &lerr);
    if (st && !rel[0]) { /* the root itself: the walk fails */
        *err = lerr;
        return st;
    }
    if (st) { /* a subfolder: one error entry, the walk goes on */
        DP_LOG_WARN("%s", dp_err_msg(&lerr));
        return push_file(w, rel, dir, NULL, false, dp_err_msg(&lerr)) ? dp_err_set(err, DP_ENOMEM, "out of memory")
                                                                      : DP_OK;
    }
    for (size_t i = 0; i < n && !st; i++) {
        char crel[4096], cabs[4096];
        if (snprintf(crel, sizeof(crel), "%s%s%s", rel, rel[0] ? "/" : "", names[i]) >= (int)sizeof(crel) ||
            snprintf(cabs, sizeof(cabs), "%s/%s", root, crel) >= (int)sizeof(cabs)) {
            DP_LOG_WARN("skipping a path longer than 4095 bytes under %s", dir);
            continue;
        }
        dp_stat_info si;
        dp_err serr = {0};
        dp_status sst = dp_stat(cabs, false, &si, &serr);
        if (sst == DP_ENOENT) continue; /* vanished since the listing */
        if (sst) { /* e.g. a folder without execute permission: its entries cannot be inspected */
            if (push_file(w, crel, cabs, NULL, false, dp_err_msg(&serr))) st = dp_err_set(err, DP_ENOMEM, "out of memory");
            continue;
        }
        if (si.kind == DP_KIND_LINK) {
            if (!o->follow_symlinks || dp_stat(cabs, true, &si, NULL)) {
                w->n_skipped_links++;
                continue;
            }
            if (!o->links_outside && !inside(root_real, cabs)) {
                char msg[4200];
                snprintf(msg, sizeof(msg), "%s is a link that leads outside %s (inputs[].links_outside allows it)", cabs,
                         root);
                if (push_file(w, crel, cabs, NULL, false, msg)) st = dp_err_set(err, DP_ENOMEM, "out of memory");
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
            st = walk(root, root_real, crel, o, w, path_ids, depth + 1, err);
            continue;
        }
        if (si.kind != DP_KIND_FILE) {
            w->n_skipped_special++;
            continue;
        }
        if (o->n_include && !any_match(o->include, o->n_include, crel)) continue;
        if (any_match(o->exclude, o->n_exclude, crel)) continue;
        if (push_file(w, crel, cabs, &si, o->max_file_size && si.size > o->max_file_size, NULL))
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
    char *root_real = NULL;
    if ((st = dp_path_resolve(root, &root_real, err))) return st;
    st = walk(root, root_real, "", o, out, ids, 1, err);
    free(root_real);
    return st;
}

void pl_walk_free(pl_walk *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n; i++) {
        free(w->files[i].rel);
        free(w->files[i].abs);
        free(w->files[i].error);
    }
    free(w->files);
    memset(w, 0, sizeof(*w));
}
