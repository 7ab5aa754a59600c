/*
 * sha256.h - SHA-256 (FIPS 180-4), streaming. Used for document hashes, custom_ids and
 * model/template fingerprints, so it must be exact; tests check the FIPS vectors.
 */
#ifndef DP_SHA256_H
#define DP_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct dp_sha256 {
    uint32_t h[8];      /* chaining state */
    uint64_t n_bytes;   /* total bytes absorbed */
    uint8_t buf[64];    /* partial block */
    size_t buf_len;     /* bytes in buf */
} dp_sha256;

void dp_sha256_init(dp_sha256 *s);
void dp_sha256_update(dp_sha256 *s, const void *data, size_t n);
void dp_sha256_final(dp_sha256 *s, uint8_t out[32]);
/* One-shot digest. */
void dp_sha256_digest(const void *data, size_t n, uint8_t out[32]);
/* Lower-case hex of a digest; hex must hold 65 bytes. */
void dp_sha256_hex(const uint8_t digest[32], char hex[65]);

#endif /* DP_SHA256_H */
