/*
 * progress.c - see progress.h.
 */
#include "progress.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "platform.h"
#include "say.h"

#define ETA_TAU 60.0 /* seconds */

void pl_eta_init(pl_eta *e, double prior) {
    memset(e, 0, sizeof(*e));
    e->prior = prior > 0 ? prior : 0;
}

void pl_eta_update(pl_eta *e, double t, uint64_t done) {
    if (t <= 0) return;
    if (t <= ETA_TAU) { /* the first minute: the average so far (once something has finished) */
        if (done) e->rate = (double)done / t;
    } else if (t - e->t_last >= 1.0) {
        const double inst = (double)(done - e->done_last) / (t - e->t_last);
        const double a = 1.0 - exp(-(t - e->t_last) / ETA_TAU);
        e->rate = e->rate > 0 ? e->rate + a * (inst - e->rate) : (done ? (double)done / t : 0);
    } else {
        return;
    }
    e->t_last = t;
    e->done_last = done;
}

double pl_eta_seconds(const pl_eta *e, uint64_t left) {
    const double rate = e->rate > 0 ? e->rate : e->prior;
    if (!left) return 0;
    return rate > 0 ? (double)left / rate : -1;
}

int64_t pl_tokens_left(const pl_progress_snapshot *s) {
    if (!s->chunking_done || !s->counts_tokens) return -1;
    const uint64_t open = s->queued_requests > s->requests_done ? s->queued_requests - s->requests_done : 0;
    const double gen_each = s->requests_done ? (double)s->gen_tokens / (double)s->requests_done
                                             : (double)(s->max_gen > 0 ? s->max_gen : 0);
    const uint64_t saved = s->prefix_saved < s->queued_prompt_tokens ? s->prefix_saved : s->queued_prompt_tokens;
    const double prompt = (double)(s->queued_prompt_tokens - saved);
    const double left = prompt + (double)s->gen_tokens + (double)open * gen_each - (double)s->computed_tokens;
    return left > 0 ? (int64_t)left : 0;
}

void pl_progress_init(pl_progress *p, bool quiet, int mode, double prior_rate) {
    memset(p, 0, sizeof(*p));
    pl_eta_init(&p->eta, prior_rate);
    pl_eta_init(&p->eta_tokens, 0);
    p->quiet = quiet;
    p->tty = mode == 1 || (mode < 0 && dp_stderr_is_terminal());
    p->t0 = p->t_last = p->t_rate = dp_time_ns();
}

static void clear_line(pl_progress *p) {
    if (p->tty && p->last_len) {
        fprintf(stderr, "\r%*s\r", p->last_len, "");
        p->last_len = 0;
    }
}

void pl_progress_message(pl_progress *p, const char *msg) {
    clear_line(p);
    pl_say(PL_SAY_INFO, "note", NULL, "%s", msg);
}

void pl_progress_update(pl_progress *p, const pl_progress_snapshot *s, bool final) {
    if (p->quiet) return;
    const uint64_t now = dp_time_ns();
    const uint64_t every = p->tty ? 250000000ull : 10000000000ull;
    if (!final && now - p->t_last < every) return;
    p->t_last = now;
    /* tokens as the engine computes them, so that a long prompt's minutes of prefill show a rate
     * before its request finishes */
    const uint64_t tokens = s->computed_tokens ? s->computed_tokens : s->gen_tokens + s->prompt_tokens;
    if (now - p->t_rate >= 1000000000ull) {
        const double inst = (double)(tokens - p->tokens_at_last) * 1e9 / (double)(now - p->t_rate);
        p->rate = p->rate > 0 ? 0.7 * p->rate + 0.3 * inst : inst;
        p->tokens_at_last = tokens;
        p->t_rate = now;
    }
    const double el = (double)(now - p->t0) / 1e9;
    char eta[32] = "?";
    const uint64_t ran = s->docs_done - s->docs_skipped;
    /* a .jsonl file holds many documents: until all are listed, count the files */
    const uint64_t total = s->docs_listed > s->files ? s->docs_listed : s->files;
    pl_eta_update(&p->eta, el, ran);
    /* once the chunker has made every request the work left is known in tokens, which serves a
     * folder of mixed lengths (a long document in flight finishes no document for minutes) and
     * leaves out the documents an incremental run skips; until then, documents */
    const int64_t tokens_left = pl_tokens_left(s);
    double secs = -1;
    if (tokens_left >= 0) {
        pl_eta_update(&p->eta_tokens, el, s->computed_tokens);
        secs = pl_eta_seconds(&p->eta_tokens, (uint64_t)tokens_left);
    }
    if (secs < 0 && s->listing_done && total >= s->docs_done) secs = pl_eta_seconds(&p->eta, total - s->docs_done);
    if (secs >= 0 && secs < 100 * 3600)
        snprintf(eta, sizeof(eta), "%d:%02d:%02d", (int)secs / 3600, (int)secs / 60 % 60, (int)secs % 60);
    char line[256];
    int n = snprintf(line, sizeof(line), "%llu/%llu documents (%llu skipped, %llu failed), %llu requests, %.0f tok/s, "
                     "%.0f s elapsed, ETA %s", (unsigned long long)s->docs_done, (unsigned long long)total,
                     (unsigned long long)s->docs_skipped, (unsigned long long)s->docs_failed,
                     (unsigned long long)s->requests_done, p->rate, el, final ? "0:00:00" : eta);
    if (p->tty) {
        fprintf(stderr, "\r%s%*s", line, p->last_len > n ? p->last_len - n : 0, "");
        p->last_len = n;
        if (final) {
            fputc('\n', stderr);
            p->last_len = 0;
        }
    } else {
        pl_say(PL_SAY_INFO, "progress",
               json_pack("{s:I, s:I, s:I, s:I, s:I, s:f, s:f, s:s}", "documents_done", (json_int_t)s->docs_done,
                         "documents_total", (json_int_t)total, "skipped", (json_int_t)s->docs_skipped, "failed",
                         (json_int_t)s->docs_failed, "requests", (json_int_t)s->requests_done, "tokens_per_second",
                         (double)(int64_t)(p->rate * 10) / 10, "elapsed_seconds", (double)(int64_t)(el * 10) / 10,
                         "eta", final ? "0:00:00" : eta),
               "%s", line);
    }
    fflush(stderr);
}
