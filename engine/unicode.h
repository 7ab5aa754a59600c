/*
 * unicode.h - Unicode character properties for the pre-tokenizer and the chunker.
 *
 * One flags byte per code point from a two-level table generated from the Unicode Character
 * Database (unicode_gen.py -> unicode_tables.c): a lookup is two loads, no branches.
 */
#ifndef ENG_UNICODE_H
#define ENG_UNICODE_H

#include <stdint.h>

enum {
    ENG_UNI_L = 1,   /* letter: Lu Ll Lt Lm Lo */
    ENG_UNI_N = 2,   /* number: Nd Nl No */
    ENG_UNI_M = 4,   /* mark: Mn Mc Me */
    ENG_UNI_WS = 8,  /* White_Space (25 code points) */
    ENG_UNI_P = 16,  /* punctuation: Pc Pd Ps Pe Pi Pf Po */
    ENG_UNI_S = 32,  /* symbol: Sm Sc Sk So */
};

extern const uint16_t eng_unicode_stage1[0x110000 / 256];
extern const uint8_t eng_unicode_stage2[][256];

/* Property flags of cp (0 for cp > U+10FFFF). */
static inline uint8_t eng_unicode_flags(uint32_t cp) {
    if (cp >= 0x110000) return 0;
    return eng_unicode_stage2[eng_unicode_stage1[cp >> 8]][cp & 0xFF];
}

#endif /* ENG_UNICODE_H */
