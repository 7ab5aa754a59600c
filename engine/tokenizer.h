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
 *
 * The public part is declared in engine.h; this header adds what only the engine, its backends
 * and its tests use.
 */
#ifndef ENG_TOKENIZER_H
#define ENG_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "gguf.h"
#include "status.h"

typedef enum eng_token_type {
    ENG_TOKEN_TYPE_UNDEFINED = 0,
    ENG_TOKEN_TYPE_NORMAL = 1,
    ENG_TOKEN_TYPE_UNKNOWN = 2,
    ENG_TOKEN_TYPE_CONTROL = 3,
    ENG_TOKEN_TYPE_USER_DEFINED = 4,
    ENG_TOKEN_TYPE_UNUSED = 5,
    ENG_TOKEN_TYPE_BYTE = 6,
} eng_token_type;

const char *eng_tokenizer_pre(const eng_tokenizer *t); /* "qwen2" / "qwen35"; borrowed */
int32_t eng_token_eos(const eng_tokenizer *t);
eng_token_type eng_token_get_type(const eng_tokenizer *t, int32_t id);
/* Where the vocabulary trie of grammar_match.c lives, and the lock that guards building it. */
struct eng_vocab_trie;
struct dp_mutex;
struct dp_mutex *eng_tokenizer_trie_slot(const eng_tokenizer *t, struct eng_vocab_trie ***slot);
/* Id of a token with exactly this text, or -1. */
int32_t eng_token_find(const eng_tokenizer *t, const char *text, size_t len);

/* The GPT-2 byte-level map (model-formats.md §5.4): the code point that stands for byte b in token
 * texts (33-126, 161-172, 174-255 map to themselves, the other 68 bytes to U+0100..U+0143). */
uint32_t eng_byte_to_codepoint(int b);

#endif /* ENG_TOKENIZER_H */
