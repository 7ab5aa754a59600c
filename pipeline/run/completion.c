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

/* ids unique per execution, as OpenAI's are: the same request run twice gets new ones */
static const char *nonce(void) {
    static char n[40];
    if (!n[0]) snprintf(n, sizeof(n), "%d-%llu", dp_getpid(), (unsigned long long)dp_time_ns());
    return n;
}

static void request_id(const char *custom_id, int64_t created, char out[40]) {
    char when[32], rid[33];
    snprintf(when, sizeof(when), "%lld", (long long)created);
    hex_id(custom_id, when, nonce(), 16, rid);
    snprintf(out, 40, "req_%s", rid);
}

void pl_base64(const uint8_t *p, size_t n, char *out) {
    static const char k[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        const uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        out[o++] = k[v >> 18 & 63];
        out[o++] = k[v >> 12 & 63];
        out[o++] = i + 1 < n ? k[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? k[v & 63] : '=';
    }
    out[o] = 0;
}

json_t *pl_embedding_response(const char *custom_id, const char *model, const char *fingerprint, const float *vecs,
                              size_t n, size_t dim, bool base64, int32_t n_tokens, int64_t created) {
    char req_id[40];
    request_id(custom_id, created, req_id);
    json_t *data = json_array();
    char *b64 = base64 ? malloc(4 * (dim * 4 + 2) / 3 + 8) : NULL;
    uint8_t *le = base64 ? malloc(dim * 4) : NULL;
    for (size_t i = 0; i < n; i++) {
        const float *v = vecs + i * dim;
        json_t *e;
        if (base64 && b64 && le) {
            for (size_t k = 0; k < dim; k++) { /* little-endian float32, whatever the host */
                uint32_t u;
                memcpy(&u, &v[k], 4);
                le[4 * k] = (uint8_t)u, le[4 * k + 1] = (uint8_t)(u >> 8), le[4 * k + 2] = (uint8_t)(u >> 16),
                le[4 * k + 3] = (uint8_t)(u >> 24);
            }
            pl_base64(le, dim * 4, b64);
            e = json_string(b64);
        } else {
            e = json_array();
            for (size_t k = 0; k < dim; k++) json_array_append_new(e, json_real(v[k]));
        }
        json_array_append_new(data, json_pack("{s:s, s:I, s:o}", "object", "embedding", "index", (json_int_t)i,
                                              "embedding", e));
    }
    free(b64);
    free(le);
    json_t *usage = json_pack("{s:i, s:i}", "prompt_tokens", n_tokens, "total_tokens", n_tokens);
    json_t *body = json_pack("{s:s, s:o, s:s, s:o, s:s}", "object", "list", "data", data, "model", model, "usage",
                             usage, "system_fingerprint", fingerprint);
    return json_pack("{s:i, s:s, s:o}", "status_code", 200, "request_id", req_id, "body", body);
}

static bool ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

static const char *find(const char *t, size_t n, size_t from, const char *pat) {
    const size_t pl = strlen(pat);
    for (size_t i = from; i + pl <= n; i++)
        if (!memcmp(t + i, pat, pl)) return t + i;
    return NULL;
}

pl_reasoning_split pl_split_reasoning(const char *t, size_t n) {
    pl_reasoning_split s = {0, 0, 0, n, false};
    if (!t) return s;
    size_t a = 0;
    while (a < n && ws(t[a])) a++;
    const bool open = n - a >= 7 && !memcmp(t + a, "<think>", 7);
    const size_t r0 = open ? a + 7 : 0;
    const char *close = find(t, n, r0, "</think>");
    if (!close && !open) return s;
    size_t r1 = close ? (size_t)(close - t) : n, ra = r0;
    while (ra < r1 && ws(t[ra])) ra++;
    while (r1 > ra && ws(t[r1 - 1])) r1--;
    size_t c0 = close ? (size_t)(close - t) + 8 : n;
    while (c0 < n && ws(t[c0])) c0++;
    size_t c1 = n;
    while (c1 > c0 && ws(t[c1 - 1])) c1--;
    s = (pl_reasoning_split){ra, r1 - ra, c0, c1 - c0, true};
    return s;
}

/* t[0..n) as a JSON string, repaired to valid UTF-8 (U+FFFD). */
static json_t *utf8_string(const char *t, size_t n) {
    uint8_t *fixed = malloc(3 * n + 1);
    const size_t fl = fixed ? dp_utf8_repair((const uint8_t *)(t ? t : ""), t ? n : 0, fixed, NULL) : 0;
    json_t *j = json_stringn(fixed ? (const char *)fixed : "", fl);
    free(fixed);
    return j ? j : json_string("");
}

json_t *pl_completion_response(const pl_completion *c) {
    char when[32], cid[25], req_id[40], body_id[40];
    snprintf(when, sizeof(when), "%lld", (long long)c->created);
    request_id(c->custom_id, c->created, req_id);
    hex_id(nonce(), c->custom_id, when, 12, cid);
    snprintf(body_id, sizeof(body_id), "%s-%s", c->chat ? "chatcmpl" : "cmpl", cid);
    const pl_reasoning_split sp = c->thinking ? pl_split_reasoning(c->text, c->len)
                                              : (pl_reasoning_split){0, 0, 0, c->len, false};
    json_t *text = utf8_string(c->text + sp.c_at, sp.c_len);
    json_t *ch = json_object();
    json_object_set_new(ch, "index", json_integer(0));
    if (c->chat) {
        json_t *msg = json_object();
        json_object_set_new(msg, "role", json_string("assistant"));
        json_object_set_new(msg, "content", text);
        /* as llama-server and vLLM return it: the reasoning apart, never in content */
        if (sp.has_reasoning) json_object_set_new(msg, "reasoning_content", utf8_string(c->text + sp.r_at, sp.r_len));
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
