/*
 * scheduler.c - see scheduler.h.
 */
#include "scheduler.h"

#include <stdlib.h>
#include <string.h>

#include "dynbuf.h"
#include "platform.h"

typedef struct slot {
    bool busy, decoding;
    eng_tokens prompt;
    int32_t max_tokens, n_fed, n_gen, next;
    int32_t kv_reserved;  /* KV blocks this request may still take (see admit) */
    char **stop;
    size_t n_stop;
    eng_sampler *smp;
    eng_matcher *gm;      /* the request's grammar, when it has one (after "</think>" when it thinks) */
    const char *error;    /* with finish "error" */
    dp_buf text;
    eng_detok dt;
    void *user;
    uint64_t t_admit, t_first;
} slot;

struct pl_sched {
    eng_context *c;
    const eng_tokenizer *tok;
    int32_t n_vocab, n_slots, n_busy, n_ubatch;
    slot *sl;
    int32_t *bt, *bpos, *bseq;
    int8_t *bw;
    uint64_t n_tokens;
    eng_tokens prefix;          /* shared prompt head, held by sequence n_slots */
    uint64_t prefix_saved;
};

static void slot_clear(slot *s) {
    eng_tokens_free(&s->prompt);
    for (size_t i = 0; i < s->n_stop; i++) free(s->stop[i]);
    free(s->stop);
    eng_sampler_free(s->smp);
    eng_matcher_free(s->gm);
    dp_buf_free(&s->text);
    memset(s, 0, sizeof(*s));
}

dp_status pl_sched_new(eng_context *c, const eng_model *m, int32_t n_slots, int32_t max_step, pl_sched **out,
                       dp_err *err) {
    pl_sched *s = calloc(1, sizeof(*s));
    if (!s) return dp_err_set(err, DP_ENOMEM, "scheduler: out of memory");
    s->c = c;
    s->tok = eng_model_get_tokenizer(m);
    s->n_vocab = (int32_t)eng_model_get_info(m)->n_vocab;
    s->n_slots = n_slots;
    /* a step holds at most one piece per slot, and never more than the engine takes in one go */
    s->n_ubatch = n_slots * PL_SCHED_PIECE < max_step ? n_slots * PL_SCHED_PIECE : max_step;
    if (s->n_ubatch < PL_SCHED_PIECE) s->n_ubatch = PL_SCHED_PIECE;
    s->sl = calloc((size_t)n_slots, sizeof(slot));
    s->bt = malloc((size_t)s->n_ubatch * 3 * sizeof(int32_t));
    s->bw = malloc((size_t)s->n_ubatch);
    if (!s->sl || !s->bt || !s->bw) {
        pl_sched_free(s);
        return dp_err_set(err, DP_ENOMEM, "scheduler: out of memory");
    }
    s->bpos = s->bt + s->n_ubatch;
    s->bseq = s->bpos + s->n_ubatch;
    *out = s;
    return DP_OK;
}

void pl_sched_free(pl_sched *s) {
    if (!s) return;
    for (int32_t k = 0; s->sl && k < s->n_slots; k++) slot_clear(&s->sl[k]);
    eng_tokens_free(&s->prefix);
    free(s->sl);
    free(s->bt);
    free(s->bw);
    free(s);
}

int32_t pl_sched_free_slots(const pl_sched *s) { return s->n_slots - s->n_busy; }

/* KV blocks reserved by the active requests. */
static int32_t kv_committed(const pl_sched *s) {
    int32_t n = 0;
    for (int32_t k = 0; k < s->n_slots; k++) n += s->sl[k].busy ? s->sl[k].kv_reserved : 0;
    return n;
}

/* KV blocks the requests may use: the pool less the shared prefix's blocks (0 = no pool, an
 * attention-free model). */
static int32_t kv_capacity(const pl_sched *s) {
    const int32_t total = eng_kv_blocks_total(s->c);
    return total ? total - eng_kv_blocks_needed((int32_t)s->prefix.n, 0) : 0;
}
int32_t pl_sched_active(const pl_sched *s) { return s->n_busy; }
uint64_t pl_sched_tokens(const pl_sched *s) { return s->n_tokens; }
uint64_t pl_sched_prefix_saved(const pl_sched *s) { return s->prefix_saved; }

dp_status pl_sched_set_prefix(pl_sched *s, const int32_t *prefix, int32_t n, dp_err *err) {
    const int32_t seq = s->n_slots;
    eng_tokens_free(&s->prefix);
    eng_seq_clear(s->c, seq);
    n -= n % PL_SCHED_PIECE; /* whole pieces: requests then compute exactly what they would alone */
    if (n < 1) return DP_OK;
    /* the same fixed pieces a request would use for these positions */
    for (int32_t p = 0; p < n; p += PL_SCHED_PIECE) {
        const int32_t take = n - p < PL_SCHED_PIECE ? n - p : PL_SCHED_PIECE;
        for (int32_t i = 0; i < take; i++) s->bt[i] = prefix[p + i], s->bpos[i] = p + i, s->bseq[i] = seq, s->bw[i] = 0;
        eng_batch b = {take, s->bt, s->bpos, s->bseq, s->bw};
        dp_status st = eng_decode(s->c, &b, err);
        if (st) {
            eng_seq_clear(s->c, seq);
            return st;
        }
        s->n_tokens += (uint64_t)take;
    }
    for (int32_t i = 0; i < n; i++)
        if (eng_tokens_push(&s->prefix, prefix[i])) {
            eng_tokens_free(&s->prefix);
            return dp_err_set(err, DP_ENOMEM, "scheduler: out of memory");
        }
    return DP_OK;
}

dp_status pl_sched_admit(pl_sched *s, const pl_gen_req *r, dp_err *err) {
    int32_t k = 0;
    while (k < s->n_slots && s->sl[k].busy) k++;
    if (k == s->n_slots) return dp_err_set(err, DP_EBUSY, "scheduler: no free slot");
    if (r->n_prompt < 1 || r->max_tokens < 1) return dp_err_set(err, DP_EINVAL, "scheduler: empty request");
    /* Reserve the KV blocks the request can reach (prompt + max_tokens) before it starts, so a
     * step never runs out of blocks halfway: a request waits until finished ones free enough,
     * and one that cannot fit even an empty pool is refused outright. */
    const int32_t np = (int32_t)s->prefix.n;
    const bool shares = np && r->n_prompt > np && !memcmp(r->prompt, s->prefix.ids, (size_t)np * sizeof(int32_t));
    const int32_t cap = kv_capacity(s), need = eng_kv_blocks_needed(r->n_prompt + r->max_tokens, shares ? np : 0);
    if (cap && need > cap)
        return dp_err_set(err, DP_ERANGE, "the request needs %d KV blocks (%d prompt + %d max_tokens positions), the "
                          "cache holds %d", need, r->n_prompt, r->max_tokens, cap);
    const int32_t committed = cap ? kv_committed(s) : 0;
    if (cap && committed + need > cap)
        return dp_err_set(err, DP_EBUSY, "scheduler: %d KV blocks free of %d, the request needs %d",
                          cap - committed, cap, need);
    slot *sl = &s->sl[k];
    memset(sl, 0, sizeof(*sl));
    dp_status st = DP_OK;
    for (int32_t i = 0; i < r->n_prompt && !st; i++) st = eng_tokens_push(&sl->prompt, r->prompt[i]);
    if (!st && r->n_stop) {
        sl->stop = calloc(r->n_stop, sizeof(char *));
        if (!sl->stop) st = DP_ENOMEM;
        for (size_t i = 0; i < r->n_stop && !st; i++)
            if (!(sl->stop[sl->n_stop++] = strdup(r->stop[i]))) st = DP_ENOMEM;
    }
    if (st) {
        slot_clear(sl);
        return dp_err_set(err, DP_ENOMEM, "scheduler: out of memory");
    }
    if ((st = eng_sampler_new(&r->sp, s->n_vocab, &sl->smp, err))) {
        slot_clear(sl);
        return st;
    }
    if (r->grammar && (st = eng_matcher_new_after(r->grammar, r->grammar_after_think ? "</think>" : NULL, &sl->gm, err))) {
        slot_clear(sl);
        return st;
    }
    for (int32_t i = 0; i < r->n_prompt; i++) eng_sampler_accept(sl->smp, r->prompt[i]);
    dp_buf_init(&sl->text, (size_t)1 << 26);
    sl->max_tokens = r->max_tokens;
    sl->kv_reserved = cap ? need : 0;
    sl->user = r->user;
    sl->busy = true;
    sl->t_admit = dp_time_ns();
    eng_seq_clear(s->c, k);
    if (shares) {
        eng_seq_copy(s->c, s->n_slots, k);
        sl->n_fed = np;
        s->prefix_saved += (uint64_t)np;
    }
    s->n_busy++;
    return DP_OK;
}

void pl_sched_cancel_all(pl_sched *s, void (*drop)(void *user)) {
    for (int32_t k = 0; k < s->n_slots; k++)
        if (s->sl[k].busy) {
            if (drop) drop(s->sl[k].user);
            slot_clear(&s->sl[k]);
            eng_seq_clear(s->c, k);
        }
    s->n_busy = 0;
}

static const char *grammar_failed(slot *sl) {
    sl->error = eng_matcher_failure(sl->gm);
    return "error";
}

/* Samples the next token: within the grammar when it applies (NULL = go on), else freely. */
static const char *sample(slot *sl, const float *l, int32_t *next) {
    if (!sl->gm) {
        *next = eng_sampler_sample(sl->smp, l);
        return NULL;
    }
    *next = eng_sampler_sample_masked(sl->smp, l, sl->gm);
    if (*next < 0 || !eng_matcher_accept_token(sl->gm, *next)) return grammar_failed(sl);
    return NULL;
}

/* Appends the sampled token; returns the finish reason or NULL to go on. */
static const char *take_token(pl_sched *s, slot *sl, int32_t next) {
    if (eng_token_is_eog(s->tok, next)) return "stop";
    eng_sampler_accept(sl->smp, next);
    uint8_t buf[512];
    size_t n = eng_detok_push(s->tok, &sl->dt, next, false, buf, sizeof(buf));
    const size_t before = sl->text.len;
    dp_buf_append(&sl->text, buf, n);
    sl->n_gen++;
    sl->next = next;
    for (size_t q = 0; q < sl->n_stop; q++) {
        /* only the new bytes (and a stop string's length before them) can complete a match */
        const size_t sl_len = strlen(sl->stop[q]);
        size_t from = before > sl_len ? before - sl_len : 0;
        const char *t = (const char *)sl->text.data;
        for (size_t i = from; i + sl_len <= sl->text.len; i++)
            if (!memcmp(t + i, sl->stop[q], sl_len)) {
                sl->text.len = i;
                return "stop";
            }
    }
    /* the grammar is complete and nothing may follow: the end, without asking the model */
    if (sl->gm && eng_matcher_must_end(sl->gm)) return "stop";
    return sl->n_gen >= sl->max_tokens ? "length" : NULL;
}

dp_status pl_sched_step(pl_sched *s, pl_sched_done_fn done, void *cb, dp_err *err) {
    if (!s->n_busy) return DP_EOF;
    int32_t n = 0;
    for (int32_t k = 0; k < s->n_slots; k++) {
        slot *sl = &s->sl[k];
        if (!sl->busy) continue;
        if (sl->decoding) {
            if (n + 1 > s->n_ubatch) continue; /* next step */
            s->bt[n] = sl->next, s->bpos[n] = (int32_t)sl->prompt.n + sl->n_gen - 1, s->bseq[n] = k, s->bw[n] = 1;
            n++;
        } else {
            const int32_t left = (int32_t)sl->prompt.n - sl->n_fed, take = left < PL_SCHED_PIECE ? left : PL_SCHED_PIECE;
            if (n + take > s->n_ubatch) continue; /* whole pieces only: next step */
            for (int32_t i = 0; i < take; i++) {
                s->bt[n] = sl->prompt.ids[sl->n_fed + i], s->bpos[n] = sl->n_fed + i, s->bseq[n] = k;
                s->bw[n] = i == take - 1 && take == left;
                n++;
            }
        }
    }
    eng_batch b = {n, s->bt, s->bpos, s->bseq, s->bw};
    dp_status st = eng_decode(s->c, &b, err);
    if (st == DP_ENUMERIC) { /* never hand out what the check refused: the step's requests fail */
        for (int32_t i = 0; i < n; i++) {
            slot *sl = &s->sl[s->bseq[i]];
            if (!sl->busy) continue; /* (a prompt's earlier tokens in this step) */
            pl_gen_out o = {sl->user, "", 0, (int32_t)sl->prompt.n, sl->n_gen, "error", dp_err_msg(err),
                            sl->t_admit, sl->t_first ? sl->t_first : dp_time_ns(), dp_time_ns()};
            if (done) done(cb, &o);
            slot_clear(sl);
            eng_seq_clear(s->c, s->bseq[i]);
            s->n_busy--;
        }
        return DP_OK;
    }
    if (st) return st;
    s->n_tokens += (uint64_t)n;
    int32_t li = 0;
    for (int32_t i = 0; i < n; i++) {
        slot *sl = &s->sl[s->bseq[i]];
        if (!sl->decoding) sl->n_fed++;
        if (!s->bw[i]) continue;
        const float *l = eng_get_logits(s->c, li++);
        if (!sl->decoding) sl->decoding = true, sl->t_first = dp_time_ns();
        int32_t next;
        const char *finish = sample(sl, l, &next);
        if (!finish) finish = take_token(s, sl, next);
        if (!finish) continue;
        if (!strcmp(finish, "length")) {
            uint8_t tail[8];
            dp_buf_append(&sl->text, tail, eng_detok_flush(&sl->dt, tail));
        }
        pl_gen_out o = {sl->user, sl->text.data ? (const char *)sl->text.data : "", sl->text.len,
                        (int32_t)sl->prompt.n, sl->n_gen, finish, sl->error, sl->t_admit, sl->t_first, dp_time_ns()};
        if (done) done(cb, &o);
        slot_clear(sl);
        eng_seq_clear(s->c, s->bseq[i]);
        s->n_busy--;
    }
    return DP_OK;
}

dp_status pl_sched_share_head(pl_sched *s, const eng_tokens *a, const eng_tokens *b, int64_t reserve, int64_t n_ctx,
                              int32_t *shared, dp_err *err) {
    *shared = 0;
    const char *off = getenv("DOCPIPE_NO_PREFIX");
    if (off && *off == '1') return DP_OK;
    size_t n = 0;
    while (n < a->n && n < b->n && a->ids[n] == b->ids[n]) n++;
    /* a head that leaves no room for content and generation helps no request */
    if (n < PL_SCHED_PIECE || (int64_t)n + reserve + 8 > n_ctx) return DP_OK;
    dp_status st = pl_sched_set_prefix(s, a->ids, (int32_t)n, err);
    if (!st) *shared = (int32_t)(n - n % PL_SCHED_PIECE);
    return st;
}
