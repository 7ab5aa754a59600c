/*
 * sampler.h - token sampling with llama.cpp's chain and meanings (model-formats.md §7):
 * penalties -> top-k -> top-p -> min-p -> temperature -> random pick, each stage a no-op at
 * its neutral setting; temperature <= 0 is greedy (argmax, ties to the lowest id).
 *
 * Every sequence owns a sampler with its own RNG, so its tokens do not depend on what else
 * is in the batch; the same seed gives the same tokens.
 */
#ifndef ENG_SAMPLER_H
#define ENG_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>

#include "status.h"

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

#endif /* ENG_SAMPLER_H */
