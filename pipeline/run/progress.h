/*
 * progress.h - what a run shows while it works: on a terminal one line updated in place
 * (documents done/total, requests, tokens/s, ETA); otherwise (cron, systemd, CI logs) a plain
 * line every 10 seconds; nothing with --quiet. Lines go to stderr; stdout stays free.
 */
#ifndef PL_PROGRESS_H
#define PL_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

typedef struct pl_progress_snapshot {
    uint64_t files;
    bool listing_done;
    uint64_t docs_listed, docs_done, docs_skipped, docs_failed, requests_done, gen_tokens, prompt_tokens;
    /* tokens computed so far, counted as each engine step ends (0 where the stage does not count
     * them: the rate then follows finished requests) */
    uint64_t computed_tokens;
    bool counts_tokens;           /* the stage publishes computed_tokens (the embedding stage does not) */
    /* the requests the chunker has made so far and their prompt tokens; chunking_done once it has
     * made them all, which puts a size on the work left in tokens */
    bool chunking_done;
    uint64_t queued_requests, queued_prompt_tokens;
    uint64_t prefix_saved;        /* prompt tokens a shared prompt head saved computing */
    int64_t max_gen;              /* generation.max_tokens: a request's tokens to generate, at most */
} pl_progress_snapshot;

/* The time left, from the rate at which documents are processed (skipped ones do not count):
 * the average since the run's work began for the first minute, then an exponential average
 * with a one-minute time constant, so bursts (a batch of sequences finishing together) and
 * single slow documents do not swing it. Before the first document finishes, the rate of
 * earlier runs of the job (prior, documents per second; 0 when unknown) stands in. */
typedef struct pl_eta {
    double prior;         /* documents/s of earlier runs */
    double rate;          /* documents/s now (0: unknown) */
    double t_last;        /* seconds at the last update */
    uint64_t done_last;
} pl_eta;

void pl_eta_init(pl_eta *e, double prior);
/* t: seconds since the run's work began; done: documents processed so far (not skipped). */
void pl_eta_update(pl_eta *e, double t, uint64_t done);
/* Seconds for `left` more documents; -1 when there is no rate yet. */
double pl_eta_seconds(const pl_eta *e, uint64_t left);
/* Tokens the engine has still to compute (prompt and generated), once the chunker has made
 * every request (-1 before, or when the stage does not count computed tokens): the prompts less
 * what a shared head saved, plus for each request not yet finished the average generated so
 * far (generation.max_tokens before any finished), less what is computed. Requests a map-reduce
 * run adds later are not in it. */
int64_t pl_tokens_left(const pl_progress_snapshot *s);

typedef struct pl_progress {
    bool quiet, tty;
    uint64_t t0, t_last;
    uint64_t tokens_at_last, t_rate;
    double rate;          /* smoothed tokens/s (prompt + generated) */
    int last_len;
    pl_eta eta;           /* in documents */
    pl_eta eta_tokens;    /* in computed tokens, once the chunker has sized the work */
} pl_progress;

/* mode: -1 auto (updating line on a terminal), 0 plain lines, 1 updating line. prior_rate:
 * documents per second of earlier runs of the job (0: none), for an ETA before the first
 * document of this run finishes. */
void pl_progress_init(pl_progress *p, bool quiet, int mode, double prior_rate);
/* Prints when due (or always when final). */
void pl_progress_update(pl_progress *p, const pl_progress_snapshot *s, bool final);
/* A message on its own line (it does not break the updating line). */
void pl_progress_message(pl_progress *p, const char *msg);

#endif /* PL_PROGRESS_H */
