/*
 * batch_request.h - one line of an OpenAI batch file (the input of the OpenAI Batch API and of
 * `vllm run-batch`) checked and read into a request, before any model is involved: every field
 * docpipe uses is checked for its type and range, and a field it would otherwise have to ignore
 * while it changes the answer (n > 1, logprobs, tools) is refused, so a
 * request never runs as something other than what it asked for. Refusals name the line and the
 * field, e.g. "line 8: body.max_tokens must be an integer from 1 to 4096 (the context), not -1".
 */
#ifndef PL_BATCH_REQUEST_H
#define PL_BATCH_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "status.h"

typedef struct pl_batch_req {
    char *custom_id; /* "" where the line has none (it is then refused) */
    char *model;     /* body.model as the line gave it (NULL: none); echoed in the result */
    int think;       /* body.chat_template_kwargs.enable_thinking: 1, 0, or -1 (not given) */
    int line;
    bool chat; /* /v1/chat/completions (msgs) or /v1/completions (prompt) */
    eng_chat_msg *msgs; /* owned strings: role "system" also for OpenAI's "developer"; content a
                         * string, or the text parts of a list joined by "\n" */
    size_t n_msgs;
    char *prompt;
    int32_t max_tokens;    /* default 256 */
    eng_sampler_params sp; /* OpenAI's defaults; seeded from seed and custom_id alone */
    char **stop;
    size_t n_stop;
    char *gbnf;     /* body.response_format json_object / json_schema as a GBNF grammar, or NULL */
    bool embed;     /* /v1/embeddings: inputs (each a non-empty string), nothing above but custom_id,
                     * line and model */
    char **inputs;
    size_t n_inputs;
    bool base64;    /* body.encoding_format "base64" (default "float") */
} pl_batch_req;

/* Reads line lineno (len bytes, no newline) into *out. DP_EINVAL with err "line N: ..." for a
 * line that is not a request docpipe can run as asked; out->custom_id and out->line are set
 * even then (custom_id "" when there is none) so the error record can name them. n_ctx bounds
 * max_tokens. pl_batch_req_free(out) either way. */
dp_status pl_batch_req_parse(const char *line, size_t len, int lineno, int32_t n_ctx, pl_batch_req *out, dp_err *err);
void pl_batch_req_free(pl_batch_req *r);

#endif /* PL_BATCH_REQUEST_H */
