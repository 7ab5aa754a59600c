/*
 * job_grammar.h - the grammar a job's generation must follow: generation.response_format
 * (json_object, or json_schema inline or from schema_file) or generation.grammar_file, as GBNF
 * text for eng_grammar_compile. Preflight checks it (so docpipe validate does); the run
 * compiles it against the model's vocabulary and its text enters the settings fingerprint.
 */
#ifndef PL_JOB_GRAMMAR_H
#define PL_JOB_GRAMMAR_H

#include "dynbuf.h"
#include "job.h"

/* Leaves out empty when the job has no grammar. Errors read "generation.KEY: why" (the caller puts
 * the file and generation.rf_line/rf_col before it); DP_EFORMAT / DP_EUNSUPPORTED: exit 65,
 * DP_ENOENT / DP_EIO: a file that cannot be read, 66. */
dp_status pl_job_grammar(const job_spec *j, dp_buf *out, dp_err *err);

#endif /* PL_JOB_GRAMMAR_H */
