/*
 * utf8.c - strict UTF-8 (RFC 3629) with U+FFFD repair by maximal subpart.
 *
 * DESIGN: the valid ranges of the second byte depend on the lead byte (E0: A0..BF, ED: 80..9F,
 * F0: 90..BF, F4: 80..8F); checking them up front is what rejects overlongs and surrogates
 * without decoding first. Pure functions, no state.
 */
#include "utf8.h"

size_t dp_utf8_seq_len(uint8_t b) {
    if (b < 0x80) return 1;
    if (b >= 0xC2 && b <= 0xDF) return 2;
    if (b >= 0xE0 && b <= 0xEF) return 3;
    if (b >= 0xF0 && b <= 0xF4) return 4;
    return 0;
}

/* Valid range of the second byte for a given lead byte. */
static void second_range(uint8_t lead, uint8_t *lo, uint8_t *hi) {
    *lo = 0x80;
    *hi = 0xBF;
    if (lead == 0xE0) *lo = 0xA0;
    else if (lead == 0xED) *hi = 0x9F;
    else if (lead == 0xF0) *lo = 0x90;
    else if (lead == 0xF4) *hi = 0x8F;
}

size_t dp_utf8_decode(const uint8_t *s, size_t n, uint32_t *cp, bool *valid) {
    uint8_t b = s[0];
    size_t len = dp_utf8_seq_len(b);
    *valid = false;
    *cp = DP_UTF8_REPLACEMENT;
    if (len == 1) {
        *cp = b;
        *valid = true;
        return 1;
    }
    if (len == 0) return 1;
    uint8_t lo, hi;
    second_range(b, &lo, &hi);
    if (n < 2 || s[1] < lo || s[1] > hi) return 1;
    uint32_t c = b & (0xFF >> (len + 1));
    c = (c << 6) | (s[1] & 0x3F);
    for (size_t i = 2; i < len; i++) {
        if (i >= n || (s[i] & 0xC0) != 0x80) return i; /* maximal subpart so far */
        c = (c << 6) | (s[i] & 0x3F);
    }
    *cp = c;
    *valid = true;
    return len;
}

size_t dp_utf8_encode(uint32_t cp, uint8_t out[4]) {
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | (cp >> 6));
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp >= 0xD800 && cp <= 0xDFFF) return 0;
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | (cp >> 12));
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    if (cp <= 0x10FFFF) {
        out[0] = (uint8_t)(0xF0 | (cp >> 18));
        out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
        out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[3] = (uint8_t)(0x80 | (cp & 0x3F));
        return 4;
    }
    return 0;
}

bool dp_utf8_valid(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        uint32_t cp;
        bool ok;
        i += dp_utf8_decode(s + i, n - i, &cp, &ok);
        if (!ok) return false;
    }
    return true;
}

size_t dp_utf8_incomplete_tail(const uint8_t *s, size_t n) {
    /* Look back at most 3 bytes for a lead byte whose sequence runs past the end. */
    for (size_t k = 1; k <= 3 && k <= n; k++) {
        uint8_t b = s[n - k];
        if ((b & 0xC0) == 0x80) continue; /* continuation: keep looking for the lead */
        size_t len = dp_utf8_seq_len(b);
        if (len <= k) return 0; /* complete (or invalid) */
        /* the bytes present must be a valid prefix */
        uint32_t cp;
        bool ok;
        size_t used = dp_utf8_decode(s + n - k, k, &cp, &ok);
        return used == k ? k : 0;
    }
    return 0;
}

size_t dp_utf8_repair(const uint8_t *in, size_t n, uint8_t *out, size_t *n_replaced) {
    size_t i = 0, o = 0, bad = 0;
    while (i < n) {
        if (in[i] < 0x80) {
            out[o++] = in[i++];
            continue;
        }
        uint32_t cp;
        bool ok;
        size_t used = dp_utf8_decode(in + i, n - i, &cp, &ok);
        if (ok) {
            for (size_t k = 0; k < used; k++) out[o++] = in[i + k];
        } else {
            out[o++] = 0xEF;
            out[o++] = 0xBF;
            out[o++] = 0xBD;
            bad++;
        }
        i += used;
    }
    if (n_replaced) *n_replaced = bad;
    return o;
}
