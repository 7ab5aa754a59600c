/*
 * rng.h - splitmix64, the one seeding step docpipe uses wherever it needs reproducible numbers
 * from a 64-bit seed (the sampler's xoshiro state, random test-model weights, per-request seeds).
 * Changing it changes every seeded output: tests pin its values.
 */
#ifndef DP_RNG_H
#define DP_RNG_H

#include <stdint.h>

/* Advances *state and returns the next 64-bit value (Steele, Lea and Flood, 2014). */
static inline uint64_t dp_splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

#endif /* DP_RNG_H */
