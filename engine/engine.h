/*
 * engine.h - the public face of the docpipe engine: the only engine header pipeline/ includes.
 *
 * Run a prompt and read the next token's logits (the llama_decode model: submit tokens with
 * positions and sequence ids, step, read logits; examples/generate.c is the full runnable loop
 * with chat rendering, sampling and streaming):
 *
 *   eng_model *m;  eng_context *c;  dp_err err = {0};
 *   eng_model_load("model.gguf", &m, &err);
 *   eng_context_params cp = eng_context_default_params();   // 4096 ctx, 1 seq, all CPUs
 *   eng_context_new(m, &cp, &c, &err);
 *   eng_tokens ids = {0};
 *   eng_tokenize(eng_model_get_tokenizer(m), NULL, "Hello", 5, true, true, &ids, &err);
 *   eng_decode_sequence(c, 0, ids.ids, (int32_t)ids.n, 0, &err);  // seq 0 from position 0
 *   const float *logits = eng_get_logits(c, 0);                // [n_vocab]
 *   ... eng_context_free(c); eng_model_free(m);
 *
 * It also offers the model-file layer: GGUF reading and writing, hyper-parameters and memory
 * estimates, quantization, and random-weight test models.
 */
#ifndef ENG_ENGINE_H
#define ENG_ENGINE_H

#include "gguf.h"
#include "gguf_writer.h"
#include "model_info.h"
#include "quant.h"
#include "quantize.h"
#include "device.h"
#include "status.h"
#include "test_model.h"
#include "tokenizer.h"
#include "chat.h"
#include "sampler.h"

/* ---- Inference ---------------------------------------------------------------------------- */

typedef struct eng_model eng_model;
typedef struct eng_context eng_context;

/* Loads and validates a model (weights stay mapped). A missing tensor, a wrong shape, an
 * unsupported architecture or type is refused naming it. Free with eng_model_free(). */
dp_status eng_model_load(const char *path, eng_model **out, dp_err *err);
void eng_model_free(eng_model *m);
const eng_model_info *eng_model_get_info(const eng_model *m);        /* borrowed */
const eng_tokenizer *eng_model_get_tokenizer(const eng_model *m);    /* borrowed */
eng_chat_kind eng_model_chat_kind(const eng_model *m);


/* Positions per KV cache block: the unit the paged cache allocates and shares. */
#define ENG_KV_BLOCK 256

typedef struct eng_context_params {
    uint32_t n_ctx;      /* tokens per sequence */
    uint32_t n_seq_max;  /* sequences decoded at once */
    uint32_t n_kv_blocks;/* KV blocks shared by all sequences; 0 = enough for every sequence to
                          * reach n_ctx (models without attention layers need none) */
    uint32_t n_ubatch;   /* tokens per forward step (longer batches are split) */
    int n_threads;       /* CPU threads (0 = all) */
    dp_device device;
    bool exact;          /* scalar reference path: weights dequantized, all math in f32 */
    int kv_type;         /* ENG_TYPE_F16 (default) or ENG_TYPE_F32 */
    bool check_layers;   /* after every layer, check that the activations are finite (a debug
                          * switch: a copy of the residual per layer; DOCPIPE_CHECK_LAYERS=1 sets it) */
    int deltanet_mode;   /* qwen35 prompts: 0 = chunk-wise (token by token with exact), 1 = always token
                          * by token, 2 = always chunk-wise. Decode steps are token by token. */
} eng_context_params;

eng_context_params eng_context_default_params(void);
/* Allocates the KV cache, recurrent state and buffers. Free with eng_context_free(). */
dp_status eng_context_new(eng_model *m, const eng_context_params *p, eng_context **out, dp_err *err);
void eng_context_free(eng_context *c);
const char *eng_context_backend_name(const eng_context *c); /* "cpu (avx2)" */
/* The CPU kernel sets this build has ("scalar avx2 avx512-vnni amx") and the one this CPU
 * runs ("avx2"), for `docpipe --version`. */
const char *eng_cpu_kernels_built(void);
const char *eng_cpu_kernels_used(void);

/* Tokens to evaluate: token i goes to sequence seq[i] at position pos[i]; tokens of one
 * sequence must come in position order, continuing that sequence. logits[i] != 0 asks for
 * the logits after token i. */
typedef struct eng_batch {
    int32_t n;
    const int32_t *token;
    const int32_t *pos;
    const int32_t *seq;
    const int8_t *logits; /* (optional) NULL = only the last token */
} eng_batch;

/* Evaluates n tokens of one sequence from position pos0; logits for the last token only. */
dp_status eng_decode_sequence(eng_context *c, int32_t seq, const int32_t *tokens, int32_t n, int32_t pos0,
                              dp_err *err);
/* Runs the batch; afterwards eng_get_logits(c, j) is the j-th requested logits row.
 * Every logits row is checked before it is handed out: a value that is not finite, or a row
 * whose values are all equal (what a skipped or zeroed product leaves), fails the call with
 * DP_ENUMERIC naming the row's sequence and position; so does a layer whose output is not finite
 * when check_layers is on. A failed call leaves the context's sequences in an undefined state. */
dp_status eng_decode(eng_context *c, const eng_batch *b, dp_err *err);
const float *eng_get_logits(const eng_context *c, int32_t j); /* [n_vocab] or NULL */
int32_t eng_n_logits(const eng_context *c);
/* Forgets a sequence (KV and recurrent state) so its slot can start again at position 0. */
void eng_seq_clear(eng_context *c, int32_t seq);
/* Makes dst a copy of src: its KV rows and recurrent state (qwen35), so dst continues from where
 * src stands (a shared prompt prefix computed once). dst's old content is dropped. */
void eng_seq_copy(eng_context *c, int32_t src, int32_t dst);
/* Number of positions a sequence holds. */
int32_t eng_seq_len(const eng_context *c, int32_t seq);
/* KV blocks in the pool, and free now. A sequence holds ceil(len / ENG_KV_BLOCK) blocks, some
 * of them shared with the sequence it was copied from; writing into a shared block copies it
 * first. eng_decode fails with DP_ENOMEM, changing nothing, when a step needs more blocks than
 * are free: a scheduler reserves what its sequences will need (eng_kv_blocks_needed). */
int32_t eng_kv_blocks_total(const eng_context *c);
int32_t eng_kv_blocks_free(const eng_context *c);
/* Blocks a sequence copied from one of shared_len positions needs of its own to reach len. */
int32_t eng_kv_blocks_needed(int32_t len, int32_t shared_len);
/* Bytes of one KV block over all attention layers (K and V), for sizing the pool from memory. */
size_t eng_kv_block_bytes(const eng_model_info *info, int kv_type);
/* KV blocks that fit in budget bytes beside the weights, the recurrent state of n_seqs sequences
 * and the buffers (eng_model_mem_estimate at n_ctx, n_ubatch); 0 when nothing fits. */
uint64_t eng_kv_blocks_fitting(const eng_model_info *info, uint32_t n_ctx, uint32_t n_seqs, uint32_t n_ubatch,
                               int kv_type, uint64_t budget, uint64_t *fixed_bytes);
/* Sizes p->n_kv_blocks from a memory budget in bytes (0 = what the machine has available now,
 * dp_mem_available): the budget less the weights, the recurrent state of p->n_seq_max sequences
 * and the buffers (eng_model_mem_estimate), in whole blocks, at most what every sequence needs
 * at full context. DP_ENOMEM, naming the numbers, when not one sequence at full context fits. */
dp_status eng_context_fit_budget(const eng_model *m, eng_context_params *p, uint64_t budget, dp_err *err);

#endif /* ENG_ENGINE_H */
