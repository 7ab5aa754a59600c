/*
 * replay_main.c - runs a fuzz target without libFuzzer: every file in the corpus folders
 * given on the command line, then 20,000 deterministic mutations of them (byte flips,
 * truncations, splices, and "interesting" 8-byte values written over length fields). Built
 * with ASan+UBSan in CI, this is the corpus replay the fuzzing policy asks for.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct blob {
    uint8_t *p;
    size_t n;
} blob;

static uint64_t rng(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void run_exact(const uint8_t *p, size_t n) {
    uint8_t *copy = malloc(n ? n : 1); /* exact size, so ASan sees over-reads */
    if (!copy) abort();
    memcpy(copy, p, n);
    LLVMFuzzerTestOneInput(copy, n);
    free(copy);
}

int main(int argc, char **argv) {
    blob *seeds = NULL;
    size_t n_seeds = 0;
    for (int a = 1; a < argc; a++) {
        DIR *d = opendir(argv[a]);
        if (!d) {
            fprintf(stderr, "cannot open corpus %s\n", argv[a]);
            return 1;
        }
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            char path[4096];
            snprintf(path, sizeof(path), "%s/%s", argv[a], e->d_name);
            FILE *f = fopen(path, "rb");
            if (!f) continue;
            seeds = realloc(seeds, (n_seeds + 1) * sizeof(*seeds));
            blob *b = &seeds[n_seeds++];
            fseek(f, 0, SEEK_END);
            long len = ftell(f);
            fseek(f, 0, SEEK_SET);
            b->n = len > 0 ? (size_t)len : 0;
            b->p = malloc(b->n + 1);
            if (fread(b->p, 1, b->n, f) != b->n) b->n = 0;
            fclose(f);
            run_exact(b->p, b->n);
        }
        closedir(d);
    }
    if (!n_seeds) {
        fprintf(stderr, "no corpus files found\n");
        return 1;
    }
    static const uint64_t interesting[] = {0, 1, 0x7F, 0xFF, 0x7FFFFFFF, 0xFFFFFFFF, 0x100000000ull,
                                           0x7FFFFFFFFFFFFFFFull, 0xFFFFFFFFFFFFFFFFull, 1ull << 62, 64, 65};
    uint64_t s = 20260101;
    long runs = 0;
    for (int i = 0; i < 20000; i++) {
        const blob *src = &seeds[rng(&s) % n_seeds];
        size_t n = src->n;
        uint8_t *p = malloc(n + 16);
        memcpy(p, src->p, n);
        switch (rng(&s) % 4) {
        case 0: /* byte flips */
            for (int k = 0, m = 1 + (int)(rng(&s) % 4); k < m && n; k++) p[rng(&s) % n] ^= (uint8_t)rng(&s);
            break;
        case 1: /* truncation */
            n = n ? rng(&s) % n : 0;
            break;
        case 2: /* an interesting value over 8 bytes */
            if (n >= 8) {
                uint64_t v = interesting[rng(&s) % (sizeof(interesting) / sizeof(interesting[0]))];
                memcpy(p + rng(&s) % (n - 7), &v, (rng(&s) & 1) ? 8 : 4);
            }
            break;
        default: { /* splice a chunk of another seed */
            const blob *o = &seeds[rng(&s) % n_seeds];
            if (o->n && n) {
                size_t off = rng(&s) % n, from = rng(&s) % o->n, len = rng(&s) % 64;
                if (off + len > n) len = n - off;
                if (from + len > o->n) len = o->n - from;
                memcpy(p + off, o->p + from, len);
            }
        }
        }
        run_exact(p, n);
        free(p);
        runs++;
    }
    printf("replayed %zu corpus files and %ld mutations: no crash\n", n_seeds, runs);
    for (size_t i = 0; i < n_seeds; i++) free(seeds[i].p);
    free(seeds);
    return 0;
}
