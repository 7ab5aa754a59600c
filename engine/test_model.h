/*
 * test_model.h - deterministic random-weight models in the exact layout of real GGUF files
 * (tensor names, shapes, metadata keys, tokenizer keys), for tests, examples and benchmarks.
 * No weights are ever committed: everything is generated from a seed.
 */
#ifndef ENG_TEST_MODEL_H
#define ENG_TEST_MODEL_H

#include <stdint.h>

#include "model_info.h"
#include "status.h"

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

#endif /* ENG_TEST_MODEL_H */
