/*
 * fuzz_batch_req.c - libFuzzer target: any bytes as one line of an OpenAI batch file
 * (pipeline/input/batch_request.c). A line is read or refused with a message naming it; never a
 * crash, and a read request holds what the tokenizer and the sampler rely on.
 */
#include <stdint.h>
#include <string.h>

#include "batch_request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    pl_batch_req r;
    dp_err err = {0};
    const dp_status st = pl_batch_req_parse((const char *)data, size, 3, 512, &r, &err);
    if (!r.custom_id) __builtin_trap(); /* the error record names it, "" at least */
    if (st == DP_EINVAL && strncmp(err.msg, "line 3", 6)) __builtin_trap();
    if (st == DP_OK) {
        if (r.embed ? !r.n_inputs : r.max_tokens < 1 || r.max_tokens > 512 || !(r.sp.temp >= 0) ||
                                        (r.chat ? !r.n_msgs : !r.prompt))
            __builtin_trap();
        for (size_t i = 0; i < r.n_inputs; i++) /* an embedding input is a non-empty string */
            if (!r.inputs[i] || !r.inputs[i][0]) __builtin_trap();
        for (size_t i = 0; i < r.n_msgs; i++)
            if (!r.msgs[i].role || !r.msgs[i].content) __builtin_trap();
        for (size_t i = 0; i < r.n_stop; i++)
            if (!r.stop[i][0]) __builtin_trap();
    }
    pl_batch_req_free(&r);
    return 0;
}
