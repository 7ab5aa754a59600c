/*
 * e2eutil.h - helpers for the end-to-end tests of `docpipe run`: tiny models, job files,
 * reading and checking the output records.
 */
#ifndef DP_E2EUTIL_H
#define DP_E2EUTIL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "testutil.h"

/* A small random-weight model of arch under tmpdir (made once per process). Borrowed. */
const char *e2e_model(const char *arch);

/* Writes a job file: model, one input folder, the given extra YAML (sections after inputs). */
void e2e_write_job(const char *path, const char *model, const char *input, const char *extra_yaml);

/* Reads every line of a .jsonl or .jsonl.gz file. Fails the test on a line that is not a JSON
 * object, lacks the final newline, or repeats a custom_id. Returns custom_id -> record. */
json_t *e2e_load_records(const char *path, size_t *n_lines);
/* The assistant text of a result record ("" for an error record). */
const char *e2e_text(json_t *rec);
/* Runs a shell command; returns its exit status. */
int e2e_sh(const char *fmt, ...);
/* True when path exists. */
bool e2e_exists(const char *path);
/* Checks every record: valid shape, meta fields, and prompt_tokens + max_tokens <= context. */
void e2e_check_records(json_t *recs, int context, int max_tokens);
/* custom_id -> text of every result (an embedding result: its data array), for comparing runs. */
json_t *e2e_texts(json_t *recs);

#endif /* DP_E2EUTIL_H */
