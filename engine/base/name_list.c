/*
 * name_list.c - see name_list.h.
 */
#include "name_list.h"

#include <stdlib.h>
#include <string.h>

dp_status dp_name_list_add(dp_name_list *l, const char *name) {
    const size_t len = strlen(name) + 1;
    if (l->count == l->cap) {
        const size_t cap = l->cap ? 2 * l->cap : 64;
        size_t *o = realloc(l->offs, cap * sizeof(size_t));
        if (!o) return DP_ENOMEM;
        l->offs = o, l->cap = cap;
    }
    char *p = realloc(l->pool, l->bytes + len);
    if (!p) return DP_ENOMEM;
    l->pool = p;
    memcpy(l->pool + l->bytes, name, len);
    l->offs[l->count++] = l->bytes;
    l->bytes += len;
    return DP_OK;
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

dp_status dp_name_list_finish(dp_name_list *l, char ***names, size_t *n) {
    *names = NULL;
    *n = 0;
    char **v = malloc(l->count * sizeof(char *) + l->bytes + 1);
    if (v) {
        char *names_at = (char *)(v + l->count);
        if (l->bytes) memcpy(names_at, l->pool, l->bytes);
        for (size_t i = 0; i < l->count; i++) v[i] = names_at + l->offs[i];
        qsort(v, l->count, sizeof(char *), cmp_names);
        *names = v;
        *n = l->count;
    }
    dp_name_list_free(l);
    return v ? DP_OK : DP_ENOMEM;
}

void dp_name_list_free(dp_name_list *l) {
    free(l->pool);
    free(l->offs);
    memset(l, 0, sizeof(*l));
}
