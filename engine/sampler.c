/*
 * sampler.c - see sampler.h.
 *
 * DESIGN: candidates are (id, logit) pairs; stages shrink the set. top-k uses a partial
 * selection (O(V) average) instead of a full sort, because V is 150-250k and a full sort per
 * token would cost more than a small model's forward pass. Ordering is by logit descending,
 * lower id first on ties, so results are deterministic. The RNG is a splitmix/xoshiro stream
 * seeded per sequence (model-formats.md §7.3: reproducibility of our own, not llama.cpp's streams).
 */
#include "engine.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__) || defined(_M_X64)
#include <emmintrin.h>
#endif

#include "compiler.h"
#include "rng.h"

typedef struct cand {
    int32_t id;
    float logit;
} cand;

struct eng_sampler {
    eng_sampler_params p;
    int32_t n_vocab;
    cand *c;              /* [n_vocab] */
    int32_t *hist;        /* ring of recent tokens */
    int32_t hist_cap, hist_n, hist_pos;
    int32_t *counts;      /* [n_vocab] occurrences in the window */
    uint64_t rng[4];
};

eng_sampler_params eng_sampler_default_params(void) {
    eng_sampler_params p = {.temp = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f, .repeat_penalty = 1.0f,
                            .penalty_last_n = 64, .seed = 0xFFFFFFFFu};
    return p;
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static double rand_unit(eng_sampler *s) { /* xoshiro256**, 53 bits in [0, 1) */
    uint64_t *r = s->rng;
    uint64_t res = rotl(r[1] * 5, 7) * 9, t = r[1] << 17;
    r[2] ^= r[0];
    r[3] ^= r[1];
    r[1] ^= r[2];
    r[0] ^= r[3];
    r[2] ^= t;
    r[3] = rotl(r[3], 45);
    return (double)(res >> 11) / 9007199254740992.0;
}

dp_status eng_sampler_new(const eng_sampler_params *p, int32_t n_vocab, eng_sampler **out, dp_err *err) {
    eng_sampler *s = calloc(1, sizeof(*s));
    if (!s) return dp_err_set(err, DP_ENOMEM, "out of memory");
    s->p = *p;
    s->n_vocab = n_vocab;
    s->c = malloc((size_t)n_vocab * sizeof(cand));
    s->counts = calloc((size_t)n_vocab, sizeof(int32_t));
    s->hist_cap = p->penalty_last_n > 0 ? p->penalty_last_n : p->penalty_last_n < 0 ? 1 << 20 : 1;
    s->hist = malloc((size_t)s->hist_cap * sizeof(int32_t));
    if (!s->c || !s->counts || !s->hist) {
        eng_sampler_free(s);
        return dp_err_set(err, DP_ENOMEM, "out of memory for a sampler");
    }
    uint64_t seed = p->seed;
    for (int i = 0; i < 4; i++) s->rng[i] = dp_splitmix64(&seed);
    *out = s;
    return DP_OK;
}

void eng_sampler_free(eng_sampler *s) {
    if (!s) return;
    free(s->c);
    free(s->counts);
    free(s->hist);
    free(s);
}

void eng_sampler_accept(eng_sampler *s, int32_t tok) {
    if (s->p.penalty_last_n == 0 || tok < 0 || tok >= s->n_vocab) return;
    if (s->hist_n == s->hist_cap) {
        s->counts[s->hist[s->hist_pos]]--;
        s->hist_n--;
    }
    s->hist[s->hist_pos] = tok;
    s->hist_pos = (s->hist_pos + 1) % s->hist_cap;
    s->hist_n++;
    s->counts[tok]++;
}

/* The first index of the largest value, as `if (l[i] > l[best]) best = i` gives it (a NaN never
 * wins; l[0] does when it is one). Per 4096-value piece, 16 independent lane maxima find the
 * piece's largest value, and only a piece that beats the best so far is searched for its first
 * index: one pass over the vocabulary at vector speed instead of a compare-and-branch per value
 * (the greedy step of every sequence reads all of it). */
int32_t eng_argmax(const float *l, int32_t n) {
    enum { PIECE = 4096, LANES = 16 };
    int32_t best = 0;
    float m = n > 0 ? l[0] : 0.0f;
    for (int32_t i0 = 0; i0 < n; i0 += PIECE) {
        const int32_t e = n - i0 < PIECE ? n : i0 + PIECE;
        float lane[LANES];
        int32_t i = i0;
#if defined(__SSE2__) || defined(_M_X64)
        /* maxps(x, m) is exactly x > m ? x : m, which compilers will not vectorize on their own */
        __m128 v0 = _mm_set1_ps(-INFINITY), v1 = v0, v2 = v0, v3 = v0;
        for (; i + LANES <= e; i += LANES) {
            v0 = _mm_max_ps(_mm_loadu_ps(l + i), v0);
            v1 = _mm_max_ps(_mm_loadu_ps(l + i + 4), v1);
            v2 = _mm_max_ps(_mm_loadu_ps(l + i + 8), v2);
            v3 = _mm_max_ps(_mm_loadu_ps(l + i + 12), v3);
        }
        _mm_storeu_ps(lane, v0);
        _mm_storeu_ps(lane + 4, v1);
        _mm_storeu_ps(lane + 8, v2);
        _mm_storeu_ps(lane + 12, v3);
#else
        for (int k = 0; k < LANES; k++) lane[k] = -INFINITY;
        for (; i + LANES <= e; i += LANES)
            for (int k = 0; k < LANES; k++) lane[k] = l[i + k] > lane[k] ? l[i + k] : lane[k];
#endif
        float pm = -INFINITY;
        for (; i < e; i++) pm = l[i] > pm ? l[i] : pm;
        for (int k = 0; k < LANES; k++) pm = lane[k] > pm ? lane[k] : pm;
        if (!(pm > m)) continue;
        for (i = i0; l[i] != pm; i++) {}
        m = pm;
        best = i;
    }
    return best;
}

static inline bool before(const cand *a, const cand *b) {
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

static int cmp_cand(const void *x, const void *y) {
    const cand *a = x, *b = y;
    return before(a, b) ? -1 : before(b, a) ? 1 : 0;
}

/* Moves the k best candidates to the front (unordered), quickselect. */
static void select_top(cand *c, int32_t n, int32_t k) {
    int32_t lo = 0, hi = n - 1;
    while (lo < hi) {
        cand pivot = c[(lo + hi) / 2];
        int32_t i = lo, j = hi;
        while (i <= j) {
            while (before(&c[i], &pivot)) i++;
            while (before(&pivot, &c[j])) j--;
            if (i <= j) {
                cand t = c[i];
                c[i] = c[j];
                c[j] = t;
                i++;
                j--;
            }
        }
        if (k - 1 <= j) hi = j;
        else if (k - 1 >= i) lo = i;
        else break;
    }
}

/* The chain over the candidates c[0..n) (penalties already applied): greedy, or top-k, top-p,
 * min-p and temperature in llama.cpp's order. */
static int32_t pick(eng_sampler *s, int32_t n) {
    const eng_sampler_params *p = &s->p;
    cand *c = s->c;
    if (p->temp <= 0.0f) {
        int32_t best = 0;
        for (int32_t i = 1; i < n; i++)
            if (before(&c[i], &c[best])) best = i;
        return c[best].id;
    }
    if (p->top_k > 0 && p->top_k < n) {
        select_top(c, n, p->top_k);
        n = p->top_k;
    }
    qsort(c, (size_t)n, sizeof(cand), cmp_cand); /* n is small after top-k, else V log V */
    if (p->top_p < 1.0f) {
        double sum = 0, cum = 0;
        for (int32_t i = 0; i < n; i++) sum += exp((double)c[i].logit - c[0].logit);
        int32_t keep = n;
        for (int32_t i = 0; i < n; i++) {
            cum += exp((double)c[i].logit - c[0].logit) / sum;
            if (cum >= p->top_p) {
                keep = i + 1;
                break;
            }
        }
        n = keep;
    }
    if (p->min_p > 0.0f) {
        const float thr = c[0].logit + logf(p->min_p);
        int32_t keep = 1;
        while (keep < n && c[keep].logit >= thr) keep++;
        n = keep;
    }
    double sum = 0;
    for (int32_t i = 0; i < n; i++) sum += exp(((double)c[i].logit - c[0].logit) / p->temp);
    const double u = rand_unit(s) * sum;
    double run = 0;
    for (int32_t i = 0; i < n; i++) {
        run += exp(((double)c[i].logit - c[0].logit) / p->temp);
        if (run >= u) return c[i].id;
    }
    return c[n - 1].id;
}


static inline float penalized(const eng_sampler *s, int32_t id, float l) {
    const int32_t cnt = s->counts[id];
    if (!cnt) return l;
    l = l > 0 ? l / s->p.repeat_penalty : l * s->p.repeat_penalty;
    return l - (float)cnt * s->p.frequency_penalty - s->p.presence_penalty;
}

static bool penalizing(const eng_sampler *s) {
    const eng_sampler_params *p = &s->p;
    return s->hist_n && (p->repeat_penalty != 1.0f || p->frequency_penalty != 0.0f || p->presence_penalty != 0.0f);
}

int32_t eng_sampler_sample(eng_sampler *s, const float *logits) {
    const int32_t V = s->n_vocab;
    const bool penalize = penalizing(s);
    /* greedy without penalties: the same token as the candidate search, without the copy */
    if (s->p.temp <= 0.0f && !penalize) return eng_argmax(logits, V);
    for (int32_t i = 0; i < V; i++) s->c[i] = (cand){i, penalize ? penalized(s, i, logits[i]) : logits[i]};
    return pick(s, V);
}

int32_t eng_sampler_sample_masked(eng_sampler *s, const float *logits, eng_matcher *m) {
    if (!m || eng_matcher_waiting(m)) return eng_sampler_sample(s, logits);
    const bool penalize = penalizing(s);
    /* greedy: the unconstrained choice, when allowed, is also the best allowed one */
    if (s->p.temp <= 0.0f && !penalize) {
        const int32_t t = eng_argmax(logits, s->n_vocab);
        if (eng_matcher_allows(m, t)) return eng_matcher_overflowed(m) ? -1 : t;
    }
    const uint64_t *mask = eng_matcher_mask(m);
    /* a part of the allowed tokens would steer the text silently (to an early end, say) */
    if (eng_matcher_overflowed(m)) return -1;
    int32_t n = 0;
    /* logits past the tokenizer's vocabulary (padding rows) are never allowed */
    const int32_t nv = eng_matcher_n_vocab(m) < s->n_vocab ? eng_matcher_n_vocab(m) : s->n_vocab;
    const int32_t words = (nv + 63) / 64;
    for (int32_t w = 0; w < words; w++)
        for (uint64_t b = mask[w]; b; b &= b - 1) {
            const int32_t i = w * 64 + dp_ctz64(b);
            if (i < nv) s->c[n++] = (cand){i, penalize ? penalized(s, i, logits[i]) : logits[i]};
        }
    return n ? pick(s, n) : -1;
}
