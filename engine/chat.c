/*
 * chat.c - see chat.h. Rules from model-formats.md §6.1-6.2; detection order from 6.4 (most
 * specific first). In the Jinja source "\n" inside a string literal is two characters.
 */
#include "engine.h"

#include <string.h>

static bool has(const char *s, size_t n, const char *needle) {
    size_t k = strlen(needle);
    if (k > n) return false;
    for (size_t i = 0; i + k <= n; i++)
        if (s[i] == needle[0] && memcmp(s + i, needle, k) == 0) return true;
    return false;
}

eng_chat_kind eng_chat_detect(const char *t, size_t n) {
    const bool chatml = has(t, n, "<|im_start|>");
    if (chatml && has(t, n, "enable_thinking") && has(t, n, "'<think>\\n'")) return ENG_CHAT_QWEN35;
    if (chatml && has(t, n, "assistant\\n<think>\\n'")) return ENG_CHAT_THINK_ALWAYS;
    if (chatml && has(t, n, "enable_thinking")) return ENG_CHAT_QWEN3;
    if (has(t, n, "You are Qwen, created by Alibaba Cloud")) return ENG_CHAT_QWEN25;
    if (chatml) return ENG_CHAT_CHATML;
    return ENG_CHAT_UNSUPPORTED;
}

const char *eng_chat_kind_name(eng_chat_kind k) {
    static const char *const names[] = {"chatml", "qwen2.5", "qwen3", "thinking", "qwen3.5", "unsupported"};
    return (unsigned)k <= ENG_CHAT_UNSUPPORTED ? names[k] : "unsupported";
}

static dp_status put(dp_buf *b, const char *s, size_t n, dp_err *err) {
    if (dp_buf_append(b, s, n)) return dp_err_set(err, DP_ENOMEM, "chat: rendered prompt too large");
    return DP_OK;
}
#define PUTS(s) do { if ((st = put(out, s, strlen(s), err))) return st; } while (0)

static void trim(const char **s, size_t *n) {
    while (*n && strchr(" \t\r\n", (*s)[0])) (*s)++, (*n)--;
    while (*n && strchr(" \t\r\n", (*s)[*n - 1])) (*n)--;
}

dp_status eng_chat_render(eng_chat_kind kind, const eng_chat_msg *msgs, size_t n, bool add_gen, bool thinking,
                          dp_buf *out, dp_err *err) {
    return eng_chat_render_spans(kind, msgs, n, add_gen, thinking, out, NULL, err);
}

dp_status eng_chat_render_spans(eng_chat_kind kind, const eng_chat_msg *msgs, size_t n, bool add_gen, bool thinking,
                                dp_buf *out, size_t (*spans)[2], dp_err *err) {
    dp_status st;
    if (kind == ENG_CHAT_UNSUPPORTED)
        return dp_err_set(err, DP_EINVAL, "chat: the model's chat template is not a ChatML template this engine knows");
    size_t last_user = SIZE_MAX;
    for (size_t i = 0; i < n; i++) {
        const char *r = msgs[i].role;
        if (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant"))
            return dp_err_set(err, DP_EINVAL, "chat: unknown role '%s' (system, user, assistant)", r);
        if (!strcmp(r, "user")) last_user = i;
    }
    if (kind == ENG_CHAT_QWEN35 && last_user == SIZE_MAX)
        return dp_err_set(err, DP_EINVAL, "chat: Qwen3.5 needs at least one user message");
    if (kind == ENG_CHAT_QWEN25 && (n == 0 || strcmp(msgs[0].role, "system")))
        PUTS("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n");
    for (size_t i = 0; i < n; i++) {
        const char *c = msgs[i].content;
        size_t cn = strlen(c);
        const bool assistant = !strcmp(msgs[i].role, "assistant");
        if (kind == ENG_CHAT_QWEN35 && !assistant) trim(&c, &cn);
        if (assistant && (kind == ENG_CHAT_QWEN3 || kind == ENG_CHAT_QWEN35 || kind == ENG_CHAT_THINK_ALWAYS) &&
            (last_user == SIZE_MAX || i < last_user)) {
            /* earlier turns lose their reasoning: keep the text after </think> */
            const char *e = NULL;
            for (size_t k = 0; k + 8 <= cn; k++)
                if (!memcmp(c + k, "</think>", 8)) e = c + k + 8;
            if (e) {
                cn -= (size_t)(e - c);
                c = e;
                while (cn && *c == '\n') c++, cn--;
            }
        }
        PUTS("<|im_start|>");
        PUTS(msgs[i].role);
        PUTS("\n");
        if (spans) spans[i][0] = out->len, spans[i][1] = cn;
        if ((st = put(out, c, cn, err))) return st;
        PUTS("<|im_end|>\n");
    }
    if (add_gen) {
        PUTS("<|im_start|>assistant\n");
        if (kind == ENG_CHAT_QWEN35) PUTS(thinking ? "<think>\n" : "<think>\n\n</think>\n\n");
        else if (kind == ENG_CHAT_QWEN3 && !thinking) PUTS("<think>\n\n</think>\n\n");
        else if (kind == ENG_CHAT_THINK_ALWAYS) PUTS("<think>\n");
    }
    return DP_OK;
}
