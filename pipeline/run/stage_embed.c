/*
 * stage_embed.c - the inference stage of a `task: embed` job: every chunk becomes one vector.
 *
 * Embedding is prompt processing only, so there is no scheduler: chunks are gathered into a
 * group (at most model.max_sequences of them, and no more KV blocks than the cache holds), the
 * whole group goes to the engine as one batch (eng_decode cuts it into steps), and each
 * sequence's final hidden states are pooled. A chunk's vector does not depend on the others in
 * its group (the engine's batch invariance), so grouping is a matter of speed only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exit_codes.h"
#include "run_internal.h"

#define WAIT_MS 20 /* how long a group waits for one more chunk once it has some */

typedef struct embedder {
    pl_run *r;
    pl_item **grp;
    int32_t n_grp, cap_grp;
    int32_t blocks;            /* KV blocks the group needs */
    int64_t n_tok;
    int32_t *tok, *pos, *seq;
    size_t cap_tok;
    size_t dim;
    dp_status st;
    dp_err err;
} embedder;

/* A request of u finished (a vector or an error): the unit is complete with its last chunk. */
static void chunk_done(embedder *e, pl_item *it, pl_result *res) {
    pl_unit *u = it->u;
    res->index = it->index, res->count = it->count;
    res->page_first = it->page_first, res->page_last = it->page_last;
    res->span = it->span;
    memset(&it->span, 0, sizeof(it->span));
    if ((e->st = pl_unit_add_result(u, res))) {
        free(res->vec);
        free(res->err_msg);
        pl_span_free(&res->span);
        dp_err_set(&e->err, e->st, "out of memory");
        return;
    }
    dp_mutex_lock(&e->r->mu);
    e->r->n_requests_done++;
    e->r->n_prompt_tokens += (uint64_t)res->n_prompt;
    dp_mutex_unlock(&e->r->mu);
    if (++u->n_done < u->n_chunks) return;
    /* refused chunks finish before the group they would have joined: records go in chunk order */
    pl_unit_sort_results(u, 0);
    (void)pl_queue_push(e->r->q_done, u); /* fails only when the writer is gone: the registry frees u */
}

/* An item that needs no engine: a unit passing through, or a chunk refused upstream. */
static void no_engine(embedder *e, pl_item *it) {
    if (!it->prompt.n && !it->err_code) {
        (void)pl_queue_push(e->r->q_done, it->u);
    } else {
        pl_result res = {0};
        res.err_code = it->err_code;
        res.err_msg = it->err_msg;
        it->err_msg = NULL;
        chunk_done(e, it, &res);
    }
    pl_item_free(it);
}

static bool fits(const embedder *e, const pl_item *it) {
    const int32_t n_seq = (int32_t)e->r->job.model.max_sequences;
    const int32_t need = eng_kv_blocks_needed((int32_t)it->prompt.n, 0);
    return e->n_grp == 0 || (e->n_grp < n_seq && e->blocks + need <= eng_kv_blocks_total(e->r->ctx));
}

static void add(embedder *e, pl_item *it) {
    e->grp[e->n_grp++] = it;
    e->blocks += eng_kv_blocks_needed((int32_t)it->prompt.n, 0);
    e->n_tok += (int64_t)it->prompt.n;
}

/* Embeds the group and hands every chunk on. */
static void run_group(embedder *e) {
    pl_run *r = e->r;
    if ((size_t)e->n_tok > e->cap_tok) {
        free(e->tok);
        e->cap_tok = (size_t)e->n_tok;
        e->tok = malloc(3 * e->cap_tok * sizeof(int32_t));
        if (!e->tok) {
            e->cap_tok = 0;
            e->st = dp_err_set(&e->err, DP_ENOMEM, "out of memory for a batch of %lld tokens", (long long)e->n_tok);
            return;
        }
        e->pos = e->tok + e->cap_tok, e->seq = e->pos + e->cap_tok;
    }
    int32_t n = 0;
    for (int32_t j = 0; j < e->n_grp; j++) {
        const eng_tokens *p = &e->grp[j]->prompt;
        eng_seq_clear(r->ctx, j);
        for (size_t t = 0; t < p->n; t++, n++) e->tok[n] = p->ids[t], e->pos[n] = (int32_t)t, e->seq[n] = j;
    }
    const uint64_t t0 = dp_time_ns();
    const eng_batch b = {n, e->tok, e->pos, e->seq, NULL};
    dp_err derr = {0};
    dp_status st = eng_decode(r->ctx, &b, &derr);
    const uint64_t t1 = dp_time_ns();
    if (st && st != DP_ENUMERIC) { /* not a bad number in one chunk: the engine itself failed */
        e->st = st;
        e->err = derr;
        return;
    }
    for (int32_t j = 0; j < e->n_grp && !e->st; j++) {
        pl_item *it = e->grp[j];
        pl_result res = {0};
        res.n_prompt = (int32_t)it->prompt.n;
        res.queue_ms = t0 > it->t_queued ? (double)(t0 - it->t_queued) / 1e6 : 0;
        res.prefill_ms = (double)(t1 - t0) / 1e6;
        res.finish = "stop";
        dp_err verr = {0};
        dp_status vs = st;
        if (!vs) {
            res.vec = malloc(e->dim * sizeof(float));
            vs = res.vec ? eng_get_embedding(r->ctx, j, r->job.embedding.normalize, res.vec, &verr)
                         : dp_err_set(&verr, DP_ENOMEM, "out of memory");
            res.dim = (int32_t)e->dim;
        }
        if (vs == DP_ENOMEM) {
            free(res.vec);
            e->st = vs;
            e->err = verr;
            break;
        }
        if (vs) { /* a value that is not finite: this chunk's record says so, the run goes on */
            free(res.vec);
            res.vec = NULL;
            res.err_code = "engine_error";
            res.err_msg = strdup(dp_err_msg(st ? &derr : &verr));
        }
        chunk_done(e, it, &res);
    }
    for (int32_t j = 0; j < e->n_grp; j++) pl_item_free(e->grp[j]);
    e->n_grp = 0, e->blocks = 0, e->n_tok = 0;
}

void *pl_stage_embed(void *arg) {
    pl_run *r = arg;
    embedder e = {.r = r, .dim = eng_model_get_info(r->model)->n_embd};
    e.cap_grp = (int32_t)r->job.model.max_sequences;
    e.grp = calloc((size_t)e.cap_grp, sizeof(*e.grp));
    if (!e.grp) e.st = dp_err_set(&e.err, DP_ENOMEM, "out of memory");
    pl_item *held = NULL; /* the chunk that did not fit the last group */
    bool input_done = false;
    while (!e.st && !r->stopping && (!input_done || held || e.n_grp)) {
        void *p = held;
        held = NULL;
        dp_status q = DP_OK;
        if (!p && !input_done) q = e.n_grp ? pl_queue_pop_wait(r->q_items, &p, WAIT_MS) : pl_queue_pop_wait(r->q_items, &p, 200);
        if (q == DP_EOF) input_done = true;
        else if (q && q != DP_EBUSY) break; /* aborted: a failure or a stop elsewhere */
        if (p) {
            pl_item *it = p;
            if (!it->prompt.n || it->err_code) {
                no_engine(&e, it);
                continue;
            }
            if (fits(&e, it)) {
                add(&e, it);
                if (e.n_grp < e.cap_grp) continue; /* room for more */
            } else {
                held = it;
            }
        } else if (!e.n_grp || (q == DP_OK && !input_done)) {
            continue; /* nothing yet */
        }
        if (e.n_grp) run_group(&e);
    }
    for (int32_t j = 0; j < e.n_grp; j++) pl_item_free(e.grp[j]);
    pl_item_free(held);
    if (e.st) pl_run_fail(r, e.st, &e.err, PL_EXIT_SOFTWARE);
    free(e.grp);
    free(e.tok);
    pl_queue_close(r->q_done);
    return NULL;
}
