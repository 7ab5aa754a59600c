/*
 * dynbuf.c - growable buffer. Doubling growth, capped at b->max; single owner, no locking.
 */
#include "dynbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void dp_buf_init(dp_buf *b, size_t max) {
    memset(b, 0, sizeof(*b));
    b->max = max;
}

void dp_buf_free(dp_buf *b) {
    if (!b) return;
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

void dp_buf_reset(dp_buf *b) {
    b->len = 0;
    if (b->data) b->data[0] = 0;
}

dp_status dp_buf_reserve(dp_buf *b, size_t n) {
    if (n > b->max || b->len > b->max - n) return DP_ERANGE;
    size_t need = b->len + n + 1;
    if (need <= b->cap) return DP_OK;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    uint8_t *p = realloc(b->data, cap);
    if (!p) return DP_ENOMEM;
    b->data = p;
    b->cap = cap;
    return DP_OK;
}

dp_status dp_buf_append(dp_buf *b, const void *data, size_t n) {
    dp_status st = dp_buf_reserve(b, n);
    if (st) return st;
    if (n) memcpy(b->data + b->len, data, n);
    b->len += n;
    b->data[b->len] = 0;
    return DP_OK;
}

dp_status dp_buf_printf(dp_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return DP_EINVAL;
    dp_status st = dp_buf_reserve(b, (size_t)n);
    if (st) return st;
    va_start(ap, fmt);
    vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return DP_OK;
}
