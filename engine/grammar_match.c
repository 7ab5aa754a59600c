/*
 * grammar_match.c - a compiled grammar against the token vocabulary: which tokens may come next.
 *
 * DESIGN: the matcher's state is a SET of pushdown stacks (as in llama.cpp's grammar sampler),
 * each stack a chain of immutable nodes {element position, parent} in an arena, so stacks share
 * their tails and moving on by one byte allocates only the new tops. Every stack's top is a
 * byte-set element; the empty stack (ACCEPT) means the text so far is a complete sentence.
 *
 * Which tokens may follow is answered without looking at the whole vocabulary per token:
 *   - the vocabulary is a byte trie laid out in pre-order, each node knowing where its subtree
 *     ends, so one linear pass over the array visits exactly the prefixes the grammar allows and
 *     skips every subtree whose first byte it refuses;
 *   - a mask depends only on the state set, so masks are cached per grammar under the set's
 *     canonical form (the inside of a long string, or the point after a key, recurs);
 *   - the sampler first asks whether its own choice is allowed (eng_matcher_allows, a walk over
 *     that token's bytes) and builds a mask only when it is not, or when it must sample from the
 *     allowed distribution (eng_sampler_sample_masked).
 */
#include "grammar.h"

#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"

enum { ACCEPT = -1, CACHE_SLOTS = 256, MAX_DEPTH = 1024 };
/* a macro, not an enum, so that eng_matcher_failure's message spells the same number */
#define MAX_STACKS 2048
#define STR_(x)    #x
#define STR(x)     STR_(x)

/* ---- the vocabulary trie --------------------------------------------------------------------- */

struct eng_vocab_trie {
    int32_t n;          /* nodes */
    uint8_t *byte;      /* [n] the byte that leads to the node */
    uint16_t *depth;    /* [n] 1 for the root's children */
    int32_t *skip;      /* [n] the first node after the node's subtree */
    int32_t *tok_off;   /* [n + 1] tokens that end at the node: toks[tok_off[i] .. tok_off[i+1]) */
    int32_t *toks;
    uint64_t *member;   /* [words] tokens in the trie (text tokens with at least one byte) */
    int32_t *eog;       /* end-of-generation tokens */
    int32_t n_eog;
    int32_t max_depth, n_vocab;
};

typedef struct piece {
    const uint8_t *s;
    uint32_t len;
    int32_t id;
} piece;

static int cmp_piece(const void *x, const void *y) {
    const piece *a = x, *b = y;
    const uint32_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->s, b->s, n);
    if (c) return c;
    if (a->len != b->len) return a->len < b->len ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

void eng_vocab_trie_free(eng_vocab_trie *t) {
    if (!t) return;
    free(t->byte), free(t->depth), free(t->skip), free(t->tok_off), free(t->toks), free(t->member), free(t->eog);
    free(t);
}

static eng_vocab_trie *trie_build(const eng_tokenizer *tk) {
    const int32_t V = eng_tokenizer_n_vocab(tk);
    eng_vocab_trie *t = calloc(1, sizeof(*t));
    piece *p = malloc((size_t)V * sizeof(*p));
    int32_t *tok_node = malloc((size_t)V * sizeof(int32_t));
    if (!t || !p || !tok_node) goto fail;
    t->n_vocab = V;
    t->member = calloc(((size_t)V + 63) / 64, sizeof(uint64_t));
    t->eog = malloc((size_t)V * sizeof(int32_t));
    if (!t->member || !t->eog) goto fail;
    int32_t np = 0;
    size_t total = 0;
    for (int32_t id = 0; id < V; id++) {
        if (eng_token_is_eog(tk, id)) t->eog[t->n_eog++] = id;
        const eng_token_type ty = eng_token_get_type(tk, id);
        /* plain text tokens only: a grammar speaks of text, never of control or added tokens */
        if (ty != ENG_TOKEN_TYPE_NORMAL && ty != ENG_TOKEN_TYPE_BYTE) continue;
        const char *s;
        size_t len = eng_token_to_piece(tk, id, false, &s);
        if (!len || len > MAX_DEPTH) continue;
        p[np++] = (piece){(const uint8_t *)s, (uint32_t)len, id};
        total += len;
    }
    qsort(p, (size_t)np, sizeof(*p), cmp_piece);
    /* at most one node per byte of every token */
    t->byte = malloc(total + 1);
    t->depth = malloc((total + 1) * sizeof(uint16_t));
    t->skip = malloc((total + 1) * sizeof(int32_t));
    t->toks = malloc(((size_t)np + 1) * sizeof(int32_t));
    if (!t->byte || !t->depth || !t->skip || !t->toks) goto fail;
    int32_t path[MAX_DEPTH + 1];
    path[0] = -1;
    for (int32_t k = 0; k < np; k++) {
        uint32_t l = 0;
        if (k) {
            const uint32_t m = p[k - 1].len < p[k].len ? p[k - 1].len : p[k].len;
            while (l < m && p[k - 1].s[l] == p[k].s[l]) l++;
        }
        for (uint32_t d = l; d < p[k].len; d++) {
            t->byte[t->n] = p[k].s[d];
            t->depth[t->n] = (uint16_t)(d + 1);
            path[d + 1] = t->n++;
        }
        if ((int32_t)p[k].len > t->max_depth) t->max_depth = (int32_t)p[k].len;
        tok_node[k] = path[p[k].len];
        t->toks[k] = p[k].id;
        t->member[p[k].id >> 6] |= 1ull << (p[k].id & 63);
    }
    t->tok_off = calloc((size_t)t->n + 1, sizeof(int32_t));
    if (!t->tok_off) goto fail;
    for (int32_t k = 0; k < np; k++) t->tok_off[tok_node[k] + 1]++;
    for (int32_t i = 0; i < t->n; i++) t->tok_off[i + 1] += t->tok_off[i];
    /* the end of each subtree: the next node no deeper than it */
    int32_t stack[MAX_DEPTH + 1], sp = 0;
    for (int32_t i = 0; i < t->n; i++) {
        while (sp && t->depth[stack[sp - 1]] >= t->depth[i]) t->skip[stack[--sp]] = i;
        stack[sp++] = i;
    }
    while (sp) t->skip[stack[--sp]] = t->n;
    free(p);
    free(tok_node);
    return t;
fail:
    free(p);
    free(tok_node);
    eng_vocab_trie_free(t);
    return NULL;
}

const eng_vocab_trie *eng_tokenizer_trie(const eng_tokenizer *tk, dp_err *err) {
    eng_vocab_trie **slot;
    dp_mutex *mu = eng_tokenizer_trie_slot(tk, &slot);
    dp_mutex_lock(mu);
    if (!*slot) *slot = trie_build(tk);
    eng_vocab_trie *t = *slot;
    dp_mutex_unlock(mu);
    if (!t) dp_err_set(err, DP_ENOMEM, "out of memory for the vocabulary trie");
    return t;
}

/* ---- grammars ---------------------------------------------------------------------------------- */

typedef struct centry {
    uint64_t hash;
    int32_t *key;
    int32_t key_len;
    uint64_t *mask;
} centry;

struct eng_grammar {
    gprog p;
    const eng_tokenizer *tk;
    const eng_vocab_trie *trie;
    int32_t n_vocab, words;
    dp_mutex mu; /* the mask cache: matchers of one grammar may run on several threads */
    centry cache[CACHE_SLOTS];
    uint64_t hits, misses;
};

dp_status eng_grammar_check(const char *text, size_t len, dp_err *err) {
    gprog p;
    dp_status st = gprog_build(text, len, &p, err);
    gprog_free(&p);
    return st;
}

dp_status eng_grammar_compile(const eng_tokenizer *tk, const char *text, size_t len, eng_grammar **out, dp_err *err) {
    *out = NULL;
    eng_grammar *g = calloc(1, sizeof(*g));
    if (!g) return dp_err_set(err, DP_ENOMEM, "out of memory for a grammar");
    dp_status st = gprog_build(text, len, &g->p, err);
    if (st) {
        free(g);
        return st;
    }
    if (!(g->trie = eng_tokenizer_trie(tk, err))) {
        gprog_free(&g->p);
        free(g);
        return DP_ENOMEM;
    }
    g->tk = tk;
    g->n_vocab = eng_tokenizer_n_vocab(tk);
    g->words = (g->n_vocab + 63) / 64;
    dp_mutex_init(&g->mu);
    *out = g;
    return DP_OK;
}

void eng_grammar_free(eng_grammar *g) {
    if (!g) return;
    for (int i = 0; i < CACHE_SLOTS; i++) free(g->cache[i].key), free(g->cache[i].mask);
    dp_mutex_free(&g->mu);
    gprog_free(&g->p);
    free(g);
}

void eng_grammar_cache_stats(const eng_grammar *g, uint64_t *hits, uint64_t *misses) {
    *hits = g->hits, *misses = g->misses;
}

/* ---- matchers ------------------------------------------------------------------------------------ */

typedef struct gnode { int32_t pos, parent; } gnode;

struct eng_matcher {
    eng_grammar *g;
    gnode *nd;
    int32_t n_nd, cap_nd;
    int32_t *cur, n_cur;    /* the state: stacks (node index or ACCEPT) */
    int32_t *buf;           /* level sets of a walk, back to back */
    size_t cap_buf;
    int32_t *lv_off, *lv_len, *lv_mark; /* [MAX_DEPTH + 1] */
    int32_t *key;           /* canonical form of cur */
    size_t cap_key;
    uint64_t *mask;         /* [words] */
    int32_t *memo;          /* compaction */
    int32_t *work;          /* expand's pending (element, parent) pairs; compact's chains */
    size_t cap_work;
    bool broken;            /* a set outgrew MAX_STACKS or memory: nothing is allowed */
    bool overflow;          /* some walk outgrew them since: masks and refusals are incomplete */
    /* eng_matcher_new_after: free text until `after` has been seen, the grammar from there */
    char after[32];
    size_t after_len;
    bool waiting;
    uint8_t tail[32];       /* the last bytes seen while waiting (the tag may span tokens) */
    size_t tail_len;
};

static int32_t node_new(eng_matcher *m, int32_t pos, int32_t parent) {
    if (m->n_nd == m->cap_nd) {
        int32_t cap = m->cap_nd ? m->cap_nd * 2 : 4096;
        gnode *n = realloc(m->nd, (size_t)cap * sizeof(*n));
        if (!n) return -2;
        m->nd = n, m->cap_nd = cap;
    }
    m->nd[m->n_nd] = (gnode){pos, parent};
    return m->n_nd++;
}

static bool stack_eq(const eng_matcher *m, int32_t a, int32_t b) {
    while (a != b) {
        if (a < 0 || b < 0 || m->nd[a].pos != m->nd[b].pos) return false;
        a = m->nd[a].parent, b = m->nd[b].parent;
    }
    return true;
}

typedef struct outset {
    int32_t *v; /* room for MAX_STACKS */
    int32_t n;
    bool over;
} outset;

/* Room for need entries in the array *p of *cap entries, doubling so that a text's growth costs
 * amortized constant time. */
static bool grow_i32(int32_t **p, size_t *cap, size_t need) {
    if (need <= *cap) return true;
    size_t c = *cap * 2 > need ? *cap * 2 : need < 1024 ? 1024 : need;
    int32_t *q = realloc(*p, c * sizeof(int32_t));
    if (!q) return false;
    *p = q, *cap = c;
    return true;
}

static bool work_room(eng_matcher *m, size_t need) {
    return grow_i32(&m->work, &m->cap_work, need);
}
static bool buf_room(eng_matcher *m, size_t need) {
    return grow_i32(&m->buf, &m->cap_buf, need);
}

/* Adds to o every stack that reads a byte next, starting at element pos with parent below. A
 * depth-first walk with its own stack of pending (element, parent) pairs, not recursion: a
 * chain of parts that read nothing ("( "" ){1000}" inside a {1000}) is as deep as it is long.
 * A rule's alternatives are pushed last first, so they are taken in their order. */
static void expand(eng_matcher *m, int32_t pos, int32_t parent, outset *o) {
    const gprog *P = &m->g->p;
    size_t n = 0;
    if (!work_room(m, 2)) {
        o->over = true;
        return;
    }
    m->work[n++] = pos, m->work[n++] = parent;
    while (n && !o->over) {
        parent = m->work[--n], pos = m->work[--n];
        for (;;) {
            const gel e = P->el[pos];
            if (e.kind == GEL_SET) {
                bool seen = false;
                for (int32_t i = 0; i < o->n && !seen; i++) {
                    const int32_t st = o->v[i];
                    seen = st >= 0 && m->nd[st].pos == pos && stack_eq(m, m->nd[st].parent, parent);
                }
                if (seen) break;
                const int32_t k = o->n == MAX_STACKS ? -1 : node_new(m, pos, parent);
                if (k < 0) {
                    o->over = true;
                    break;
                }
                o->v[o->n++] = k;
                break;
            }
            if (e.kind == GEL_END) {
                if (parent >= 0) { /* the rule is done: on with the element after it */
                    const gnode up = m->nd[parent];
                    pos = up.pos, parent = up.parent;
                    continue;
                }
                bool seen = false;
                for (int32_t i = 0; i < o->n && !seen; i++)
                    seen = o->v[i] == ACCEPT;
                if (!seen && o->n == MAX_STACKS)
                    o->over = true;
                else if (!seen)
                    o->v[o->n++] = ACCEPT;
                break;
            }
            int32_t cont = parent;
            if (P->el[pos + 1].kind != GEL_END && (cont = node_new(m, pos + 1, parent)) < 0) {
                o->over = true;
                break;
            }
            const int32_t a0 = P->rule_alt[e.arg], a1 = P->rule_alt[e.arg + 1];
            if (!work_room(m, n + 2 * (size_t)(a1 - a0))) {
                o->over = true;
                break;
            }
            for (int32_t a = a1 - 1; a >= a0; a--)
                m->work[n++] = P->alt_start[a], m->work[n++] = cont;
            break;
        }
    }
}

static int32_t advance(eng_matcher *m, const int32_t *in, int32_t n_in, uint8_t byte, int32_t *out) {
    const gprog *P = &m->g->p;
    outset o = {out, 0, false};
    for (int32_t i = 0; i < n_in && !o.over; i++) {
        const int32_t s = in[i];
        if (s == ACCEPT) continue;
        const gnode n = m->nd[s];
        if (gbytes_has(&P->sets[P->el[n.pos].arg], byte)) expand(m, n.pos + 1, n.parent, &o);
    }
    return o.over ? -1 : o.n;
}

dp_status eng_matcher_new(eng_grammar *g, bool lead_space, eng_matcher **out, dp_err *err) {
    *out = NULL;
    eng_matcher *m = calloc(1, sizeof(*m));
    if (!m) return dp_err_set(err, DP_ENOMEM, "out of memory for a grammar matcher");
    m->g = g;
    m->cur = malloc(MAX_STACKS * sizeof(int32_t));
    m->lv_off = malloc(3 * (MAX_DEPTH + 1) * sizeof(int32_t));
    m->mask = malloc((size_t)g->words * sizeof(uint64_t));
    if (!m->cur || !m->lv_off || !m->mask || !buf_room(m, 16 * MAX_STACKS)) {
        eng_matcher_free(m);
        return dp_err_set(err, DP_ENOMEM, "out of memory for a grammar matcher");
    }
    m->lv_len = m->lv_off + MAX_DEPTH + 1;
    m->lv_mark = m->lv_len + MAX_DEPTH + 1;
    const gprog *P = &g->p;
    const int32_t r = lead_space ? P->root_lead : P->root;
    outset o = {m->cur, 0, false};
    for (int32_t a = P->rule_alt[r]; a < P->rule_alt[r + 1] && !o.over; a++) expand(m, P->alt_start[a], -1, &o);
    m->n_cur = o.n;
    m->broken = m->overflow = o.over;
    *out = m;
    return DP_OK;
}

dp_status eng_matcher_new_after(eng_grammar *g, const char *after, eng_matcher **out, dp_err *err) {
    if (!after || !*after) return eng_matcher_new(g, false, out, err);
    const size_t n = strlen(after);
    if (n >= sizeof((*out)->after)) return dp_err_set(err, DP_EINVAL, "grammar: the opening text is over 31 bytes");
    dp_status st = eng_matcher_new(g, true, out, err);
    if (st) return st;
    memcpy((*out)->after, after, n + 1);
    (*out)->after_len = n;
    (*out)->waiting = true;
    return DP_OK;
}

bool eng_matcher_waiting(const eng_matcher *m) { return m->waiting; }

/* Free text while waiting: the last bytes seen are kept (the tag may span tokens); once they end
 * with the tag, the grammar takes the rest. False when the grammar refuses that rest. */
static bool wait_feed(eng_matcher *m, const uint8_t *b, size_t n) {
    const size_t al = m->after_len;
    for (size_t i = 0; i < n; i++) {
        if (m->tail_len == al) memmove(m->tail, m->tail + 1, --m->tail_len);
        m->tail[m->tail_len++] = b[i];
        if (m->tail_len == al && !memcmp(m->tail, m->after, al)) {
            m->waiting = false;
            return eng_matcher_accept_bytes(m, b + i + 1, n - i - 1);
        }
    }
    return true;
}

void eng_matcher_free(eng_matcher *m) {
    if (!m) return;
    free(m->nd), free(m->cur), free(m->buf), free(m->lv_off), free(m->key), free(m->mask), free(m->memo), free(m->work);
    free(m);
}

bool eng_matcher_can_end(const eng_matcher *m) {
    for (int32_t i = 0; i < m->n_cur; i++)
        if (m->cur[i] == ACCEPT) return true;
    return false;
}

int32_t eng_matcher_n_vocab(const eng_matcher *m) { return m->g->n_vocab; }

bool eng_matcher_must_end(const eng_matcher *m) { return !m->waiting && m->n_cur == 1 && m->cur[0] == ACCEPT; }

bool eng_matcher_dead(const eng_matcher *m) { return m->broken || m->n_cur == 0; }

bool eng_matcher_overflowed(const eng_matcher *m) {
    return m->overflow;
}

const char *eng_matcher_failure(const eng_matcher *m) {
    return m->overflow ? "the grammar left more than " STR(MAX_STACKS) " parses open at once: too ambiguous to "
                                                                       "follow (docs/structured-output.md)"
                       : "no token can continue the text within the grammar";
}

static const uint8_t *piece_of(const eng_matcher *m, int32_t token, size_t *n) {
    const char *s;
    *n = eng_token_to_piece(m->g->tk, token, false, &s);
    return (const uint8_t *)s;
}

/* Walks bytes from the current state into buf; returns the final set's offset or -1 (refused). */
static int64_t walk(eng_matcher *m, const uint8_t *b, size_t n, int32_t *len) {
    if (m->broken || !buf_room(m, (size_t)2 * MAX_STACKS)) return -1;
    memcpy(m->buf, m->cur, (size_t)m->n_cur * sizeof(int32_t));
    int32_t k = m->n_cur;
    int32_t in = 0, outp = MAX_STACKS;
    for (size_t i = 0; i < n && k > 0; i++) {
        k = advance(m, m->buf + in, k, b[i], m->buf + outp);
        int32_t t = in;
        in = outp, outp = t;
    }
    if (k < 0) m->overflow = true;
    if (k <= 0) return -1;
    *len = k;
    return in;
}

bool eng_matcher_allows(eng_matcher *m, int32_t token) {
    const eng_vocab_trie *t = m->g->trie;
    if (token < 0 || token >= t->n_vocab) return false;
    if (m->waiting) return true;
    if (!((t->member[token >> 6] >> (token & 63)) & 1)) {
        for (int32_t i = 0; i < t->n_eog; i++)
            if (t->eog[i] == token) return eng_matcher_can_end(m);
        return false;
    }
    const int32_t mark = m->n_nd;
    size_t n;
    const uint8_t *s = piece_of(m, token, &n);
    int32_t len;
    const bool ok = walk(m, s, n, &len) >= 0;
    m->n_nd = mark;
    return ok;
}

/* Keeps the arena from growing without end: copies the stacks of the state to the front. */
static void compact(eng_matcher *m) {
    if (m->n_nd < 65536) return;
    int32_t *memo = realloc(m->memo, (size_t)m->n_nd * sizeof(int32_t));
    gnode *nn = malloc((size_t)m->cap_nd * sizeof(gnode));
    if (!memo || !nn || !work_room(m, (size_t)m->n_nd)) { /* (work: a chain is at most all nodes) */
        if (memo) m->memo = memo;
        free(nn);
        return;
    }
    m->memo = memo;
    for (int32_t i = 0; i < m->n_nd; i++) memo[i] = -1;
    int32_t n = 0;
    for (int32_t k = 0; k < m->n_cur; k++) {
        int32_t s = m->cur[k];
        if (s < 0) continue;
        /* copy the chain bottom-up: collect it (as long as the text's nesting), then place
         * parents first */
        size_t d = 0;
        for (int32_t x = s; x >= 0 && memo[x] < 0; x = m->nd[x].parent)
            m->work[d++] = x;
        for (size_t j = d; j-- > 0;) {
            const gnode o = m->nd[m->work[j]];
            nn[n] = (gnode){o.pos, o.parent < 0 ? -1 : memo[o.parent]};
            memo[m->work[j]] = n++;
        }
        m->cur[k] = memo[s];
    }
    free(m->nd);
    m->nd = nn;
    m->n_nd = n;
}

static bool commit(eng_matcher *m, int64_t off, int32_t len) {
    memcpy(m->cur, m->buf + off, (size_t)len * sizeof(int32_t));
    m->n_cur = len;
    compact(m);
    return true;
}

bool eng_matcher_accept_bytes(eng_matcher *m, const void *bytes, size_t n) {
    if (m->waiting) return wait_feed(m, bytes, n);
    int32_t len;
    const int32_t mark = m->n_nd;
    int64_t off = walk(m, bytes, n, &len);
    if (off < 0) {
        m->n_nd = mark;
        return false;
    }
    return commit(m, off, len);
}

bool eng_matcher_accept_token(eng_matcher *m, int32_t token) {
    const eng_vocab_trie *t = m->g->trie;
    if (token < 0 || token >= t->n_vocab) return false;
    if (m->waiting) { /* any token; its text as the detokenizer gives it (added tokens such as </think> too) */
        const char *p;
        const size_t n = eng_token_to_piece(m->g->tk, token, false, &p);
        return wait_feed(m, (const uint8_t *)p, n);
    }
    if (!((t->member[token >> 6] >> (token & 63)) & 1)) {
        for (int32_t i = 0; i < t->n_eog; i++)
            if (t->eog[i] == token && eng_matcher_can_end(m)) {
                m->cur[0] = ACCEPT, m->n_cur = 1;
                return true;
            }
        return false;
    }
    size_t n;
    const uint8_t *s = piece_of(m, token, &n);
    return eng_matcher_accept_bytes(m, s, n);
}

/* ---- masks ---------------------------------------------------------------------------------------- */

/* The state in canonical form: each stack's positions top to bottom and a -2, stacks in sorted
 * order (the same set reached by two paths may list its stacks in another order). */
static int32_t canon_key(eng_matcher *m) {
    size_t need = 0;
    for (int32_t k = 0; k < m->n_cur; k++) {
        need++;
        for (int32_t x = m->cur[k]; x >= 0; x = m->nd[x].parent) need++;
    }
    if (need * 2 > m->cap_key) {
        int32_t *b = realloc(m->key, need * 2 * sizeof(int32_t));
        if (!b) return -1;
        m->key = b, m->cap_key = need * 2;
    }
    /* write each stack, then insertion-sort the stacks (sets are small) */
    int32_t *tmp = m->key + need;
    size_t w = 0;
    int32_t nseg = m->n_cur;
    int32_t segs_off[MAX_STACKS], segs_len[MAX_STACKS];
    for (int32_t k = 0; k < m->n_cur; k++) {
        segs_off[k] = (int32_t)w;
        for (int32_t x = m->cur[k]; x >= 0; x = m->nd[x].parent) tmp[w++] = m->nd[x].pos;
        tmp[w++] = -2;
        segs_len[k] = (int32_t)w - segs_off[k];
    }
    for (int32_t i = 1; i < nseg; i++) {
        const int32_t o = segs_off[i], l = segs_len[i];
        int32_t j = i - 1;
        for (; j >= 0; j--) {
            const int32_t po = segs_off[j], pl = segs_len[j];
            const int32_t n = pl < l ? pl : l;
            int c = 0;
            for (int32_t q = 0; q < n && !c; q++) c = tmp[po + q] < tmp[o + q] ? -1 : tmp[po + q] > tmp[o + q];
            if (c < 0 || (c == 0 && pl <= l)) break;
            segs_off[j + 1] = po, segs_len[j + 1] = pl;
        }
        segs_off[j + 1] = o, segs_len[j + 1] = l;
    }
    size_t o = 0;
    for (int32_t i = 0; i < nseg; i++) {
        memcpy(m->key + o, tmp + segs_off[i], (size_t)segs_len[i] * sizeof(int32_t));
        o += (size_t)segs_len[i];
    }
    return (int32_t)o;
}

static uint64_t hash_key(const int32_t *k, int32_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (int32_t i = 0; i < n; i++) h = (h ^ (uint32_t)k[i]) * 0x100000001b3ull;
    return h | 1;
}

/* One pass over the trie in pre-order: a node is visited only when the grammar takes the bytes
 * on its path; a refused node's subtree is skipped whole. */
static void build_mask(eng_matcher *m, uint64_t *mask) {
    const eng_vocab_trie *t = m->g->trie;
    memset(mask, 0, (size_t)m->g->words * sizeof(uint64_t));
    if (m->broken || !buf_room(m, (size_t)(t->max_depth + 2) * MAX_STACKS)) return;
    memcpy(m->buf, m->cur, (size_t)m->n_cur * sizeof(int32_t));
    m->lv_off[0] = 0, m->lv_len[0] = m->n_cur, m->lv_mark[0] = m->n_nd;
    for (int32_t i = 0; i < t->n;) {
        const int32_t d = t->depth[i];
        m->n_nd = m->lv_mark[d - 1];
        const int32_t off = m->lv_off[d - 1] + m->lv_len[d - 1];
        const int32_t k = m->lv_len[d - 1] ? advance(m, m->buf + m->lv_off[d - 1], m->lv_len[d - 1], t->byte[i], m->buf + off) : 0;
        if (k <= 0) {
            if (k < 0) m->overflow = true;
            i = t->skip[i];
            continue;
        }
        m->lv_off[d] = off, m->lv_len[d] = k, m->lv_mark[d] = m->n_nd;
        for (int32_t q = t->tok_off[i]; q < t->tok_off[i + 1]; q++) mask[t->toks[q] >> 6] |= 1ull << (t->toks[q] & 63);
        i++;
    }
    m->n_nd = m->lv_mark[0];
    if (eng_matcher_can_end(m))
        for (int32_t i = 0; i < t->n_eog; i++) mask[t->eog[i] >> 6] |= 1ull << (t->eog[i] & 63);
}

const uint64_t *eng_matcher_mask(eng_matcher *m) {
    eng_grammar *g = m->g;
    if (m->waiting) { /* free text: everything */
        memset(m->mask, 0xFF, (size_t)g->words * sizeof(uint64_t));
        if (g->n_vocab % 64) m->mask[g->words - 1] = (1ull << (g->n_vocab % 64)) - 1;
        return m->mask;
    }
    const int32_t kn = canon_key(m);
    if (kn < 0) {
        build_mask(m, m->mask);
        return m->mask;
    }
    const uint64_t h = hash_key(m->key, kn);
    centry *e = &g->cache[h % CACHE_SLOTS];
    dp_mutex_lock(&g->mu);
    if (e->hash == h && e->key_len == kn && !memcmp(e->key, m->key, (size_t)kn * sizeof(int32_t))) {
        memcpy(m->mask, e->mask, (size_t)g->words * sizeof(uint64_t));
        g->hits++;
        dp_mutex_unlock(&g->mu);
        return m->mask;
    }
    g->misses++;
    dp_mutex_unlock(&g->mu);
    const bool over = m->overflow;
    build_mask(m, m->mask);
    if (m->overflow && !over) return m->mask; /* incomplete: another text must not take it */
    int32_t *key = malloc((size_t)kn * sizeof(int32_t));
    uint64_t *mk = malloc((size_t)g->words * sizeof(uint64_t));
    if (!key || !mk) {
        free(key), free(mk);
        return m->mask;
    }
    memcpy(key, m->key, (size_t)kn * sizeof(int32_t));
    memcpy(mk, m->mask, (size_t)g->words * sizeof(uint64_t));
    dp_mutex_lock(&g->mu);
    free(e->key), free(e->mask);
    *e = (centry){h, key, kn, mk};
    dp_mutex_unlock(&g->mu);
    return m->mask;
}
