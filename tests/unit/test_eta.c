/*
 * test_eta.c - the progress line's ETA (pl_eta, progress.h): steady under bursty completion
 * (a batch of sequences finishing together), under one slow document, and known right after a
 * resume from the earlier runs' pace; and the work left in tokens once the chunker has made
 * every request (pl_tokens_left), which a long document in flight needs.
 */
#include "testutil.h"

#include <math.h>

#include "progress.h"

/* The rate an ETA implies, for `left` documents. */
static double implied_rate(const pl_eta *e, uint64_t left) {
    const double s = pl_eta_seconds(e, left);
    return s > 0 ? (double)left / s : 0;
}

static void test_bursts_do_not_swing_it(void **state) {
    (void)state;
    /* 8 documents finish together every 8 s: 1 document/s on average, 1000 in all */
    pl_eta e;
    pl_eta_init(&e, 0);
    double lo = 1e9, hi = 0;
    for (int t = 1; t <= 600; t++) {
        const uint64_t done = (uint64_t)(t / 8) * 8;
        pl_eta_update(&e, t, done);
        if (t < 40) continue; /* (the first bursts are all there is to go by) */
        const double r = implied_rate(&e, 1000 - done);
        if (r < lo) lo = r;
        if (r > hi) hi = r;
        /* within 25 s the estimate moves far less than 3x */
        if (r < 0.8 || r > 1.25) fail_msg("t=%d: rate %.3f documents/s for a true 1.0", t, r);
    }
    assert_true(hi / lo < 1.6);
}

static void test_one_slow_document(void **state) {
    (void)state;
    /* 2 documents/s for 5 minutes, then nothing finishes for 40 s (one long document), then on */
    pl_eta e;
    pl_eta_init(&e, 0);
    uint64_t done = 0;
    double before = 0;
    for (int t = 1; t <= 400; t++) {
        if (t <= 300 || t > 340) done += 2;
        pl_eta_update(&e, t, done);
        if (t == 300) before = implied_rate(&e, 1000);
        if (t > 300 && t <= 325) { /* the 25 s after it stalls */
            const double r = implied_rate(&e, 1000);
            if (r < before / 3) fail_msg("t=%d: the rate fell from %.2f to %.2f", t, before, r);
        }
    }
    assert_true(before > 1.9 && before < 2.1);
}

static void test_before_the_first_document(void **state) {
    (void)state;
    pl_eta e;
    pl_eta_init(&e, 0);
    pl_eta_update(&e, 5, 0);
    assert_true(pl_eta_seconds(&e, 100) < 0); /* nothing to go by */
    assert_true(pl_eta_seconds(&e, 0) == 0);
    /* a resume: earlier runs did 0.5 documents/s */
    pl_eta_init(&e, 0.5);
    pl_eta_update(&e, 1, 0);
    assert_true(fabs(pl_eta_seconds(&e, 100) - 200) < 1e-9);
    /* then this run's own pace takes over */
    for (int t = 2; t <= 120; t++) pl_eta_update(&e, t, (uint64_t)t);
    assert_true(fabs(implied_rate(&e, 100) - 1.0) < 0.1);
}

static void test_tokens_left(void **state) {
    (void)state;
    /* one 31,481-token document and ten short ones, 38,975 prompt tokens, max_tokens 32 */
    pl_progress_snapshot s = {.listing_done = true, .files = 11, .docs_listed = 11, .counts_tokens = true,
                              .queued_requests = 11, .queued_prompt_tokens = 38975, .max_gen = 32};
    assert_int_equal(pl_tokens_left(&s), -1); /* the chunker may have more to hand on */
    s.chunking_done = true;
    assert_int_equal(pl_tokens_left(&s), 38975 + 11 * 32);
    /* minutes into the long prefill: no document has finished, the work left still shrinks */
    s.computed_tokens = 20000;
    assert_int_equal(pl_tokens_left(&s), 38975 + 11 * 32 - 20000);
    /* the short ones done, 12 tokens generated each: the open request is expected to generate as many */
    s.requests_done = 10, s.docs_done = 10, s.gen_tokens = 120, s.computed_tokens = 30000;
    s.prompt_tokens = 7494;
    assert_int_equal(pl_tokens_left(&s), 38975 + 120 + 12 - 30000);
    /* a shared prompt head saved 500 prompt tokens */
    s.prefix_saved = 500;
    assert_int_equal(pl_tokens_left(&s), 38975 - 500 + 120 + 12 - 30000);
    /* recomputation (a preempted request) never makes it negative; reduce requests past the count neither */
    s.computed_tokens = 50000, s.requests_done = 14;
    assert_int_equal(pl_tokens_left(&s), 0);
    /* the embedding stage does not count computed tokens: no estimate from them */
    s.counts_tokens = false;
    assert_int_equal(pl_tokens_left(&s), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bursts_do_not_swing_it),
        cmocka_unit_test(test_one_slow_document),
        cmocka_unit_test(test_before_the_first_document),
        cmocka_unit_test(test_tokens_left),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
