/*
 * headings.h - the section headings of a document's decoded text, so that every chunk can say
 * which section it lies in ("heading path": ["Install", "Linux"]).
 *
 * Markdown: ATX headings ("## Title", closing #'s dropped) and setext headings (a line
 * underlined with === or ---), never inside fenced code blocks (``` or ~~~), where "# ..." is a
 * shell or Python comment. HTML: the extractor records <h1>..<h6> as it writes the text
 * (extract.c); the offsets are into the decoded text either way.
 */
#ifndef PL_HEADINGS_H
#define PL_HEADINGS_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

typedef struct pl_heading {
    size_t at;          /* where the heading's line starts in the text */
    size_t text_at, text_len; /* its title, without markup */
    int level;          /* 1..6 */
} pl_heading;

typedef struct pl_headings {
    pl_heading *v;      /* in text order */
    size_t n, cap;
} pl_headings;

#define PL_HEADING_DEPTH 6

dp_status pl_headings_add(pl_headings *h, size_t at, size_t text_at, size_t text_len, int level);
/* Appends the Markdown headings of text[0..len). */
dp_status pl_headings_markdown(const char *text, size_t len, pl_headings *out);
/* Where a walk through a document's offsets stands; zero it to start. */
typedef struct pl_heading_cursor {
    size_t next;                        /* headings before it are applied */
    size_t by_level[PL_HEADING_DEPTH];
    unsigned char set[PL_HEADING_DEPTH];
} pl_heading_cursor;

/* The headings in force at byte `at`: path[0..return) are indexes into h->v, outermost first
 * (a heading starting at `at` counts). Levels may skip ("#" then "###"): the path holds the
 * headings present, in order. Offsets asked in increasing order cost one pass over the list
 * in all; a smaller one than before starts the cursor over. */
size_t pl_headings_path(const pl_headings *h, pl_heading_cursor *c, size_t at, size_t path[PL_HEADING_DEPTH]);
void pl_headings_free(pl_headings *h);

#endif /* PL_HEADINGS_H */
