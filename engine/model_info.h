/*
 * model_info.h - what a GGUF model is: architecture, hyper-parameters, tokenizer summary, and
 * the memory it needs at a given context and number of sequences (model-formats.md section 8).
 *
 * Reading is tolerant of architectures the engine cannot run (inspect shows any GGUF), but
 * every value that will size memory is range-checked here (rule 11 of model-formats.md §1.6).
 */
#ifndef ENG_MODEL_INFO_H
#define ENG_MODEL_INFO_H

#include <stdbool.h>
#include <stdint.h>

#include "gguf.h"
#include "status.h"

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
} eng_model_info;

typedef struct eng_mem_estimate {
    uint64_t weights;       /* tensor data used by the forward pass (mapped) */
    uint64_t kv_cache;      /* F16 K and V for n_ctx tokens of each sequence */
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
const char *eng_arch_name(eng_arch a);
/* Name of a general.file_type value ("Q4_K_M"), or NULL if unknown. */
const char *eng_file_type_name(uint32_t ft);

#endif /* ENG_MODEL_INFO_H */
