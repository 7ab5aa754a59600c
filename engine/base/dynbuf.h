/*
 * dynbuf.h - a growable byte buffer with a hard size cap (after curl's dynbuf).
 *
 * The cap turns "input made us allocate without bound" into a clean DP_ERANGE. The buffer is
 * always NUL-terminated past its length, so text can be used as a C string.
 */
#ifndef DP_DYNBUF_H
#define DP_DYNBUF_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

typedef struct dp_buf {
    uint8_t *data; /* owned; NULL until the first append */
    size_t len;    /* bytes used */
    size_t cap;    /* bytes allocated */
    size_t max;    /* hard limit on len */
} dp_buf;

/* Caller-allocated: dp_buf b; dp_buf_init(&b, 1 << 20); ... dp_buf_free(&b); */
void dp_buf_init(dp_buf *b, size_t max);
/* Frees the storage and leaves b empty (still usable). Accepts NULL. */
void dp_buf_free(dp_buf *b);
void dp_buf_reset(dp_buf *b);
dp_status dp_buf_append(dp_buf *b, const void *data, size_t n);
dp_status dp_buf_printf(dp_buf *b, const char *fmt, ...) DP_PRINTF(2, 3);
/* Ensures room for n more bytes without changing len. */
dp_status dp_buf_reserve(dp_buf *b, size_t n);

#endif /* DP_DYNBUF_H */
