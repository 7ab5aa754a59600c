/*
 * chunker.c - see chunker.h.
 *
 * DESIGN: the text is tokenized one window at a time (a little more than the budget, from
 * the chunk's start), never whole, so memory does not grow with the document; token i of the
 * window covers bytes [off[i], off[i+1]) (the byte-exact detokenizer gives each token's
 * length). A chunk may end at most `budget` tokens after its start; within the second half of
 * that window the last boundary of the best kind wins, and only where a character starts. The
 * chunk's text is then re-tokenized alone and the end pulled back until it fits. The next chunk
 * starts `overlap` tokens before the end, always after the previous start, so the loop makes
 * progress on any input. Cost: about two tokenizations of the document plus one per chunk.
 */
#include "chunker.h"

#include <stdlib.h>
#include <string.h>

enum { B_TOKEN = 0, B_SENTENCE = 1, B_LINE = 2, B_PARAGRAPH = 3 };

/* The kind of boundary at byte offset p (between text[p-1] and text[p]). */
static int boundary_kind(const char *t, size_t p) {
    if (p >= 1 && t[p - 1] == '\f') return B_PARAGRAPH; /* a page ends (pdftotext ends each with \f) */
    if (p >= 2 && t[p - 1] == '\n' && (t[p - 2] == '\n' || (p >= 3 && t[p - 2] == '\r' && t[p - 3] == '\n')))
        return B_PARAGRAPH;
    if (p >= 1 && t[p - 1] == '\n') return B_LINE;
    /* sentence ends: ". " "! " "? " (the space belongs to the next token in BPE), or the
     * full-width 。！？ (E3 80 82, EF BC 81, EF BC 9F) and ． (EF BC 8E) */
    if (p >= 3) {
        const unsigned char *u = (const unsigned char *)t + p - 3;
        if ((u[0] == 0xE3 && u[1] == 0x80 && u[2] == 0x82) || (u[0] == 0xEF && u[1] == 0xBC &&
                                                               (u[2] == 0x81 || u[2] == 0x9F || u[2] == 0x8E)))
            return B_SENTENCE;
    }
    if (p >= 1 && (t[p - 1] == '.' || t[p - 1] == '!' || t[p - 1] == '?') && (t[p] == ' ' || t[p] == '\n'))
        return B_SENTENCE;
    return B_TOKEN;
}

static dp_status push(pl_chunks *c, pl_chunk k) {
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 16;
        pl_chunk *v = realloc(c->v, cap * sizeof(*v));
        if (!v) return DP_ENOMEM;
        c->v = v;
        c->cap = cap;
    }
    c->v[c->n++] = k;
    return DP_OK;
}

/* Tokenizes text[from, from + w) (w grown until it holds more than `need` tokens or reaches the
 * end) and fills off[] with the byte offset of every token start, relative to the document. */
static dp_status window(const eng_tokenizer *tok, eng_tok_ws *ws, const char *text, size_t len, size_t from,
                        size_t need, eng_tokens *ids, size_t **off, size_t *off_cap, bool *at_end, dp_err *err) {
    size_t w = need * 8 + 64;
    for (;;) {
        if (w > len - from) w = len - from;
        ids->n = 0;
        dp_status st = eng_tokenize(tok, ws, text + from, w, false, false, ids, err);
        if (st) return st;
        *at_end = from + w == len;
        if (ids->n > need || *at_end) break;
        w *= 2;
    }
    if (ids->n + 1 > *off_cap) {
        size_t cap = ids->n + 1 + 1024;
        size_t *v = realloc(*off, cap * sizeof(size_t));
        if (!v) return dp_err_set(err, DP_ENOMEM, "chunker: out of memory for %zu tokens", ids->n);
        *off = v;
        *off_cap = cap;
    }
    (*off)[0] = from;
    for (size_t i = 0; i < ids->n; i++) {
        const char *p;
        (*off)[i + 1] = (*off)[i] + eng_token_to_piece(tok, ids->ids[i], true, &p);
    }
    if ((*off)[ids->n] != from + w)
        return dp_err_set(err, DP_ERROR, "chunker: token pieces cover %zu bytes of %zu", (*off)[ids->n] - from, w);
    return DP_OK;
}

/* A chunk may only end where a character starts (a byte-level token can split one). */
static bool char_start(const char *t, size_t len, size_t p) {
    return p >= len || ((unsigned char)t[p] & 0xC0) != 0x80;
}

dp_status pl_chunk_text(const eng_tokenizer *tok, eng_tok_ws *ws, const char *text, size_t len, int32_t budget,
                        int32_t overlap, pl_chunks *out, dp_err *err) {
    if (budget < 8 || overlap < 0 || overlap >= budget / 2)
        return dp_err_set(err, DP_EINVAL, "chunker: budget %d must be >= 8 and overlap %d in [0, budget/2)", budget,
                          overlap);
    if (len == 0) return DP_OK;
    eng_tokens ids = {0}, tmp = {0};
    size_t *off = NULL, off_cap = 0;
    dp_status st = DP_OK;
    size_t sb = 0; /* byte where the next chunk starts */
    while (sb < len) {
        bool at_end = false;
        if ((st = window(tok, ws, text, len, sb, (size_t)budget, &ids, &off, &off_cap, &at_end, err))) goto done;
        const size_t n = ids.n;
        /* the window's last token may be cut by the window edge: only ends before it count,
         * unless the window reaches the end of the text */
        const size_t usable = at_end ? n : n - 1;
        size_t e = (size_t)budget < usable ? (size_t)budget : usable;
        if (e < n || !at_end) { /* prefer the best boundary in the second half of the window */
            size_t best = e;
            int best_kind = -1;
            for (size_t i = e; i > (size_t)budget / 2 && i > 0; i--) {
                if (!char_start(text, len, off[i])) continue;
                int k = boundary_kind(text, off[i]);
                if (k > best_kind) {
                    best_kind = k;
                    best = i;
                    if (k == B_PARAGRAPH) break;
                }
            }
            e = best;
        }
        while (e > 1 && !char_start(text, len, off[e])) e--;
        if (e == 0) e = 1;
        /* re-count the chunk on its own; pull the end back until it fits */
        for (;;) {
            tmp.n = 0;
            if ((st = eng_tokenize(tok, ws, text + off[0], off[e] - off[0], false, false, &tmp, err))) goto done;
            if ((int64_t)tmp.n <= budget || e <= 1) break;
            e -= (size_t)((int64_t)tmp.n - budget) < e - 1 ? (size_t)((int64_t)tmp.n - budget) : 1;
            while (e > 1 && !char_start(text, len, off[e])) e--;
        }
        if ((st = push(out, (pl_chunk){off[0], off[e], (int32_t)tmp.n}))) {
            st = dp_err_set(err, DP_ENOMEM, "chunker: out of memory");
            goto done;
        }
        if (off[e] >= len) break;
        size_t next = e > (size_t)overlap ? e - (size_t)overlap : 0;
        if (next == 0) next = e; /* always move forward */
        while (next < e && !char_start(text, len, off[next])) next++;
        sb = off[next];
    }
done:
    eng_tokens_free(&ids);
    eng_tokens_free(&tmp);
    free(off);
    return st;
}

void pl_chunks_free(pl_chunks *c) {
    if (!c) return;
    free(c->v);
    memset(c, 0, sizeof(*c));
}
