/*
 * rank.h - ranking for retrieval (docpipe query): the k best of many scores, and reciprocal
 * rank fusion of several ranked lists (vector similarity and BM25 with --hybrid).
 */
#ifndef PL_RANK_H
#define PL_RANK_H

#include <stddef.h>
#include <stdint.h>

/* The k constant of reciprocal rank fusion: a list's item at rank r (1-based) adds 1 / (60 + r). */
#define PL_RRF_K 60

/* Indexes of the min(k, n) highest scores, best first (a tie: the lower index first). O(n log k). */
size_t pl_top_k(const float *scores, size_t n, size_t k, size_t *out);

/* Fuses n_lists ranked lists of ids (best first) by reciprocal rank fusion; the k best ids into
 * out_ids with their fused scores, best first (a tie: the id met first, list by list). */
size_t pl_rrf(const int64_t *const *lists, const size_t *lens, size_t n_lists, size_t k, int64_t *out_ids,
              double *out_scores);

#endif /* PL_RANK_H */
