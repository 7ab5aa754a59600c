/*
 * extract_internal.h - what the readers of extract.c and office.c share (not part of
 * extract.h's interface).
 */
#ifndef PL_EXTRACT_INTERNAL_H
#define PL_EXTRACT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "dynbuf.h"
#include "extract.h"

/* An entity after '&' (s, n bytes available) into o; bytes consumed after '&', 0 if none. */
int pl_put_entity(const char *s, size_t n, dp_buf *o);
/* HTML to text: tags, scripts and styles dropped, entities decoded, blocks become lines;
 * h (optional) gets the <h1>..<h6> titles. */
void pl_html_to_text(const char *s, size_t n, dp_buf *o, pl_headings *h);
/* The text of an office document (e: its extension: docx, pptx, xlsx, odt, epub) into *text
 * (dp_buf_free it), its format name into *format. */
pl_doc_error pl_extract_office(const char *e, const uint8_t *data, size_t len, size_t max, dp_buf *text,
                               const char **format, dp_err *err);

#endif /* PL_EXTRACT_INTERNAL_H */
