/*
 * fuzz_tokenizer.c - libFuzzer target: tokenize -> detokenize must give back the input bytes
 * exactly, for any bytes (invalid UTF-8 and NULs included), with special parsing off. With
 * special parsing on, the only allowed difference is control-token text becoming hidden
 * tokens, so that run only checks for crashes. The vocabulary is make-test-model's built-in
 * one (qwen35 pre-tokenizer), or a real model named by DP_FUZZ_MODEL.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static eng_tokenizer *g_tok;
static eng_tok_ws *g_ws;

static void setup(void) {
    dp_err err = {0};
    const char *path = getenv("DP_FUZZ_MODEL");
    char tmp[64] = "";
    if (!path) {
        eng_test_model_params p;
        eng_test_model_defaults(&p, ENG_ARCH_QWEN35);
        snprintf(tmp, sizeof(tmp), "/tmp/dp-fuzz-tok-%d.gguf", (int)getpid());
        if (eng_test_model_write(&p, tmp, 1, &err)) abort();
        path = tmp;
    }
    eng_gguf *g;
    if (eng_gguf_open(path, &g, &err) || eng_tokenizer_load(g, &g_tok, &err) || eng_tok_ws_new(&g_ws)) {
        fprintf(stderr, "fuzz_tokenizer: %s\n", err.msg);
        abort();
    }
    eng_gguf_close(g);
    if (tmp[0]) remove(tmp);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!g_tok) setup();
    eng_tokens ids = {0};
    dp_err err = {0};
    if (eng_tokenize(g_tok, g_ws, (const char *)data, size, false, false, &ids, &err)) abort();
    uint8_t *out = malloc(size + 8);
    size_t o = 0;
    eng_detok d = {0};
    uint8_t buf[256];
    for (size_t i = 0; i < ids.n; i++) {
        size_t k = eng_detok_push(g_tok, &d, ids.ids[i], false, buf, sizeof(buf));
        if (o + k > size) abort(); /* more bytes than went in */
        memcpy(out + o, buf, k);
        o += k;
    }
    o += eng_detok_flush(&d, out + o);
    if (o != size || memcmp(out, data, size) != 0) abort(); /* the round trip lost or changed bytes */
    free(out);
    ids.n = 0;
    if (eng_tokenize(g_tok, g_ws, (const char *)data, size, true, true, &ids, &err)) abort();
    eng_tokens_free(&ids);
    return 0;
}
