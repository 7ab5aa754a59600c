/*
 * cmd_validate.c - `docpipe validate JOB.yaml`: checks a job without loading the model or
 * writing anything, and refuses everything `docpipe run` would refuse before it starts
 * (preflight.h). Every problem is reported, not only the first.
 *
 * Exit codes (docs/errors.md): 0 valid; 65 the job file is invalid ("FILE:LINE:COL: message")
 * or an output lies inside an input folder; 66 an input folder does not exist or no file
 * matches; 73 an output or the state folder cannot be created; 78 the model file is missing;
 * 64 usage. With several problems, the code is that of the first.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "exit_codes.h"
#include "job.h"
#include "preflight.h"

int pl_cmd_validate(int argc, char **argv) {
    if (argc != 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: docpipe validate JOB.yaml\n");
        return PL_EXIT_USAGE;
    }
    job_spec j;
    dp_err err = {0};
    dp_status st = job_load(argv[1], &j, &err);
    if (st) {
        fprintf(stderr, "docpipe validate: %s\n", dp_err_msg(&err));
        return st == DP_ENOENT || st == DP_EACCES ? PL_EXIT_NOINPUT : PL_EXIT_DATAERR;
    }
    int rc = pl_preflight(&j, PL_PREFLIGHT_FULL, "docpipe validate");
    if (rc == PL_EXIT_OK)
        printf("%s: valid (model %s, %zu input folder%s, chunking %s, results %s)\n", argv[1], j.model.path,
               j.n_inputs, j.n_inputs == 1 ? "" : "s", j.chunking.mode == JOB_CHUNK_MAP_REDUCE ? "map-reduce" : "per-chunk",
               j.outputs.jsonl);
    job_spec_free(&j);
    return rc;
}
