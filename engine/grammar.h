/*
 * grammar.h - the engine's private view of a compiled grammar (grammar.c builds it from GBNF
 * text, grammar_match.c runs it against the token vocabulary).
 *
 * DESIGN: every terminal is a set of BYTES, not of characters. A GBNF character class is
 * rewritten at compile time into the UTF-8 byte sequences of its code points (a rule whose
 * alternatives are runs of byte sets), so the matcher never decodes UTF-8: a token that ends in
 * the middle of a character simply leaves the matcher inside that character's byte sequence,
 * and byte-level BPE tokens are matched exactly. The program is a flat array of elements; an
 * alternative is a run of SET / REF elements closed by END, and a rule is a list of
 * alternatives (docs/structured-output.md).
 */
#ifndef ENG_GRAMMAR_H
#define ENG_GRAMMAR_H

#include <stdbool.h>
#include <stdint.h>

#include "engine.h"
#include "platform.h"

enum { GEL_SET = 0, GEL_REF = 1, GEL_END = 2 };

typedef struct gel {
    uint8_t kind;  /* GEL_* */
    int32_t arg;   /* SET: set index; REF: rule index */
} gel;

typedef struct gbytes { uint64_t w[4]; } gbytes; /* 256-bit byte set */

/* A parsed, checked grammar without a vocabulary (what eng_grammar_check builds). */
typedef struct gprog {
    gel *el;
    int32_t n_el;
    gbytes *sets;
    int32_t n_sets;
    int32_t *alt_start;  /* element index of each alternative's first element */
    int32_t *rule_alt;   /* [n_rules + 1]: the rule's alternatives are alt_start[rule_alt[r] .. rule_alt[r+1]) */
    int32_t n_rules;
    int32_t root, root_lead; /* the start rule; the same after up to 8 bytes of white space */
} gprog;

dp_status gprog_build(const char *text, size_t len, gprog *out, dp_err *err);
void gprog_free(gprog *p);

static inline bool gbytes_has(const gbytes *s, uint8_t b) { return (s->w[b >> 6] >> (b & 63)) & 1; }

/* The vocabulary as a trie in pre-order (grammar_match.c): built once per tokenizer. */
typedef struct eng_vocab_trie eng_vocab_trie;
const eng_vocab_trie *eng_tokenizer_trie(const eng_tokenizer *t, dp_err *err);
void eng_vocab_trie_free(eng_vocab_trie *t);

#endif /* ENG_GRAMMAR_H */
