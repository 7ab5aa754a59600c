/*
 * test_layout.c - the on-disk names of a job (pipeline/output/layout.c): the one place they are
 * spelled, pinned here because users' scripts, merge and status depend on them.
 */
#include "testutil.h"

#include "layout.h"

static void test_whole_run_names(void **state) {
    (void)state;
    const pl_layout_job j = {"st", "out/results.jsonl", true, "mon/docpipe.prom", "out/maps.jsonl"};
    pl_layout l;
    assert_int_equal(pl_layout_make(&j, 0, 0, &l), DP_OK);
    assert_string_equal(l.state_dir, "st");
    assert_string_equal(l.lock, "st/job.lock");
    assert_string_equal(l.checkpoint, "st/checkpoint.json");
    assert_string_equal(l.ledger, "st/ledger.jsonl");
    assert_string_equal(l.manifest, "st/manifest.json");
    assert_string_equal(l.results, "out/results.jsonl.gz");
    assert_string_equal(l.errors, "out/errors.jsonl");
    assert_string_equal(l.status, "out/status.json");
    assert_string_equal(l.metrics, "mon/docpipe.prom");
    assert_string_equal(l.intermediate, "out/maps.jsonl.gz");
    pl_layout_free(&l);
    pl_layout_free(&l); /* (twice: safe) */
}

static void test_shard_names(void **state) {
    (void)state;
    const pl_layout_job j = {"st", "out/results.jsonl", false, "docpipe.prom", NULL};
    pl_layout l;
    assert_int_equal(pl_layout_make(&j, 2, 8, &l), DP_OK);
    assert_string_equal(l.state_dir, "st/shard-2-of-8");
    assert_string_equal(l.checkpoint, "st/shard-2-of-8/checkpoint.json");
    assert_string_equal(l.ledger, "st/shard-2-of-8/ledger.jsonl");
    assert_string_equal(l.lock, "st/shard-2-of-8/job.lock");
    assert_string_equal(l.manifest, "st/manifest.json");
    assert_string_equal(l.results, "out/part-2-of-8.jsonl");
    assert_string_equal(l.errors, "out/part-2-of-8.errors.jsonl");
    assert_string_equal(l.status, "out/part-2-of-8.status.json");
    assert_string_equal(l.metrics, "./part-2-of-8.docpipe.prom");
    assert_null(l.intermediate);
    pl_layout_free(&l);
    char buf[64];
    assert_int_equal(pl_layout_path(&j, 2, 8, PL_FILE_ERRORS, buf, sizeof(buf)), DP_OK);
    assert_string_equal(buf, "out/part-2-of-8.errors.jsonl");
    char small[8];
    assert_int_equal(pl_layout_path(&j, 2, 8, PL_FILE_ERRORS, small, sizeof(small)), DP_ERANGE);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_whole_run_names),
        cmocka_unit_test(test_shard_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
