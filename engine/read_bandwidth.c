/*
 * read_bandwidth.c - how fast this machine's threads read memory: the ceiling of decoding one
 * sequence, which reads every weight once per token (docs/engine.md, "Decode and the memory
 * roofline").
 *
 * DESIGN: a buffer far larger than the last-level cache, touched once (so its pages exist),
 * then read front to back by n threads in contiguous slices, each summing 64-bit words into
 * eight independent chains: no store traffic, and enough loads in flight for the hardware
 * prefetcher to keep DRAM busy. The loads are plain C: DRAM, not the load width, is the limit
 * (a thread issues 2-3 loads of 8 bytes per cycle, several times what a memory channel
 * delivers), so the figure holds for every instruction set. The best of three passes counts.
 */
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "parallel.h"
#include "platform.h"

typedef struct pass {
    const uint64_t *words;
    uint64_t sums[256]; /* one per slice, read back so the loads cannot be dropped */
    int64_t slice;
} pass;

static void read_slice(void *ctx, int64_t lo, int64_t hi) {
    pass *p = ctx;
    for (int64_t s = lo; s < hi; s++) {
        const uint64_t *w = p->words + (size_t)s * (size_t)p->slice;
        uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
        for (int64_t i = 0; i < p->slice; i += 8) {
            a0 += w[i], a1 += w[i + 1], a2 += w[i + 2], a3 += w[i + 3];
            a4 += w[i + 4], a5 += w[i + 5], a6 += w[i + 6], a7 += w[i + 7];
        }
        p->sums[s & 255] = a0 ^ a1 ^ a2 ^ a3 ^ a4 ^ a5 ^ a6 ^ a7;
    }
}

double eng_read_bandwidth(int n_threads, size_t bytes) {
    if (n_threads < 1) n_threads = dp_cpu_count();
    if (bytes < ((size_t)64 << 20)) bytes = (size_t)64 << 20;
    /* n_threads slices, each a whole number of 64-byte groups */
    const int64_t n_slices = n_threads;
    const int64_t slice = (int64_t)(bytes / 8 / (size_t)n_slices) & ~(int64_t)7;
    uint64_t *words = malloc((size_t)(slice * n_slices) * 8);
    if (!words) return 0;
    for (int64_t i = 0; i < slice * n_slices; i++) words[i] = (uint64_t)i;
    pass p = {words, {0}, slice};
    double best = 0;
    for (int r = 0; r < 3; r++) {
        const uint64_t t0 = dp_time_ns();
        if (eng_parallel_for(n_threads, n_slices, read_slice, &p, NULL)) break;
        const double s = (double)(dp_time_ns() - t0) * 1e-9;
        const double rate = (double)(slice * n_slices) * 8 / (s > 0 ? s : 1e-9);
        if (rate > best) best = rate;
    }
    volatile uint64_t sink = 0;
    for (int i = 0; i < 256; i++) sink ^= p.sums[i];
    (void)sink;
    free(words);
    return best;
}
