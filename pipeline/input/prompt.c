/*
 * prompt.c - see prompt.h.
 *
 * DESIGN: the chat frame is rendered once with a sentinel byte (0x01, which the user template
 * cannot contain after validation) standing for the user message; the rendered text is split
 * at the sentinel and each part tokenized with special parsing. The user template is walked
 * left to right: literal text with special parsing, {{variables}} and {{content}} without.
 * Token counts therefore add up exactly: tokens(prompt) = overhead + tokens(content).
 */
#include "prompt.h"

#include <stdio.h>
#include <string.h>

#include "dynbuf.h"

static dp_status tok_part(const eng_tokenizer *t, eng_tok_ws *ws, const char *s, size_t n, bool special,
                          eng_tokens *out, dp_err *err) {
    return n ? eng_tokenize(t, ws, s, n, false, special, out, err) : DP_OK;
}

static const char *var_value(const pl_prompt_vars *v, const char *name, size_t n, char *num) {
#define IS(x) (n == sizeof(x) - 1 && !memcmp(name, x, n))
    if (IS("path")) return v->path ? v->path : "";
    if (IS("filename")) return v->filename ? v->filename : "";
    if (IS("ext")) return v->ext ? v->ext : "";
    if (IS("date")) return v->date ? v->date : "";
    if (IS("doc_sha256")) return v->doc_sha256 ? v->doc_sha256 : "";
    if (IS("chunk_index")) return snprintf(num, 16, "%d", v->chunk_index), num;
    if (IS("chunk_count")) return snprintf(num, 16, "%d", v->chunk_count), num;
#undef IS
    return NULL;
}

bool pl_template_numbers_lines(const char *tmpl) {
    for (const char *p = tmpl ? strstr(tmpl, "{{") : NULL; p; p = strstr(p + 2, "{{")) {
        const char *a = p + 2;
        while (*a == ' ') a++;
        if (strncmp(a, "content_numbered", 16)) continue;
        a += 16;
        while (*a == ' ') a++;
        if (!strncmp(a, "}}", 2)) return true;
    }
    return false;
}

/* content with every line prefixed by its number in the document: "  42| code". */
static dp_status numbered_tokens(const eng_tokenizer *t, eng_tok_ws *ws, const char *s, size_t n, int32_t first,
                                 eng_tokens *out, dp_err *err) {
    int32_t lines = 1;
    for (size_t i = 0; i + 1 < n; i++) lines += s[i] == '\n';
    char num[16];
    int width = snprintf(num, sizeof(num), "%d", first + lines - 1);
    if (width < 4) width = 4;
    dp_buf b;
    dp_buf_init(&b, (size_t)1 << 31);
    dp_status st = DP_OK;
    int32_t line = first;
    for (size_t a = 0; a < n && !st; line++) {
        const char *nl = memchr(s + a, '\n', n - a);
        const size_t e = nl ? (size_t)(nl - s) + 1 : n;
        if ((st = dp_buf_printf(&b, "%*d| ", width, line)) || (st = dp_buf_append(&b, s + a, e - a))) break;
        a = e;
    }
    if (!st) st = tok_part(t, ws, (const char *)b.data, b.len, false, out, err);
    else dp_err_set(err, st, "out of memory");
    dp_buf_free(&b);
    return st;
}

/* The user template with variables and content (content may be NULL: overhead only). */
static dp_status user_tokens(const eng_tokenizer *t, eng_tok_ws *ws, const char *tmpl, const pl_prompt_vars *v,
                             const char *content, size_t len, eng_tokens *out, dp_err *err) {
    const char *p = tmpl;
    dp_status st = DP_OK;
    while (*p && !st) {
        const char *open = strstr(p, "{{");
        const char *close = open ? strstr(open + 2, "}}") : NULL;
        if (!open || !close) return tok_part(t, ws, p, strlen(p), true, out, err);
        if ((st = tok_part(t, ws, p, (size_t)(open - p), true, out, err))) return st;
        const char *a = open + 2, *b = close;
        while (a < b && *a == ' ') a++;
        while (b > a && b[-1] == ' ') b--;
        char num[16];
        if ((size_t)(b - a) == 7 && !memcmp(a, "content", 7)) {
            if (content) st = tok_part(t, ws, content, len, false, out, err);
        } else if ((size_t)(b - a) == 16 && !memcmp(a, "content_numbered", 16)) {
            if (content) st = numbered_tokens(t, ws, content, len, v->line_start > 0 ? v->line_start : 1, out, err);
        } else {
            const char *val = var_value(v, a, (size_t)(b - a), num);
            if (!val) return dp_err_set(err, DP_EINVAL, "prompt: unknown variable {{%.*s}}", (int)(b - a), a);
            st = tok_part(t, ws, val, strlen(val), false, out, err);
        }
        p = close + 2;
    }
    return st;
}

static dp_status build(const eng_tokenizer *t, eng_tok_ws *ws, const pl_prompt_spec *p, const pl_prompt_vars *v,
                       const char *content, size_t len, eng_tokens *out, dp_err *err) {
    if (strchr(p->user_template, '\x01') || (p->system && strchr(p->system, '\x01')))
        return dp_err_set(err, DP_EINVAL, "prompt: templates cannot contain the byte 0x01");
    eng_chat_msg msgs[2];
    size_t n = 0;
    if (p->system) msgs[n++] = (eng_chat_msg){"system", p->system};
    msgs[n++] = (eng_chat_msg){"user", "\x01"};
    dp_buf frame;
    dp_buf_init(&frame, (size_t)1 << 24);
    dp_status st = eng_chat_render(p->chat, msgs, n, true, p->thinking, &frame, err);
    if (!st) {
        const char *f = (const char *)frame.data, *s = memchr(f, '\x01', frame.len);
        if (!s) st = dp_err_set(err, DP_ERROR, "prompt: the chat frame lost the user message");
        else if (!(st = tok_part(t, ws, f, (size_t)(s - f), true, out, err)) &&
                 !(st = user_tokens(t, ws, p->user_template, v, content, len, out, err)))
            st = tok_part(t, ws, s + 1, frame.len - (size_t)(s + 1 - f), true, out, err);
    }
    dp_buf_free(&frame);
    return st;
}

dp_status pl_prompt_tokens(const eng_tokenizer *t, eng_tok_ws *ws, const pl_prompt_spec *p, const pl_prompt_vars *v,
                           const char *content, size_t len, eng_tokens *out, dp_err *err) {
    return build(t, ws, p, v, content ? content : "", content ? len : 0, out, err);
}

dp_status pl_prompt_overhead(const eng_tokenizer *t, eng_tok_ws *ws, const pl_prompt_spec *p, const pl_prompt_vars *v,
                             int32_t *n, dp_err *err) {
    eng_tokens ids = {0};
    dp_status st = build(t, ws, p, v, NULL, 0, &ids, err);
    *n = (int32_t)ids.n;
    eng_tokens_free(&ids);
    return st;
}
