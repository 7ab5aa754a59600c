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
} pl_progress_snapshot;

typedef struct pl_progress {
    bool quiet, tty;
    uint64_t t0, t_last;
    uint64_t tokens_at_last, t_rate;
    double rate;          /* smoothed tokens/s (prompt + generated) */
    int last_len;
} pl_progress;

/* mode: -1 auto (updating line on a terminal), 0 plain lines, 1 updating line. */
void pl_progress_init(pl_progress *p, bool quiet, int mode);
/* Prints when due (or always when final). */
void pl_progress_update(pl_progress *p, const pl_progress_snapshot *s, bool final);
/* A message on its own line (it does not break the updating line). */
void pl_progress_message(pl_progress *p, const char *msg);

#endif /* PL_PROGRESS_H */
