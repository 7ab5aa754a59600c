/*
 * json_schema.h - JSON Schema (the subset of docs/structured-output.md) to GBNF grammar text,
 * which the engine compiles (eng_grammar_compile). Outputs are compact-or-spaced JSON: white
 * space between tokens is allowed but bounded, properties come in the schema's order.
 *
 *   dp_buf g; dp_buf_init(&g, 1 << 24);
 *   if (pl_schema_to_gbnf(text, len, &g, &err)) ... err: "/properties/age: ..." (a JSON pointer)
 */
#ifndef PL_JSON_SCHEMA_H
#define PL_JSON_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>

#include "dynbuf.h"
#include "status.h"

/* The schema as JSON text; anything the compiler does not support is DP_EUNSUPPORTED naming
 * the schema path, never ignored (annotations such as title and description excepted). */
dp_status pl_schema_to_gbnf(const char *schema, size_t len, dp_buf *out, dp_err *err);
/* Any JSON object (OpenAI's response_format json_object). */
dp_status pl_json_object_gbnf(dp_buf *out, dp_err *err);

/* The GBNF text of a file: a JSON Schema (schema true) or a GBNF grammar, checked (eng_grammar_check)
 * either way; errors name the file. DP_ENOENT / DP_EIO when it cannot be read, else DP_EFORMAT /
 * DP_EUNSUPPORTED. */
dp_status pl_grammar_from_file(const char *path, bool schema, dp_buf *out, dp_err *err);

#endif /* PL_JSON_SCHEMA_H */
