/*
 * test_cluster_examples.c - the cluster examples docs/cluster.md shows are real: the sbatch
 * script passes shellcheck (skipped with a message when shellcheck is not installed) and every
 * Kubernetes manifest is well-formed YAML (libyaml) with the settings the docs promise.
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("%s: cannot open", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (fread(s, 1, (size_t)n, f) != (size_t)n) fail_msg("%s: short read", path);
    s[n] = 0;
    fclose(f);
    return s;
}

/* Parses the whole stream; fails the test with libyaml's message and position on an error. */
static void parse_yaml(const char *path) {
    char *s = slurp(path);
    yaml_parser_t p;
    yaml_parser_initialize(&p);
    yaml_parser_set_input_string(&p, (const unsigned char *)s, strlen(s));
    yaml_event_t ev;
    int done = 0, docs = 0;
    while (!done) {
        if (!yaml_parser_parse(&p, &ev))
            fail_msg("%s:%zu:%zu: %s", path, p.problem_mark.line + 1, p.problem_mark.column + 1, p.problem);
        docs += ev.type == YAML_DOCUMENT_START_EVENT;
        done = ev.type == YAML_STREAM_END_EVENT;
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&p);
    assert_int_equal(docs, 1);
    free(s);
}

static void test_manifests(void **state) {
    (void)state;
    static const char *const files[][3] = {
        {"indexed-job.yaml", "completionMode: Indexed", "backoffLimitPerIndex"},
        {"merge-job.yaml", "\"merge\"", "kind: Job"},
        {"cronjob.yaml", "concurrencyPolicy: Forbid", "kind: CronJob"},
    };
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/examples/cluster/%s", DP_SOURCE_DIR, files[i][0]);
        parse_yaml(path);
        char *s = slurp(path);
        if (!strstr(s, files[i][1]) || !strstr(s, files[i][2])) fail_msg("%s lacks %s / %s", path, files[i][1], files[i][2]);
        free(s);
    }
}

static void test_sbatch_script(void **state) {
    (void)state;
    char path[4096], cmd[8300];
    snprintf(path, sizeof(path), "%s/examples/cluster/docpipe-array.sbatch", DP_SOURCE_DIR);
    char *s = slurp(path);
    static const char *const need[] = {"#SBATCH --array=", "%", "#SBATCH --requeue", "#SBATCH --signal=B:USR1@",
                                       "--dependency=\"afterok:", "DOCPIPE} merge"};
    for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++)
        if (!strstr(s, need[i])) fail_msg("%s lacks %s", path, need[i]);
    free(s);
    if (system("command -v shellcheck >/dev/null 2>&1") != 0) {
        print_message("[  SKIPPED ] shellcheck is not installed (apt-get install shellcheck)\n");
        skip();
    }
    snprintf(cmd, sizeof(cmd), "shellcheck '%s'", path);
    assert_int_equal(system(cmd), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_manifests), cmocka_unit_test(test_sbatch_script)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
