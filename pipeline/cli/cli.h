/*
 * cli.h - the docpipe subcommands. Each takes the arguments after its name (argv[0] is the
 * subcommand) and returns a process exit code from exit_codes.h.
 */
#ifndef PL_CLI_H
#define PL_CLI_H

int pl_cmd_inspect(int argc, char **argv);
int pl_cmd_quantize(int argc, char **argv);
int pl_cmd_make_test_model(int argc, char **argv);
int pl_cmd_tokenize(int argc, char **argv);
int pl_cmd_embed(int argc, char **argv);
int pl_cmd_query(int argc, char **argv);
int pl_cmd_eval(int argc, char **argv);
int pl_cmd_perplexity(int argc, char **argv);
int pl_cmd_generate(int argc, char **argv);
int pl_cmd_bench(int argc, char **argv);
int pl_cmd_validate(int argc, char **argv);
int pl_cmd_batch(int argc, char **argv);
int pl_cmd_run(int argc, char **argv);
int pl_cmd_plan(int argc, char **argv);
int pl_cmd_status(int argc, char **argv);
int pl_cmd_merge(int argc, char **argv);

/* Parses a positive integer option value; prints a usage error and returns false if bad. */
#include <stdbool.h>
#include <stdint.h>
bool pl_parse_u32(const char *opt, const char *val, uint32_t lo, uint32_t hi, uint32_t *out);
/* A size in bytes with an optional K, M, G or T suffix (powers of 1024): "12G", "512M". */
bool pl_parse_size(const char *opt, const char *val, uint64_t *out);
/* --device: "cpu", "cuda" or "auto" to an dp_device value; false (said on stderr) otherwise. */
bool pl_parse_device(const char *v, int *out);

/* The KV cache's type from -ctk/-ctv (--cache-type-k/-v, llama.cpp's spelling) or --kv-type:
 * f16, q8_0 or f32. docpipe keeps K and V in one type, so -ctk and -ctv must agree. Call
 * pl_kv_option for every option (true when it was one of these; *bad set when its value was
 * not a type), then pl_kv_type for the result (false, said on stderr, when K and V differ). */
typedef struct pl_kv_opts {
    int k, v; /* ENG_TYPE_*; -1 = not given */
} pl_kv_opts;
#define PL_KV_OPTS_INIT {-1, -1}
bool pl_kv_option(pl_kv_opts *kv, const char *opt, const char *val, bool *bad);
bool pl_kv_type(const pl_kv_opts *kv, int *kv_type);

#endif /* PL_CLI_H */
