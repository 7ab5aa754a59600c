/*
 * rank.c - top-k selection and reciprocal rank fusion (rank.h).
 */
#include <stdbool.h>
#include <stdlib.h>

#include "rank.h"

/* a worse than b: lower score, or the same score and a later index */
static bool worse(const float *s, size_t a, size_t b) { return s[a] < s[b] || (s[a] == s[b] && a > b); }

/* heap[0] is the worst of the k kept so far */
static void sift_down(const float *s, size_t *h, size_t n, size_t i) {
    for (;;) {
        size_t w = i, l = 2 * i + 1, r = l + 1;
        if (l < n && worse(s, h[l], h[w])) w = l;
        if (r < n && worse(s, h[r], h[w])) w = r;
        if (w == i) return;
        size_t t = h[i];
        h[i] = h[w], h[w] = t;
        i = w;
    }
}

size_t pl_top_k(const float *scores, size_t n, size_t k, size_t *out) {
    if (k > n) k = n;
    if (!k) return 0;
    for (size_t i = 0; i < k; i++) out[i] = i;
    for (size_t i = k / 2; i-- > 0;) sift_down(scores, out, k, i);
    for (size_t i = k; i < n; i++)
        if (worse(scores, out[0], i)) {
            out[0] = i;
            sift_down(scores, out, k, 0);
        }
    /* heap to best-first: take the worst off the end each time */
    for (size_t m = k; m > 1; m--) {
        size_t t = out[0];
        out[0] = out[m - 1], out[m - 1] = t;
        sift_down(scores, out, m - 1, 0);
    }
    return k;
}

size_t pl_rrf(const int64_t *const *lists, const size_t *lens, size_t n_lists, size_t k, int64_t *out_ids,
              double *out_scores) {
    size_t total = 0;
    for (size_t l = 0; l < n_lists; l++) total += lens[l];
    int64_t *ids = malloc((total ? total : 1) * sizeof(int64_t));
    double *sc = malloc((total ? total : 1) * sizeof(double));
    size_t n = 0;
    if (!ids || !sc) {
        free(ids);
        free(sc);
        return 0;
    }
    /* lists are short (a few hundred ids): a linear search per id is enough */
    for (size_t l = 0; l < n_lists; l++)
        for (size_t r = 0; r < lens[l]; r++) {
            size_t j = 0;
            while (j < n && ids[j] != lists[l][r]) j++;
            if (j == n) ids[n] = lists[l][r], sc[n++] = 0;
            sc[j] += 1.0 / (double)(PL_RRF_K + r + 1);
        }
    size_t m = 0;
    for (; m < k && m < n; m++) { /* stable selection (k is small): the best left moves up, the rest keep order */
        size_t b = m;
        for (size_t j = m + 1; j < n; j++)
            if (sc[j] > sc[b]) b = j;
        const int64_t bi = ids[b];
        const double bs = sc[b];
        for (size_t j = b; j > m; j--) ids[j] = ids[j - 1], sc[j] = sc[j - 1];
        ids[m] = bi, sc[m] = bs;
        out_ids[m] = bi, out_scores[m] = bs;
    }
    free(ids);
    free(sc);
    return m;
}
