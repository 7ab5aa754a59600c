/*
 * name_list.h - the sorted list of names dp_dir_list returns, built one name at a time: what
 * both platform files share of a directory listing (the OS calls that produce the names differ).
 */
#ifndef DP_NAME_LIST_H
#define DP_NAME_LIST_H

#include <stddef.h>

#include "status.h"

typedef struct dp_name_list {
    char *pool;   /* the names, NUL-terminated, one after another */
    size_t *offs; /* where each starts in pool */
    size_t count, cap, bytes;
} dp_name_list;

/* Copies name in; DP_ENOMEM (the list stays valid) when memory runs out. */
dp_status dp_name_list_add(dp_name_list *l, const char *name);
/* Sorts the names byte-wise into one allocation (the pointer array, then the names; free *names
 * with free()) and frees the builder; DP_ENOMEM leaves *names NULL. */
dp_status dp_name_list_finish(dp_name_list *l, char ***names, size_t *n);
/* Frees the builder without a result (after an error). */
void dp_name_list_free(dp_name_list *l);

#endif /* DP_NAME_LIST_H */
