/*
 * chunker.h - cuts a document into pieces whose token count fits a budget, at the most natural
 * boundary available: a paragraph break or the end of a page (a form feed), else a line break,
 * else the end of a sentence (. ! ? and 。！？ with their full-width kin), else any token
 * boundary; consecutive chunks share `overlap` tokens.
 *
 * Counting uses the model's own tokenizer with special parsing off (document text can never
 * produce control tokens), and every chunk is re-tokenized on its own: no chunk exceeds the
 * budget even where tokens merge differently at its edges.
 */
#ifndef PL_CHUNKER_H
#define PL_CHUNKER_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"

typedef struct pl_chunk {
    size_t start, end;  /* byte range of the document */
    int32_t n_tokens;   /* tokens of text[start, end) tokenized on its own */
} pl_chunk;

typedef struct pl_chunks {
    pl_chunk *v;
    size_t n, cap;
} pl_chunks;

/* Chunks text[0..len). budget >= 8 tokens; 0 <= overlap < budget / 2. An empty text gives no
 * chunk. ws is the caller's tokenizer workspace (may be NULL). */
dp_status pl_chunk_text(const eng_tokenizer *tok, eng_tok_ws *ws, const char *text, size_t len, int32_t budget,
                        int32_t overlap, pl_chunks *out, dp_err *err);
void pl_chunks_free(pl_chunks *c);

#endif /* PL_CHUNKER_H */
