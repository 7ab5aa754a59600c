/*
 * stage_infer.c - the inference stage: keeps every sequence slot of the engine busy across
 * documents and chunks (scheduler.h), and runs map-reduce.
 *
 * A map-reduce document's reduce requests are made here, when its last map result arrives:
 * the map texts are joined ("\n\n") into groups that fit the reduce budget, one request per
 * group; if that gives more than one result, the next level combines those, until one text
 * remains (the document's final answer). Reduce requests go before new documents, so a
 * document finishes soon after its chunks and the writer's reorder buffer stays small.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "completion.h"
#include "exit_codes.h"
#include "run_internal.h"
#include "scheduler.h"


typedef struct infer {
    pl_run *r;
    pl_sched *s;
    eng_tok_ws *ws;
    pl_item **ready;     /* reduce requests waiting for a slot (FIFO) */
    pl_item *waiting;    /* the next request, when the KV cache has no room for it yet */
    size_t n_ready, head_ready, cap_ready;
    dp_status st;
    dp_err err;
} infer;

void pl_unit_sort_results(pl_unit *u, size_t from) {
    for (size_t i = from + 1; i < u->n_res; i++) /* few, nearly sorted: insertion sort */
        for (size_t j = i; j > from && u->res[j].index < u->res[j - 1].index; j--) {
            pl_result tmp = u->res[j];
            u->res[j] = u->res[j - 1];
            u->res[j - 1] = tmp;
        }
}

dp_status pl_unit_add_result(pl_unit *u, const pl_result *res) {
    if (u->n_res == u->cap_res) {
        size_t cap = u->cap_res ? 2 * u->cap_res : 4;
        pl_result *v = realloc(u->res, cap * sizeof(*v));
        if (!v) return DP_ENOMEM;
        u->res = v;
        u->cap_res = cap;
    }
    u->res[u->n_res++] = *res;
    return DP_OK;
}

static dp_status push_ready(infer *f, pl_item *it) {
    if (f->n_ready == f->cap_ready) {
        size_t cap = f->cap_ready ? 2 * f->cap_ready : 16;
        pl_item **v = realloc(f->ready, cap * sizeof(*v));
        if (!v) return DP_ENOMEM;
        f->ready = v;
        f->cap_ready = cap;
    }
    f->ready[f->n_ready++] = it;
    return DP_OK;
}

static void unit_complete(infer *f, pl_unit *u) {
    pl_run *r = f->r;
    if (pl_queue_push(r->q_done, u)) { /* the writer is gone (a failure): the registry frees u */
    }
}

/* What a reduce step combines of a result: its answer, without the reasoning before it. */
static void answer_of(const pl_run *r, const pl_result *res, const char **t, size_t *n) {
    const pl_reasoning_split sp = r->job.generation.thinking ? pl_split_reasoning(res->text, res->len)
                                                             : (pl_reasoning_split){0, 0, 0, res->len, false};
    *t = res->text ? res->text + sp.c_at : "";
    *n = res->text ? sp.c_len : 0;
}

/* Builds the next reduce level from results [from, u->n_res) of u; the unit is complete when
 * none is needed. */
static dp_status start_level(infer *f, pl_unit *u, size_t from, int32_t level) {
    pl_run *r = f->r;
    const size_t n_in = u->n_res - from;
    size_t n_ok = 0;
    for (size_t i = from; i < u->n_res; i++) n_ok += !u->res[i].err_code;
    if (n_in == 1 || !r->do_reduce || n_ok == 0 || n_ok < n_in) {
        /* one text left: it is the answer; a failed piece stops the reduction (the error records say why) */
        if (n_in == 1 && !u->res[from].err_code && r->do_reduce) u->res[from].final = true;
        u->level_n = 0;
        unit_complete(f, u);
        return DP_OK;
    }
    int32_t ov = 0;
    const int32_t budget = pl_content_budget(r, f->ws, &r->reduce_spec, u, &ov, &f->err);
    if (budget < 0) return DP_ERROR;
    /* greedy groups: add texts while the joined content fits */
    typedef struct { size_t a, b; } grp;
    grp *g = calloc(n_in, sizeof(grp));
    if (!g) return DP_ENOMEM;
    size_t n_g = 0;
    eng_tokens t = {0};
    dp_status st = DP_OK;
    for (size_t i = from; i < u->n_res && !st;) {
        size_t j = i;
        int64_t used = 0;
        while (j < u->n_res) {
            t.n = 0;
            const char *tx;
            size_t tl;
            answer_of(r, &u->res[j], &tx, &tl);
            if ((st = eng_tokenize(r->tok, f->ws, tx, tl, false, false, &t, &f->err))) break;
            const int64_t add = (int64_t)t.n + (j > i ? 2 : 0); /* "\n\n" is at most 2 tokens */
            if (used + add > budget && j > i) break;
            used += add;
            j++;
            if (used > budget) break; /* a single text over budget: its group fails below */
        }
        g[n_g++] = (grp){i, j};
        i = j;
    }
    eng_tokens_free(&t);
    if (!st && n_g >= n_in) { /* no progress: every text alone is near the budget */
        pl_result e = {0};
        e.index = 0, e.count = 1, e.level = level;
        e.err_code = "context_length_exceeded";
        char msg[256];
        snprintf(msg, sizeof(msg), "reduce level %d: %zu partial results do not fit two to a %d-token reduce prompt; "
                 "raise model.context or lower generation.max_tokens", level, n_in, r->n_ctx);
        e.err_msg = strdup(msg);
        st = pl_unit_add_result(u, &e);
        free(g);
        if (!st) unit_complete(f, u);
        return st;
    }
    u->level_n = (int32_t)n_g;
    u->level_done = 0;
    for (size_t k = 0; k < n_g && !st; k++) {
        dp_buf content;
        dp_buf_init(&content, (size_t)1 << 30);
        for (size_t i = g[k].a; i < g[k].b && !st; i++) {
            if (i > g[k].a) st = dp_buf_append(&content, "\n\n", 2);
            const char *tx;
            size_t tl;
            answer_of(r, &u->res[i], &tx, &tl);
            if (!st) st = dp_buf_append(&content, tx, tl);
        }
        pl_item *it = calloc(1, sizeof(*it));
        if (!it) st = DP_ENOMEM;
        if (!st) {
            it->u = u, it->index = (int32_t)k, it->count = (int32_t)n_g, it->level = level;
            pl_prompt_vars v = {u->path, u->filename, u->ext, r->date, u->sha, (int32_t)k + 1, (int32_t)n_g, 1};
            st = pl_prompt_tokens(r->tok, f->ws, &r->reduce_spec, &v, content.data ? (const char *)content.data : "",
                                  content.len, &it->prompt, &f->err);
            if (!st && (int64_t)it->prompt.n + r->job.generation.max_tokens > r->n_ctx) {
                char msg[256];
                snprintf(msg, sizeof(msg), "reduce level %d group %zu: the prompt has %zu tokens; with max_tokens it "
                         "exceeds the context of %d", level, k, it->prompt.n, r->n_ctx);
                it->err_code = "context_length_exceeded";
                it->err_msg = strdup(msg);
                eng_tokens_free(&it->prompt);
            }
            it->t_queued = dp_time_ns();
            if (!st) st = push_ready(f, it);
            if (st) pl_item_free(it);
        }
        dp_buf_free(&content);
    }
    free(g);
    return st;
}

/* One request of u finished (result or error). */
static dp_status request_done(infer *f, pl_item *it, pl_result *res) {
    pl_unit *u = it->u;
    res->index = it->index, res->count = it->count, res->level = it->level;
    res->page_first = it->page_first, res->page_last = it->page_last;
    res->span = it->span;
    memset(&it->span, 0, sizeof(it->span));
    dp_status st = pl_unit_add_result(u, res);
    if (st) return st;
    dp_mutex_lock(&f->r->mu);
    f->r->n_requests_done++;
    f->r->n_gen_tokens += (uint64_t)res->n_gen;
    f->r->n_prompt_tokens += (uint64_t)res->n_prompt;
    dp_mutex_unlock(&f->r->mu);
    if (it->level == 0 ? ++u->n_done < u->n_chunks : ++u->level_done < u->level_n) return DP_OK;
    /* the level is complete; its requests finished in any order: put them in index order */
    const size_t from = it->level == 0 ? 0 : u->n_res - (size_t)u->level_n;
    pl_unit_sort_results(u, from);
    return start_level(f, u, from, it->level + 1);
}

static void on_done(void *cb, const pl_gen_out *o) {
    infer *f = cb;
    pl_item *it = o->user;
    if (f->st) {
        pl_item_free(it);
        return;
    }
    pl_result res = {0};
    if (o->error) { /* the engine refused the step's results: an error record, the run goes on */
        res.err_code = "engine_error";
        res.err_msg = strdup(o->error);
        res.n_prompt = o->n_prompt;
        f->st = request_done(f, it, &res);
        pl_item_free(it);
        return;
    }
    res.text = malloc(o->len + 1);
    if (!res.text) {
        f->st = dp_err_set(&f->err, DP_ENOMEM, "out of memory");
        pl_item_free(it);
        return;
    }
    memcpy(res.text, o->text, o->len);
    res.text[o->len] = 0;
    res.len = o->len;
    res.n_prompt = o->n_prompt, res.n_gen = o->n_gen, res.finish = o->finish;
    res.queue_ms = o->t_admit_ns > it->t_queued ? (double)(o->t_admit_ns - it->t_queued) / 1e6 : 0;
    res.prefill_ms = (double)(o->t_first_ns - o->t_admit_ns) / 1e6;
    res.decode_ms = (double)(o->t_done_ns - o->t_first_ns) / 1e6;
    f->st = request_done(f, it, &res);
    pl_item_free(it);
}

/* An item that needs no engine time: a pass-through unit or a refused request. */
static dp_status no_engine(infer *f, pl_item *it) {
    if (!it->prompt.n && !it->err_code) {
        unit_complete(f, it->u);
        pl_item_free(it);
        return DP_OK;
    }
    pl_result res = {0};
    res.err_code = it->err_code;
    res.err_msg = it->err_msg;
    it->err_msg = NULL;
    dp_status st = request_done(f, it, &res);
    pl_item_free(it);
    return st;
}

static dp_status admit(infer *f, pl_item *it) {
    if (!it->prompt.n || it->err_code) return no_engine(f, it);
    pl_run *r = f->r;
    char cid[64];
    pl_result probe = {.index = it->index, .level = it->level};
    pl_custom_id(r, it->u, &probe, cid);
    pl_gen_req g = {it->prompt.ids, (int32_t)it->prompt.n, (int32_t)r->job.generation.max_tokens,
                    pl_run_sampler(r, cid), (const char *const *)r->job.generation.stop, r->job.generation.n_stop, it,
                    r->grammar, r->grammar && r->job.generation.thinking};
    dp_status st = pl_sched_admit(f->s, &g, &f->err);
    if (st == DP_EBUSY) { /* after finished requests free KV blocks; DP_EBUSY stops admitting */
        f->waiting = it;
        return st;
    }
    if (st == DP_ERANGE) { /* it cannot fit even an empty cache */
        it->err_code = "context_length_exceeded";
        it->err_msg = strdup(dp_err_msg(&f->err));
        eng_tokens_free(&it->prompt);
        return no_engine(f, it);
    }
    if (st) pl_item_free(it);
    return st;
}

/* The prompt head every map request shares: the longest common token prefix of two probe
 * prompts that differ in every variable and in content (the chat frame, the system prompt and
 * the template's text before its first variable are tokenized on their own, so they give the
 * same tokens in every request). */
static dp_status shared_prefix(infer *f) {
    pl_run *r = f->r;
    eng_tokens a = {0}, b = {0};
    pl_prompt_vars va = {"a/x.txt", "x.txt", "txt", "2000-01-01", "0", 1, 1, 1};
    pl_prompt_vars vb = {"b/y.md", "y.md", "md", "2099-12-31", "f", 7, 9, 7};
    dp_status st = pl_prompt_tokens(r->tok, f->ws, &r->map_spec, &va, "alpha", 5, &a, &f->err);
    if (!st) st = pl_prompt_tokens(r->tok, f->ws, &r->map_spec, &vb, "omega\n", 6, &b, &f->err);
    int32_t shared = 0;
    if (!st) st = pl_sched_share_head(f->s, &a, &b, r->job.generation.max_tokens, r->n_ctx, &shared, &f->err);
    dp_mutex_lock(&r->mu);
    r->n_prefix_tokens = (uint64_t)shared;
    dp_mutex_unlock(&r->mu);
    eng_tokens_free(&a);
    eng_tokens_free(&b);
    return st;
}

void *pl_stage_infer(void *arg) {
    pl_run *r = arg;
    infer f = {.r = r};
    bool input_done = false;
    if ((f.st = pl_sched_new(r->ctx, r->model, (int32_t)r->job.model.max_sequences, r->n_ubatch, &f.s, &f.err)) ||
        (f.st = eng_tok_ws_new(&f.ws) ? dp_err_set(&f.err, DP_ENOMEM, "out of memory") : DP_OK) ||
        (f.st = shared_prefix(&f)))
        goto out;
    while (!r->stopping && !f.st) {
        /* fill free slots: reduce requests first, then new work */
        while (pl_sched_free_slots(f.s) > 0 && !f.st && !r->stopping) {
            dp_status a;
            if (f.waiting) {
                pl_item *it = f.waiting;
                f.waiting = NULL;
                if ((a = admit(&f, it)) == DP_EBUSY) break;
                f.st = a;
                continue;
            }
            if (f.head_ready < f.n_ready) {
                a = admit(&f, f.ready[f.head_ready++]);
                if (f.head_ready == f.n_ready) f.head_ready = f.n_ready = 0;
                if (a == DP_EBUSY) break;
                f.st = a;
                continue;
            }
            if (input_done) break;
            void *p = NULL;
            const bool idle = pl_sched_active(f.s) == 0;
            dp_status q = idle ? pl_queue_pop_wait(r->q_items, &p, 200) : pl_queue_try_pop(r->q_items, &p);
            if (q == DP_EBUSY) break;
            if (q == DP_EOF) {
                input_done = true;
                break;
            }
            if (q) goto out; /* aborted: a failure or a stop elsewhere */
            if ((a = admit(&f, p)) == DP_EBUSY) break;
            f.st = a;
        }
        if (f.st) break;
        if (pl_sched_active(f.s) == 0) {
            if (input_done && f.head_ready >= f.n_ready && !f.waiting) break;
            continue;
        }
        dp_status st = pl_sched_step(f.s, on_done, &f, &f.err);
        if (st && st != DP_EOF) f.st = st;
        dp_mutex_lock(&r->mu);
        r->n_computed_tokens = pl_sched_tokens(f.s);
        r->n_prefix_saved = pl_sched_prefix_saved(f.s);
        dp_mutex_unlock(&r->mu);
    }
out:
    if (f.s) {
        dp_mutex_lock(&r->mu);
        r->n_prefix_saved = pl_sched_prefix_saved(f.s);
        dp_mutex_unlock(&r->mu);
    }
    if (f.st) pl_run_fail(r, f.st, &f.err, PL_EXIT_SOFTWARE);
    if (f.s) pl_sched_cancel_all(f.s, pl_item_free);
    for (size_t i = f.head_ready; i < f.n_ready; i++) pl_item_free(f.ready[i]);
    pl_item_free(f.waiting);
    free(f.ready);
    pl_sched_free(f.s);
    eng_tok_ws_free(f.ws);
    /* on a stop the writer still drains what is complete and commits it */
    pl_queue_close(r->q_done);
    return NULL;
}
