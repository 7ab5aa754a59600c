/* ringbuf.h - a fixed-capacity byte ring buffer for the log shipper. */
#ifndef RINGBUF_H
#define RINGBUF_H

#include <stddef.h>

typedef struct ringbuf {
    unsigned char *data;
    size_t cap;   /* bytes */
    size_t head;  /* next byte to read */
    size_t len;   /* bytes stored */
} ringbuf;

int ringbuf_init(ringbuf *rb, size_t cap);
void ringbuf_free(ringbuf *rb);
/* Appends up to n bytes; returns how many fit. */
size_t ringbuf_write(ringbuf *rb, const void *src, size_t n);
/* Removes up to n bytes into dst; returns how many were read. */
size_t ringbuf_read(ringbuf *rb, void *dst, size_t n);

#endif
