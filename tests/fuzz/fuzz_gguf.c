/*
 * fuzz_gguf.c - libFuzzer target for the GGUF reader: parse a buffer, then touch every
 * metadata value and tensor view the way a loader would. Build with -DDP_FUZZ=ON (clang):
 *
 *   cmake -B build-fuzz -DCMAKE_C_COMPILER=clang -DDP_FUZZ=ON && cmake --build build-fuzz -t fuzz_gguf
 *   build-fuzz/tests/fuzz_gguf -max_len=65536 -rss_limit_mb=512 -malloc_limit_mb=64 tests/fuzz/corpus/gguf
 *
 * CI replays the corpus (and seeded mutations of it) through replay_main.c.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gguf.h"
#include "engine.h"
#include "quant.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    eng_gguf *g = NULL;
    dp_err err = {0};
    if (eng_gguf_open_buffer(data, size, "fuzz.gguf", &g, &err) != DP_OK) return 0;
    volatile uint64_t sink = 0;
    for (int64_t i = 0; i < eng_gguf_n_kv(g); i++) {
        const eng_gguf_kv *kv = eng_gguf_kv_at(g, i);
        for (uint64_t k = 0; k < kv->n && k < 64; k++) {
            int64_t iv;
            double dv;
            if (kv->strs) sink += kv->strs[k].len ? (uint8_t)kv->strs[k].ptr[kv->strs[k].len - 1] : 0;
            else if (eng_gguf_kv_int(kv, k, &iv)) sink += (uint64_t)iv;
            else if (eng_gguf_kv_float(kv, k, &dv)) sink += (uint64_t)(dv != 0);
        }
    }
    float row[256];
    for (int64_t i = 0; i < eng_gguf_n_tensors(g); i++) {
        const eng_gguf_tensor *t = eng_gguf_tensor_at(g, i);
        if (t->nbytes) sink += ((const uint8_t *)t->data)[t->nbytes - 1];
        const eng_type_traits *tr = eng_type_get(t->type);
        if (tr->to_float && tr->blck <= 256 && t->ne[0] >= tr->blck && t->nbytes >= tr->type_size)
            eng_dequantize_row(t->type, t->data, row, tr->blck); /* first block only */
    }
    eng_model_info info;
    if (eng_model_info_load(g, &info, &err) == DP_OK) {
        eng_mem_estimate e;
        eng_model_mem_estimate(&info, 4096, 4, 512, &e);
        sink += e.total;
    }
    (void)sink;
    eng_gguf_close(g);
    return 0;
}
