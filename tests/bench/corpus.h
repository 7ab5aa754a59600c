/*
 * corpus.h - a deterministic synthetic corpus for tokenizer and chunker benchmarks: English
 * prose, Chinese prose and source code in fixed proportions, generated from a seed.
 */
#ifndef DP_BENCH_CORPUS_H
#define DP_BENCH_CORPUS_H

#include <stddef.h>
#include <stdint.h>

typedef enum { CORPUS_MIXED, CORPUS_ENGLISH, CORPUS_CHINESE, CORPUS_CODE } corpus_kind;

/* Fills a new buffer (free()) with about n bytes of the kind; *out_len gets the exact size.
 * MIXED interleaves documents of ~4-16 KB: 40% English, 30% Chinese, 30% code by bytes. */
char *corpus_make(corpus_kind kind, size_t n, uint64_t seed, size_t *out_len);

#endif
