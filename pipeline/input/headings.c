/*
 * headings.c - Markdown headings and the heading path of a byte offset (headings.h).
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "headings.h"

dp_status pl_headings_add(pl_headings *h, size_t at, size_t text_at, size_t text_len, int level) {
    if (level < 1 || level > PL_HEADING_DEPTH) return DP_EINVAL;
    if (h->n == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 16;
        pl_heading *v = realloc(h->v, cap * sizeof(*v));
        if (!v) return DP_ENOMEM;
        h->v = v;
        h->cap = cap;
    }
    h->v[h->n++] = (pl_heading){at, text_at, text_len, level};
    return DP_OK;
}

static bool blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r') return false;
    return true;
}

/* Up to three spaces of indent, as CommonMark allows before a heading or a fence. */
static size_t indent(const char *s, size_t n) {
    size_t i = 0;
    while (i < n && i < 4 && s[i] == ' ') i++;
    return i;
}

/* A fence opener/closer: 3+ backticks or tildes after at most 3 spaces; *ch and *cnt describe it. */
static bool fence(const char *s, size_t n, char *ch, size_t *cnt) {
    size_t i = indent(s, n);
    if (i > 3 || i >= n || (s[i] != '`' && s[i] != '~')) return false;
    size_t k = i;
    while (k < n && s[k] == s[i]) k++;
    if (k - i < 3) return false;
    *ch = s[i];
    *cnt = k - i;
    return true;
}

static void trim(const char *s, size_t *a, size_t *b) {
    while (*a < *b && (s[*a] == ' ' || s[*a] == '\t')) (*a)++;
    while (*b > *a && (s[*b - 1] == ' ' || s[*b - 1] == '\t' || s[*b - 1] == '\r')) (*b)--;
}

/* "## Title ##": level 2, title "Title"; 0 when the line is no ATX heading. */
static int atx(const char *s, size_t n, size_t *ta, size_t *tb) {
    size_t i = indent(s, n);
    if (i > 3) return 0;
    size_t k = i;
    while (k < n && s[k] == '#') k++;
    const int level = (int)(k - i);
    if (level < 1 || level > 6) return 0;
    if (k < n && s[k] != ' ' && s[k] != '\t' && s[k] != '\r') return 0; /* "#hashtag" */
    size_t a = k, b = n;
    trim(s, &a, &b);
    size_t c = b; /* an optional closing run of #'s after a space */
    while (c > a && s[c - 1] == '#') c--;
    if (c == a) b = a;
    else if (c < b && (s[c - 1] == ' ' || s[c - 1] == '\t')) b = c;
    trim(s, &a, &b);
    *ta = a, *tb = b;
    return level;
}

/* "===" (1) or "---" (2) under a paragraph line; 0 otherwise. */
static int setext(const char *s, size_t n) {
    size_t i = indent(s, n);
    if (i > 3 || i >= n || (s[i] != '=' && s[i] != '-')) return 0;
    const char c = s[i];
    while (i < n && s[i] == c) i++;
    if (!blank(s + i, n - i)) return 0;
    return c == '=' ? 1 : 2;
}

dp_status pl_headings_markdown(const char *text, size_t len, pl_headings *out) {
    char fch = 0;
    size_t fcnt = 0;
    bool in_fence = false;
    size_t prev = SIZE_MAX, prev_n = 0; /* the previous line, when it could be a setext title */
    for (size_t a = 0; a < len;) {
        const char *nl = memchr(text + a, '\n', len - a);
        const size_t e = nl ? (size_t)(nl - text) : len, n = e - a;
        const char *s = text + a;
        char ch;
        size_t cnt, ta, tb;
        int lv;
        if (in_fence) {
            if (fence(s, n, &ch, &cnt) && ch == fch && cnt >= fcnt && blank(s + indent(s, n) + cnt, n - indent(s, n) - cnt))
                in_fence = false;
            prev = SIZE_MAX;
        } else if (fence(s, n, &fch, &fcnt)) {
            in_fence = true;
            prev = SIZE_MAX;
        } else if ((lv = atx(s, n, &ta, &tb))) {
            if (pl_headings_add(out, a, a + ta, tb - ta, lv)) return DP_ENOMEM;
            prev = SIZE_MAX;
        } else if (prev != SIZE_MAX && (lv = setext(s, n))) {
            size_t pa = 0, pb = prev_n;
            trim(text + prev, &pa, &pb);
            if (pl_headings_add(out, prev, prev + pa, pb - pa, lv)) return DP_ENOMEM;
            prev = SIZE_MAX;
        } else if (blank(s, n) || indent(s, n) > 3 || (n && (s[indent(s, n)] == '-' || s[indent(s, n)] == '*' ||
                                                             s[indent(s, n)] == '>' || s[indent(s, n)] == '|'))) {
            prev = SIZE_MAX; /* a title is a plain paragraph line (not a list item, quote or table row) */
        } else {
            prev = a, prev_n = n;
        }
        a = nl ? e + 1 : len;
    }
    return DP_OK;
}

size_t pl_headings_path(const pl_headings *h, pl_heading_cursor *c, size_t at, size_t path[PL_HEADING_DEPTH]) {
    if (c->next && (!h || c->next > h->n || h->v[c->next - 1].at > at)) memset(c, 0, sizeof(*c));
    for (; h && c->next < h->n && h->v[c->next].at <= at; c->next++) {
        const int l = h->v[c->next].level - 1;
        c->by_level[l] = c->next, c->set[l] = 1;
        for (int d = l + 1; d < PL_HEADING_DEPTH; d++) c->set[d] = 0;
    }
    size_t n = 0;
    for (int d = 0; d < PL_HEADING_DEPTH; d++)
        if (c->set[d]) path[n++] = c->by_level[d];
    return n;
}

void pl_headings_free(pl_headings *h) {
    if (!h) return;
    free(h->v);
    memset(h, 0, sizeof(*h));
}
