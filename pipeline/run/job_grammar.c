/*
 * job_grammar.c - see job_grammar.h.
 */
#include "job_grammar.h"

#include <string.h>

#include "engine.h"
#include "json_schema.h"

dp_status pl_job_grammar(const job_spec *j, dp_buf *out, dp_err *err) {
    const job_response rt = j->generation.response;
    if (rt != JOB_RESPONSE_TEXT && j->generation.grammar_file)
        return dp_err_set(err, DP_EFORMAT, "generation.response_format and generation.grammar_file exclude each other");
    if (rt == JOB_RESPONSE_TEXT && !j->generation.grammar_file) return DP_OK;
    if (j->task == JOB_TASK_EMBED)
        return dp_err_set(err, DP_EFORMAT, "generation.response_format / grammar_file apply to task generate, not embed");
    dp_err e = {0};
    dp_status st;
    const char *key = j->generation.grammar_file ? "grammar_file" : "response_format";
    if (rt == JOB_RESPONSE_JSON_OBJECT) st = pl_json_object_gbnf(out, &e);
    else if (j->generation.schema_json)
        st = pl_schema_to_gbnf(j->generation.schema_json, strlen(j->generation.schema_json), out, &e);
    else st = pl_grammar_from_file(j->generation.schema_file ? j->generation.schema_file : j->generation.grammar_file,
                                   j->generation.schema_file != NULL, out, &e);
    if (!st && j->generation.schema_json) st = eng_grammar_check((const char *)out->data, out->len, &e);
    if (st) dp_err_set(err, st, "generation.%s: %s", key, e.msg);
    return st;
}
