/*
 * utf8.h - UTF-8 decoding, encoding, validation and repair.
 *
 * Decoding is strict (RFC 3629): no overlong forms, no surrogates, nothing above U+10FFFF.
 * An invalid sequence decodes as U+FFFD consuming the maximal subpart that could have
 * started a valid sequence (at least one byte), the practice Unicode recommends (ch. 3, U+FFFD
 * substitution), so repair is deterministic and never skips a valid character.
 */
#ifndef DP_UTF8_H
#define DP_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DP_UTF8_REPLACEMENT 0xFFFDu

/* Decodes one code point from s[0..n) (n >= 1) into *cp and returns the bytes consumed (1..4).
 * Sets *valid to false (and *cp to U+FFFD) for an invalid or truncated sequence. */
size_t dp_utf8_decode(const uint8_t *s, size_t n, uint32_t *cp, bool *valid);
/* Encodes cp into out (4 bytes); returns the length, or 0 for a surrogate or > U+10FFFF. */
size_t dp_utf8_encode(uint32_t cp, uint8_t out[4]);
/* True when s[0..n) is entirely valid UTF-8. */
bool dp_utf8_valid(const uint8_t *s, size_t n);
/* Length of a sequence from its lead byte (1..4), or 0 if b cannot start one. */
size_t dp_utf8_seq_len(uint8_t lead);
/* For streaming: the number of trailing bytes of s[0..n) that form the valid beginning of a
 * multi-byte character not yet complete (0..3). Emit s[0..n-k) now and hold the k bytes. */
size_t dp_utf8_incomplete_tail(const uint8_t *s, size_t n);
/* Writes a repaired copy of in to out (capacity >= 3 * n bytes suffices) and returns its
 * length; every invalid sequence becomes U+FFFD. *n_replaced (may be NULL) counts them. */
size_t dp_utf8_repair(const uint8_t *in, size_t n, uint8_t *out, size_t *n_replaced);

#endif /* DP_UTF8_H */
