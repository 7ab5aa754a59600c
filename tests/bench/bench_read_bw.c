/*
 * bench_read_bw.c - this machine's memory read bandwidth, 1 thread up to N, with the engine's
 * own probe (eng_read_bandwidth, engine/read_bandwidth.c): the ceiling of one-sequence decode,
 * which reads every weight once per token. `docpipe bench` measures it again with its thread
 * count and prints tg as a share of that ceiling; this shows how the ceiling grows with threads.
 *
 *   tests/bench/bench_read_bw [MAX_THREADS] [MIB]     (defaults: every CPU, 1024 MiB)
 *
 * Not a test: run it on an idle machine.
 */
#include <stdio.h>
#include <stdlib.h>

#include "engine.h"
#include "platform.h"

int main(int argc, char **argv) {
    const int max_t = argc > 1 ? atoi(argv[1]) : dp_cpu_count();
    const size_t mib = argc > 2 ? (size_t)atoi(argv[2]) : 1024;
    printf("read bandwidth, streaming %zu MiB, best of 3 passes\n", mib);
    for (int t = 1; t <= (max_t > 0 ? max_t : 1); t++) {
        const double bw = eng_read_bandwidth(t, mib << 20);
        if (bw <= 0) {
            fprintf(stderr, "cannot allocate %zu MiB\n", mib);
            return 1;
        }
        printf("%3d thread%s %8.2f GB/s\n", t, t > 1 ? "s" : " ", bw / 1e9);
    }
    return 0;
}
