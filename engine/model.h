/*
 * model.h - a loaded model: hyper-parameters, tokenizer, and views of every weight tensor
 * in the mapped GGUF file (internal to the engine; the pipeline sees eng_model through
 * engine.h only).
 */
#ifndef ENG_MODEL_H
#define ENG_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "gguf.h"
#include "engine.h"
#include "status.h"
#include "tokenizer.h"

/* A weight matrix: ne1 rows of ne0 elements, in its file type, viewed in the mapping. */
typedef struct eng_weight {
    const void *data;  /* NULL when absent */
    int type;          /* eng_type */
    int64_t ne0, ne1;  /* input (row length), output (rows) */
    size_t row_bytes;
    const char *name;
} eng_weight;

typedef enum eng_layer_kind {
    ENG_LAYER_ATTN = 0,     /* softmax attention with a KV cache */
    ENG_LAYER_DELTANET = 1, /* qwen35 Gated DeltaNet with recurrent state */
} eng_layer_kind;

typedef struct eng_layer {
    eng_layer_kind kind;
    int kv_index;              /* ATTN: index among attention layers */
    int rec_index;             /* DELTANET: index among recurrent layers */
    const float *attn_norm;    /* [n_embd] */
    const float *ffn_norm;     /* [n_embd] (qwen35: post_attention_norm) */
    /* attention */
    eng_weight wq, wk, wv, wo;
    const float *bq, *bk, *bv;      /* (optional) qwen2 biases */
    const float *q_norm, *k_norm;   /* (optional) [head_dim] qwen3/qwen35 */
    /* Gated DeltaNet */
    eng_weight wqkv, wgate, wbeta, walpha, wssm_out;
    const float *conv1d;       /* [conv_ch][kernel]: element (k, c) at c * kernel + k */
    const float *dt_bias;      /* [n_v_heads] */
    const float *ssm_a;        /* [n_v_heads], = -exp(A_log) */
    const float *ssm_norm;     /* [d_v] */
    /* feed-forward */
    eng_weight wg, wu, wd;
} eng_layer;

struct eng_model {
    eng_gguf *gguf;            /* owned: the weights point into its mapping */
    eng_model_info info;
    eng_tokenizer *tok;        /* owned */
    eng_weight tok_embd;       /* [n_vocab] rows of n_embd */
    eng_weight output;         /* LM head (= tok_embd when tied) */
    const float *output_norm;
    eng_layer *layers;         /* [n_layer] */
    bool q_gated;              /* qwen35 attention: attn_q holds query and gate per head */
    bool rope_neox;            /* NEOX pairing (Qwen); NORMAL for llama */
    const float *rope_freqs;   /* (optional, llama 3.1 style) [n_rot/2]: theta_i is divided by it */
    float **owned;             /* f32 copies of small tensors stored in other types */
    int n_owned;
    char template_kind;        /* chat template family, see chat.h */
};

/* Calls fn once for every tensor the forward pass reads (weights and f32 vectors: host
 * pointer and bytes), each pointer once even when tensors are tied. A device backend uploads
 * them with this. */
typedef void (*eng_tensor_fn)(void *ud, const void *p, size_t bytes);
void eng_model_for_each_tensor(const struct eng_model *m, eng_tensor_fn fn, void *ud);

#endif /* ENG_MODEL_H */
