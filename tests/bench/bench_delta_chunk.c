/*
 * bench_delta_chunk.c - one thread's chunk-wise Gated DeltaNet update (the prompt path of a
 * qwen35 linear-attention layer) for one value head: the portable form, and the kernel the
 * dispatcher picks with AVX-512 off and on. The flop count is that of the products the chunk
 * form needs (K K^T, Q K^T, T V, T K, W S, Q S, QK Vt, K^T Vt: 2 c (2 c dk + c dv + 3 dk dv + ...)
 * written out below), so the GFLOP/s of the three are comparable. Best of the repetitions.
 *
 *   bench_delta_chunk               # c = 64 tokens, dk = dv = 128 (Qwen3.5-4B)
 *   bench_delta_chunk 64 128 128 2000
 *   bench_delta_chunk 64 128 128 500 -2   # a fast-forgetting head: gate -2 a token
 *
 * The gate (log-decay a token, default -0.05) matters: from about -1.4 a token the decays
 * within a chunk reach below 2^-126, where subnormal arithmetic would cost microcode assists.
 */
#include <stdio.h>
#include <stdlib.h>

#include "kernels.h"
#include "platform.h"
#include "rng.h"

static double run(eng_delta_chunk_fn f, int c, const float *const *q, const float *const *k, const float *const *v,
                  const float *beta, const float *g, float *S, int dk, int dv, float *O, float *ws, int reps) {
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        const uint64_t t0 = dp_time_ns();
        f(c, q, k, v, beta, g, S, dk, dv, O, ws);
        const double dt = (double)(dp_time_ns() - t0) * 1e-9;
        if (dt < best) best = dt;
    }
    return best;
}

int main(int argc, char **argv) {
    const int c = argc > 1 ? atoi(argv[1]) : ENG_DELTA_CHUNK, dk = argc > 2 ? atoi(argv[2]) : 128,
              dv = argc > 3 ? atoi(argv[3]) : 128, reps = argc > 4 ? atoi(argv[4]) : 500;
    const float gate = argc > 5 ? (float)atof(argv[5]) : -0.05f;
    if (c < 1 || c > ENG_DELTA_CHUNK || dk < 1 || dv < 1 || reps < 1 || !(gate <= 0.0f)) {
        fprintf(stderr, "usage: bench_delta_chunk [C (1..%d) [DK DV [REPS [GATE <= 0]]]]\n", ENG_DELTA_CHUNK);
        return 64;
    }
    float *x = malloc((size_t)c * (2 * dk + dv) * sizeof(float)), *S = malloc((size_t)dk * dv * sizeof(float));
    float *O = malloc((size_t)ENG_DELTA_CHUNK * dv * sizeof(float));
    float *ws = malloc(ENG_DELTA_CHUNK_WS(ENG_DELTA_CHUNK, dk, dv) * sizeof(float));
    if (!x || !S || !O || !ws) {
        fprintf(stderr, "bench_delta_chunk: out of memory\n");
        return 1;
    }
    const float *q[ENG_DELTA_CHUNK], *k[ENG_DELTA_CHUNK], *v[ENG_DELTA_CHUNK];
    float beta[ENG_DELTA_CHUNK], g[ENG_DELTA_CHUNK];
    uint64_t s = 1;
    for (size_t i = 0; i < (size_t)c * (2 * dk + dv); i++)
        x[i] = (float)((double)(dp_splitmix64(&s) >> 11) / 9007199254740992.0 * 0.2 - 0.1);
    for (int r = 0; r < c; r++) {
        q[r] = x + (size_t)r * (2 * dk + dv);
        k[r] = q[r] + dk;
        v[r] = k[r] + dk;
        beta[r] = 0.5f;
        g[r] = gate;
    }
    for (size_t i = 0; i < (size_t)dk * dv; i++) S[i] = 0;
    /* K K^T, Q K^T (c c dk each), T V, T K (c c dv, c c dk), W S, Q S (c dk dv each), QK Vt
     * (c c dv), K^T Vt (c dk dv): multiply-adds, counted whole (the kernels skip some zeros) */
    const double flops = 2.0 * c * ((double)c * (3 * dk + 2 * dv) + 3.0 * dk * dv);
    const char *names[3] = {"portable", "avx2", "avx512"};
    for (int pass = 0; pass < 3; pass++) {
        eng_cpu_force_scalar(pass == 0);
        eng_cpu_disable_avx512(pass == 1);
        const eng_delta_chunk_fn f = pass == 0 ? eng_delta_chunk_ref : eng_delta_chunk_best();
        const double t = run(f, c, q, k, v, beta, g, S, dk, dv, O, ws, pass == 0 ? reps / 10 + 1 : reps);
        printf("delta chunk c=%d dk=%d dv=%d gate %g %-8s (%s): %8.1f us, %6.1f GFLOP/s\n", c, dk, dv, (double)gate,
               names[pass], eng_cpu_kernel_name(), t * 1e6, flops / t * 1e-9);
    }
    eng_cpu_force_scalar(false);
    eng_cpu_disable_avx512(false);
    free(x);
    free(S);
    free(O);
    free(ws);
    return 0;
}
