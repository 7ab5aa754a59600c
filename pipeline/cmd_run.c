/*
 * cmd_run.c - `docpipe run JOB.yaml [--restart] [--device D] [--quiet] [--progress=line|plain]`,
 * `docpipe plan JOB.yaml [--no-bench]` and `docpipe status JOB.yaml` (run.h does the work).
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "exit_codes.h"
#include "run.h"

bool pl_parse_device(const char *v, int *out);

int pl_cmd_run(int argc, char **argv) {
    pl_run_opts o = {false, -1, false, -1};
    const char *job = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--restart")) o.restart = true;
        else if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) o.quiet = true;
        else if (!strcmp(a, "--progress=line")) o.progress = 1;
        else if (!strcmp(a, "--progress=plain")) o.progress = 0;
        else if (!strcmp(a, "--device")) {
            if (i + 1 >= argc || !pl_parse_device(argv[++i], &o.device)) return PL_EXIT_USAGE;
        } else if (!strcmp(a, "--shard")) {
            fprintf(stderr, "docpipe run: --shard is not in this build yet (see docs/cli.md)\n");
            return PL_EXIT_USAGE;
        } else if (a[0] == '-' || job) {
            fprintf(stderr, "docpipe run: unexpected argument '%s'\n", a);
            goto usage;
        } else job = a;
    }
    if (!job) goto usage;
    return pl_run_job(job, &o);
usage:
    fprintf(stderr, "usage: docpipe run JOB.yaml [--restart] [--device cpu|cuda|auto] [--quiet] "
            "[--progress=line|plain]\n");
    return PL_EXIT_USAGE;
}

int pl_cmd_plan(int argc, char **argv) {
    const char *job = NULL;
    bool bench = true;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--no-bench")) bench = false;
        else if (argv[i][0] == '-' || job) {
            fprintf(stderr, "usage: docpipe plan JOB.yaml [--no-bench]\n");
            return PL_EXIT_USAGE;
        } else job = argv[i];
    }
    if (!job) {
        fprintf(stderr, "usage: docpipe plan JOB.yaml [--no-bench]\n");
        return PL_EXIT_USAGE;
    }
    return pl_plan_job(job, bench);
}

int pl_cmd_status(int argc, char **argv) {
    if (argc != 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: docpipe status JOB.yaml\n");
        return PL_EXIT_USAGE;
    }
    return pl_status_job(argv[1]);
}
