/*
 * quantize.h - convert a GGUF model to a quantized file type with llama.cpp's per-tensor mix
 * (model-formats.md §2.6), so files we make look like the files users download.
 */
#ifndef ENG_QUANTIZE_H
#define ENG_QUANTIZE_H

#include <stdint.h>

#include "status.h"

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
/* The type a tensor gets in ftype (exposed for tests). i_v/n_v count attn_v-like tensors. */
int eng_quantize_tensor_type(eng_ftype ftype, const char *name, uint32_t n_dims, int64_t ne0, int src_type,
                             int i_layer, int n_layer, int i_v, int n_v, int tied);

dp_status eng_quantize_file(const char *in, const char *out, eng_ftype ftype, int n_threads,
                            eng_quantize_progress_fn progress, void *ud, dp_err *err);

#endif /* ENG_QUANTIZE_H */
