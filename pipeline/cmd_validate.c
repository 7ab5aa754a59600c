/*
 * cmd_validate.c - `docpipe validate JOB.yaml`: checks a job without loading the model.
 *
 * Exit codes (design.md): 0 valid; 65 the job file is invalid ("FILE:LINE:COL: message");
 * 66 an input folder does not exist; 78 the model file is missing; 64 usage.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "exit_codes.h"
#include "job.h"
#include "platform.h"

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
    int rc = PL_EXIT_OK;
    dp_stat_info si;
    if (dp_stat(j.model.path, true, &si, NULL) || si.kind != DP_KIND_FILE) {
        fprintf(stderr, "docpipe validate: %s:%d:%d: model.path: %s is not a readable file\n", argv[1],
                j.model.path_line, j.model.path_col, j.model.path);
        rc = PL_EXIT_CONFIG;
    }
    for (size_t i = 0; i < j.n_inputs && rc == PL_EXIT_OK; i++) {
        if (dp_stat(j.inputs[i].path, true, &si, NULL) || si.kind != DP_KIND_DIR) {
            fprintf(stderr, "docpipe validate: %s:%d:%d: inputs[%zu].path: %s is not a folder\n", argv[1],
                    j.inputs[i].line, j.inputs[i].col, i, j.inputs[i].path);
            rc = PL_EXIT_NOINPUT;
        }
    }
    if (rc == PL_EXIT_OK)
        printf("%s: valid (model %s, %zu input folder%s, chunking %s, results %s)\n", argv[1], j.model.path,
               j.n_inputs, j.n_inputs == 1 ? "" : "s", j.chunking.mode == JOB_CHUNK_MAP_REDUCE ? "map-reduce" : "per-chunk",
               j.outputs.jsonl);
    job_spec_free(&j);
    return rc;
}
