/*
 * completion.c - see completion.h.
 */
#include "completion.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "platform.h"
#include "sha256.h"
#include "utf8.h"

#ifndef DP_VERSION_STR
#define DP_VERSION_STR "0"
#endif

/* 2*n hex digits of sha256(a, 0, b, 0, c), into out (2n + 1 bytes). */
static void hex_id(const char *a, const char *b, const char *c, int n, char *out) {
    dp_sha256 h;
    dp_sha256_init(&h);
    dp_sha256_update(&h, a, strlen(a) + 1);
    dp_sha256_update(&h, b, strlen(b) + 1);
    dp_sha256_update(&h, c, strlen(c));
    uint8_t d[32];
    char hex[65];
    dp_sha256_final(&h, d);
    dp_sha256_hex(d, hex);
    memcpy(out, hex, (size_t)(2 * n));
    out[2 * n] = 0;
}

void pl_system_fingerprint(const char *model_identity, char out[20]) {
    char hex[13];
    hex_id("docpipe " DP_VERSION_STR, model_identity, "", 6, hex);
    snprintf(out, 20, "fp_%s", hex);
}

json_t *pl_completion_response(const pl_completion *c) {
    /* ids unique per execution, as OpenAI's are: the same request run twice gets new ones */
    static char nonce[40];
    if (!nonce[0]) snprintf(nonce, sizeof(nonce), "%d-%llu", dp_getpid(), (unsigned long long)dp_time_ns());
    char when[32], rid[33], cid[25], req_id[40], body_id[40];
    snprintf(when, sizeof(when), "%lld", (long long)c->created);
    hex_id(c->custom_id, when, nonce, 16, rid);
    hex_id(nonce, c->custom_id, when, 12, cid);
    snprintf(req_id, sizeof(req_id), "req_%s", rid);
    snprintf(body_id, sizeof(body_id), "%s-%s", c->chat ? "chatcmpl" : "cmpl", cid);
    uint8_t *fixed = malloc(3 * c->len + 1);
    const size_t fl = fixed ? dp_utf8_repair((const uint8_t *)c->text, c->len, fixed, NULL) : 0;
    json_t *text = json_stringn(fixed ? (const char *)fixed : "", fl);
    free(fixed);
    json_t *ch = json_object();
    json_object_set_new(ch, "index", json_integer(0));
    if (c->chat) {
        json_t *msg = json_object();
        json_object_set_new(msg, "role", json_string("assistant"));
        json_object_set_new(msg, "content", text);
        json_object_set_new(ch, "message", msg);
    } else {
        json_object_set_new(ch, "text", text);
    }
    json_object_set_new(ch, "logprobs", json_null());
    json_object_set_new(ch, "finish_reason", json_string(c->finish));
    json_t *choices = json_array();
    json_array_append_new(choices, ch);
    json_t *usage = json_pack("{s:i, s:i, s:i}", "prompt_tokens", c->n_prompt, "completion_tokens", c->n_gen,
                              "total_tokens", c->n_prompt + c->n_gen);
    json_t *body = json_pack("{s:s, s:s, s:I, s:s, s:o, s:o, s:s}", "id", body_id, "object",
                             c->chat ? "chat.completion" : "text_completion", "created", (json_int_t)c->created,
                             "model", c->model, "choices", choices, "usage", usage, "system_fingerprint",
                             c->fingerprint);
    return json_pack("{s:i, s:s, s:o}", "status_code", 200, "request_id", req_id, "body", body);
}
