/*
 * test_memory.c - memory stays flat: the peak RSS of `docpipe run` over 4,000 small documents
 * is no more than over 200 of the same kind plus a small margin (bounded queues, documents freed
 * as soon as they are written; what grows is only the file list and the ledger, tens of bytes per
 * document). The numbers are printed for docs/operations.md.
 */
#include "e2eutil.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

/* Peak RSS in KiB of `docpipe run job`. */
static long run_rss(const char *job, int *rc) {
    fflush(NULL);
    pid_t p = fork();
    if (p == 0) {
        int nul = open("/dev/null", O_RDWR);
        dup2(nul, 0), dup2(nul, 1), dup2(nul, 2);
        execl(DP_BINARY, "docpipe", "run", job, "--quiet", (char *)NULL);
        _exit(127);
    }
    int st;
    struct rusage ru;
    wait4(p, &st, 0, &ru);
    *rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return ru.ru_maxrss;
}

static long rss_for(int n) {
    char d[4096], job[4400];
    snprintf(d, sizeof(d), "%s/mem%d", tu_tmpdir(), n);
    assert_int_equal(e2e_sh("mkdir -p '%s/in' && cd '%s/in' && for i in $(seq 1 %d); do d=$((i / 500)); mkdir -p $d; "
                            "printf 'document %%s: a short note about the nightly run.' $i > $d/n$i.txt; done",
                            d, d, n), 0);
    snprintf(job, sizeof(job), "%s/job.yaml", d);
    e2e_write_job(job, e2e_model("qwen35"), "in", "prompts:\n  template: \"{{content}}\"\ngeneration:\n  max_tokens: 2\n"
                  "outputs:\n  jsonl: out/r.jsonl\n");
    int rc = 0;
    long kb = run_rss(job, &rc);
    assert_int_equal(rc, 0);
    char res[4400];
    snprintf(res, sizeof(res), "%s/out/r.jsonl", d);
    size_t lines = 0;
    json_decref(e2e_load_records(res, &lines));
    assert_int_equal(lines, (size_t)n);
    return kb;
}

static void test_rss_flat(void **state) {
    (void)state;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    print_message("[  SKIPPED ] peak RSS under a sanitizer measures its shadow memory and quarantine, not docpipe\n");
    skip();
#endif
    const long small = rss_for(200), big = rss_for(4000);
    print_message("peak RSS: %ld KiB for 200 documents, %ld KiB for 4000\n", small, big);
    /* 20x the documents: allow 10%% + 4 MiB (the list of 4,000 names and allocator noise) */
    if (big > small + small / 10 + 4096) fail_msg("RSS grows with the number of documents: %ld KiB -> %ld KiB", small, big);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_rss_flat)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
