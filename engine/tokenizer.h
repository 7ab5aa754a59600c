/*
 * tokenizer.h - Qwen byte-level BPE (GGUF tokenizer.ggml.model "gpt2"), token for token what
 * llama.cpp produces, with a streaming detokenizer.
 *
 *   eng_tokenizer *tok;  eng_tokens ids = {0};
 *   eng_tokenizer_load(gguf, &tok, &err);                // copies what it needs from the file
 *   eng_tokenize(tok, NULL, text, len, true, true, &ids, &err);
 *   ... ids.ids[0 .. ids.n) ...
 *   eng_tokens_free(&ids); eng_tokenizer_free(tok);
 *
 * Pre-tokenizers "qwen2" (also "deepseek-r1-qwen") and "qwen35" (model-formats.md §5.5). Special,
 * control and user-defined tokens are matched before BPE (5.3): user-defined always, control
 * only when parse_special is set. Text must be UTF-8; invalid bytes are kept (each one a
 * symbol of its own) so detokenize(tokenize(x)) == x for any bytes, where llama.cpp would
 * substitute U+FFFD.
 *
 * Threads: an eng_tokenizer is immutable after load and may be shared. Each thread passes its
 * own eng_tok_ws (piece cache and scratch), or NULL for a temporary one (slower).
 */
#ifndef ENG_TOKENIZER_H
#define ENG_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf.h"
#include "status.h"

typedef struct eng_tokenizer eng_tokenizer;
typedef struct eng_tok_ws eng_tok_ws;

typedef enum eng_token_type {
    ENG_TOKEN_TYPE_UNDEFINED = 0,
    ENG_TOKEN_TYPE_NORMAL = 1,
    ENG_TOKEN_TYPE_UNKNOWN = 2,
    ENG_TOKEN_TYPE_CONTROL = 3,
    ENG_TOKEN_TYPE_USER_DEFINED = 4,
    ENG_TOKEN_TYPE_UNUSED = 5,
    ENG_TOKEN_TYPE_BYTE = 6,
} eng_token_type;

/* A growable array of token ids, owned by the caller. */
typedef struct eng_tokens {
    int32_t *ids;
    size_t n, cap;
} eng_tokens;

dp_status eng_tokens_push(eng_tokens *t, int32_t id);
void eng_tokens_free(eng_tokens *t);

/* Loads the vocabulary, merges and special tokens. Refuses other tokenizer models and
 * pre-tokenizers with a message naming them. *out takes ownership. */
dp_status eng_tokenizer_load(const eng_gguf *g, eng_tokenizer **out, dp_err *err);
void eng_tokenizer_free(eng_tokenizer *t);

int32_t eng_tokenizer_n_vocab(const eng_tokenizer *t);
const char *eng_tokenizer_pre(const eng_tokenizer *t); /* "qwen2" / "qwen35"; borrowed */
int32_t eng_token_bos(const eng_tokenizer *t);          /* -1 if none */
/* Whether tokenizing with add_special puts BOS first (tokenizer.ggml.add_bos_token). */
bool eng_token_add_bos(const eng_tokenizer *t);
int32_t eng_token_eos(const eng_tokenizer *t);
eng_token_type eng_token_get_type(const eng_tokenizer *t, int32_t id);
/* End of generation: eos, or a token whose text is an end-of-turn marker (model-formats.md §6.3). */
bool eng_token_is_eog(const eng_tokenizer *t, int32_t id);
/* Id of a token with exactly this text, or -1. */
int32_t eng_token_find(const eng_tokenizer *t, const char *text, size_t len);

/* The GPT-2 byte-level map (model-formats.md §5.4): the code point that stands for byte b in token
 * texts (33-126, 161-172, 174-255 map to themselves, the other 68 bytes to U+0100..U+0143). */
uint32_t eng_byte_to_codepoint(int b);

/* Per-thread workspace: a cache of tokenized pieces plus scratch. */
dp_status eng_tok_ws_new(eng_tok_ws **out);
void eng_tok_ws_free(eng_tok_ws *ws);

/* Appends the ids of text[0..len) to out. add_special adds BOS/EOS as the file says (never
 * for Qwen); parse_special lets control-token text (<|im_start|>) become those tokens. */
dp_status eng_tokenize(const eng_tokenizer *t, eng_tok_ws *ws, const char *text, size_t len, bool add_special,
                       bool parse_special, eng_tokens *out, dp_err *err);

/* The bytes of one token: NORMAL tokens un-mapped from byte-level form, USER_DEFINED as is,
 * CONTROL/UNKNOWN only when special is set, UNUSED nothing. Returns the length; *bytes is
 * borrowed (may not end at a UTF-8 character boundary). */
size_t eng_token_to_piece(const eng_tokenizer *t, int32_t id, bool special, const char **bytes);

/* Appends the text of ids to out (a dp_buf-like byte vector managed by the caller). */
typedef struct eng_detok {
    uint8_t pending[4]; /* bytes of a character not complete yet */
    size_t n_pending;
} eng_detok;

/* Streaming: writes the complete UTF-8 text that ids make so far into out (capacity must be
 * >= 4 + the token's piece length) and returns its length; a character split across tokens is
 * held back until it completes. eng_detok_flush returns what is left (possibly invalid). */
size_t eng_detok_push(const eng_tokenizer *t, eng_detok *d, int32_t id, bool special, uint8_t *out, size_t cap);
size_t eng_detok_flush(eng_detok *d, uint8_t *out);

#endif /* ENG_TOKENIZER_H */
