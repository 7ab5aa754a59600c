/*
 * context.h - the inference context (internal): buffers, KV cache, recurrent state, and the
 * forward entry point shared by engine.c and forward.c.
 */
#ifndef ENG_CONTEXT_H
#define ENG_CONTEXT_H

#include <stdint.h>

#include "backend.h"
#include "engine.h"
#include "model.h"

/* Activation buffers for up to n_ubatch tokens (row strides in floats). */
typedef struct eng_buffers {
    float *x, *h, *y;      /* [T][E] residual, normed, mixer/FFN output */
    int ld_e;              /* E */
    float *qg; int ld_qg;  /* [T][q rows of attn_q] */
    float *q, *gate, *att; /* [T][H * hd] */
    float *k, *v;          /* [T][Hkv * hd] */
    float *ffn_g, *ffn_u;  /* [T][F] */
    float *dn_qkv, *dn_conv; /* [T][conv_ch] */
    float *dn_z, *dn_out;  /* [T][inner] */
    float *dn_beta, *dn_alpha; /* [T][Hv] */
} eng_buffers;

typedef struct eng_kv_layer {
    void *k, *v; /* [n_blocks][ENG_KV_BLOCK][Hkv * hd] of kv_type */
} eng_kv_layer;

typedef struct eng_rec_layer {
    float *conv; /* [n_seq][kernel - 1][conv_ch] */
    float *ssm;  /* [n_seq][Hv][dv][dk] */
} eng_rec_layer;

/* One forward step: at most n_ubatch tokens. */
typedef struct eng_ubatch {
    int n;
    const int32_t *token, *pos, *seq;
    const int8_t *want; /* logits wanted after token t */
} eng_ubatch;

struct eng_context {
    eng_model *model;
    eng_context_params p;
    eng_backend *be;
    char be_name[64];
    int n_ctx, n_seq, n_ubatch;
    int kv_type;
    eng_kv_layer *kv;     /* [n_attn_layers] */
    eng_rec_layer *rec;   /* [n_rec_layers] */
    size_t rec_bytes_per_seq;
    size_t conv_per_seq, ssm_per_seq; /* floats of one sequence's conv and delta state, per layer */
    int32_t *seq_len;     /* [n_seq] positions held */
    /* the paged KV cache: blocks of ENG_KV_BLOCK positions, shared by reference */
    int32_t n_blocks, max_bps; /* blocks in the pool; blocks a sequence can hold */
    int32_t *blk_table;   /* [n_seq][max_bps], -1 = none */
    int32_t *blk_ref;     /* [n_blocks] sequences referring to each block */
    int32_t *blk_free;    /* [n_blocks] stack of free blocks */
    int32_t *blk_writers; /* [n_blocks] scratch of eng_decode: a step's writers of each shared block */
    int32_t n_free;
    size_t kv_row_bytes;  /* one position of one layer's K (or V) */
    int32_t *slot;        /* [n_ubatch] cache row (block * ENG_KV_BLOCK + offset) of each token of a step */
    int32_t *seq_next;    /* [n_seq] scratch for batch validation */
    eng_buffers buf;
    void *buf_mem;        /* one backend allocation behind buf */
    float *logits;        /* [n_logits_max][n_vocab] host copy (= logits_be for a host backend) */
    float *logits_be;     /* [n_logits_max][n_vocab] backend memory the forward pass writes */
    int32_t n_logits, n_logits_max;
    int8_t *want;         /* [n_ubatch] scratch */
    /* an embedding context (p.pooling != NONE): each step's final hidden states, on the host, and
     * per sequence the running pool (MEAN: the sum; LAST, CLS: a copy of the row) and its count */
    float *emb_rows;      /* [n_ubatch][n_embd] */
    double *emb_acc;      /* [n_seq][n_embd] */
    int32_t *emb_n;       /* [n_seq] */
    int32_t *call_pos;    /* eng_decode_sequence's positions and sequence ids: grows to the longest
                           * call once, so a decode loop allocates nothing per token */
    size_t call_pos_cap;
    /* the per-layer activation check (eng_context_params.check_layers): a host copy of x, and the
     * first layer whose output was not finite in the current call (-1: none) */
    float *check_x;
    int check_layer, check_token;
};

void eng_forward(eng_context *c, const eng_ubatch *ub);

#endif /* ENG_CONTEXT_H */
