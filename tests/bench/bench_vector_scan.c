/*
 * bench_vector_scan.c - what `docpipe query` spends ranking: every stored vector scored against
 * the question (eng_scorer_dot) and the k best kept (pl_top_k), for N rows of DIM floats held in
 * memory as the query holds them. Prints the best and the median of the repetitions, and the read
 * bandwidth that implies (the scan reads N * DIM * 4 bytes).
 *
 *   bench_vector_scan                      # 100,000 x 1,024, k 10, all CPUs
 *   bench_vector_scan 100000 1024 --threads 1 --reps 30
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "platform.h"
#include "rank.h"
#include "rng.h"

static int cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    size_t n = 100000;
    int dim = 1024, threads = 0, reps = 20, k = 10, pos = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-k") && i + 1 < argc) k = atoi(argv[++i]);
        else if (pos == 0) n = (size_t)atoll(argv[i]), pos++;
        else if (pos == 1) dim = atoi(argv[i]), pos++;
        else {
            fprintf(stderr, "usage: bench_vector_scan [N] [DIM] [--threads T] [--reps R] [-k K]\n");
            return 64;
        }
    }
    float *rows = malloc(n * (size_t)dim * sizeof(float)), *q = malloc((size_t)dim * sizeof(float));
    float *scores = malloc(n * sizeof(float));
    size_t *best = malloc((size_t)k * sizeof(size_t));
    double *ms = malloc((size_t)reps * sizeof(double));
    if (!rows || !q || !scores || !best || !ms) {
        fprintf(stderr, "bench_vector_scan: out of memory for %zu x %d\n", n, dim);
        return 70;
    }
    uint64_t rng = 42;
    for (size_t i = 0; i < n * (size_t)dim; i++) rows[i] = (float)(dp_splitmix64(&rng) >> 40) / (float)(1 << 24) - 0.5f;
    for (int i = 0; i < dim; i++) q[i] = (float)(dp_splitmix64(&rng) >> 40) / (float)(1 << 24) - 0.5f;
    eng_scorer *s = NULL;
    dp_err err = {0};
    if (eng_scorer_new(threads, &s, &err)) {
        fprintf(stderr, "bench_vector_scan: %s\n", dp_err_msg(&err));
        return 70;
    }
    size_t sink = 0;
    for (int r = -1; r < reps; r++) { /* one warm-up */
        const uint64_t t0 = dp_time_ns();
        eng_scorer_dot(s, q, rows, n, dim, scores);
        sink += pl_top_k(scores, n, (size_t)k, best);
        const double t = (double)(dp_time_ns() - t0) / 1e6;
        if (r >= 0) ms[r] = t;
    }
    qsort(ms, (size_t)reps, sizeof(double), cmp_d);
    const double gb = (double)n * dim * 4 / 1e9;
    printf("vector scan: %zu x %d floats (%.0f MB), k %d, %d threads: best %.1f ms, median %.1f ms (%.1f GB/s at the "
           "median); top score %.4f\n", n, dim, gb * 1e3, k, threads ? threads : dp_cpu_count(), ms[0],
           ms[reps / 2], gb / (ms[reps / 2] / 1e3), (double)scores[best[0]]);
    eng_scorer_free(s);
    free(rows);
    free(q);
    free(scores);
    free(best);
    free(ms);
    return sink ? 0 : 1;
}
