/*
 * git_changes.h - the files of a git work tree that changed since a revision (inputs[].changed_since):
 * what a code-review job looks at, without a shell (git is run with an argument vector).
 */
#ifndef PL_GIT_CHANGES_H
#define PL_GIT_CHANGES_H

#include <stdbool.h>
#include <stddef.h>

#include "status.h"

typedef struct pl_changed {
    char **paths;   /* relative to the folder, '/'-separated, sorted */
    size_t n;
} pl_changed;

/* The files under folder that differ between ref and the work tree (git diff --name-only
 * --relative ref), plus new files git does not ignore (git ls-files --others --exclude-standard).
 * Errors name the folder: not a git work tree, an unknown ref (DP_EINVAL), git missing (DP_ENOENT). */
dp_status pl_git_changed(const char *folder, const char *ref, pl_changed *out, dp_err *err);
bool pl_changed_has(const pl_changed *c, const char *rel);
void pl_changed_free(pl_changed *c);

#endif /* PL_GIT_CHANGES_H */
