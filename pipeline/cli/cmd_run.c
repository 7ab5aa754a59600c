/*
 * cmd_run.c - `docpipe run JOB.yaml [--restart] [-m M] [-t N] [-c N] [--device D] [--quiet] ...`,
 * `docpipe plan JOB.yaml [--no-bench]` and `docpipe status JOB.yaml` (run.h does the work).
 */
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include "cli.h"
#include "exit_codes.h"
#include "help.h"
#include "run.h"


int pl_cmd_run(int argc, char **argv) {
    pl_run_opts o = {.device = -1, .progress = -1};
    const char *job = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--restart")) o.restart = true;
        else if (!strcmp(a, "--retry-failed")) o.retry_failed = true;
        else if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) o.quiet = true;
        else if (!strcmp(a, "--progress=line")) o.progress = 1;
        else if (!strcmp(a, "--progress=plain")) o.progress = 0;
        else if (!strcmp(a, "--device")) {
            if (i + 1 >= argc || !pl_parse_device(argv[++i], &o.device)) return PL_EXIT_USAGE;
        } else if (!strcmp(a, "--shard")) {
            unsigned si = 0, sn = 0;
            char tail = 0;
            if (i + 1 >= argc || sscanf(argv[++i], "%u/%u%c", &si, &sn, &tail) != 2 || sn < 1 || sn > 65536 ||
                si >= sn) {
                fprintf(stderr, "docpipe run: --shard takes I/N with 0 <= I < N, e.g. --shard 0/4\n");
                return PL_EXIT_USAGE;
            }
            o.shard_i = si, o.shard_n = sn;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "docpipe run: %s needs a model file\n", a);
                return PL_EXIT_USAGE;
            }
            o.model = argv[++i];
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (!pl_parse_u32(a, i + 1 < argc ? argv[++i] : NULL, 1, 1024, &o.threads)) return PL_EXIT_USAGE;
        } else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) {
            if (!pl_parse_u32(a, i + 1 < argc ? argv[++i] : NULL, 64, 1u << 20, &o.context)) return PL_EXIT_USAGE;
        } else if (!strcmp(a, "--mem")) {
            if (!pl_parse_size(a, i + 1 < argc ? argv[++i] : NULL, &o.mem)) return PL_EXIT_USAGE;
        } else if (!strcmp(a, "--shards")) {
            if (!pl_parse_u32(a, i + 1 < argc ? argv[++i] : NULL, 1, 65536, &o.shards)) return PL_EXIT_USAGE;
        } else if (a[0] == '-' && a[1]) {
            pl_unknown_option("run", a);
            return PL_EXIT_USAGE;
        } else if (job) {
            fprintf(stderr, "docpipe run: one job file at a time ('%s' and '%s')\n", job, a);
            goto usage;
        } else job = a;
    }
    if (!job) goto usage;
    return pl_run_job(job, &o);
usage:
    fprintf(stderr, "usage: docpipe run JOB.yaml [--restart] [--retry-failed] [-m MODEL.gguf] [-t N] [-c N] "
            "[--device cpu|cuda|auto] [--quiet] [--progress=line|plain] [--shard I/N | --shards N] [--mem SIZE]\n");
    return PL_EXIT_USAGE;
}

int pl_cmd_plan(int argc, char **argv) {
    const char *job = NULL;
    bool bench = true;
    uint32_t shards = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--no-bench")) bench = false;
        else if (!strcmp(argv[i], "--shards")) {
            if (!pl_parse_u32(argv[i], i + 1 < argc ? argv[i + 1] : NULL, 1, 65536, &shards)) return PL_EXIT_USAGE;
            i++;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            pl_unknown_option("plan", argv[i]);
            return PL_EXIT_USAGE;
        } else if (job) {
            goto usage;
        } else job = argv[i];
    }
    if (!job) goto usage;
    return pl_plan_job(job, bench, shards);
usage:
    fprintf(stderr, "usage: docpipe plan JOB.yaml [--no-bench] [--shards N]\n");
    return PL_EXIT_USAGE;
}

int pl_cmd_merge(int argc, char **argv) {
    if (argc != 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: docpipe merge JOB.yaml\n");
        return PL_EXIT_USAGE;
    }
    return pl_merge_job(argv[1]);
}

int pl_cmd_status(int argc, char **argv) {
    if (argc != 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: docpipe status JOB.yaml\n");
        return PL_EXIT_USAGE;
    }
    return pl_status_job(argv[1]);
}
