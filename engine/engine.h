/*
 * engine.h - the public face of the docpipe engine: the only engine header pipeline/ includes.
 *
 * Today it offers the model-file layer: open and validate a GGUF file, read its
 * hyper-parameters and memory needs, quantize it, and generate random-weight test models.
 * The inference API (contexts, sequences, sampling) joins it with the CPU engine.
 *
 *   eng_gguf *g; eng_model_info info; eng_mem_estimate mem; dp_err err = {0};
 *   if (eng_gguf_open("model.gguf", &g, &err)) { fprintf(stderr, "%s\n", err.msg); return 1; }
 *   if (eng_model_info_load(g, &info, &err) == DP_OK) {
 *       eng_model_mem_estimate(&info, 8192, 1, 512, &mem);
 *       printf("%s: %u layers, %.2f GiB at 8K context\n", info.arch_name, info.n_layer,
 *              mem.total / 1073741824.0);
 *   }
 *   eng_gguf_close(g);
 */
#ifndef ENG_ENGINE_H
#define ENG_ENGINE_H

#include "gguf.h"
#include "gguf_writer.h"
#include "model_info.h"
#include "quant.h"
#include "quantize.h"
#include "status.h"
#include "test_model.h"
#include "tokenizer.h"

#endif /* ENG_ENGINE_H */
