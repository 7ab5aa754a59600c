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

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "device.h"
#include "dynbuf.h"
#include "status.h"

/* ---- Element types (ggml's type ids, as GGUF files store them) ----------------------------------- */

typedef enum eng_type {
    ENG_TYPE_F32 = 0,
    ENG_TYPE_F16 = 1,
    ENG_TYPE_Q4_0 = 2,
    ENG_TYPE_Q4_1 = 3,
    ENG_TYPE_Q5_0 = 6,
    ENG_TYPE_Q5_1 = 7,
    ENG_TYPE_Q8_0 = 8,
    ENG_TYPE_Q8_1 = 9,
    ENG_TYPE_Q2_K = 10,
    ENG_TYPE_Q3_K = 11,
    ENG_TYPE_Q4_K = 12,
    ENG_TYPE_Q5_K = 13,
    ENG_TYPE_Q6_K = 14,
    ENG_TYPE_Q8_K = 15,
    ENG_TYPE_I8 = 24,
    ENG_TYPE_I16 = 25,
    ENG_TYPE_I32 = 26,
    ENG_TYPE_I64 = 27,
    ENG_TYPE_F64 = 28,
    ENG_TYPE_BF16 = 30,
    ENG_TYPE_COUNT = 43, /* ids below this have a name; only some are supported */
} eng_type;

/* "Q4_K", or "type 99" (a static buffer per thread) for unknown ids. Borrowed. */
const char *eng_type_name(int id);
/* Parses a name case-insensitively ("q4_k", "F16"). Returns -1 if unknown. */
int eng_type_from_name(const char *name);
/* True when a file may hold tensors of this type and the engine can decode them. */
bool eng_type_is_supported(int id);

/* ---- GGUF files: validated metadata and zero-copy tensor views over a mapping -------------------- */

typedef enum eng_gguf_type {
    ENG_GGUF_TYPE_UINT8 = 0,
    ENG_GGUF_TYPE_INT8 = 1,
    ENG_GGUF_TYPE_UINT16 = 2,
    ENG_GGUF_TYPE_INT16 = 3,
    ENG_GGUF_TYPE_UINT32 = 4,
    ENG_GGUF_TYPE_INT32 = 5,
    ENG_GGUF_TYPE_FLOAT32 = 6,
    ENG_GGUF_TYPE_BOOL = 7,
    ENG_GGUF_TYPE_STRING = 8,
    ENG_GGUF_TYPE_ARRAY = 9,
    ENG_GGUF_TYPE_UINT64 = 10,
    ENG_GGUF_TYPE_INT64 = 11,
    ENG_GGUF_TYPE_FLOAT64 = 12,
    ENG_GGUF_TYPE_COUNT,
} eng_gguf_type;

#define ENG_GGUF_MAX_DIMS 4
#define ENG_GGUF_MAX_NAME 64                 /* tensor names are shorter than this */

typedef struct eng_gguf eng_gguf;

/* A string inside the mapping: not NUL-terminated; print with "%.*s", (int)s.len, s.ptr. */
typedef struct eng_gguf_str {
    const char *ptr;
    uint64_t len;
} eng_gguf_str;

typedef struct eng_gguf_kv {
    eng_gguf_str key;
    eng_gguf_type type;       /* value type */
    eng_gguf_type arr_type;   /* element type when type == ARRAY */
    uint64_t n;               /* elements (1 for a scalar) */
    const uint8_t *data;      /* scalar or first element, unaligned */
    const eng_gguf_str *strs; /* STRING values: n entries (also for a scalar string) */
    uint64_t file_offset;     /* where the key starts, for messages */
} eng_gguf_kv;

typedef struct eng_gguf_tensor {
    char name[ENG_GGUF_MAX_NAME];
    uint32_t n_dims;
    int64_t ne[ENG_GGUF_MAX_DIMS]; /* ne[0] contiguous; missing dims are 1 */
    int type;                      /* eng_type id */
    uint64_t offset;               /* relative to the data section */
    size_t nbytes;
    const void *data;              /* view into the mapping */
} eng_gguf_tensor;

/* Opens and validates path (mmap'd). *out takes ownership; free with eng_gguf_close(). */
dp_status eng_gguf_open(const char *path, eng_gguf **out, dp_err *err);
void eng_gguf_close(eng_gguf *g);

uint32_t eng_gguf_version(const eng_gguf *g);
uint32_t eng_gguf_alignment(const eng_gguf *g);
size_t eng_gguf_file_size(const eng_gguf *g);

int64_t eng_gguf_n_kv(const eng_gguf *g);
const eng_gguf_kv *eng_gguf_kv_at(const eng_gguf *g, int64_t i);
/* NULL when absent. */
const eng_gguf_kv *eng_gguf_find(const eng_gguf *g, const char *key);

int64_t eng_gguf_n_tensors(const eng_gguf *g);
const eng_gguf_tensor *eng_gguf_tensor_at(const eng_gguf *g, int64_t i);
/* NULL when absent. */
const eng_gguf_tensor *eng_gguf_find_tensor(const eng_gguf *g, const char *name);

const char *eng_gguf_type_name(eng_gguf_type t); /* "UINT32"; borrowed */

/* Typed getters. Absent key: DP_ENOENT. Wrong type or value out of range: DP_EFORMAT with the
 * key, the type found and what is allowed. Integer getters accept any integer width whose
 * value fits (writers differ); float getters accept FLOAT32 and FLOAT64. */
dp_status eng_gguf_get_u32(const eng_gguf *g, const char *key, uint32_t *out, dp_err *err);
dp_status eng_gguf_get_i64(const eng_gguf *g, const char *key, int64_t *out, dp_err *err);
dp_status eng_gguf_get_f32(const eng_gguf *g, const char *key, float *out, dp_err *err);
dp_status eng_gguf_get_bool(const eng_gguf *g, const char *key, bool *out, dp_err *err);
dp_status eng_gguf_get_str(const eng_gguf *g, const char *key, eng_gguf_str *out, dp_err *err);
/* An ARRAY whose elements have type elem (use ENG_GGUF_TYPE_COUNT to accept any). */
dp_status eng_gguf_get_arr(const eng_gguf *g, const char *key, eng_gguf_type elem,
                           const eng_gguf_kv **out, dp_err *err);

/* Element i of an integer scalar or array kv as int64 (any integer width). */
bool eng_gguf_kv_int(const eng_gguf_kv *kv, uint64_t i, int64_t *out);
/* Element i of a FLOAT32/FLOAT64 kv. */
bool eng_gguf_kv_float(const eng_gguf_kv *kv, uint64_t i, double *out);
/* True when the key equals s (NUL-terminated). */
bool eng_gguf_str_eq(eng_gguf_str a, const char *s);

/* ---- What a model is: hyper-parameters and the memory it needs (docs/model-formats.md §8) -------- */

#define ENG_MAX_LAYERS 512

typedef enum eng_arch {
    ENG_ARCH_UNKNOWN = 0,
    ENG_ARCH_LLAMA,
    ENG_ARCH_QWEN2,
    ENG_ARCH_QWEN3,
    ENG_ARCH_QWEN35,
} eng_arch;

typedef struct eng_model_info {
    eng_arch arch;
    char arch_name[64];
    char name[128];
    uint32_t file_type;       /* general.file_type, informational; UINT32_MAX if absent */
    uint32_t n_layer_total;   /* block_count, including MTP blocks */
    uint32_t n_nextn;         /* trailing MTP blocks */
    uint32_t n_layer;         /* main layers = n_layer_total - n_nextn */
    uint32_t n_embd, n_ff;
    uint32_t n_head, n_head_kv;
    uint32_t head_dim_k, head_dim_v;
    uint32_t n_rot;
    uint32_t n_ctx_train;
    int32_t pooling_type;     /* {arch}.pooling_type (an eng_pooling; 4 = rank), -1 when absent */
    float rope_base, rms_eps;
    char rope_scaling[16];    /* {arch}.rope.scaling.type, "" when absent or "none" */
    bool rope_scaling_yarn;   /* a scaling type the engine does not implement yet */
    uint32_t n_vocab;         /* rows of the embedding */
    bool tied_embeddings;     /* no output.weight */
    /* qwen35 (Gated DeltaNet) */
    uint32_t ssm_conv_kernel, ssm_d_state, ssm_n_group, ssm_dt_rank, ssm_d_inner;
    uint32_t full_attn_interval;
    uint32_t n_attn_layers;   /* main layers with a KV cache */
    uint32_t n_rec_layers;    /* main layers with recurrent state */
    bool is_recurrent[ENG_MAX_LAYERS];
    /* tokenizer */
    char tok_model[32], tok_pre[32];
    uint32_t n_tokens, n_merges;
    int64_t bos_id, eos_id, pad_id; /* -1 when absent */
    bool add_bos, has_chat_template;
    /* tensors */
    uint64_t weight_bytes;      /* all tensor data */
    uint64_t weight_bytes_main; /* without MTP blocks */
    uint64_t decode_bytes;      /* what one decode step reads of them: all main tensors but the
                                 * token embedding, of which it reads one row (unless it is also
                                 * the output head, read whole) */
} eng_model_info;

typedef struct eng_mem_estimate {
    uint64_t weights;       /* tensor data used by the forward pass (mapped) */
    uint64_t kv_cache;      /* K and V for n_ctx tokens of each sequence (F16 unless asked) */
    uint64_t recurrent;     /* conv + delta state of each sequence (qwen35) */
    uint64_t compute;       /* activations, logits and scratch */
    uint64_t total;
    uint64_t kv_per_token;  /* bytes per token per sequence */
    uint64_t rec_per_seq;   /* bytes per sequence */
} eng_mem_estimate;

/* Reads and validates hyper-parameters. DP_EFORMAT names the key and the allowed range. */
dp_status eng_model_info_load(const eng_gguf *g, eng_model_info *info, dp_err *err);
/* Memory at n_ctx tokens per sequence and n_seqs sequences (prefill batch of n_ubatch). */
void eng_model_mem_estimate(const eng_model_info *info, uint32_t n_ctx, uint32_t n_seqs, uint32_t n_ubatch,
                            eng_mem_estimate *out);
/* The same with the KV cache in kv_type (ENG_TYPE_F16, ENG_TYPE_Q8_0 or ENG_TYPE_F32). */
void eng_model_mem_estimate_kv(const eng_model_info *info, uint32_t n_ctx, uint32_t n_seqs, uint32_t n_ubatch,
                               int kv_type, eng_mem_estimate *out);
const char *eng_arch_name(eng_arch a);
/* Name of a general.file_type value ("Q4_K_M"), or NULL if unknown. */
const char *eng_file_type_name(uint32_t ft);

/* ---- Tokenizer: byte-level BPE token for token as llama.cpp, streaming detokenizer --------------- */

typedef struct eng_tokenizer eng_tokenizer;
typedef struct eng_tok_ws eng_tok_ws;
/* A growable array of token ids, owned by the caller. */
typedef struct eng_tokens {
    int32_t *ids;
    size_t n, cap;
} eng_tokens;

dp_status eng_tokens_push(eng_tokens *t, int32_t id);
void eng_tokens_free(eng_tokens *t);

/* Loads the vocabulary, merges and special tokens. Refuses other tokenizer models and
 * pre-tokenizers with a message naming them. *out takes ownership. */
dp_status eng_tokenizer_load(const eng_gguf *g, eng_tokenizer **out, dp_err *err);
void eng_tokenizer_free(eng_tokenizer *t);

int32_t eng_tokenizer_n_vocab(const eng_tokenizer *t);
int32_t eng_token_bos(const eng_tokenizer *t);          /* -1 if none */
/* Whether tokenizing with add_special puts BOS first (tokenizer.ggml.add_bos_token). */
bool eng_token_add_bos(const eng_tokenizer *t);
/* End of generation: eos, or a token whose text is an end-of-turn marker (model-formats.md §6.3). */
bool eng_token_is_eog(const eng_tokenizer *t, int32_t id);

/* Per-thread workspace: a cache of tokenized pieces plus scratch. */
dp_status eng_tok_ws_new(eng_tok_ws **out);
void eng_tok_ws_free(eng_tok_ws *ws);

/* Appends the ids of text[0..len) to out. add_special adds BOS/EOS as the file says (never
 * for Qwen); parse_special lets control-token text (<|im_start|>) become those tokens. */
dp_status eng_tokenize(const eng_tokenizer *t, eng_tok_ws *ws, const char *text, size_t len, bool add_special,
                       bool parse_special, eng_tokens *out, dp_err *err);

/* The bytes of one token: NORMAL tokens un-mapped from byte-level form, USER_DEFINED as is,
 * CONTROL/UNKNOWN only when special is set, UNUSED nothing. Returns the length; *bytes is
 * borrowed (may not end at a UTF-8 character boundary). */
size_t eng_token_to_piece(const eng_tokenizer *t, int32_t id, bool special, const char **bytes);

/* Appends the text of ids to out (a dp_buf-like byte vector managed by the caller). */
typedef struct eng_detok {
    uint8_t pending[4]; /* bytes of a character not complete yet */
    size_t n_pending;
} eng_detok;

/* Streaming: writes the complete UTF-8 text that ids make so far into out (capacity must be
 * >= 4 + the token's piece length) and returns its length; a character split across tokens is
 * held back until it completes. eng_detok_flush returns what is left (possibly invalid). */
size_t eng_detok_push(const eng_tokenizer *t, eng_detok *d, int32_t id, bool special, uint8_t *out, size_t cap);
size_t eng_detok_flush(eng_detok *d, uint8_t *out);

/* ---- Chat templates: ChatML families rendered by fixed rules (docs/model-formats.md §6) ---------- */

typedef enum eng_chat_kind {
    ENG_CHAT_CHATML = 0,        /* plain ChatML */
    ENG_CHAT_QWEN25 = 1,        /* default system prompt when none is given */
    ENG_CHAT_QWEN3 = 2,         /* hybrid thinking: off = empty think block */
    ENG_CHAT_THINK_ALWAYS = 3,  /* Qwen3-2507-Thinking, QwQ: generation opens <think> */
    ENG_CHAT_QWEN35 = 4,        /* trims contents; on = "<think>\n", off = empty think block */
    ENG_CHAT_UNSUPPORTED = 5,
} eng_chat_kind;

typedef struct eng_chat_msg {
    const char *role;    /* "system", "user", "assistant" */
    const char *content;
} eng_chat_msg;

/* The family of a tokenizer.chat_template (bytes, not NUL-terminated). */
eng_chat_kind eng_chat_detect(const char *tmpl, size_t len);
const char *eng_chat_kind_name(eng_chat_kind k);
/* Appends the rendered conversation to out. DP_EINVAL for an unsupported template, an
 * unknown role, or (qwen35) no user message. */
dp_status eng_chat_render(eng_chat_kind kind, const eng_chat_msg *msgs, size_t n, bool add_generation_prompt,
                          bool enable_thinking, dp_buf *out, dp_err *err);
/* The same, and where each message's content landed in out: spans[i] = {offset, length} (the
 * content as the template keeps it: trimmed, or an earlier assistant turn without its
 * reasoning). Everything outside the spans is the chat frame, the only text that may be
 * tokenized with special-token parsing on: a message's text is plain text. */
dp_status eng_chat_render_spans(eng_chat_kind kind, const eng_chat_msg *msgs, size_t n, bool add_generation_prompt,
                                bool enable_thinking, dp_buf *out, size_t (*spans)[2], dp_err *err);

/* ---- Sampling: llama.cpp's chain, one sampler and RNG per sequence (docs/model-formats.md §7) ---- */

typedef struct eng_sampler_params {
    float temp;              /* 0.8; <= 0: greedy */
    int32_t top_k;           /* 40; <= 0: off */
    float top_p;             /* 0.95; >= 1: off */
    float min_p;             /* 0.05; <= 0: off */
    float repeat_penalty;    /* 1.0: off */
    float frequency_penalty; /* 0 */
    float presence_penalty;  /* 0 */
    int32_t penalty_last_n;  /* 64; 0 off, -1 whole history */
    uint64_t seed;
} eng_sampler_params;

typedef struct eng_sampler eng_sampler;

eng_sampler_params eng_sampler_default_params(void);
dp_status eng_sampler_new(const eng_sampler_params *p, int32_t n_vocab, eng_sampler **out, dp_err *err);
void eng_sampler_free(eng_sampler *s);
/* Adds a token to the penalty history (prompt tokens too, as llama.cpp does). */
void eng_sampler_accept(eng_sampler *s, int32_t token);
/* Picks the next token from raw logits [n_vocab] (not modified). */
int32_t eng_sampler_sample(eng_sampler *s, const float *logits);
/* Argmax with ties to the lowest id. */
int32_t eng_argmax(const float *logits, int32_t n);

/* ---- Constrained generation: GBNF grammars over the vocabulary (docs/structured-output.md) ------- */

/* The largest count a repetition {m,n} may carry; a text that generates grammar (a JSON schema's
 * pattern) checks its counts against it so that what it writes always compiles. */
enum { ENG_GRAMMAR_MAX_REPEAT = 100000 };

typedef struct eng_grammar eng_grammar; /* compiled once, shared by the sequences that use it */
typedef struct eng_matcher eng_matcher; /* one per sequence: where its text stands in the grammar */

/* Parses and checks GBNF text (llama.cpp's syntax, start rule root) without a vocabulary:
 * DP_EPARSE with "grammar line L column C: ..." for what is wrong. */
dp_status eng_grammar_check(const char *gbnf, size_t len, dp_err *err);
/* The same, bound to a tokenizer's vocabulary (a trie of it is built once per tokenizer). */
dp_status eng_grammar_compile(const eng_tokenizer *t, const char *gbnf, size_t len, eng_grammar **out, dp_err *err);
void eng_grammar_free(eng_grammar *g);
/* Mask cache counters (for benchmarks). */
void eng_grammar_cache_stats(const eng_grammar *g, uint64_t *hits, uint64_t *misses);

/* lead_space: the text may open with up to 8 bytes of white space before the grammar's own
 * text (what follows a reasoning block). */
dp_status eng_matcher_new(eng_grammar *g, bool lead_space, eng_matcher **out, dp_err *err);
/* A matcher for text that opens freely (a reasoning block): every token is allowed until the text
 * `after` (e.g. "</think>") has been written, and the grammar applies to what follows it, with
 * lead_space. after NULL or "": eng_matcher_new(g, false, ...). */
dp_status eng_matcher_new_after(eng_grammar *g, const char *after, eng_matcher **out, dp_err *err);
bool eng_matcher_waiting(const eng_matcher *m); /* still before `after` */
void eng_matcher_free(eng_matcher *m);
/* Whether the token may come next: its bytes continue the text within the grammar, or it ends
 * generation and the text is complete. Control and added tokens are never allowed. */
bool eng_matcher_allows(eng_matcher *m, int32_t token);
/* Moves on by a token / by raw bytes; false (state unchanged) when the grammar refuses them. */
bool eng_matcher_accept_token(eng_matcher *m, int32_t token);
bool eng_matcher_accept_bytes(eng_matcher *m, const void *bytes, size_t n);
bool eng_matcher_can_end(const eng_matcher *m);  /* the text so far is complete */
bool eng_matcher_must_end(const eng_matcher *m); /* complete, and nothing may follow */
bool eng_matcher_dead(const eng_matcher *m);     /* nothing may follow and it is not complete */
/* Some byte of the text or of a candidate token would have left more than 2048 parses open (an
 * ambiguous grammar: "a"{0,3000} "a"{0,3000} after 2046 a's): what the matcher allows from there
 * on is a part of what the grammar allows, so callers end the text with an error saying so. */
bool eng_matcher_overflowed(const eng_matcher *m);
/* Why the text cannot go on once the masked sampler returned -1 or the grammar refused the token
 * (the overflow above, or no token continuing the text), for an error message; a static string. */
const char *eng_matcher_failure(const eng_matcher *m);
/* The tokenizer's vocabulary size (a model's output may have more rows: those are never allowed). */
int32_t eng_matcher_n_vocab(const eng_matcher *m);
/* Bit i set = token i allowed next ([eng_matcher_n_vocab / 64 rounded up] words, owned by the
 * matcher, valid until its next call). */
const uint64_t *eng_matcher_mask(eng_matcher *m);
/* eng_sampler_sample over the allowed tokens only (the whole chain sees nothing else); -1 when
 * no token is allowed or the matcher overflowed. m NULL: eng_sampler_sample. */
int32_t eng_sampler_sample_masked(eng_sampler *s, const float *logits, eng_matcher *m);

/* ---- Model files: quantization with llama.cpp's per-tensor mix, random-weight test models -------- */

typedef enum eng_ftype {
    ENG_FTYPE_Q4_0 = 2,
    ENG_FTYPE_Q8_0 = 7,
    ENG_FTYPE_Q4_K_M = 15,
    ENG_FTYPE_Q5_K_M = 17,
    ENG_FTYPE_Q6_K = 18,
} eng_ftype;

/* Called after each tensor: index, count, name, chosen type id, bytes written so far. */
typedef void (*eng_quantize_progress_fn)(void *ud, int64_t i, int64_t n, const char *name, int type,
                                         uint64_t bytes_out);

/* "q4_k_m" -> ENG_FTYPE_Q4_K_M (case-insensitive); -1 if unknown. */
int eng_ftype_from_name(const char *name);

dp_status eng_quantize_file(const char *in, const char *out, eng_ftype ftype, int n_threads,
                            eng_quantize_progress_fn progress, void *ud, dp_err *err);

typedef struct eng_test_model_params {
    eng_arch arch;            /* QWEN2, QWEN3 or QWEN35 */
    uint32_t n_layer;
    uint32_t n_embd;
    uint32_t n_head, n_head_kv;
    uint32_t head_dim;        /* 0 = n_embd / n_head */
    uint32_t n_ff;
    uint32_t n_rot;           /* 0 = head_dim (qwen35: head_dim / 4) */
    uint32_t n_ctx_train;
    float rope_base;
    /* qwen35 Gated DeltaNet */
    uint32_t ssm_n_group;     /* key heads */
    uint32_t ssm_dt_rank;     /* value heads */
    uint32_t ssm_d_state;     /* head dim */
    uint32_t ssm_conv_kernel;
    uint32_t full_attn_interval;
    uint32_t n_vocab;         /* rows; 0 = size of the vocabulary */
    int weight_type;          /* eng_type of 2-D weights: any type the engine runs (quant.h) */
    int embd_type;            /* token_embd.weight; -1 = weight_type */
    int output_type;          /* -1: the head is tied to token_embd (no output.weight); else a
                               * separate output.weight of this type */
    /* Per-tensor types, first match wins: a 2-D weight whose name contains pattern[i] gets
     * type[i] (as llama-quantize's --tensor-type). Up to 8. */
    int n_overrides;
    const char *override_pattern[8];
    int override_type[8];
    uint64_t seed;
    const char *vocab_from;   /* (optional) GGUF whose tokenizer.* keys are copied */
    const char *name;         /* general.name */
} eng_test_model_params;

/* Fills p with the defaults of a tiny model of the arch (fast to run in tests). */
void eng_test_model_defaults(eng_test_model_params *p, eng_arch arch);
/* Presets of real shapes: "qwen3-4b", "qwen35-4b", "qwen2.5-3b". DP_EINVAL if unknown. */
dp_status eng_test_model_shape(eng_test_model_params *p, const char *shape);
/* Writes the model to path (atomically). n_threads generates weights in parallel; the
 * output does not depend on it. */
dp_status eng_test_model_write(const eng_test_model_params *p, const char *path, int n_threads, dp_err *err);


/* ---- Machine ------------------------------------------------------------------------------- */

/* Bytes per second that n_threads threads (< 1: every CPU) read from memory, streaming through
 * a buffer of the given size (at least 64 MiB; pick one well past the last-level cache, e.g.
 * 1 GiB); the best of three passes, about a second in all. 0 when the buffer cannot be had.
 * Decoding one sequence reads every weight once per token, so this over the bytes a token
 * reads (eng_model_info.decode_bytes, plus the KV cache it attends over) bounds its tokens/s. */
double eng_read_bandwidth(int n_threads, size_t bytes);

/* ---- Inference ----------------------------------------------------------------------------- */

typedef struct eng_model eng_model;
typedef struct eng_context eng_context;

/* Loads and validates a model (weights stay mapped). A missing tensor, a wrong shape, an
 * unsupported architecture or type is refused naming it. Free with eng_model_free(). */
dp_status eng_model_load(const char *path, eng_model **out, dp_err *err);
void eng_model_free(eng_model *m);
const eng_model_info *eng_model_get_info(const eng_model *m);        /* borrowed */
const eng_tokenizer *eng_model_get_tokenizer(const eng_model *m);    /* borrowed */
eng_chat_kind eng_model_chat_kind(const eng_model *m);


/* How an embedding context turns a sequence's final hidden states (after output_norm) into one
 * vector; the values of GGUF's {arch}.pooling_type. */
typedef enum eng_pooling {
    ENG_POOLING_NONE = 0, /* no embedding: the context computes logits (generation) */
    ENG_POOLING_MEAN = 1, /* the average over the sequence's tokens */
    ENG_POOLING_CLS = 2,  /* the first token's */
    ENG_POOLING_LAST = 3, /* the last token's (Qwen3-Embedding) */
} eng_pooling;
/* "none", "mean", "cls", "last". */
const char *eng_pooling_name(eng_pooling p);
/* The inverse of eng_pooling_name; false for anything else. */
bool eng_pooling_parse(const char *s, eng_pooling *out);
/* The pooling a model file asks for (its pooling_type), or fallback when it names none or one
 * the engine does not implement (rank). */
eng_pooling eng_model_pooling(const eng_model *m, eng_pooling fallback);

/* Ranking stored embeddings: scores of many vectors against one query, with this CPU's SIMD dot
 * product over a pool of threads (n_threads 0 = all CPUs). */
typedef struct eng_scorer eng_scorer;
dp_status eng_scorer_new(int n_threads, eng_scorer **out, dp_err *err);
/* scores[i] = q . rows[i * dim ..] for i < n (rows contiguous, row-major). */
void eng_scorer_dot(eng_scorer *s, const float *q, const float *rows, size_t n, int dim, float *scores);
void eng_scorer_free(eng_scorer *s);

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
    int kv_type;         /* ENG_TYPE_F16 (default), ENG_TYPE_Q8_0 (half the memory; CPU backend, head
                          * sizes a multiple of 32) or ENG_TYPE_F32 */
    bool check_layers;   /* after every layer, check that the activations are finite (a debug
                          * switch: a copy of the residual per layer; DOCPIPE_CHECK_LAYERS=1 sets it) */
    eng_pooling pooling; /* NONE (default): logits for sampling; else an embedding context: no output
                          * head, eng_get_embedding pools the final hidden states */
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

/* What this build and machine offer for a device (DP_DEVICE_AUTO: the first accelerator this
 * build has): whether a backend for it is built in, and how many usable devices there are now
 * with device 0's name and free memory. For `docpipe --version` and diagnostics. */
typedef struct eng_device_report {
    bool built;
    char backend[16];  /* "cuda" */
    int n_devices;     /* 0: no driver or device */
    uint64_t free_bytes;
    char name[128];
} eng_device_report;
void eng_device_query(dp_device device, eng_device_report *out);

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
/* An embedding context's vector for seq (n_embd floats into out): the pooled final hidden state
 * of every token the sequence was given since it was cleared, L2-normalized when normalize.
 * A token's hidden state does not depend on what else was in its batch, so neither does the
 * vector. DP_EINVAL for a logits context or a sequence with no (CLS: no first) token;
 * DP_ENUMERIC when a value is not finite. */
dp_status eng_get_embedding(const eng_context *c, int32_t seq, bool normalize, float *out, dp_err *err);
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
