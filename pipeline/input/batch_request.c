/*
 * batch_request.c - an OpenAI batch request line checked and read (see batch_request.h).
 *
 * JSON null counts as absent for every optional field: the OpenAI SDKs write unset fields as
 * null. Fields docpipe has no use for and that do not change the answer (user, metadata,
 * stream_options, ...) are ignored, as OpenAI's own endpoint ignores unknown ones.
 */
#include "batch_request.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dynbuf.h"
#include "json_schema.h"

void pl_batch_req_free(pl_batch_req *r) {
    if (!r) return;
    free(r->custom_id);
    free(r->model);
    for (size_t i = 0; i < r->n_msgs; i++) {
        free((char *)r->msgs[i].role); /* owned: const only in eng_chat_msg */
        free((char *)r->msgs[i].content);
    }
    free(r->msgs);
    free(r->prompt);
    free(r->gbnf);
    for (size_t i = 0; i < r->n_stop; i++)
        free(r->stop[i]);
    free(r->stop);
    for (size_t i = 0; i < r->n_inputs; i++)
        free(r->inputs[i]);
    free(r->inputs);
    memset(r, 0, sizeof(*r));
}

/* A short account of a value for a message: 12, 0.5, "abc…", a list, an object. */
static const char *describe(const json_t *v, char *buf, size_t n) {
    if (!v) return "nothing";
    switch (json_typeof(v)) {
    case JSON_INTEGER: snprintf(buf, n, "%lld", (long long)json_integer_value(v)); break;
    case JSON_REAL: snprintf(buf, n, "%g", json_real_value(v)); break;
    case JSON_STRING: {
        const size_t l = json_string_length(v);
        snprintf(buf, n, "\"%.*s%s\"", l > 24 ? 24 : (int)l, json_string_value(v), l > 24 ? "..." : "");
        break;
    }
    case JSON_TRUE: snprintf(buf, n, "true"); break;
    case JSON_FALSE: snprintf(buf, n, "false"); break;
    case JSON_ARRAY: snprintf(buf, n, json_array_size(v) ? "a list" : "an empty list"); break;
    case JSON_OBJECT: snprintf(buf, n, "an object"); break;
    default: snprintf(buf, n, "null"); break;
    }
    return buf;
}

static dp_status refuse(dp_err *err, int line, const char *fmt, ...) DP_PRINTF(3, 4);
static dp_status refuse(dp_err *err, int line, const char *fmt, ...) {
    char msg[DP_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return dp_err_set(err, DP_EINVAL, "line %d: %s", line, msg);
}

/* body's field name, or NULL when it is absent or null */
static json_t *field(json_t *body, const char *name) {
    json_t *v = json_object_get(body, name);
    return json_is_null(v) ? NULL : v;
}

/* The strings go on as C strings: one holding U+0000 (JSON_ALLOW_NUL lets it through the parser,
 * so that it can be refused by name) would be cut short. */
static bool holds_nul(const json_t *v) { return strlen(json_string_value(v)) != json_string_length(v); }

/* A string without U+0000, copied into *out. */
static dp_status text(json_t *v, const char *what, int line, char **out, dp_err *err) {
    char d[64];
    if (!json_is_string(v)) return refuse(err, line, "%s must be a string, not %s", what, describe(v, d, sizeof(d)));
    if (holds_nul(v)) return refuse(err, line, "%s holds a NUL character (\\u0000)", what);
    if (!(*out = strdup(json_string_value(v)))) return dp_err_set(err, DP_ENOMEM, "out of memory");
    return DP_OK;
}

static dp_status number(json_t *body, const char *name, double lo, double hi, bool lo_open, float *out, int line,
                        dp_err *err) {
    json_t *v = field(body, name);
    if (!v) return DP_OK;
    const double x = json_is_number(v) ? json_number_value(v) : NAN;
    if (!(x >= lo && x <= hi) || (lo_open && x == lo)) {
        char d[64], range[64];
        if (isinf(hi))
            snprintf(range, sizeof(range), "%s %g", lo_open ? ">" : ">=", lo);
        else
            snprintf(range, sizeof(range), "from %g%s to %g", lo, lo_open ? " (exclusive)" : "", hi);
        return refuse(err, line, "body.%s must be a number %s, not %s", name, range, describe(v, d, sizeof(d)));
    }
    *out = (float)x;
    return DP_OK;
}

/* OpenAI's content: a string, or a list of parts of which docpipe takes the text ones. */
static dp_status content(json_t *v, size_t i, int line, char **out, dp_err *err) {
    char what[64], d[64];
    snprintf(what, sizeof(what), "body.messages[%zu].content", i);
    if (!json_is_array(v)) return text(v, what, line, out, err);
    if (!json_array_size(v)) return refuse(err, line, "%s is an empty list", what);
    dp_buf b;
    dp_buf_init(&b, (size_t)1 << 30);
    size_t k;
    json_t *part;
    json_array_foreach(v, k, part) {
        const char *type = json_string_value(json_object_get(part, "type"));
        json_t *t = json_object_get(part, "text");
        if (!type || strcmp(type, "text") || !json_is_string(t)) {
            dp_buf_free(&b);
            if (type && strcmp(type, "text"))
                return refuse(err, line, "%s[%zu] is of type \"%s\"; docpipe reads text parts only", what, k, type);
            return refuse(err, line, "%s[%zu] must be {\"type\": \"text\", \"text\": string}, not %s", what, k,
                          describe(part, d, sizeof(d)));
        }
        if (holds_nul(t)) {
            dp_buf_free(&b);
            return refuse(err, line, "%s[%zu].text holds a NUL character (\\u0000)", what, k);
        }
        /* text parts joined by newlines, as vLLM joins them */
        if ((k && dp_buf_append(&b, "\n", 1)) || dp_buf_append(&b, json_string_value(t), json_string_length(t))) {
            dp_buf_free(&b);
            return dp_err_set(err, DP_ENOMEM, "out of memory");
        }
    }
    /* the buffer becomes the string (a NUL appended; an empty text part leaves it unallocated) */
    if (dp_buf_append(&b, "", 1)) {
        dp_buf_free(&b);
        return dp_err_set(err, DP_ENOMEM, "out of memory");
    }
    *out = (char *)b.data;
    return DP_OK;
}

static dp_status messages(json_t *body, pl_batch_req *r, dp_err *err) {
    json_t *msgs = field(body, "messages");
    if (!json_is_array(msgs) || !json_array_size(msgs)) {
        char d[64];
        return refuse(err, r->line, "body.messages must be a non-empty list of messages, not %s",
                      describe(msgs, d, sizeof(d)));
    }
    if (!(r->msgs = calloc(json_array_size(msgs), sizeof(*r->msgs))))
        return dp_err_set(err, DP_ENOMEM, "out of memory");
    size_t i;
    json_t *e;
    json_array_foreach(msgs, i, e) {
        char what[64];
        if (!json_is_object(e)) return refuse(err, r->line, "body.messages[%zu] must be an object", i);
        eng_chat_msg *m = &r->msgs[r->n_msgs++];
        char *role = NULL, *content_text = NULL;
        snprintf(what, sizeof(what), "body.messages[%zu].role", i);
        if (text(json_object_get(e, "role"), what, r->line, &role, err)) return err->code;
        if (!strcmp(role, "developer")) strcpy(role, "system"); /* OpenAI's newer name for it */
        m->role = role;
        if (content(json_object_get(e, "content"), i, r->line, &content_text, err)) return err->code;
        m->content = content_text;
    }
    return DP_OK;
}

static dp_status prompt(json_t *body, pl_batch_req *r, dp_err *err) {
    json_t *p = field(body, "prompt");
    /* a list of one prompt is the same request; more would need one choice each */
    if (json_is_array(p) && json_array_size(p) == 1 && json_is_string(json_array_get(p, 0))) p = json_array_get(p, 0);
    if (json_is_array(p))
        return refuse(err, r->line, "body.prompt is a list of %zu prompts; docpipe runs one prompt, a string, per line",
                      json_array_size(p));
    if (!p) return refuse(err, r->line, "body.prompt (a string) is required");
    return text(p, "body.prompt", r->line, &r->prompt, err);
}

static dp_status stops(json_t *body, pl_batch_req *r, dp_err *err) {
    json_t *v = field(body, "stop");
    if (!v) return DP_OK;
    const size_t n = json_is_array(v) ? json_array_size(v) : 1;
    if (!(r->stop = calloc(n ? n : 1, sizeof(char *)))) return dp_err_set(err, DP_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *s = json_is_array(v) ? json_array_get(v, i) : v;
        char what[32];
        snprintf(what, sizeof(what), json_is_array(v) ? "body.stop[%zu]" : "body.stop", i);
        if (text(s, what, r->line, &r->stop[r->n_stop], err)) return err->code;
        if (!*r->stop[r->n_stop]) {
            free(r->stop[r->n_stop]);
            return refuse(err, r->line, "%s is an empty string", what);
        }
        r->n_stop++;
    }
    return DP_OK;
}

/* Fields that ask for something docpipe does not produce: refused rather than ignored. */
static dp_status unsupported(json_t *body, int line, dp_err *err) {
    json_t *v;
    char d[64];
    if ((v = field(body, "n")) && !(json_is_integer(v) && json_integer_value(v) == 1))
        return refuse(err, line, "body.n is %s; docpipe returns one choice per request (send one line per sample)",
                      describe(v, d, sizeof(d)));
    if ((v = field(body, "best_of")) && !(json_is_integer(v) && json_integer_value(v) == 1))
        return refuse(err, line, "body.best_of is %s; docpipe supports only 1", describe(v, d, sizeof(d)));
    if ((v = field(body, "logprobs")) && !json_is_false(v) && !(json_is_integer(v) && json_integer_value(v) == 0))
        return refuse(err, line, "body.logprobs is %s; docpipe does not return log probabilities",
                      describe(v, d, sizeof(d)));
    if ((v = field(body, "echo")) && !json_is_false(v))
        return refuse(err, line, "body.echo is %s; docpipe does not echo the prompt", describe(v, d, sizeof(d)));
    if ((v = field(body, "tools")) && !(json_is_array(v) && !json_array_size(v)))
        return refuse(err, line, "body.tools: docpipe does not call tools");
    return DP_OK;
}

/* body.response_format: text (nothing), json_object, or json_schema with its schema, as a GBNF
 * grammar in r->gbnf; a schema docpipe cannot follow exactly is refused with its path. */
static dp_status response_format(json_t *body, pl_batch_req *r, dp_err *err) {
    const int line = r->line;
    json_t *v = field(body, "response_format");
    if (!v || json_is_null(v)) return DP_OK;
    const char *t = json_is_object(v) ? json_string_value(json_object_get(v, "type")) : NULL;
    if (!t) return refuse(err, line, "body.response_format must be an object with a type: text, json_object or json_schema");
    if (!strcmp(t, "text")) return DP_OK;
    dp_buf g;
    dp_buf_init(&g, (size_t)1 << 26);
    dp_err e = {0};
    dp_status st;
    if (!strcmp(t, "json_object")) {
        st = pl_json_object_gbnf(&g, &e);
    } else if (!strcmp(t, "json_schema")) {
        json_t *js = json_object_get(v, "json_schema"), *sc = json_is_object(js) ? json_object_get(js, "schema") : NULL;
        if (!json_is_object(sc) && !json_is_true(sc)) {
            dp_buf_free(&g);
            return refuse(err, line, "body.response_format.json_schema.schema must be an object (a JSON Schema)");
        }
        char *text = json_dumps(sc, JSON_COMPACT | JSON_ENCODE_ANY);
        st = text ? pl_schema_to_gbnf(text, strlen(text), &g, &e) : dp_err_set(&e, DP_ENOMEM, "out of memory");
        free(text);
    } else {
        dp_buf_free(&g);
        return refuse(err, line, "body.response_format.type is %s; text, json_object and json_schema are supported", t);
    }
    if (st) {
        dp_buf_free(&g);
        return refuse(err, line, "body.response_format.json_schema: %s", e.msg);
    }
    r->gbnf = (char *)g.data; /* NUL-terminated */
    return DP_OK;
}

/* An /v1/embeddings body: input (a string or a list of 1..2048 strings, none empty), model,
 * encoding_format; dimensions (a shortened vector) is refused rather than ignored. */
static dp_status embedding(json_t *body, pl_batch_req *r, dp_err *err) {
    const int lineno = r->line;
    char d[64];
    json_t *v;
    if ((v = field(body, "model"))) {
        if (!json_is_string(v)) return refuse(err, lineno, "body.model must be a string, not %s", describe(v, d, sizeof(d)));
        if (!(r->model = strdup(json_string_value(v)))) return dp_err_set(err, DP_ENOMEM, "out of memory");
    }
    if ((v = field(body, "dimensions")))
        return refuse(err, lineno, "body.dimensions: docpipe returns the model's full vectors (drop the field)");
    if ((v = field(body, "encoding_format"))) {
        const char *f = json_string_value(v);
        if (!f || (strcmp(f, "float") && strcmp(f, "base64")))
            return refuse(err, lineno, "body.encoding_format must be \"float\" or \"base64\", not %s",
                          describe(v, d, sizeof(d)));
        r->base64 = !strcmp(f, "base64");
    }
    json_t *in = json_object_get(body, "input");
    const size_t n = json_is_string(in) ? 1 : json_is_array(in) ? json_array_size(in) : 0;
    if (!n || n > 2048)
        return refuse(err, lineno, "body.input must be a string or a list of 1 to 2048 strings, not %s",
                      describe(in, d, sizeof(d)));
    if (!(r->inputs = calloc(n, sizeof(char *)))) return dp_err_set(err, DP_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *s = json_is_string(in) ? in : json_array_get(in, i);
        if (!json_is_string(s) || !json_string_length(s) || holds_nul(s))
            return refuse(err, lineno, "body.input[%zu] must be a non-empty string (token id lists are not taken), "
                          "not %s", i, describe(s, d, sizeof(d)));
        if (!(r->inputs[i] = strdup(json_string_value(s)))) return dp_err_set(err, DP_ENOMEM, "out of memory");
        r->n_inputs = i + 1;
    }
    return DP_OK;
}

dp_status pl_batch_req_parse(const char *line, size_t len, int lineno, int32_t n_ctx, pl_batch_req *r, dp_err *err) {
    memset(r, 0, sizeof(*r));
    r->think = -1;
    r->line = lineno;
    r->sp = eng_sampler_default_params();
    r->sp.temp = 1.0f; /* OpenAI's defaults */
    r->sp.top_k = 0;
    r->sp.top_p = 1.0f;
    r->sp.min_p = 0.0f;
    r->max_tokens = 256;
    char d[64];
    json_error_t je;
    json_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je), *v;
    dp_status st = DP_OK;
    if (!o) {
        r->custom_id = strdup("");
        return dp_err_set(err, DP_EINVAL, "line %d, column %d: not valid JSON: %s", lineno, je.column, je.text);
    }
    json_t *cid = json_object_get(o, "custom_id");
    r->custom_id = strdup(json_is_string(cid) && !holds_nul(cid) ? json_string_value(cid) : "");
    if (!r->custom_id) {
        json_decref(o);
        return dp_err_set(err, DP_ENOMEM, "out of memory");
    }
    if (!json_is_object(o)) {
        st = refuse(err, lineno, "a request must be a JSON object, not %s", describe(o, d, sizeof(d)));
        goto out;
    }
    if (!*r->custom_id) {
        st = refuse(err, lineno, "custom_id (a non-empty string) is required");
        goto out;
    }
    const char *method = json_string_value(v = json_object_get(o, "method"));
    if (v && (!method || strcmp(method, "POST"))) {
        st = refuse(err, lineno, "method must be \"POST\", not %s", describe(v, d, sizeof(d)));
        goto out;
    }
    const char *url = json_string_value(v = json_object_get(o, "url"));
    if (!url || (strcmp(url, "/v1/chat/completions") && strcmp(url, "/v1/completions") &&
                 strcmp(url, "/v1/embeddings"))) {
        st = refuse(err, lineno,
                    "url must be \"/v1/chat/completions\", \"/v1/completions\" or \"/v1/embeddings\", not %s",
                    describe(v, d, sizeof(d)));
        goto out;
    }
    r->chat = !strcmp(url, "/v1/chat/completions");
    r->embed = !strcmp(url, "/v1/embeddings");
    json_t *body = json_object_get(o, "body");
    if (!json_is_object(body)) {
        st = refuse(err, lineno, "body must be an object, not %s", describe(body, d, sizeof(d)));
        goto out;
    }
    if (r->embed) {
        st = embedding(body, r, err);
        goto out;
    }
    if ((st = unsupported(body, lineno, err))) goto out;
    if ((v = field(body, "chat_template_kwargs"))) { /* vLLM's and llama-server's way to ask for thinking */
        json_t *et = json_is_object(v) ? json_object_get(v, "enable_thinking") : NULL;
        if (!json_is_object(v) || (et && !json_is_boolean(et) && !json_is_null(et))) {
            st = refuse(err, lineno, "body.chat_template_kwargs must be an object whose enable_thinking is true or "
                        "false, not %s", describe(v, d, sizeof(d)));
            goto out;
        }
        if (json_is_boolean(et)) r->think = json_is_true(et);
    }
    if ((v = field(body, "model"))) { /* which model the caller named; the one loaded answers */
        if (!json_is_string(v)) {
            st = refuse(err, lineno, "body.model must be a string, not %s", describe(v, d, sizeof(d)));
            goto out;
        }
        if (!(r->model = strdup(json_string_value(v)))) {
            st = dp_err_set(err, DP_ENOMEM, "out of memory");
            goto out;
        }
    }
    const char *mt = field(body, "max_tokens") ? "max_tokens" : "max_completion_tokens";
    if ((v = field(body, mt))) {
        if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > n_ctx) {
            st = refuse(err, lineno, "body.%s must be an integer from 1 to %d (the context), not %s", mt, (int)n_ctx,
                        describe(v, d, sizeof(d)));
            goto out;
        }
        r->max_tokens = (int32_t)json_integer_value(v);
    }
    if ((st = number(body, "temperature", 0, INFINITY, false, &r->sp.temp, lineno, err))) goto out;
    if ((st = number(body, "top_p", 0, 1, true, &r->sp.top_p, lineno, err))) goto out;
    if ((st = number(body, "min_p", 0, 1, false, &r->sp.min_p, lineno, err))) goto out;
    if ((st = number(body, "presence_penalty", -2, 2, false, &r->sp.presence_penalty, lineno, err))) goto out;
    if ((st = number(body, "frequency_penalty", -2, 2, false, &r->sp.frequency_penalty, lineno, err))) goto out;
    if ((v = field(body, "top_k"))) { /* 0 or -1 (vLLM's spelling): off */
        if (!json_is_integer(v) || json_integer_value(v) < -1 || json_integer_value(v) > INT32_MAX) {
            st = refuse(err, lineno, "body.top_k must be an integer, 0 or -1 for off, not %s",
                        describe(v, d, sizeof(d)));
            goto out;
        }
        r->sp.top_k = json_integer_value(v) < 0 ? 0 : (int32_t)json_integer_value(v);
    }
    /* a request's RNG depends on its seed and custom_id only, never on its neighbours */
    uint64_t seed = 0xcbf29ce484222325ull;
    for (const char *c = r->custom_id; *c; c++)
        seed = (seed ^ (uint8_t)*c) * 0x100000001b3ull;
    if ((v = field(body, "seed"))) {
        if (!json_is_integer(v)) {
            st = refuse(err, lineno, "body.seed must be an integer, not %s", describe(v, d, sizeof(d)));
            goto out;
        }
        seed ^= (uint64_t)json_integer_value(v) * 0x9E3779B97F4A7C15ull;
    }
    r->sp.seed = seed;
    if ((st = stops(body, r, err))) goto out;
    if ((st = response_format(body, r, err))) goto out;
    st = r->chat ? messages(body, r, err) : prompt(body, r, err);
out:
    json_decref(o);
    return st;
}
