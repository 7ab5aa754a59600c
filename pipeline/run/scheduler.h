/*
 * scheduler.h - continuous batching over the engine: a fixed set of sequence slots; a free slot
 * takes the next request; every step is one eng_decode holding one token for each decoding
 * slot and the next prompt piece of each prefilling slot; a finished request frees its slot at
 * once, so nothing waits for the slowest sequence.
 *
 *   pl_sched_new(ctx, model, n_slots, &s, &err);
 *   for (;;) {
 *       while (pl_sched_free_slots(s) && have_work()) pl_sched_admit(s, &req, &err);
 *       st = pl_sched_step(s, on_done, cb, &err);   // DP_EOF: nothing admitted, idle
 *   }
 *
 * Batch invariance: prompt pieces are cut at fixed offsets of the request's own prompt, a step
 * only takes whole pieces (at most max_step tokens, so the engine never splits one), and each
 * request samples from its own seeded sampler, so a request's tokens do not depend on what else
 * runs in the step or on admission order (the engine's kernels reduce in a fixed order per row).
 */
#ifndef PL_SCHEDULER_H
#define PL_SCHEDULER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"

typedef struct pl_sched pl_sched;

typedef struct pl_gen_req {
    const int32_t *prompt;    /* copied at admission */
    int32_t n_prompt;         /* >= 1; n_prompt + max_tokens <= the context */
    int32_t max_tokens;
    eng_sampler_params sp;
    const char *const *stop;  /* (optional) stop strings, copied */
    size_t n_stop;
    void *user;               /* handed back in pl_gen_out */
    eng_grammar *grammar;     /* (optional) the text must be a sentence of it; borrowed, outlives the request */
    bool grammar_after_think; /* free text up to "</think>", the grammar after it */
} pl_gen_req;

typedef struct pl_gen_out {
    void *user;
    const char *text;         /* generated text (may hold invalid UTF-8); valid during the callback */
    size_t len;
    int32_t n_prompt, n_gen;
    const char *finish;       /* "stop" (end-of-generation token, stop string, or the grammar complete),
                                 "length", or "error" */
    const char *error;        /* with "error": why (the engine's check of the step failed) */
    uint64_t t_admit_ns, t_first_ns, t_done_ns; /* dp_time_ns() stamps */
} pl_gen_out;

typedef void (*pl_sched_done_fn)(void *cb, const pl_gen_out *out);

/* The prompt piece every prefilling slot contributes to a step. */
#define PL_SCHED_PIECE 256

/* n_slots < the context's n_seq_max (one more holds the shared prefix); max_step = the
 * context's n_ubatch (>= PL_SCHED_PIECE): a step never holds more, so the engine never splits a
 * piece, which would change a sequence's numbers with what else runs. */
dp_status pl_sched_new(eng_context *c, const eng_model *m, int32_t n_slots, int32_t max_step, pl_sched **out,
                       dp_err *err);
void pl_sched_free(pl_sched *s);
int32_t pl_sched_free_slots(const pl_sched *s);
int32_t pl_sched_active(const pl_sched *s);
/* Starts a request in a free slot. It first reserves the KV cache blocks the request can reach
 * (eng_kv_blocks_needed of prompt + max_tokens, less the blocks of a shared prefix): DP_EBUSY
 * when no slot or not enough blocks are free now (admit it after a step frees some), DP_ERANGE
 * when it could not fit even an otherwise empty cache (report it as context_length_exceeded). */
dp_status pl_sched_admit(pl_sched *s, const pl_gen_req *r, dp_err *err);
/* Runs one engine step and reports every request it finished through done (in slot order).
 * DP_EOF when no request is active. When the engine's check of the step's results fails
 * (DP_ENUMERIC: logits not finite or flat), every request of that step ends with finish "error"
 * and the reason, its sequence is cleared, and the step returns DP_OK: the others go on. */
dp_status pl_sched_step(pl_sched *s, pl_sched_done_fn done, void *cb, dp_err *err);
/* Computes prefix[0..n) once, in a sequence of its own (id n_slots: the context needs
 * n_slots + 1 sequences), and starts every later request whose prompt begins with it (and is
 * longer) from a copy of that sequence (eng_seq_copy) instead of recomputing it: a job's chat
 * frame and system prompt are computed once for the whole run. The prefix is cut down to whole
 * pieces (a multiple of PL_SCHED_PIECE), so a request computes exactly the pieces it would
 * compute alone: its results are bit-identical with or without sharing. */
dp_status pl_sched_set_prefix(pl_sched *s, const int32_t *prefix, int32_t n, dp_err *err);
/* The one place that decides on a shared head (run and batch): the longest common token prefix
 * of two prompts that stand for all (a, b), shared when it is at least one piece and leaves
 * reserve + 8 tokens of n_ctx, unless DOCPIPE_NO_PREFIX=1 (tests and tests/bench/prefix.sh
 * compare without). *shared: the tokens shared (whole pieces), 0 when none. */
dp_status pl_sched_share_head(pl_sched *s, const eng_tokens *a, const eng_tokens *b, int64_t reserve, int64_t n_ctx,
                              int32_t *shared, dp_err *err);
/* Prompt tokens not computed thanks to the prefix so far. */
uint64_t pl_sched_prefix_saved(const pl_sched *s);
/* Abandons every active request, handing each user pointer to drop (optional); their slots
 * become free. */
void pl_sched_cancel_all(pl_sched *s, void (*drop)(void *user));
/* Tokens decoded so far (prompt and generated), for progress rates. */
uint64_t pl_sched_tokens(const pl_sched *s);

#endif /* PL_SCHEDULER_H */
