/*
 * chat.h - ChatML rendering for the Qwen families without a Jinja interpreter
 * (model-formats.md §6): the family is detected from the embedded template by substrings, and
 * messages are rendered by fixed rules, always with an explicit thinking switch.
 */
#ifndef ENG_CHAT_H
#define ENG_CHAT_H

#include <stdbool.h>
#include <stddef.h>

#include "dynbuf.h"
#include "status.h"

typedef enum eng_chat_kind {
    ENG_CHAT_CHATML = 0,        /* plain ChatML */
    ENG_CHAT_QWEN25 = 1,        /* default system prompt when none is given */
    ENG_CHAT_QWEN3 = 2,         /* hybrid thinking: off = empty think block */
    ENG_CHAT_THINK_ALWAYS = 3,  /* Qwen3-2507-Thinking, QwQ: generation opens <think> */
    ENG_CHAT_QWEN35 = 4,        /* trims contents; on = "<think>\n", off = empty think block */
    ENG_CHAT_UNSUPPORTED = 5,
} eng_chat_kind;

typedef struct eng_chat_msg {
    const char *role;    /* "system", "user", "assistant" */
    const char *content;
} eng_chat_msg;

/* The family of a tokenizer.chat_template (bytes, not NUL-terminated). */
eng_chat_kind eng_chat_detect(const char *tmpl, size_t len);
const char *eng_chat_kind_name(eng_chat_kind k);
/* Appends the rendered conversation to out. DP_EINVAL for an unsupported template, an
 * unknown role, or (qwen35) no user message. */
dp_status eng_chat_render(eng_chat_kind kind, const eng_chat_msg *msgs, size_t n, bool add_generation_prompt,
                          bool enable_thinking, dp_buf *out, dp_err *err);
/* The same, and where each message's content landed in out: spans[i] = {offset, length} (the
 * content as the template keeps it: trimmed, or an earlier assistant turn without its
 * reasoning). Everything outside the spans is the chat frame, the only text that may be
 * tokenized with special-token parsing on: a message's text is plain text. */
dp_status eng_chat_render_spans(eng_chat_kind kind, const eng_chat_msg *msgs, size_t n, bool add_generation_prompt,
                                bool enable_thinking, dp_buf *out, size_t (*spans)[2], dp_err *err);

#endif /* ENG_CHAT_H */
