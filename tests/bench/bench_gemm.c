/*
 * bench_gemm.c - one thread's GEMM throughput for a weight type, shape and token count: the
 * kernel eng_gemm_best picks (AMX where the CPU has it, else AVX-512), or the AVX-512 one with
 * --no-amx (--no-avx512: the AVX2 kernels). Weights of M matrices (--mats M) are cycled, so with
 * enough of them they come from DRAM as in a real step instead of staying in L2/L3. Best of the
 * repetitions, then the mean: on a shared VM the two can differ by 2x (a neighbour on the host
 * core), and the engine's matmuls run at the mean, not the best.
 *
 *   bench_gemm q4_k 2560 9728 16            # one qwen3 ffn_up, 16 tokens (a 16-sequence step)
 *   bench_gemm q6_k 2560 32768 16 --mats 24 # 24 x 62 MB: from DRAM
 *   bench_gemm q4_k 2560 9728 512 --no-amx  # a 512-token prompt piece, AVX-512
 *   bench_gemm q4_k 2560 9728 1 --dot --mats 24  # one-sequence decode: four rows a call, as the engine
 *   bench_gemm q4_k 2560 512 1 --dot --one-row   # the same, one row a call
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "platform.h"
#include "quant.h"
#include "rng.h"

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: bench_gemm q4_k|q5_k|q6_k|q8_0|q4_0|q5_0 K N TOKENS [--reps R] [--mats M] [--no-amx]\n"
                        "                  [--no-avx512] [--dot [--one-row]]\n");
        return 64;
    }
    const char *tn = argv[1];
    const int wt = !strcmp(tn, "q4_k")   ? ENG_TYPE_Q4_K
                   : !strcmp(tn, "q5_k") ? ENG_TYPE_Q5_K
                   : !strcmp(tn, "q6_k") ? ENG_TYPE_Q6_K
                   : !strcmp(tn, "q8_0") ? ENG_TYPE_Q8_0
                   : !strcmp(tn, "q4_0") ? ENG_TYPE_Q4_0
                   : !strcmp(tn, "q5_0") ? ENG_TYPE_Q5_0
                                         : -1;
    const int64_t K = atoll(argv[2]), N = atoll(argv[3]);
    const int T = atoi(argv[4]);
    int reps = 5, mats = 1;
    bool dot = false, one_row = false;
    for (int i = 5; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--mats") && i + 1 < argc) mats = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--no-amx")) eng_cpu_disable_amx(true);
        else if (!strcmp(argv[i], "--no-avx512")) eng_cpu_disable_avx512(true);
        else if (!strcmp(argv[i], "--dot")) dot = true;
        else if (!strcmp(argv[i], "--one-row")) one_row = true;
        else {
            fprintf(stderr, "bench_gemm: unknown option '%s'\n", argv[i]);
            return 64;
        }
    }
    if (wt < 0 || K <= 0 || K % 256 || N <= 0 || T <= 0 || reps <= 0 || mats <= 0) {
        fprintf(stderr,
                "bench_gemm: need a type of q4_k, q5_k, q6_k, q8_0, q4_0, q5_0, K a multiple of 256, N, TOKENS > 0\n");
        return 64;
    }
    const eng_gemm_fn gemm = eng_gemm_best(wt);
    const eng_vec_dot_fn vdot = eng_vec_dot_best(wt);
    const eng_vec_dot4r_fn vdot4r = one_row ? NULL : eng_vec_dot4r_best(wt);
    const eng_vec_dot_pf_fn vdot_pf = eng_vec_dot_pf_best(wt);
    if (dot ? !vdot : !gemm) {
        fprintf(stderr, "bench_gemm: this CPU has no %s kernel for %s\n", dot ? "row dot" : "GEMM", tn);
        return 1;
    }
    const int act = eng_act_type(wt);
    const size_t rb = eng_row_size(wt, K), xs = eng_act_row_size(act, K);
    const int64_t ahead = (int64_t)((eng_vec_dot_pf_lead() + rb - 1) / rb), ahead4 = ahead > 4 ? ahead : 4;
    uint8_t *w = malloc(rb * (size_t)N * (size_t)mats), *x = malloc(xs * (size_t)T);
    float *f = malloc((size_t)K * sizeof(float)), *y = malloc((size_t)T * (size_t)N * sizeof(float));
    void *ws = malloc(eng_gemm_ws_size(K, T));
    if (!w || !x || !f || !y || !ws) {
        fprintf(stderr, "bench_gemm: out of memory\n");
        return 1;
    }
    uint64_t s = 1;
    /* 64 distinct rows quantized, the rest copies: the speed does not depend on the values */
    for (int64_t r = 0; r < N * mats; r++) {
        if (r < 64) {
            for (int64_t i = 0; i < K; i++) f[i] = (float)((double)(dp_splitmix64(&s) >> 11) / 9007199254740992.0 * 2 - 1);
            eng_quantize_row(wt, f, w + rb * (size_t)r, K);
        } else {
            memcpy(w + rb * (size_t)r, w + rb * (size_t)(r % 64), rb);
        }
    }
    for (int t = 0; t < T; t++) {
        for (int64_t i = 0; i < K; i++) f[i] = (float)((double)(dp_splitmix64(&s) >> 11) / 9007199254740992.0 * 2 - 1);
        eng_act_quantize(act, f, x + xs * (size_t)t, K);
    }
    if (!dot && eng_gemm_prep_best(wt)) eng_gemm_prep_best(wt)(x, xs, T, K);
    double best = 1e30, sum = 0;
    for (int r = 0; r < reps * mats; r++) {
        const uint64_t t0 = dp_time_ns();
        const uint8_t *wm = w + (size_t)(r % mats) * rb * (size_t)N;
        if (dot) /* each row fetching the one `ahead` rows on, as mm_rows has them */
            for (int t = 0; t < T; t++) {
                int64_t n = 0;
                if (vdot4r)
                    for (; n + 4 <= N; n += 4) {
                        const uint8_t *next = n + ahead4 + 4 <= N ? wm + rb * (size_t)(n + ahead4) : NULL;
                        vdot4r(K, wm + rb * (size_t)n, rb, x + xs * (size_t)t, next, &y[(size_t)t * N + n]);
                    }
                for (; n < N; n++) {
                    const uint8_t *row = wm + rb * (size_t)n, *next = n + ahead < N ? row + rb * (size_t)ahead : NULL;
                    const uint8_t *xt = x + xs * (size_t)t;
                    y[(size_t)t * N + n] = vdot_pf ? vdot_pf(K, row, xt, next) : vdot(K, row, xt);
                }
            }
        else
            gemm(K, wm, rb, 0, N, x, xs, T, y, (int)N, ws);
        const double dt = (double)(dp_time_ns() - t0) * 1e-9;
        if (dt < best) best = dt;
        sum += dt;
    }
    printf("%s %s%s K=%lld N=%lld tokens=%d mats=%d: %.3f ms, %.1f GMAC/s, %.2f GB/s of weights (mean %.3f ms)\n", tn,
           eng_cpu_kernel_name(), dot ? " row dots" : "", (long long)K, (long long)N, T, mats, best * 1e3, (double)K * (double)N * T / best * 1e-9,
           (double)rb * (double)N / best * 1e-9, sum / (reps * mats) * 1e3);
    free(w);
    free(x);
    free(f);
    free(y);
    free(ws);
    return 0;
}
