/*
 * job.h - the job model: a YAML job file parsed (libyaml), validated against the schema of
 * job_schema.c and turned into a job_spec with defaults applied and paths resolved against
 * the job file's folder. Every error reads "FILE:LINE:COL: message" (docs/job-file.md lists
 * every key with its type, default and range).
 *
 * jobs/ may use the base headers of engine/ (status, dynbuf, platform) and nothing else.
 */
#ifndef JOB_JOB_H
#define JOB_JOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "device.h"
#include "status.h"

typedef enum job_chunk_mode { JOB_CHUNK_MAP_REDUCE = 0, JOB_CHUNK_PER_CHUNK = 1 } job_chunk_mode;

/* What the job does with each chunk: generate text from a prompt, or embed the chunk. */
typedef enum job_task { JOB_TASK_GENERATE = 0, JOB_TASK_EMBED = 1 } job_task;

/* embedding.pooling; AUTO: what the model file names (last token when it names none). */
typedef enum job_pooling { JOB_POOL_AUTO = 0, JOB_POOL_MEAN, JOB_POOL_CLS, JOB_POOL_LAST } job_pooling;

typedef struct job_input {
    char *path;              /* folder, resolved */
    char **include;          /* globs ("**" crosses folders) */
    size_t n_include;
    char **exclude;
    size_t n_exclude;
    int64_t max_file_size;   /* bytes */
    bool follow_symlinks;
    bool links_outside;   /* a followed link may lead outside the folder */
    char *jsonl_field;       /* the field holding a .jsonl line's document */
    char *changed_since;     /* (optional) a git revision: only files changed since it */
    int line, col;           /* where it is declared, for later messages */
} job_input;

/* generation.response_format.type: OpenAI's names. */
typedef enum job_response { JOB_RESPONSE_TEXT = 0, JOB_RESPONSE_JSON_OBJECT = 1, JOB_RESPONSE_JSON_SCHEMA = 2 } job_response;

typedef struct job_spec {
    char *file;              /* the job file as given */
    job_task task;
    char *dir;               /* its folder: relative paths resolve against it */
    struct {
        char *path;
        dp_device device;
        int64_t context;     /* tokens per sequence */
        int64_t threads;     /* 0 = all CPUs */
        int64_t max_sequences;
        int kv_type;         /* 0 = f16, 1 = q8_0 (the KV cache's type) */
        char *sha256;        /* (optional) expected model hash */
        int path_line, path_col; /* where model.path is written */
    } model;
    job_input *inputs;
    size_t n_inputs;
    struct {
        char *system;        /* (optional) */
        char *template_;     /* the per-document / per-chunk prompt */
        char *reduce_template; /* (optional) combines chunk results in map-reduce mode */
    } prompts;
    struct {
        int64_t max_tokens, top_k, seed, repeat_last_n;
        double temperature, top_p, min_p, repeat_penalty, presence_penalty, frequency_penalty;
        bool thinking;
        char **stop;         /* stop strings (OpenAI's: generation ends before one; it is not kept) */
        size_t n_stop;
        job_response response; /* response_format.type */
        char *schema_json;   /* response_format.json_schema.schema as JSON text (inline) */
        char *schema_file;   /* response_format.json_schema.schema_file, resolved */
        char *grammar_file;  /* a GBNF grammar, resolved */
        int rf_line, rf_col; /* where response_format (or grammar_file) is written */
    } generation;
    struct {                 /* task: embed */
        job_pooling pooling;
        char *instruction;   /* (optional) chunks become "Instruct: {instruction}\nQuery: {chunk}" */
        bool normalize;      /* L2, default true */
    } embedding;
    struct {
        int64_t max_tokens;  /* 0 = what the context allows */
        int64_t overlap;
        job_chunk_mode mode;
    } chunking;
    struct {
        char *jsonl;
        bool gzip;
        char *per_document_dir; /* (optional) */
        char *metrics;          /* (optional) Prometheus text file */
        char *intermediate;     /* (optional, map-reduce) where map and partial-reduce results go */
        char *sqlite;           /* (optional) the SQLite database sink */
        bool sqlite_keep_deleted; /* a document gone from the inputs stays, marked deleted */
    } outputs;
    char *state_dir;
    /* converters: an extension (".doc", lower case) -> a program and its arguments, "{input}"
     * standing for the document's path */
    struct job_converter {
        char *ext;
        char **argv;
        size_t argc;
        int line, col;
    } *converters;
    size_t n_converters;
} job_spec;

/* Parses and validates path. On error *out is untouched and err says FILE:LINE:COL: what.
 * DP_EFORMAT: the job is invalid (exit 65). Free with job_spec_free(). */
dp_status job_load(const char *path, job_spec *out, dp_err *err);
/* Same from a buffer (tests, fuzzing); name appears in messages, dir resolves relative paths. */
dp_status job_load_buffer(const char *data, size_t len, const char *name, const char *dir, job_spec *out, dp_err *err);
void job_spec_free(job_spec *j);

/* The schema's keys, for documentation checks: section ("model", "inputs[]", "" for top
 * level) and key of entry i < job_schema_n_keys(). */
size_t job_schema_n_keys(void);
void job_schema_key(size_t i, const char **section, const char **key);

/* The variables a prompt template may use: content, path, filename, ext, chunk_index,
 * chunk_count, date, doc_sha256. */
bool job_template_var_known(const char *name, size_t len);

#endif /* JOB_JOB_H */
