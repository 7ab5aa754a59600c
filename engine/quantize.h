/*
 * quantize.h - convert a GGUF model to a quantized file type with llama.cpp's per-tensor mix
 * (model-formats.md §2.6), so files we make look like the files users download.
 *
 * The public part is declared in engine.h; this header adds what only the engine, its backends
 * and its tests use.
 */
#ifndef ENG_QUANTIZE_H
#define ENG_QUANTIZE_H

#include <stdint.h>

#include "engine.h"
#include "status.h"

/* The type a tensor gets in ftype (exposed for tests). i_v/n_v count attn_v-like tensors. */
int eng_quantize_tensor_type(eng_ftype ftype, const char *name, uint32_t n_dims, int64_t ne0, int src_type,
                             int i_layer, int n_layer, int i_v, int n_v, int tied);

#endif /* ENG_QUANTIZE_H */
