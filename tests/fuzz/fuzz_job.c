/*
 * fuzz_job.c - libFuzzer target: any bytes as a job file (docs/testing.md, fuzzing). The parser must
 * return DP_OK or an error with a message; never crash, hang or leak, whatever the nesting,
 * anchors, encodings or sizes.
 */
#include <stdio.h>
#include <string.h>

#include "job.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    job_spec j;
    dp_err err = {0};
    if (job_load_buffer((const char *)data, size, "fuzz.yaml", "/jobs", &j, &err) == DP_OK) job_spec_free(&j);
    else if (!err.msg[0]) __builtin_trap(); /* every refusal says why */
    return 0;
}
