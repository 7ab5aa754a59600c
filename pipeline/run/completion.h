/*
 * completion.h - a successful request's "response" object exactly as the OpenAI Batch API
 * writes it ({status_code, request_id, body: {id, object, created, model, choices, usage,
 * system_fingerprint}}), one builder for `docpipe run` and `docpipe batch`.
 */
#ifndef PL_COMPLETION_H
#define PL_COMPLETION_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct pl_completion {
    const char *custom_id;   /* with created and a per-process nonce: request_id and body.id */
    const char *model;       /* body.model */
    const char *fingerprint; /* body.system_fingerprint (pl_system_fingerprint) */
    bool chat;               /* chat.completion (choices[].message) or text_completion (.text) */
    const char *text;        /* may hold invalid UTF-8: repaired (U+FFFD) */
    size_t len;
    const char *finish;      /* "stop" or "length" */
    int32_t n_prompt, n_gen;
    int64_t created;         /* Unix seconds */
    bool thinking;           /* the model was asked to reason: its <think> block goes to
                              * message.reasoning_content, the rest to content */
} pl_completion;

/* The parts of a Qwen3/Qwen3.5 answer made with thinking on, "<think>REASONING</think>CONTENT"
 * (the opening tag may be the prompt's last tokens, as Qwen3.5's template writes it): offsets
 * into t. No closing tag: with an opening tag all is reasoning (cut by max_tokens), without one
 * all is content. Whitespace around both parts is left out. */
typedef struct pl_reasoning_split {
    size_t r_at, r_len, c_at, c_len;
    bool has_reasoning;
} pl_reasoning_split;
pl_reasoning_split pl_split_reasoning(const char *t, size_t n);

json_t *pl_completion_response(const pl_completion *c);

/* An /v1/embeddings request's "response": {status_code, request_id, body: {object: "list",
 * data: [{object: "embedding", index, embedding}], model, usage, system_fingerprint}}. vecs holds
 * n vectors of dim floats; base64 writes each as the base64 of its little-endian float32 bytes
 * (OpenAI's encoding_format "base64"), else as a number array. OpenAI's embeddings carry no
 * system_fingerprint; ours do, as the completions', because vectors of two models must never be
 * mixed unnoticed (a resumed batch checks it). */
json_t *pl_embedding_response(const char *custom_id, const char *model, const char *fingerprint, const float *vecs,
                              size_t n, size_t dim, bool base64, int32_t n_tokens, int64_t created);

/* Standard base64 (RFC 4648, padded) of n bytes into out, which holds 4 * ((n + 2) / 3) + 1. */
void pl_base64(const uint8_t *p, size_t n, char *out);

/* "fp_" and 12 hex digits of a hash of the model's identity (its sha256 where known, else its
 * name, size and type) and of the docpipe version: what changes answers changes it. */
void pl_system_fingerprint(const char *model_identity, char out[20]);

#endif /* PL_COMPLETION_H */
