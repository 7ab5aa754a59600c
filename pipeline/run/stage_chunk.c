/*
 * stage_chunk.c - the chunker stage: turns each document into requests that fit the context.
 *
 * A chunk's budget = context per sequence - the prompt without content (chat frame, system
 * prompt, template text and variables, counted with chunk numbers of six digits, more than any
 * document has) - max_tokens, and never above chunking.max_tokens or the model's trained
 * context. If the template alone leaves fewer than 8 tokens, the document gets a
 * context_length_exceeded record. Every request's full prompt is re-counted before it leaves:
 * nothing above the context ever reaches the engine.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chunker.h"
#include "exit_codes.h"
#include "run_internal.h"

static pl_prompt_vars vars_for(const pl_run *r, const pl_unit *u, int32_t index, int32_t count) {
    return (pl_prompt_vars){u->path, u->filename, u->ext, r->date, u->sha, index, count, 1};
}

/* task: embed: what an embedded chunk is, "Instruct: ...\nQuery: " + the chunk with the
 * tokenizer's own BOS/EOS (Qwen3-Embedding's convention); document text never yields control
 * tokens. out is reset. */
static dp_status embed_tokens(const pl_run *r, eng_tok_ws *ws, const char *text, size_t len, eng_tokens *out,
                              dp_err *err) {
    out->n = 0;
    const char *ins = r->job.embedding.instruction;
    if (!ins) return eng_tokenize(r->tok, ws, text, len, true, false, out, err);
    dp_buf b;
    dp_buf_init(&b, (size_t)1 << 31);
    dp_status st = dp_buf_printf(&b, "Instruct: %s\nQuery: ", ins);
    if (!st) st = dp_buf_append(&b, text, len);
    if (!st) st = eng_tokenize(r->tok, ws, (const char *)b.data, b.len, true, false, out, err);
    else dp_err_set(err, st, "out of memory");
    dp_buf_free(&b);
    return st;
}

/* Tokens a request of this document may give its content; < 8 when the template alone is too big. */
int32_t pl_content_budget(pl_run *r, eng_tok_ws *ws, const pl_prompt_spec *spec, const pl_unit *u, int32_t *overhead,
                          dp_err *err) {
    int32_t ov = 0;
    int64_t gen = r->job.generation.max_tokens;
    if (r->job.task == JOB_TASK_EMBED) {
        /* the instruction and special tokens, + 1: a token may merge across the join */
        eng_tokens t = {0};
        dp_status st = embed_tokens(r, ws, "", 0, &t, err);
        ov = (int32_t)t.n + (r->job.embedding.instruction ? 1 : 0);
        eng_tokens_free(&t);
        if (st) return -1;
        gen = 0;
    } else {
        pl_prompt_vars v = vars_for(r, u, 999999, 999999);
        if (pl_prompt_overhead(r->tok, ws, spec, &v, &ov, err)) return -1;
    }
    *overhead = ov;
    int64_t ctx = r->n_ctx;
    if (r->n_ctx_train > 0 && r->n_ctx_train < ctx) ctx = r->n_ctx_train;
    int64_t b = ctx - ov - gen;
    if (r->job.chunking.max_tokens > 0 && r->job.chunking.max_tokens < b) b = r->job.chunking.max_tokens;
    return b < 0 ? 0 : (int32_t)(b > INT32_MAX ? INT32_MAX : b);
}

static void doc_fail(pl_unit *u, const char *code, const char *msg) {
    u->err_code = code;
    u->err_stage = "chunking";
    u->err_msg = strdup(msg);
}

static bool push_item(pl_run *r, pl_item *it) {
    it->t_queued = dp_time_ns();
    if (it->prompt.n) { /* for the progress line's ETA */
        dp_mutex_lock(&r->mu);
        r->n_queued_requests++;
        r->n_queued_prompt_tokens += it->prompt.n;
        dp_mutex_unlock(&r->mu);
    }
    if (pl_queue_push(r->q_items, it)) {
        pl_item_free(it);
        return false;
    }
    return true;
}

/* A document whose text marks page ends with form feeds: pdftotext's pages, a deck's slides. */
static bool paged(const pl_unit *u) { return u->format && (strstr(u->format, "pdf") || !strcmp(u->format, "pptx")); }

/* The 1-based page of byte `at` of a paged text: one more than the form feeds before it. */
static int32_t page_at(const char *text, size_t at) {
    int32_t p = 1;
    for (size_t i = 0; i < at; i++) p += text[i] == '\f';
    return p;
}

/* Walks a document's text forward, counting lines (offsets asked in increasing order). */
typedef struct line_cursor {
    size_t at;
    int32_t line;
} line_cursor;

static int32_t line_at(const char *text, line_cursor *c, size_t at) {
    if (at < c->at) *c = (line_cursor){0, 1};
    for (; c->at < at; c->at++) c->line += text[c->at] == '\n';
    return c->line;
}

/* The record's view of chunk c: its text, byte and line range, tokens and heading path. */
static dp_status make_span(const pl_doc *d, const pl_chunk *c, line_cursor *ls, line_cursor *le,
                           pl_heading_cursor *hc, pl_span *sp) {
    const char *t = d->text.text;
    sp->len = c->end - c->start;
    sp->text = malloc(sp->len + 1);
    if (!sp->text) return DP_ENOMEM;
    memcpy(sp->text, t + c->start, sp->len);
    sp->text[sp->len] = 0;
    sp->byte_start = c->start, sp->byte_end = c->end;
    sp->n_tokens = c->n_tokens;
    /* a chunk ending in a line break ends on the line that break closes */
    sp->line_start = line_at(t, ls, c->start);
    sp->line_end = line_at(t, le, c->end > c->start ? c->end - 1 : c->start);
    size_t path[PL_HEADING_DEPTH], total = 0;
    const size_t n = pl_headings_path(&d->text.headings, hc, c->start, path);
    for (size_t i = 0; i < n; i++) total += d->text.headings.v[path[i]].text_len + 1;
    if (!n) return DP_OK;
    if (!(sp->headings = malloc(total))) return DP_ENOMEM;
    char *o = sp->headings;
    for (size_t i = 0; i < n; i++) {
        const pl_heading *h = &d->text.headings.v[path[i]];
        memcpy(o, t + h->text_at, h->text_len);
        o[h->text_len] = 0;
        o += h->text_len + 1;
    }
    sp->n_headings = (int32_t)n;
    return DP_OK;
}

/* A chunk of nothing but white space (a long run of blank lines, form feeds between empty pages)
 * says nothing to a model or an index: it is left out, and the chunks are numbered without it. */
static void drop_blank(const char *text, pl_chunks *ch) {
    size_t w = 0;
    for (size_t k = 0; k < ch->n; k++) {
        bool blank = true;
        for (size_t i = ch->v[k].start; i < ch->v[k].end && blank; i++) blank = strchr(" \t\r\n\f\v", text[i]) != NULL;
        if (!blank) ch->v[w++] = ch->v[k];
    }
    ch->n = w;
}

/* Whether every chunk's full prompt, its lines numbered, fits the context with max_tokens. */
static bool numbered_fit(pl_run *r, eng_tok_ws *ws, const pl_doc *d, const pl_chunks *ch) {
    line_cursor lc = {0, 1};
    eng_tokens t = {0};
    bool fit = true;
    dp_err err = {0};
    for (size_t k = 0; k < ch->n && fit; k++) {
        pl_prompt_vars v = vars_for(r, d->u, (int32_t)k + 1, (int32_t)ch->n);
        v.line_start = line_at(d->text.text, &lc, ch->v[k].start);
        t.n = 0;
        fit = !pl_prompt_tokens(r->tok, ws, &r->map_spec, &v, d->text.text + ch->v[k].start,
                                ch->v[k].end - ch->v[k].start, &t, &err) &&
              (int64_t)t.n + r->job.generation.max_tokens <= r->n_ctx;
    }
    eng_tokens_free(&t);
    return fit;
}

/* false: stop (the run is stopping or failed) */
static bool chunk_doc(pl_run *r, eng_tok_ws *ws, pl_doc *d) {
    pl_unit *u = d->u;
    char msg[512];
    if (!u->skipped && !u->err_code) {
        size_t i = 0;
        while (i < d->text.len && strchr(" \t\r\n\f\v", d->text.text[i])) i++;
        if (i == d->text.len)
            doc_fail(u, "empty_document", paged(u) && strstr(u->format, "pdf") ? "the PDF has no text layer (scanned pages?): it needs OCR "
                     "first, e.g. ocrmypdf, which adds one" : "the document has no text");
    }
    if (u->skipped || u->err_code) {
        pl_item *it = calloc(1, sizeof(*it));
        if (!it) return false;
        it->u = u;
        return push_item(r, it);
    }
    dp_err err = {0};
    int32_t ov = 0;
    const int32_t budget = pl_content_budget(r, ws, &r->map_spec, u, &ov, &err);
    if (budget < 0) {
        doc_fail(u, "invalid_template", dp_err_msg(&err));
    } else if (budget < 8) {
        snprintf(msg, sizeof(msg), "the prompt without the document takes %d tokens and generation.max_tokens %lld; "
                 "the context (model.context %d) leaves no room for content", ov,
                 (long long)r->job.generation.max_tokens, r->n_ctx);
        doc_fail(u, "context_length_exceeded", msg);
    }
    pl_chunks ch = {0};
    if (!u->err_code) {
        /* numbered lines cost tokens the chunker does not count: a document whose chunks then do
         * not fit is chunked again, smaller, until they do */
        const bool numbered = r->job.task == JOB_TASK_GENERATE && pl_template_numbers_lines(r->map_spec.user_template);
        dp_status cs = DP_OK;
        for (int32_t b = budget, attempt = 0;; attempt++) {
            int32_t overlap = (int32_t)r->job.chunking.overlap;
            if (overlap >= b / 2) overlap = b / 2 - 1;
            if (overlap < 0) overlap = 0;
            cs = pl_chunk_text(r->tok, ws, d->text.text, d->text.len, b, overlap, &ch, &err);
            if (cs) break;
            drop_blank(d->text.text, &ch);
            if (!numbered || attempt == 8 || b < 16 || numbered_fit(r, ws, d, &ch)) break;
            pl_chunks_free(&ch);
            b = b * 3 / 4;
        }
        if (cs)
            doc_fail(u, "chunking_failed", dp_err_msg(&err));
        else if (ch.n == 0)
            doc_fail(u, "empty_document", "the document has no text");
        else if (ch.n > 999999)
            doc_fail(u, "too_large", "more than 999999 chunks");
    }
    if (u->err_code) {
        pl_chunks_free(&ch);
        pl_item *it = calloc(1, sizeof(*it));
        if (!it) return false;
        it->u = u;
        return push_item(r, it);
    }
    /* set before the first request leaves: the inference stage counts against it */
    u->n_chunks = (int32_t)ch.n;
    if (paged(u)) { /* pages end with \f: a trailing one does not start another page */
        size_t end = d->text.len;
        while (end && strchr(" \t\r\n\f\v", d->text.text[end - 1])) end--;
        u->n_pages = page_at(d->text.text, end);
    }
    bool ok = true;
    line_cursor ls = {0, 1}, le = {0, 1};
    pl_heading_cursor hc = {0};
    for (size_t k = 0; k < ch.n && ok; k++) {
        pl_item *it = calloc(1, sizeof(*it));
        if (!it || make_span(d, &ch.v[k], &ls, &le, &hc, &it->span)) {
            pl_item_free(it);
            ok = false;
            break;
        }
        it->u = u;
        it->index = (int32_t)k;
        it->count = (int32_t)ch.n;
        if (u->n_pages) {
            const pl_chunk *pc = &ch.v[k];
            size_t last = pc->end;
            while (last > pc->start && strchr(" \t\r\n\f\v", d->text.text[last - 1])) last--;
            it->page_first = page_at(d->text.text, pc->start);
            it->page_last = page_at(d->text.text, last > pc->start ? last - 1 : pc->start);
        }
        pl_prompt_vars v = vars_for(r, u, (int32_t)k + 1, (int32_t)ch.n);
        v.line_start = it->span.line_start;
        const pl_chunk *c = &ch.v[k];
        const bool embed = r->job.task == JOB_TASK_EMBED;
        dp_status st = embed ? embed_tokens(r, ws, d->text.text + c->start, c->end - c->start, &it->prompt, &err)
                             : pl_prompt_tokens(r->tok, ws, &r->map_spec, &v, d->text.text + c->start,
                                                c->end - c->start, &it->prompt, &err);
        if (st || (int64_t)it->prompt.n + (embed ? 0 : r->job.generation.max_tokens) > r->n_ctx) {
            /* cannot happen when the budget arithmetic holds; refuse rather than overflow */
            if (!st) snprintf(msg, sizeof(msg), "chunk %zu: the prompt has %zu tokens; with max_tokens it exceeds "
                              "the context of %d", k, it->prompt.n, r->n_ctx);
            it->err_code = st ? "invalid_template" : "context_length_exceeded";
            it->err_msg = strdup(st ? dp_err_msg(&err) : msg);
            eng_tokens_free(&it->prompt);
        }
        ok = push_item(r, it);
    }
    pl_chunks_free(&ch);
    return ok;
}

void *pl_stage_chunk(void *arg) {
    pl_run *r = arg;
    eng_tok_ws *ws = NULL;
    if (eng_tok_ws_new(&ws)) {
        dp_err err = {0};
        dp_err_set(&err, DP_ENOMEM, "chunker: out of memory");
        pl_run_fail(r, DP_ENOMEM, &err, PL_EXIT_SOFTWARE);
    }
    void *p;
    while (ws && pl_queue_pop(r->q_docs, &p) == DP_OK) {
        pl_doc *d = p;
        bool ok = chunk_doc(r, ws, d);
        pl_doc_text_free(&d->text);
        free(d);
        if (!ok) break;
    }
    eng_tok_ws_free(ws);
    dp_mutex_lock(&r->mu);
    r->chunking_done = !r->stopping && !r->fail_status;
    dp_mutex_unlock(&r->mu);
    pl_queue_close(r->q_items);
    return NULL;
}
