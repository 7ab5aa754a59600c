/*
 * prompt.h - a request's token ids from the job's prompts: the chat template of the model
 * around the system text and the user template, with {{variables}} filled in.
 *
 * Only text the job author wrote (the chat frame, the system prompt, the template's literal
 * text) is tokenized with special-token parsing; document content and variable values
 * (file names, hashes) never are, so a document or a file name containing "<|im_end|>"
 * cannot end the turn (model-formats.md §5.3).
 */
#ifndef PL_PROMPT_H
#define PL_PROMPT_H

#include <stdbool.h>
#include <stdint.h>

#include "engine.h"

typedef struct pl_prompt_vars {
    const char *path, *filename, *ext, *date, *doc_sha256;
    int32_t chunk_index, chunk_count; /* 1-based */
    int32_t line_start;               /* the content's first line in its document (1-based; 0: 1) */
} pl_prompt_vars;

/* Whether a template numbers its content ({{content_numbered}}): each line of the content is
 * written as "%4d| line" (wider when the numbers are), counting from vars.line_start, so a model
 * reviewing code can name the lines of the source file. */
bool pl_template_numbers_lines(const char *tmpl);

typedef struct pl_prompt_spec {
    eng_chat_kind chat;   /* the model's template family */
    const char *system;   /* (optional) */
    const char *user_template;
    bool thinking;
} pl_prompt_spec;

/* Appends the ids of the full prompt for content[0..len) to out. */
dp_status pl_prompt_tokens(const eng_tokenizer *tok, eng_tok_ws *ws, const pl_prompt_spec *p,
                           const pl_prompt_vars *v, const char *content, size_t len, eng_tokens *out, dp_err *err);
/* Tokens the prompt takes besides the content (the frame, system text, template, variables). */
dp_status pl_prompt_overhead(const eng_tokenizer *tok, eng_tok_ws *ws, const pl_prompt_spec *p,
                             const pl_prompt_vars *v, int32_t *n, dp_err *err);

#endif /* PL_PROMPT_H */
