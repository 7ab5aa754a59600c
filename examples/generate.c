/*
 * generate.c - the smallest complete program on the engine API (engine/include/engine.h): load a
 * model, render a chat prompt, decode it, then sample and stream tokens until an
 * end-of-generation token. Build: part of the tree (build/examples/generate).
 *
 *   build/examples/generate MODEL.gguf "Summarize: the nightly job finished."
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL.gguf PROMPT [N_TOKENS]\n", argv[0]);
        return 64;
    }
    const int n_predict = argc > 3 ? atoi(argv[3]) : 64;
    dp_err err = {0};
    eng_model *m = NULL;
    eng_context *c = NULL;
    eng_sampler *s = NULL;
    eng_tokens ids = {0};
    dp_buf prompt;
    dp_buf_init(&prompt, 1 << 20);
    int rc = 1;

    if (eng_model_load(argv[1], &m, &err)) goto fail;
    const eng_tokenizer *tok = eng_model_get_tokenizer(m);
    eng_context_params cp = eng_context_default_params(); /* 4096 tokens, 1 sequence, all CPUs */
    if (eng_context_new(m, &cp, &c, &err)) goto fail;
    eng_sampler_params sp = eng_sampler_default_params();
    sp.seed = 42;
    if (eng_sampler_new(&sp, (int32_t)eng_model_get_info(m)->n_vocab, &s, &err)) goto fail;

    /* ChatML for the model's template family, thinking off */
    eng_chat_msg msgs[] = {{"user", argv[2]}};
    if (eng_chat_render(eng_model_chat_kind(m), msgs, 1, true, false, &prompt, &err)) goto fail;
    if (eng_tokenize(tok, NULL, (const char *)prompt.data, prompt.len, true, true, &ids, &err)) goto fail;
    for (size_t i = 0; i < ids.n; i++) eng_sampler_accept(s, ids.ids[i]);

    /* the prompt in one step, then one token per step */
    if (eng_decode_sequence(c, 0, ids.ids, (int32_t)ids.n, 0, &err)) goto fail;
    eng_detok d = {0};
    uint8_t buf[512];
    for (int i = 0; i < n_predict; i++) {
        int32_t next = eng_sampler_sample(s, eng_get_logits(c, 0));
        if (eng_token_is_eog(tok, next)) break;
        eng_sampler_accept(s, next);
        fwrite(buf, 1, eng_detok_push(tok, &d, next, false, buf, sizeof(buf)), stdout);
        fflush(stdout);
        if (eng_decode_sequence(c, 0, &next, 1, (int32_t)ids.n + i, &err)) goto fail;
    }
    fwrite(buf, 1, eng_detok_flush(&d, buf), stdout);
    putchar('\n');
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "generate: %s\n", dp_err_msg(&err));
done:
    dp_buf_free(&prompt);
    eng_tokens_free(&ids);
    eng_sampler_free(s);
    eng_context_free(c);
    eng_model_free(m);
    return rc;
}
