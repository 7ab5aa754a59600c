/*
 * bench_int8_peak.c - this CPU's ceiling for int8 products: 512-bit vpdpbusd (64 multiply-adds)
 * with 12 independent accumulators, one thread, and the tokens/s that ceiling allows a model of
 * MACS multiply-adds per token (argument, in billions; default 3.63: a qwen3-4B-shaped model
 * without its output head, as a prompt of many tokens runs it). It puts `docpipe bench`'s pp
 * figure in proportion: pp / (ceiling x threads) is the share of the machine the GEMM uses.
 *
 *   tests/bench/bench_int8_peak [GMACS_PER_TOKEN]
 *
 * Not a test: on CPUs without AVX-512 VNNI it says so and exits 0.
 */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>

#include "platform.h"

static double now(void) { return (double)dp_time_ns() * 1e-9; }

__attribute__((target("avx512f,avx512vnni"))) static double vnni_macs_per_s(void) {
    __m512i a[12];
    for (int j = 0; j < 12; j++) a[j] = _mm512_set1_epi32(j);
    const __m512i b = _mm512_set1_epi8(3), c = _mm512_set1_epi8(5);
    const long n = 20000000;
    const double t0 = now();
    for (long i = 0; i < n; i++) {
#pragma GCC unroll 12
        for (int j = 0; j < 12; j++) a[j] = _mm512_dpbusd_epi32(a[j], b, c);
    }
    const double t = now() - t0;
    __m512i s = a[0];
    for (int j = 1; j < 12; j++) s = _mm512_add_epi32(s, a[j]);
    volatile int sink = _mm512_reduce_add_epi32(s);
    (void)sink;
    return (double)n * 12 * 64 / t;
}

int main(int argc, char **argv) {
    const double gmacs = argc > 1 ? atof(argv[1]) : 3.63;
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512vnni") || !__builtin_cpu_supports("avx512f")) {
        printf("this CPU has no AVX-512 VNNI\n");
        return 0;
    }
    double best = 0;
    for (int r = 0; r < 3; r++) {
        const double v = vnni_macs_per_s();
        best = v > best ? v : best;
    }
    printf("vpdpbusd zmm, 1 thread: %.1f G int8 multiply-adds/s (%.0f GOPS)\n", best / 1e9, 2 * best / 1e9);
    printf("ceiling for %.2f G multiply-adds per token: %.1f tok/s per thread\n", gmacs, best / (gmacs * 1e9));
    return 0;
}
