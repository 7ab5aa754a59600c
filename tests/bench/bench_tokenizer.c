/*
 * bench_tokenizer.c - single-thread tokenizer throughput (a benchmark, not a test).
 *
 *   build/tests/bench_tokenizer MODEL.gguf [--mb N] [--write-corpus FILE]
 *
 * Tokenizes a deterministic synthetic corpus (tests/bench/corpus.c: 40% English, 30% Chinese,
 * 30% source code by bytes) one document at a time, as the chunker does, and prints MB/s for
 * it and for hostile inputs: random bytes (invalid UTF-8), NUL-heavy text, 100 MB of one
 * repeated letter, and 1 MB without whitespace. --write-corpus saves the corpus so the same
 * bytes can be given to llama-tokenize for the side-by-side figure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "corpus.h"
#include "engine.h"
#include "tokenizer.h"
#include "platform.h"

static double run(const eng_tokenizer *t, const char *s, size_t n, size_t doc, size_t *n_tok) {
    eng_tok_ws *ws;
    eng_tok_ws_new(&ws);
    eng_tokens ids = {0};
    dp_err err = {0};
    *n_tok = 0;
    uint64_t t0 = dp_time_ns();
    for (size_t off = 0; off < n;) {
        size_t len = n - off < doc ? n - off : doc;
        /* end documents at a line break, like files */
        if (off + len < n) {
            const char *nl = memchr(s + off + len, '\n', n - off - len);
            len = nl ? (size_t)(nl - (s + off)) + 1 : n - off;
        }
        ids.n = 0;
        if (eng_tokenize(t, ws, s + off, len, false, false, &ids, &err)) {
            fprintf(stderr, "tokenize failed: %s\n", err.msg);
            exit(1);
        }
        *n_tok += ids.n;
        off += len;
    }
    double sec = (double)(dp_time_ns() - t0) / 1e9;
    eng_tokens_free(&ids);
    eng_tok_ws_free(ws);
    return (double)n / 1e6 / sec;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_tokenizer MODEL.gguf [--mb N] [--write-corpus FILE]\n");
        return 64;
    }
    size_t mb = 24;
    const char *write = NULL;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--mb") && i + 1 < argc) mb = (size_t)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--write-corpus") && i + 1 < argc) write = argv[++i];
    }
    dp_err err = {0};
    eng_gguf *g;
    eng_tokenizer *t;
    if (eng_gguf_open(argv[1], &g, &err) || eng_tokenizer_load(g, &t, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 78;
    }
    eng_gguf_close(g);
    size_t n, ntok;
    char *c = corpus_make(CORPUS_MIXED, mb << 20, 1234, &n);
    if (write) {
        FILE *f = fopen(write, "wb");
        if (!f || fwrite(c, 1, n, f) != n || fclose(f)) {
            perror(write);
            return 73;
        }
    }
    printf("model %s, pre-tokenizer %s, single thread\n", argv[1], eng_tokenizer_pre(t));
    double r = run(t, c, n, 16384, &ntok);
    printf("%-44s %8.2f MB in %9zu tokens  %8.2f MB/s\n", "mixed corpus (40% en, 30% zh, 30% code)", n / 1e6, ntok, r);
    printf("%-44s %8.2f MB in %9zu tokens  %8.2f MB/s\n", "mixed corpus, one call for the whole text", n / 1e6, ntok,
           run(t, c, n, n, &ntok));
    free(c);
    const struct { corpus_kind k; const char *name; } kinds[] = {
        {CORPUS_ENGLISH, "English prose"}, {CORPUS_CHINESE, "Chinese prose"}, {CORPUS_CODE, "source code"}};
    for (int k = 0; k < 3; k++) {
        c = corpus_make(kinds[k].k, 8 << 20, 99, &n);
        r = run(t, c, n, 16384, &ntok);
        printf("%-44s %8.2f MB in %9zu tokens  %8.2f MB/s\n", kinds[k].name, n / 1e6, ntok, r);
        free(c);
    }
    uint64_t s = 7;
    n = 8 << 20;
    c = malloc(n);
    for (size_t i = 0; i < n; i++) c[i] = (char)((s = s * 6364136223846793005ull + 1442695040888963407ull) >> 56);
    r = run(t, c, n, 16384, &ntok);
    printf("%-44s %8.2f MB in %9zu tokens  %8.2f MB/s\n", "random bytes (invalid UTF-8, NULs)", n / 1e6, ntok, r);
    for (size_t i = 0; i < n; i++) c[i] = (i % 7 == 0) ? '\0' : (char)('a' + i % 26);
    r = run(t, c, n, 16384, &ntok);
    printf("%-44s %8.2f MB in %9zu tokens  %8.2f MB/s\n", "text with NUL bytes", n / 1e6, ntok, r);
    free(c);
    n = 100u << 20;
    c = malloc(n);
    memset(c, 'a', n);
    r = run(t, c, n, n, &ntok);
    printf("%-44s %8.2f MB in %9zu tokens  %8.2f MB/s\n", "100 MB of one repeated letter", n / 1e6, ntok, r);
    n = 1u << 20;
    for (size_t i = 0; i < n; i++) c[i] = (char)('!' + (s = s * 6364136223846793005ull + 1) % 94);
    r = run(t, c, n, n, &ntok);
    printf("%-44s %8.2f MB in %9zu tokens  %8.2f MB/s\n", "1 MB without whitespace (printable ASCII)", n / 1e6, ntok,
           r);
    free(c);
    eng_tokenizer_free(t);
    return 0;
}
