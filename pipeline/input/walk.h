/*
 * walk.h - the files of an input folder, in a stable order, filtered by include/exclude globs
 * (the reader stage's listing half; extract.h turns each file into text).
 *
 * Order: depth-first, entries of a folder sorted byte-wise, so the same tree gives the same
 * list on every machine and run. Globs match the path relative to the root with '/' between
 * parts: '*' and '?' stay within one part, '**' crosses parts ("**" + "/" also matches zero
 * parts), [abc] [a-z] [!x] are classes. Exclude wins over include. Symbolic links are skipped
 * unless follow_symlinks; followed folder loops are cut; a followed link that leads outside the
 * root is listed as an error (a folder is not entered) unless links_outside. Special files are
 * skipped. A subfolder that cannot be listed, or an entry that cannot be inspected, is listed as
 * an error entry (error set) so it gets a record instead of vanishing; only the root failing to
 * list fails the walk.
 */
#ifndef PL_WALK_H
#define PL_WALK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

typedef struct pl_file {
    char *rel;          /* relative to the root, '/'-separated */
    char *abs;          /* root + "/" + rel */
    uint64_t size;
    uint64_t dev, ino;  /* identity when listed: the reader refuses another file in its place */
    int64_t mtime_ns;
    bool too_large;     /* size > max_file_size: listed so it gets an error record */
    char *error;        /* (optional) why this entry could not be listed or inspected */
} pl_file;

typedef struct pl_walk {
    pl_file *files;
    size_t n, cap;
    size_t n_skipped_links, n_skipped_special, n_errors;
} pl_walk;

typedef struct pl_walk_opts {
    const char *const *include; size_t n_include; /* none = everything */
    const char *const *exclude; size_t n_exclude;
    bool follow_symlinks;
    uint64_t max_file_size;
    bool links_outside; /* followed links may lead outside the root */
} pl_walk_opts;

/* Appends the files of root to out (several inputs can share one pl_walk). */
dp_status pl_walk_dir(const char *root, const pl_walk_opts *o, pl_walk *out, dp_err *err);
void pl_walk_free(pl_walk *w);
bool pl_glob_match(const char *pattern, const char *path);

#endif /* PL_WALK_H */
