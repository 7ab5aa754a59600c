#include "ringbuf.h"

#include <stdlib.h>
#include <string.h>

int ringbuf_init(ringbuf *rb, size_t cap) {
    rb->data = malloc(cap);
    rb->cap = cap;
    rb->head = rb->len = 0;
    return rb->data ? 0 : -1;
}

void ringbuf_free(ringbuf *rb) {
    free(rb->data);
    rb->data = NULL;
}

size_t ringbuf_write(ringbuf *rb, const void *src, size_t n) {
    size_t room = rb->cap - rb->len;
    if (n > room) n = room;
    size_t tail = (rb->head + rb->len) % rb->cap;
    size_t first = rb->cap - tail;
    if (first > n) first = n;
    memcpy(rb->data + tail, src, first);
    memcpy(rb->data, (const unsigned char *)src + first, n - first);
    rb->len += n;
    return n;
}

size_t ringbuf_read(ringbuf *rb, void *dst, size_t n) {
    if (n > rb->len) n = rb->len;
    size_t first = rb->cap - rb->head;
    if (first > n) first = n;
    memcpy(dst, rb->data + rb->head, first);
    memcpy((unsigned char *)dst + first, rb->data, n - first);
    rb->head = (rb->head + n) % rb->cap;
    rb->len -= n;
    return n;
}
