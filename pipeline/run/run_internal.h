/*
 * run_internal.h - what the stages of `docpipe run` pass each other (run.c wires them up).
 *
 * A document is a pl_unit from the moment the reader lists it until the writer has written
 * it. Units are numbered in listing order (seq); the writer emits them in that order (a small
 * reorder buffer), so the same job gives the same output file on every run, and what a
 * checkpoint covers is always a whole number of documents.
 *
 * Ownership: units live in the run's registry (so a stopped run can free the ones still in
 * flight); the writer frees each one it emits. Items and docs belong to whoever holds them.
 */
#ifndef PL_RUN_INTERNAL_H
#define PL_RUN_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "extract.h"
#include "job.h"
#include "platform.h"
#include "prompt.h"
#include "queue.h"
#include "run.h"
#include "sink.h"
#include "sqlite_sink.h"
#include "state.h"

/* Where a chunk lies in its document: what a per-chunk record carries so that it stands on its
 * own (docs/output.md). */
typedef struct pl_span {
    char *text;                 /* the chunk's text (a copy) */
    size_t len;
    uint64_t byte_start, byte_end; /* [start, end) in the decoded text */
    int32_t line_start, line_end;  /* 1-based, inclusive */
    int32_t n_tokens;           /* of the text alone */
    char *headings;             /* heading path: titles, each NUL-terminated, outermost first */
    int32_t n_headings;
} pl_span;

void pl_span_free(pl_span *s);

/* One generated (or failed) request of a document. */
typedef struct pl_result {
    char *text;                 /* generated text (repaired to valid UTF-8 when written) */
    size_t len;
    int32_t index;              /* chunk index (map, per-chunk) or group index (reduce), 0-based */
    int32_t count;              /* chunks (or groups) at this level */
    int32_t level;              /* 0 = map / chunk, 1.. = reduce level */
    int32_t page_first, page_last; /* pages of a paged document (PDF) this request read; 0: not paged */
    pl_span span;               /* a chunk's request (level 0): where the chunk lies */
    float *vec;                 /* task: embed: the chunk's vector, dim floats */
    int32_t dim;
    bool final;                 /* the document's combined answer (map-reduce) */
    int32_t n_prompt, n_gen;
    const char *finish;
    double queue_ms, prefill_ms, decode_ms;
    const char *err_code;       /* (static) set when this request failed */
    char *err_msg;
} pl_result;

typedef struct pl_unit {
    struct pl_unit *prev, *next; /* registry */
    uint64_t seq;
    char *path;                 /* source path as shown in records: input folder (as in the job) + '/' + rel,
                                 * bytes that are not UTF-8 escaped as \xNN */
    char *raw_path;             /* the path's bytes when they are not UTF-8 (NULL otherwise) */
    char *out_rel;              /* path under outputs.per_document_dir */
    const char *filename, *ext; /* inside path */
    char sha[65];               /* of the file's bytes (or the .jsonl line's); "stat:SIZE:MTIME" when not read */
    uint64_t size;              /* bytes of the file (or the line) */
    char key[17];               /* custom_id prefix: sha256(path, sha) */
    bool skipped;               /* finished in an earlier run */
    bool failed_before;         /* ... and failed there (it still counts for the exit code) */
    const char *err_code;       /* (static) the document failed as a whole */
    char *err_msg;
    const char *err_stage;      /* "read" or "chunk" */
    const char *format;
    size_t n_replaced;
    int32_t n_pages;            /* pages of a paged document (PDF), 0 otherwise */
    uint64_t t_read_ns;
    /* owned by the inference stage until the unit is complete */
    int32_t n_chunks, n_done;
    int32_t level_n, level_done; /* requests of the current reduce level */
    pl_result *res;
    size_t n_res, cap_res;
} pl_unit;

/* reader -> chunker */
typedef struct pl_doc {
    pl_unit *u;
    pl_doc_text text;
} pl_doc;

/* chunker -> inference: one request, or a unit passing through (prompt.n == 0) */
typedef struct pl_item {
    pl_unit *u;
    eng_tokens prompt;
    int32_t index, count, level;
    int32_t page_first, page_last; /* see pl_result */
    pl_span span;               /* see pl_result; handed on to it */
    const char *err_code;       /* a request that cannot run (its error is recorded) */
    char *err_msg;
    uint64_t t_queued;
} pl_item;

typedef struct pl_run {
    job_spec job;
    /* model */
    eng_model *model;
    const eng_tokenizer *tok;
    eng_chat_kind chat;
    eng_pooling pooling;        /* task: embed */
    int32_t n_ctx, n_ctx_train, n_ubatch;
    eng_context *ctx;
    char model_name[256];
    char sys_fingerprint[20]; /* body.system_fingerprint, from fp.model (pl_system_fingerprint) */
    pl_prompt_spec map_spec, reduce_spec;
    char *gbnf;                 /* the job's grammar (response_format / grammar_file), or NULL */
    eng_grammar *grammar;       /* it, compiled for the model's vocabulary */
    bool do_reduce;             /* map-reduce mode with a reduce template */
    pl_fingerprint fp;
    /* state */
    char *state_dir, *checkpoint_path, *ledger_path, *lock_path;
    char *results_path, *errors_path, *status_path;
    char *inter_path;           /* outputs.intermediate (+ .gz), or NULL */
    pl_sink inter;              /* its sink (inter_path set) */
    char *metrics_path;         /* outputs.metrics (a shard's: part-I-of-N.NAME), or NULL */
    double last_success;        /* carried over from the previous metrics file */
    int64_t start_wall;
    bool metrics_warned;        /* a failed metrics write is said once, and is not fatal */
    pl_ledger *ledger;
    pl_checkpoint ck;
    pl_sink results, errors, ledger_sink;
    pl_db *db;                  /* outputs.sqlite, or NULL */
    dp_file lock;
    /* stages */
    pl_queue *q_docs, *q_items, *q_done;
    dp_mutex mu;                /* registry, counters, first error */
    pl_unit reg;                /* registry sentinel */
    uint32_t shard_i, shard_n;  /* this run's shard (shard_n = 0: the whole job) */
    bool hash_only;             /* the reader hashes but does not extract (docpipe status) */
    bool retry_failed;          /* the ledger's failed documents are not skipped */
    _Atomic int stopping;       /* stop admitting work (signal or failure) */
    dp_status fail_status;      /* first fatal error */
    dp_err fail_err;
    int fail_exit;              /* its outcome (pl_exit) */
    /* counters (under mu) */
    uint64_t n_files, n_docs_listed, n_docs_read, n_docs_done, n_docs_skipped, n_docs_failed, n_failed_before;
    uint64_t n_requests_done, n_gen_tokens, n_prompt_tokens, n_records, n_error_records;
    uint64_t n_computed_tokens; /* prompt and generated tokens the engine has computed, step by step */
    uint64_t n_queued_requests, n_queued_prompt_tokens; /* what the chunker has handed on */
    bool chunking_done;         /* ... and it has handed on everything */
    uint64_t n_prefix_tokens, n_prefix_saved; /* shared prompt head, and prompt tokens it saved */
    bool listing_done;
    bool writer_done;
    uint64_t t0;
    uint64_t t_work0;           /* when the stages started */
    double work_seconds_before; /* the checkpoint's, from earlier runs */
    char date[32];
} pl_run;

/* Stage threads (arg: pl_run *). Each closes its output queue when done; a fatal error goes
 * through pl_run_fail. */
void *pl_stage_read(void *arg);
void *pl_stage_chunk(void *arg);
void *pl_stage_infer(void *arg);
void *pl_stage_embed(void *arg);     /* task: embed, in place of pl_stage_infer */
void *pl_stage_write(void *arg);

/* Records a fatal error (the first one wins), stops admission and aborts the input queues. */
void pl_run_fail(pl_run *r, dp_status st, const dp_err *err, int outcome);
/* Stop admitting work (a signal): in-flight requests are abandoned, complete documents are
 * committed. */
void pl_run_stop(pl_run *r);
/* Tokens a request of this document may give its content (the context less the prompt's
 * overhead and max_tokens; < 8 when the template alone is too big); stage_chunk.c. */
int32_t pl_content_budget(pl_run *r, eng_tok_ws *ws, const pl_prompt_spec *spec, const pl_unit *u, int32_t *overhead,
                          dp_err *err);
/* p relative to the job's folder when it lies inside it (as the job wrote it), else as is;
 * stage_read.c. */
const char *pl_job_rel(const pl_run *r, const char *p);
/* Writes outputs.metrics (when the job has one) with the counters now; outcome (pl_exit) -1
 * while the run goes on. A failure is reported once on stderr and is not an error of the run: the
 * results matter more than their monitoring. */
void pl_run_metrics(pl_run *r, int outcome);
/* A zeroed run with its mutex, registry and date; pl_run_free releases whatever was opened. */
void pl_run_init(pl_run *r);
void pl_run_free(pl_run *r);
void pl_unit_free(pl_run *r, pl_unit *u);
void pl_item_free(void *item);
void pl_doc_free(void *doc);

/* The sampler of one request: the job's settings, seeded from the job seed and the custom_id
 * so a request's randomness never depends on its neighbours. */
eng_sampler_params pl_run_sampler(const pl_run *r, const char *custom_id);
/* meta.stage of a chunk's record: "map", "chunk" (per-chunk mode) or "embed" (task: embed). */
const char *pl_chunk_stage(const pl_run *r);
/* custom_id of a result: "<key>-c<index>-<pl_chunk_stage>", "<key>-r<level>.<index>-reduce";
 * of a document's failure (res NULL): "<key>-<stage>-error". */
void pl_custom_id(const pl_run *r, const pl_unit *u, const pl_result *res, char out[64]);
/* Appends a finished request's result to u (moved: res's pointers now belong to u). */
dp_status pl_unit_add_result(pl_unit *u, const pl_result *res);
/* Puts u->res[from..] in chunk (or group) index order: requests finish in any order. */
void pl_unit_sort_results(pl_unit *u, size_t from);
/* A chunk's heading path as a JSON array of titles (record meta, the database's heading_path). */
json_t *pl_span_headings(const pl_span *sp);

/* rel made safe to use under an output folder: no empty, "." or ".." parts, no control
 * characters, backslashes or colons, no leading dots; parts cut at 200 bytes. */
void pl_safe_relpath(const char *rel, char *out, size_t cap);

/* The shard (0..n-1) a document belongs to: by content hash, else (unread) by path. */
uint32_t pl_shard_of(const char *sha, const char *path, uint32_t n);

/* The JSON line (no newline) of a result or of a failure; free() it. */
char *pl_record_line(const pl_run *r, const pl_unit *u, const pl_result *res);
/* A document-level failure (res == NULL). */
char *pl_record_doc_error(const pl_run *r, const pl_unit *u);

#endif /* PL_RUN_INTERNAL_H */
