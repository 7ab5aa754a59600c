/*
 * tokenizer.c - byte-level BPE for Qwen GGUF files (model-formats.md section 5).
 *
 * DESIGN
 * - Load copies everything out of the GGUF (token texts, types, merges) into flat arrays, so
 *   the tokenizer outlives the file. Token text -> id and (left id, right id) -> (rank, id)
 *   are open-addressing hash tables; BPE works on ids, never on strings.
 * - Tokenize: (1) split out special tokens, longest text first, exactly llama.cpp's fragment
 *   procedure (5.3); (2) pre-tokenize each raw fragment with the hand-written splitter of 5.5
 *   over code-point property flags (unicode.h); (3) BPE each piece: initial symbols are the
 *   byte tokens of the piece's bytes (the GPT-2 byte map makes one symbol per byte), then
 *   lowest-rank merges, leftmost on ties. Short pieces use an O(n^2) scan, long ones a heap.
 * - A per-thread workspace caches short pieces' ids; documents repeat words, so most pieces
 *   skip BPE. The cache is dropped wholesale when it grows past its budget.
 * - Pieces longer than ENG_TOK_MAX_PIECE bytes are BPE'd in segments of that size, which keeps
 *   time and memory linear on pathological input (100 MB of one letter). Real text never has
 *   a 1 MiB run of letters; this is the one place we may differ from llama.cpp.
 * - Invalid UTF-8 bytes are pre-tokenized as single symbol characters and keep their bytes.
 */
#include "tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar.h"
#include "log.h"
#include "unicode.h"
#include "utf8.h"

#define ENG_TOK_MAX_PIECE (1u << 20)
#define CACHE_MAX_PIECE 48
#define CACHE_SLOTS (1u << 16)
#define CACHE_POOL_MAX ((size_t)8 << 20)

/* The pre-tokenizers (tokenizer.ggml.pre) docpipe runs, each as llama.cpp splits text for it. */
enum { PRE_QWEN2 = 0, PRE_QWEN35, PRE_LLAMA3, PRE_GPT2, PRE_SMOLLM, PRE_DEEPSEEK_LLM };
static const struct {
    const char *name;
    int id;
} k_pre[] = {
    {"qwen2", PRE_QWEN2},          {"deepseek-r1-qwen", PRE_QWEN2}, {"qwen35", PRE_QWEN35},
    {"llama-bpe", PRE_LLAMA3},     {"llama3", PRE_LLAMA3},          {"llama-v3", PRE_LLAMA3},
    {"gpt-2", PRE_GPT2},           {"smollm", PRE_SMOLLM},          {"deepseek-llm", PRE_DEEPSEEK_LLM},
};
#define PRE_NAMES "qwen2, qwen35, deepseek-r1-qwen, llama-bpe (llama3, llama-v3), gpt-2, smollm, deepseek-llm"

struct eng_tokenizer {
    int32_t n_vocab;
    int pre;
    char pre_name[32];
    char *text;           /* all token texts, back to back */
    uint32_t *text_off;   /* [n_vocab + 1] */
    int32_t *type;        /* [n_vocab] */
    uint8_t *dec;         /* decoded bytes of every token */
    uint32_t *dec_off;    /* [n_vocab + 1] */
    int32_t *tok_hash;    /* text -> id, -1 = empty */
    uint32_t tok_mask;
    uint64_t *m_key;      /* (left << 32 | right) + 1, 0 = empty */
    int32_t *m_rank, *m_id;
    uint32_t m_mask;
    int32_t byte_id[256]; /* token of each byte's byte-level symbol, -1 if missing */
    int32_t *special;     /* matched before BPE, longest text first */
    int32_t n_special;
    uint8_t *eog;         /* [n_vocab] */
    int32_t bos, eos;
    bool add_bos, add_eos;
    bool ignore_merges; /* llama-bpe: a piece that is a token as a whole is taken whole, unmerged */
    eng_vocab_trie *trie; /* built on first use by a grammar (grammar_match.c) */
    dp_mutex trie_mu;
};

dp_mutex *eng_tokenizer_trie_slot(const eng_tokenizer *t, eng_vocab_trie ***slot) {
    eng_tokenizer *w = (eng_tokenizer *)t; /* the trie is a cache: logically const */
    *slot = &w->trie;
    return &w->trie_mu;
}

/* ---- Workspace -------------------------------------------------------------------------- */

typedef struct cache_slot {
    uint64_t hash;     /* 0 = empty */
    uint32_t key_off;  /* into pool */
    uint16_t key_len;
    uint16_t n_ids;
    uint32_t ids_off;  /* into pool, 4-aligned */
} cache_slot;

struct eng_tok_ws {
    uint32_t *cps;       /* code points of the current fragment */
    uint32_t *cp_off;    /* byte offset of each code point (+ one past the end) */
    uint8_t *cp_flags;
    size_t cap_cps;
    int32_t *sym;        /* BPE symbols */
    int32_t *prev, *next, *rank;
    size_t cap_sym;
    uint64_t *heap;      /* (rank << 32 | pos) */
    size_t heap_n, cap_heap;
    cache_slot *slots;   /* [CACHE_SLOTS] */
    uint8_t *pool;
    size_t pool_len, pool_cap;
    uint32_t n_cached;
};

dp_status eng_tok_ws_new(eng_tok_ws **out) {
    eng_tok_ws *ws = calloc(1, sizeof(*ws));
    if (!ws) return DP_ENOMEM;
    ws->slots = calloc(CACHE_SLOTS, sizeof(*ws->slots));
    if (!ws->slots) {
        free(ws);
        return DP_ENOMEM;
    }
    *out = ws;
    return DP_OK;
}

void eng_tok_ws_free(eng_tok_ws *ws) {
    if (!ws) return;
    free(ws->cps);
    free(ws->cp_off);
    free(ws->cp_flags);
    free(ws->sym);
    free(ws->prev);
    free(ws->next);
    free(ws->rank);
    free(ws->heap);
    free(ws->slots);
    free(ws->pool);
    free(ws);
}

static bool grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 256;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q) return false;
    *p = q;
    *cap = c;
    return true;
}

static bool ws_cps(eng_tok_ws *ws, size_t n) {
    if (n <= ws->cap_cps) return true;
    size_t c = ws->cap_cps ? ws->cap_cps : 256;
    while (c < n) c *= 2;
    uint32_t *a = realloc(ws->cps, c * 4);
    if (!a) return false;
    ws->cps = a;
    uint32_t *b = realloc(ws->cp_off, (c + 1) * 4);
    if (!b) return false;
    ws->cp_off = b;
    uint8_t *f = realloc(ws->cp_flags, c);
    if (!f) return false;
    ws->cp_flags = f;
    ws->cap_cps = c;
    return true;
}

static bool ws_sym(eng_tok_ws *ws, size_t n) {
    if (n <= ws->cap_sym) return true;
    size_t c = ws->cap_sym ? ws->cap_sym : 256;
    while (c < n) c *= 2;
    int32_t **arrs[4] = {&ws->sym, &ws->prev, &ws->next, &ws->rank};
    for (int i = 0; i < 4; i++) {
        int32_t *p = realloc(*arrs[i], c * 4);
        if (!p) return false;
        *arrs[i] = p;
    }
    ws->cap_sym = c;
    return true;
}

/* ---- Hashing ---------------------------------------------------------------------------- */

static inline uint64_t hash_bytes(const uint8_t *p, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
    }
    uint64_t w = 0;
    memcpy(&w, p + i, n - i);
    h = (h ^ w) * 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 29;
    return h | 1; /* never 0: 0 marks an empty cache slot */
}

static inline uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xFF51AFD7ED558CCDull;
    x ^= x >> 33;
    return x;
}

int32_t eng_token_find(const eng_tokenizer *t, const char *s, size_t n) {
    uint32_t i = (uint32_t)hash_bytes((const uint8_t *)s, n) & t->tok_mask;
    for (;;) {
        int32_t id = t->tok_hash[i];
        if (id < 0) return -1;
        uint32_t len = t->text_off[id + 1] - t->text_off[id];
        if (len == n && memcmp(t->text + t->text_off[id], s, n) == 0) return id;
        i = (i + 1) & t->tok_mask;
    }
}

/* Rank and result of merging (l, r); rank -1 when the pair does not merge. */
static inline int32_t merge_rank(const eng_tokenizer *t, int32_t l, int32_t r, int32_t *res) {
    if (l < 0 || r < 0) return -1;
    uint64_t key = ((uint64_t)(uint32_t)l << 32 | (uint32_t)r) + 1;
    uint32_t i = (uint32_t)mix64(key) & t->m_mask;
    for (;;) {
        uint64_t k = t->m_key[i];
        if (k == key) {
            *res = t->m_id[i];
            return t->m_rank[i];
        }
        if (!k) return -1;
        i = (i + 1) & t->m_mask;
    }
}

/* ---- Loading ---------------------------------------------------------------------------- */

/* GPT-2 byte map (model-formats.md §5.4): byte -> code point, and the inverse for cp < 324. */
uint32_t eng_byte_to_codepoint(int b) {
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) return (uint32_t)b;
    int n = 0;
    for (int c = 0; c < b; c++)
        if (!((c >= 33 && c <= 126) || (c >= 161 && c <= 172) || (c >= 174 && c <= 255))) n++;
    return 256u + (uint32_t)n;
}

/* Texts whose tokens end generation and are forced to CONTROL (model-formats.md §6.3). */
static const char *const k_eog_texts[] = {
    "<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", "</s>", "<|eom_id|>",
    "<|end_of_text|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>", "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81" "sentence\xEF\xBD\x9C>",
    "[e~[", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>",
};

static const eng_tokenizer *g_sort_tok; /* qsort has no context argument; load is serialized by the caller */

static int cmp_special(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    uint32_t lx = g_sort_tok->text_off[x + 1] - g_sort_tok->text_off[x];
    uint32_t ly = g_sort_tok->text_off[y + 1] - g_sort_tok->text_off[y];
    if (lx != ly) return lx > ly ? -1 : 1;
    return x < y ? -1 : x > y;
}

static dp_status load_strings(eng_tokenizer *t, const eng_gguf_kv *toks, const char *path, dp_err *err) {
    uint64_t total = 0;
    for (uint64_t i = 0; i < toks->n; i++) total += toks->strs[i].len;
    if (total > UINT32_MAX / 2)
        return dp_err_set(err, DP_EFORMAT, "%s: token texts total %llu bytes (limit 2 GiB)", path,
                          (unsigned long long)total);
    t->text = malloc(total + 1);
    t->text_off = malloc((toks->n + 1) * sizeof(uint32_t));
    t->dec = malloc(total * 2 + 1);
    t->dec_off = malloc((toks->n + 1) * sizeof(uint32_t));
    if (!t->text || !t->text_off || !t->dec || !t->dec_off)
        return dp_err_set(err, DP_ENOMEM, "%s: out of memory for %llu token texts", path, (unsigned long long)toks->n);
    uint32_t off = 0;
    for (uint64_t i = 0; i < toks->n; i++) {
        t->text_off[i] = off;
        memcpy(t->text + off, toks->strs[i].ptr, (size_t)toks->strs[i].len);
        off += (uint32_t)toks->strs[i].len;
    }
    t->text_off[toks->n] = off;
    return DP_OK;
}

static void build_decoded(eng_tokenizer *t) {
    int16_t cp_to_byte[324];
    for (int i = 0; i < 324; i++) cp_to_byte[i] = -1;
    for (int b = 0; b < 256; b++) cp_to_byte[eng_byte_to_codepoint(b)] = (int16_t)b;
    uint32_t o = 0;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        t->dec_off[id] = o;
        const uint8_t *s = (const uint8_t *)t->text + t->text_off[id];
        size_t n = t->text_off[id + 1] - t->text_off[id];
        if (t->type[id] == ENG_TOKEN_TYPE_NORMAL) {
            /* reverse the byte map; a text outside it is kept as is */
            uint32_t start = o;
            bool ok = true;
            for (size_t i = 0; i < n;) {
                uint32_t cp;
                bool valid;
                size_t k = dp_utf8_decode(s + i, n - i, &cp, &valid);
                if (!valid || cp >= 324 || cp_to_byte[cp] < 0) {
                    ok = false;
                    break;
                }
                t->dec[o++] = (uint8_t)cp_to_byte[cp];
                i += k;
            }
            if (!ok) {
                o = start;
                memcpy(t->dec + o, s, n);
                o += (uint32_t)n;
            }
        } else if (t->type[id] == ENG_TOKEN_TYPE_BYTE && n == 6 && s[0] == '<' && s[1] == '0' && s[2] == 'x') {
            /* <0xAB>: strict hex (model-formats.md §1.6 rule 12) */
            int v = 0, okh = 1;
            for (int k = 3; k < 5; k++) {
                int c = s[k];
                v = v * 16 + (c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
                              : c >= 'a' && c <= 'f' ? c - 'a' + 10 : (okh = 0));
            }
            if (okh && s[5] == '>') t->dec[o++] = (uint8_t)v;
        } else {
            memcpy(t->dec + o, s, n);
            o += (uint32_t)n;
        }
    }
    t->dec_off[t->n_vocab] = o;
}

static dp_status build_token_hash(eng_tokenizer *t, const char *path, dp_err *err) {
    uint32_t cap = 1;
    while (cap < 2u * (uint32_t)t->n_vocab) cap <<= 1;
    t->tok_hash = malloc(cap * sizeof(int32_t));
    if (!t->tok_hash) return dp_err_set(err, DP_ENOMEM, "%s: out of memory", path);
    t->tok_mask = cap - 1;
    for (uint32_t i = 0; i < cap; i++) t->tok_hash[i] = -1;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        const char *s = t->text + t->text_off[id];
        uint32_t n = t->text_off[id + 1] - t->text_off[id];
        if (eng_token_find(t, s, n) >= 0) continue; /* duplicate text: the first id wins */
        uint32_t i = (uint32_t)hash_bytes((const uint8_t *)s, n) & t->tok_mask;
        while (t->tok_hash[i] >= 0) i = (i + 1) & t->tok_mask;
        t->tok_hash[i] = id;
    }
    return DP_OK;
}

static dp_status build_merges(eng_tokenizer *t, const eng_gguf_kv *merges, const char *path, dp_err *err) {
    uint32_t cap = 1;
    while (cap < 2u * (uint32_t)(merges ? merges->n : 0) + 16) cap <<= 1;
    t->m_key = calloc(cap, sizeof(uint64_t));
    t->m_rank = malloc(cap * sizeof(int32_t));
    t->m_id = malloc(cap * sizeof(int32_t));
    if (!t->m_key || !t->m_rank || !t->m_id) return dp_err_set(err, DP_ENOMEM, "%s: out of memory for merges", path);
    t->m_mask = cap - 1;
    uint64_t skipped = 0;
    char buf[1024];
    for (uint64_t r = 0; merges && r < merges->n; r++) {
        const char *s = merges->strs[r].ptr;
        size_t n = (size_t)merges->strs[r].len;
        const char *sp = n > 1 ? memchr(s + 1, ' ', n - 1) : NULL;
        if (!sp || sp == s + n - 1)
            return dp_err_set(err, DP_EFORMAT, "%s: tokenizer.ggml.merges[%llu] is not 'left right' with two non-empty "
                              "parts", path, (unsigned long long)r);
        size_t nl = (size_t)(sp - s), nr = n - nl - 1;
        int32_t l = eng_token_find(t, s, nl), rr = eng_token_find(t, sp + 1, nr);
        int32_t res = -1;
        if (nl + nr <= sizeof(buf)) {
            memcpy(buf, s, nl);
            memcpy(buf + nl, sp + 1, nr);
            res = eng_token_find(t, buf, nl + nr);
        }
        if (l < 0 || rr < 0 || res < 0) {
            skipped++;
            continue;
        }
        uint64_t key = ((uint64_t)(uint32_t)l << 32 | (uint32_t)rr) + 1;
        uint32_t i = (uint32_t)mix64(key) & t->m_mask;
        while (t->m_key[i] && t->m_key[i] != key) i = (i + 1) & t->m_mask;
        if (t->m_key[i]) continue; /* duplicate pair: the lower rank wins */
        t->m_key[i] = key;
        t->m_rank[i] = (int32_t)r;
        t->m_id[i] = res;
    }
    if (skipped) DP_LOG_DEBUG("%s: %llu merges refer to texts that are not tokens; ignored", path,
                              (unsigned long long)skipped);
    return DP_OK;
}

static int64_t get_id(const eng_gguf *g, const char *key) {
    const eng_gguf_kv *kv = eng_gguf_find(g, key);
    int64_t v;
    if (!kv || kv->type == ENG_GGUF_TYPE_ARRAY || !eng_gguf_kv_int(kv, 0, &v)) return -1;
    return v;
}

static bool get_flag(const eng_gguf *g, const char *key, bool def) {
    const eng_gguf_kv *kv = eng_gguf_find(g, key);
    if (!kv || kv->type != ENG_GGUF_TYPE_BOOL) return def;
    return kv->data[0] != 0;
}

dp_status eng_tokenizer_load(const eng_gguf *g, eng_tokenizer **out, dp_err *err) {
    *out = NULL;
    const char *path = eng_gguf_path(g);
    eng_gguf_str model, pre;
    dp_status st = eng_gguf_get_str(g, "tokenizer.ggml.model", &model, err);
    if (st) return st;
    if (!eng_gguf_str_eq(model, "gpt2"))
        return dp_err_set(err, DP_EUNSUPPORTED, "%s: tokenizer model '%.*s' is not supported (only 'gpt2', "
                          "byte-level BPE)", path, (int)(model.len > 64 ? 64 : model.len), model.ptr);
    if ((st = eng_gguf_get_str(g, "tokenizer.ggml.pre", &pre, err))) {
        if (st == DP_ENOENT)
            dp_err_set(err, DP_EUNSUPPORTED, "%s: tokenizer.ggml.pre is missing; supported pre-tokenizers are "
                       "" PRE_NAMES, path);
        return err ? err->code : st;
    }
    int pre_id = -1;
    for (size_t k = 0; k < sizeof(k_pre) / sizeof(k_pre[0]) && pre_id < 0; k++)
        if (eng_gguf_str_eq(pre, k_pre[k].name)) pre_id = k_pre[k].id;
    if (pre_id < 0)
        return dp_err_set(err, DP_EUNSUPPORTED, "%s: pre-tokenizer '%.*s' is not supported (supported: " PRE_NAMES ")",
                          path, (int)(pre.len > 64 ? 64 : pre.len), pre.ptr);
    const eng_gguf_kv *toks, *types = NULL, *merges = NULL;
    if ((st = eng_gguf_get_arr(g, "tokenizer.ggml.tokens", ENG_GGUF_TYPE_STRING, &toks, err))) return st;
    if (toks->n == 0 || toks->n > (1u << 24))
        return dp_err_set(err, DP_EFORMAT, "%s: tokenizer.ggml.tokens has %llu entries (must be 1..16777216)", path,
                          (unsigned long long)toks->n);
    if (eng_gguf_find(g, "tokenizer.ggml.token_type")) {
        if ((st = eng_gguf_get_arr(g, "tokenizer.ggml.token_type", ENG_GGUF_TYPE_INT32, &types, err))) return st;
        if (types->n != toks->n)
            return dp_err_set(err, DP_EFORMAT, "%s: tokenizer.ggml.token_type has %llu entries but tokens has %llu",
                              path, (unsigned long long)types->n, (unsigned long long)toks->n);
    }
    if (eng_gguf_find(g, "tokenizer.ggml.merges"))
        if ((st = eng_gguf_get_arr(g, "tokenizer.ggml.merges", ENG_GGUF_TYPE_STRING, &merges, err))) return st;

    eng_tokenizer *t = calloc(1, sizeof(*t));
    if (t) dp_mutex_init(&t->trie_mu);
    if (!t) return dp_err_set(err, DP_ENOMEM, "out of memory");
    t->n_vocab = (int32_t)toks->n;
    t->pre = pre_id;
    snprintf(t->pre_name, sizeof(t->pre_name), "%.*s", (int)(pre.len < 31 ? pre.len : 31), pre.ptr);
    t->ignore_merges = pre_id == PRE_LLAMA3;
    t->type = malloc((size_t)t->n_vocab * sizeof(int32_t));
    t->eog = calloc((size_t)t->n_vocab, 1);
    if (!t->type || !t->eog) {
        st = dp_err_set(err, DP_ENOMEM, "out of memory");
        goto fail;
    }
    for (int32_t i = 0; i < t->n_vocab; i++) {
        int64_t ty = ENG_TOKEN_TYPE_NORMAL;
        if (types) eng_gguf_kv_int(types, (uint64_t)i, &ty);
        if (ty < 0 || ty > ENG_TOKEN_TYPE_BYTE) ty = ENG_TOKEN_TYPE_NORMAL;
        t->type[i] = (int32_t)ty;
    }
    if ((st = load_strings(t, toks, path, err))) goto fail;
    if ((st = build_token_hash(t, path, err))) goto fail;

    /* special ids (model-formats.md §1.6 rule 12: validate even defaulted ids) */
    int64_t bos = get_id(g, "tokenizer.ggml.bos_token_id"), eos = get_id(g, "tokenizer.ggml.eos_token_id");
    const char *names[3] = {"bos", "eos", "padding"};
    int64_t ids[3] = {bos, eos, get_id(g, "tokenizer.ggml.padding_token_id")};
    for (int k = 0; k < 3; k++)
        if (ids[k] >= t->n_vocab) {
            st = dp_err_set(err, DP_EFORMAT, "%s: tokenizer.ggml.%s_token_id is %lld but the vocabulary has %d tokens",
                            path, names[k], (long long)ids[k], t->n_vocab);
            goto fail;
        }
    t->bos = (int32_t)bos;
    t->eos = (int32_t)eos;
    /* llama-bpe files add BOS unless the file says otherwise, as llama.cpp reads them */
    t->add_bos = get_flag(g, "tokenizer.ggml.add_bos_token", pre_id == PRE_LLAMA3);
    t->add_eos = get_flag(g, "tokenizer.ggml.add_eos_token", false);

    /* end-of-generation texts become CONTROL, as llama.cpp does at load (model-formats.md §5.3 step 0) */
    for (size_t k = 0; k < sizeof(k_eog_texts) / sizeof(k_eog_texts[0]); k++) {
        int32_t id = eng_token_find(t, k_eog_texts[k], strlen(k_eog_texts[k]));
        if (id >= 0) {
            t->eog[id] = 1;
            t->type[id] = ENG_TOKEN_TYPE_CONTROL;
        }
    }
    if (t->eos >= 0) t->eog[t->eos] = 1;
    build_decoded(t);
    for (int b = 0; b < 256; b++) {
        char s[2];
        uint32_t cp = eng_byte_to_codepoint(b);
        size_t n = cp < 0x80 ? (s[0] = (char)cp, 1) : (s[0] = (char)(0xC0 | (cp >> 6)), s[1] = (char)(0x80 | (cp & 0x3F)), 2);
        t->byte_id[b] = eng_token_find(t, s, n);
    }
    if ((st = build_merges(t, merges, path, err))) goto fail;

    t->special = malloc((size_t)t->n_vocab * sizeof(int32_t));
    if (!t->special) {
        st = dp_err_set(err, DP_ENOMEM, "out of memory");
        goto fail;
    }
    for (int32_t i = 0; i < t->n_vocab; i++) {
        int ty = t->type[i];
        if ((ty == ENG_TOKEN_TYPE_CONTROL || ty == ENG_TOKEN_TYPE_USER_DEFINED || ty == ENG_TOKEN_TYPE_UNKNOWN) &&
            t->text_off[i + 1] > t->text_off[i])
            t->special[t->n_special++] = i;
    }
    g_sort_tok = t;
    qsort(t->special, (size_t)t->n_special, sizeof(int32_t), cmp_special);
    g_sort_tok = NULL;
    *out = t;
    return DP_OK;
fail:
    eng_tokenizer_free(t);
    return st;
}

void eng_tokenizer_free(eng_tokenizer *t) {
    if (!t) return;
    eng_vocab_trie_free(t->trie);
    dp_mutex_free(&t->trie_mu);
    free(t->text);
    free(t->text_off);
    free(t->type);
    free(t->dec);
    free(t->dec_off);
    free(t->tok_hash);
    free(t->m_key);
    free(t->m_rank);
    free(t->m_id);
    free(t->special);
    free(t->eog);
    free(t);
}

int32_t eng_tokenizer_n_vocab(const eng_tokenizer *t) { return t->n_vocab; }
const char *eng_tokenizer_pre(const eng_tokenizer *t) { return t->pre_name; }
int32_t eng_token_bos(const eng_tokenizer *t) { return t->bos; }
bool eng_token_add_bos(const eng_tokenizer *t) { return t->add_bos && t->bos >= 0; }
int32_t eng_token_eos(const eng_tokenizer *t) { return t->eos; }

eng_token_type eng_token_get_type(const eng_tokenizer *t, int32_t id) {
    return id >= 0 && id < t->n_vocab ? (eng_token_type)t->type[id] : ENG_TOKEN_TYPE_UNDEFINED;
}

bool eng_token_is_eog(const eng_tokenizer *t, int32_t id) { return id >= 0 && id < t->n_vocab && t->eog[id]; }

dp_status eng_tokens_push(eng_tokens *v, int32_t id) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 256;
        int32_t *p = realloc(v->ids, cap * sizeof(int32_t));
        if (!p) return DP_ENOMEM;
        v->ids = p;
        v->cap = cap;
    }
    v->ids[v->n++] = id;
    return DP_OK;
}

void eng_tokens_free(eng_tokens *v) {
    if (!v) return;
    free(v->ids);
    v->ids = NULL;
    v->n = v->cap = 0;
}

/* ---- BPE -------------------------------------------------------------------------------- */

static inline bool heap_less(uint64_t a, uint64_t b) { return a < b; } /* (rank, pos): lowest, leftmost */

static void heap_push(eng_tok_ws *ws, uint64_t v) {
    size_t i = ws->heap_n++;
    ws->heap[i] = v;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!heap_less(ws->heap[i], ws->heap[p])) break;
        uint64_t tmp = ws->heap[i];
        ws->heap[i] = ws->heap[p];
        ws->heap[p] = tmp;
        i = p;
    }
}

static uint64_t heap_pop(eng_tok_ws *ws) {
    uint64_t top = ws->heap[0];
    ws->heap[0] = ws->heap[--ws->heap_n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < ws->heap_n && heap_less(ws->heap[l], ws->heap[m])) m = l;
        if (r < ws->heap_n && heap_less(ws->heap[r], ws->heap[m])) m = r;
        if (m == i) break;
        uint64_t tmp = ws->heap[i];
        ws->heap[i] = ws->heap[m];
        ws->heap[m] = tmp;
        i = m;
    }
    return top;
}

/* BPE of n symbols in ws->sym[0..n); the result is compacted into sym[0..return). */
static size_t bpe_small(const eng_tokenizer *t, eng_tok_ws *ws, size_t n) {
    int32_t *s = ws->sym, *rk = ws->rank, *res = ws->next;
    for (size_t i = 0; i + 1 < n; i++) rk[i] = merge_rank(t, s[i], s[i + 1], &res[i]);
    while (n > 1) {
        size_t best = SIZE_MAX;
        int32_t br = INT32_MAX;
        for (size_t i = 0; i + 1 < n; i++)
            if (rk[i] >= 0 && rk[i] < br) br = rk[i], best = i;
        if (best == SIZE_MAX) break;
        s[best] = res[best];
        memmove(s + best + 1, s + best + 2, (n - best - 2) * sizeof(int32_t));
        memmove(rk + best + 1, rk + best + 2, (n - best - 2) * sizeof(int32_t));
        memmove(res + best + 1, res + best + 2, (n - best - 2) * sizeof(int32_t));
        n--;
        if (best > 0) rk[best - 1] = merge_rank(t, s[best - 1], s[best], &res[best - 1]);
        if (best + 1 < n) rk[best] = merge_rank(t, s[best], s[best + 1], &res[best]);
    }
    return n;
}

static size_t bpe_heap(const eng_tokenizer *t, eng_tok_ws *ws, size_t n) {
    int32_t *s = ws->sym, *prev = ws->prev, *next = ws->next;
    ws->heap_n = 0;
    for (size_t i = 0; i < n; i++) {
        prev[i] = (int32_t)i - 1;
        next[i] = i + 1 < n ? (int32_t)(i + 1) : -1;
    }
    int32_t res = -1;
    for (size_t i = 0; i + 1 < n; i++) {
        int32_t r = merge_rank(t, s[i], s[i + 1], &res);
        if (r >= 0) heap_push(ws, (uint64_t)(uint32_t)r << 32 | (uint32_t)i);
    }
    while (ws->heap_n) {
        uint64_t top = heap_pop(ws);
        int32_t pos = (int32_t)(uint32_t)top, r = (int32_t)(top >> 32);
        int32_t nx = next[pos];
        if (s[pos] < 0 || nx < 0) continue; /* stale: symbol gone */
        int32_t cur = merge_rank(t, s[pos], s[nx], &res);
        if (cur != r) continue; /* stale: a neighbour changed */
        s[pos] = res;
        s[nx] = -1;
        next[pos] = next[nx];
        if (next[nx] >= 0) prev[next[nx]] = pos;
        if (prev[pos] >= 0) {
            int32_t rr = merge_rank(t, s[prev[pos]], s[pos], &res);
            if (rr >= 0) heap_push(ws, (uint64_t)(uint32_t)rr << 32 | (uint32_t)prev[pos]);
        }
        if (next[pos] >= 0) {
            int32_t rr = merge_rank(t, s[pos], s[next[pos]], &res);
            if (rr >= 0) heap_push(ws, (uint64_t)(uint32_t)rr << 32 | (uint32_t)pos);
        }
    }
    size_t m = 0;
    for (int32_t i = 0; i >= 0; i = next[i]) s[m++] = s[i];
    return m;
}

/* Appends the ids of one pre-token piece. */
static dp_status bpe_piece(const eng_tokenizer *t, eng_tok_ws *ws, const uint8_t *p, size_t n, eng_tokens *out) {
    if (t->ignore_merges && n <= 128) { /* the piece's byte-level text, looked up whole */
        char s[256];
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            const uint32_t cp = eng_byte_to_codepoint(p[i]);
            if (cp < 0x80) s[k++] = (char)cp;
            else s[k++] = (char)(0xC0 | (cp >> 6)), s[k++] = (char)(0x80 | (cp & 0x3F));
        }
        const int32_t id = eng_token_find(t, s, k);
        if (id >= 0) return eng_tokens_push(out, id) ? DP_ENOMEM : DP_OK;
    }
    /* cache lookup */
    uint64_t h = 0;
    cache_slot *slot = NULL;
    if (n <= CACHE_MAX_PIECE) {
        h = hash_bytes(p, n);
        uint32_t i = (uint32_t)h & (CACHE_SLOTS - 1);
        for (int probe = 0; probe < 8; probe++, i = (i + 1) & (CACHE_SLOTS - 1)) {
            cache_slot *c = &ws->slots[i];
            if (!c->hash) {
                slot = c;
                break;
            }
            if (c->hash == h && c->key_len == n && memcmp(ws->pool + c->key_off, p, n) == 0) {
                const int32_t *ids = (const int32_t *)(void *)(ws->pool + c->ids_off);
                for (uint16_t k = 0; k < c->n_ids; k++)
                    if (eng_tokens_push(out, ids[k])) return DP_ENOMEM;
                return DP_OK;
            }
        }
    }
    for (size_t off = 0; off < n; off += ENG_TOK_MAX_PIECE) {
        size_t len = n - off < ENG_TOK_MAX_PIECE ? n - off : ENG_TOK_MAX_PIECE;
        if (!ws_sym(ws, len)) return DP_ENOMEM;
        size_t m = 0;
        for (size_t i = 0; i < len; i++) {
            int32_t id = t->byte_id[p[off + i]];
            if (id >= 0) ws->sym[m++] = id; /* a vocabulary without this byte: skipped */
        }
        if (m <= 64) m = bpe_small(t, ws, m);
        else {
            if (!grow((void **)&ws->heap, &ws->cap_heap, 3 * m + 16, sizeof(uint64_t))) return DP_ENOMEM;
            m = bpe_heap(t, ws, m);
        }
        size_t first = out->n;
        for (size_t i = 0; i < m; i++)
            if (eng_tokens_push(out, ws->sym[i])) return DP_ENOMEM;
        /* cache store */
        if (slot && n == len && m <= 0xFFFF) {
            size_t need = ws->pool_len + n + 4 + m * 4;
            if (need > CACHE_POOL_MAX || ws->n_cached > CACHE_SLOTS / 2) { /* drop everything */
                memset(ws->slots, 0, CACHE_SLOTS * sizeof(*ws->slots));
                ws->pool_len = 0;
                ws->n_cached = 0;
                uint32_t i = (uint32_t)h & (CACHE_SLOTS - 1);
                slot = &ws->slots[i];
                need = n + 4 + m * 4;
            }
            if (grow((void **)&ws->pool, &ws->pool_cap, need, 1)) {
                slot->hash = h;
                slot->key_off = (uint32_t)ws->pool_len;
                slot->key_len = (uint16_t)n;
                memcpy(ws->pool + ws->pool_len, p, n);
                size_t ids_off = (ws->pool_len + n + 3) & ~(size_t)3;
                slot->ids_off = (uint32_t)ids_off;
                slot->n_ids = (uint16_t)m;
                memcpy(ws->pool + ids_off, out->ids + first, m * 4);
                ws->pool_len = ids_off + m * 4;
                ws->n_cached++;
            }
        }
    }
    return DP_OK;
}

/* ---- Pre-tokenizer (model-formats.md §5.5) ------------------------------------------------------ */

#define F_L ENG_UNI_L
#define F_N ENG_UNI_N
#define F_M ENG_UNI_M
#define F_WS ENG_UNI_WS

static inline bool is_crlf(uint32_t c) { return c == '\r' || c == '\n'; }
static inline uint32_t lower_ascii(uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

/* qwen2, qwen35, llama-bpe: splits cps[0..n) into pieces and BPEs each. */
static dp_status split_qwen(const eng_tokenizer *t, eng_tok_ws *ws, const uint8_t *text, size_t n,
                             eng_tokens *out) {
    const uint32_t *cp = ws->cps;
    const uint8_t *fl = ws->cp_flags;
    const uint8_t LET = t->pre == PRE_QWEN35 ? (F_L | F_M) : F_L; /* what a letter run accepts */
    const uint8_t NOTP = (uint8_t)(F_WS | F_L | F_N | (t->pre == PRE_QWEN35 ? F_M : 0)); /* punctuation run stops */
    size_t pos = 0;
    while (pos < n) {
        const uint32_t c = cp[pos];
        const uint8_t f = fl[pos];
        size_t take = 0;
        /* 1. contractions: 's 't 'm 'd 're 've 'll (ASCII, either case) */
        if (c == '\'' && pos + 1 < n) {
            uint32_t c1 = lower_ascii(cp[pos + 1]);
            if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') take = 2;
            else if (pos + 2 < n) {
                uint32_t c2 = lower_ascii(cp[pos + 2]);
                if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) take = 3;
            }
        }
        /* 2. [^\r\n\p{L}\p{N}]?\p{L}+ (qwen35: [\p{L}\p{M}]) */
        if (!take && !is_crlf(c) && !(f & F_N) &&
            ((f & LET) || (pos + 1 < n && (fl[pos + 1] & LET)))) {
            size_t e = pos + 1;
            while (e < n && (fl[e] & LET)) e++;
            take = e - pos;
        }
        /* 3. \p{N}: one digit at a time (llama-bpe: up to three) */
        if (!take && (f & F_N)) {
            const size_t max = t->pre == PRE_LLAMA3 ? 3 : 1;
            size_t e = pos + 1;
            while (e < n && e - pos < max && (fl[e] & F_N)) e++;
            take = e - pos;
        }
        /* 4. ' ?[^\s\p{L}\p{N}]+[\r\n]*' */
        if (!take) {
            size_t s = pos + (c == ' ' ? 1 : 0);
            if (s < n && !(fl[s] & NOTP)) {
                size_t e = s;
                while (e < n && !(fl[e] & NOTP)) e++;
                while (e < n && is_crlf(cp[e])) e++;
                take = e - pos;
            }
        }
        /* 5. \s*[\r\n]+ | \s+(?!\S) | \s+ */
        if (!take && (f & F_WS)) {
            size_t e = pos, last_nl = SIZE_MAX;
            while (e < n && (fl[e] & F_WS)) {
                if (is_crlf(cp[e])) last_nl = e;
                e++;
            }
            if (last_nl != SIZE_MAX) take = last_nl + 1 - pos;
            else if (e - pos > 1 && e < n) take = e - pos - 1;
            else take = e - pos;
        }
        if (!take) take = 1; /* 6. anything else: one code point */
        const size_t b0 = ws->cp_off[pos], b1 = ws->cp_off[pos + take];
        dp_status st = bpe_piece(t, ws, text + b0, b1 - b0, out);
        if (st) return st;
        pos += take;
    }
    return DP_OK;
}

/* BPEs the code points [a, b) of the fragment as one piece. */
static dp_status piece(const eng_tokenizer *t, eng_tok_ws *ws, const uint8_t *text, size_t a, size_t b,
                       eng_tokens *out) {
    return a < b ? bpe_piece(t, ws, text + ws->cp_off[a], ws->cp_off[b] - ws->cp_off[a], out) : DP_OK;
}

/* gpt-2 (and smollm within its digit-free runs), on the code points [a, b):
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * The contractions are lowercase only, and a lone code point nothing matches is a piece. */
static dp_status split_gpt2(const eng_tokenizer *t, eng_tok_ws *ws, const uint8_t *text, size_t a, size_t b,
                            eng_tokens *out) {
    const uint32_t *cp = ws->cps;
    const uint8_t *fl = ws->cp_flags;
    size_t pos = a;
    while (pos < b) {
        const uint32_t c = cp[pos];
        size_t take = 0;
        if (c == '\'' && pos + 1 < b) {
            const uint32_t c1 = cp[pos + 1], c2 = pos + 2 < b ? cp[pos + 2] : 0;
            if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') take = 2;
            else if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) take = 3;
        }
        if (!take) {
            const size_t s0 = pos + (c == ' ');
            const uint8_t f2 = s0 < b ? fl[s0] : 0;
            const bool in = s0 < b;
            size_t e = s0;
            if (in && (f2 & F_L)) {
                while (e < b && (fl[e] & F_L)) e++;
                take = e - pos;
            } else if (in && (f2 & F_N)) {
                while (e < b && (fl[e] & F_N)) e++;
                take = e - pos;
            } else if (in && !(f2 & (F_WS | F_L | F_N))) {
                while (e < b && !(fl[e] & (F_WS | F_L | F_N))) e++;
                take = e - pos;
            } else {
                size_t k = 0;
                while (pos + k < b && (fl[pos + k] & F_WS)) k++;
                take = k > 1 && pos + k < b ? k - 1 : k ? k : 1;
            }
        }
        dp_status st = piece(t, ws, text, pos, pos + take, out);
        if (st) return st;
        pos += take;
    }
    return DP_OK;
}

/* smollm: every digit is a piece of its own (\p{N}), the text between digits goes through gpt-2. */
static dp_status split_smollm(const eng_tokenizer *t, eng_tok_ws *ws, const uint8_t *text, size_t n,
                              eng_tokens *out) {
    size_t run = 0;
    for (size_t pos = 0; pos <= n; pos++) {
        if (pos < n && !(ws->cp_flags[pos] & F_N)) continue;
        dp_status st = split_gpt2(t, ws, text, run, pos, out);
        if (!st && pos < n) st = piece(t, ws, text, pos, pos + 1, out);
        if (st) return st;
        run = pos + 1;
    }
    return DP_OK;
}

/* deepseek-llm: six patterns applied one after another, each splitting every piece the previous
 * ones left into its matches and the text between them (leftmost matches, as std::regex finds
 * them; \s is the ASCII white space of the C locale):
 *   [\r\n]   \s?[letters]+   \s?[punctuation]+   \s+$   [CJK]+   \p{N}+
 * The letter class is the tokenizer's own list of ranges. */
static const uint32_t k_ds_letters[][2] = {{0x0041, 0x005A}, {0x0061, 0x007A}, {0x00B5, 0x00B5}, {0x00C0, 0x00D6}, {0x00D8, 0x00F6}, {0x00F8, 0x01BA}, {0x01BC, 0x01BF}, {0x01C4, 0x0293}, {0x0295, 0x02AF}, {0x0370, 0x0373}, {0x0376, 0x0376}, {0x0377, 0x0377}, {0x037B, 0x037D}, {0x037F, 0x037F}, {0x0386, 0x0386}, {0x0388, 0x038A}, {0x038C, 0x038C}, {0x038E, 0x03A1}, {0x03A3, 0x03F5}, {0x03F7, 0x0481}, {0x048A, 0x052F}, {0x0531, 0x0556}, {0x10A0, 0x10C5}, {0x13A0, 0x13F5}, {0x13F8, 0x13FD}, {0x1C90, 0x1CBA}, {0x1CBD, 0x1CBF}, {0x1D00, 0x1D2B}, {0x1D6B, 0x1D77}, {0x1D79, 0x1D9A}, {0x1E00, 0x1F15}, {0x1F18, 0x1F1D}, {0x1F20, 0x1F45}, {0x1F48, 0x1F4D}, {0x1F50, 0x1F57}, {0x1F59, 0x1F59}, {0x1F5B, 0x1F5B}, {0x1F5D, 0x1F5D}, {0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4}, {0x1FB6, 0x1FBC}, {0x1FBE, 0x1FBE}, {0x1FC2, 0x1FC4}, {0x1FC6, 0x1FCC}, {0x1FD0, 0x1FD3}, {0x1FD6, 0x1FDB}, {0x1FE0, 0x1FEC}, {0x1FF2, 0x1FF4}, {0x1FF6, 0x1FFC}, {0x2102, 0x2102}, {0x2107, 0x2107}, {0x210A, 0x2113}, {0x2115, 0x2115}, {0x2119, 0x211D}, {0x2124, 0x2124}, {0x2126, 0x2126}, {0x2128, 0x2128}, {0x212A, 0x212D}, {0x212F, 0x2134}, {0x2139, 0x2139}, {0x213C, 0x213F}, {0x2145, 0x2149}, {0x214E, 0x214E}, {0x2183, 0x2183}, {0x2184, 0x2184}, {0x2C00, 0x2C7B}, {0x2C7E, 0x2CE4}, {0x2CEB, 0x2CEE}, {0x2CF2, 0x2CF2}, {0x2CF3, 0x2CF3}, {0xA640, 0xA66D}, {0xA680, 0xA69B}, {0xA722, 0xA76F}, {0xA771, 0xA787}, {0xA78B, 0xA78E}, {0xAB70, 0xABBF}, {0xFB00, 0xFB06}, {0xFB13, 0xFB17}, {0xFF21, 0xFF3A}, {0xFF41, 0xFF5A}, {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB}, {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943}};

static bool in_ranges(uint32_t c, const uint32_t (*r)[2], size_t n) {
    for (size_t i = 0; i < n; i++)
        if (c >= r[i][0] && c <= r[i][1]) return true;
    return false;
}
static bool ds_space(uint32_t c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
static bool ds_letter(uint32_t c) {
    if (c < 0x80) return (c | 0x20) >= 'a' && (c | 0x20) <= 'z';
    return in_ranges(c, k_ds_letters, sizeof(k_ds_letters) / sizeof(k_ds_letters[0]));
}
static bool ds_punct(uint32_t c) {
    return (c >= '!' && c <= '/') || (c >= ':' && c <= '~') || (c >= 0xFF01 && c <= 0xFF0F) ||
           (c >= 0xFF1A && c <= 0xFF5E) || (c >= 0x2018 && c <= 0x201F) || (c >= 0x3000 && c <= 0x3002);
}
static bool ds_cjk(uint32_t c) { return (c >= 0x4E00 && c <= 0x9FA5) || (c >= 0x0800 && c <= 0x4E00) || (c >= 0xAC00 && c <= 0xD7FF); }

/* Length of pattern k's match starting at pos within [pos, end), 0 if none. */
static size_t ds_match(const eng_tok_ws *ws, int k, size_t pos, size_t end) {
    const uint32_t *cp = ws->cps;
    size_t e = pos;
    switch (k) {
    case 0: return cp[pos] == '\r' || cp[pos] == '\n';
    case 1:
    case 2: {
        bool (*cls)(uint32_t) = k == 1 ? ds_letter : ds_punct;
        if (ds_space(cp[e]) && e + 1 < end && cls(cp[e + 1])) e++;
        while (e < end && cls(cp[e])) e++;
        return e - pos;
    }
    case 3:
        while (e < end && ds_space(cp[e])) e++;
        return e == end ? e - pos : 0;
    case 4:
        while (e < end && ds_cjk(cp[e])) e++;
        return e - pos;
    default:
        while (e < end && (ws->cp_flags[e] & F_N)) e++;
        return e - pos;
    }
}

/* Splits [a, b) by patterns k.. and BPEs the final pieces, in order. */
static dp_status split_deepseek(const eng_tokenizer *t, eng_tok_ws *ws, const uint8_t *text, int k, size_t a,
                                size_t b, eng_tokens *out) {
    if (a >= b) return DP_OK;
    if (k == 6) return piece(t, ws, text, a, b, out);
    size_t gap = a;
    for (size_t pos = a; pos < b;) {
        const size_t m = ds_match(ws, k, pos, b);
        if (!m) {
            pos++;
            continue;
        }
        dp_status st = split_deepseek(t, ws, text, k + 1, gap, pos, out);
        if (!st) st = split_deepseek(t, ws, text, k + 1, pos, pos + m, out);
        if (st) return st;
        pos += m;
        gap = pos;
    }
    return split_deepseek(t, ws, text, k + 1, gap, b, out);
}

static dp_status pretokenize(const eng_tokenizer *t, eng_tok_ws *ws, const uint8_t *text, size_t n,
                             eng_tokens *out) {
    switch (t->pre) {
    case PRE_GPT2: return split_gpt2(t, ws, text, 0, n, out);
    case PRE_SMOLLM: return split_smollm(t, ws, text, n, out);
    case PRE_DEEPSEEK_LLM: return split_deepseek(t, ws, text, 0, 0, n, out);
    default: return split_qwen(t, ws, text, n, out);
    }
}

/* Decodes text into ws->cps with flags and byte offsets. Invalid bytes become U+FFFD-flagged
 * one-byte characters so their bytes survive. */
static dp_status decode_fragment(eng_tok_ws *ws, const uint8_t *s, size_t len, size_t *n_out) {
    if (!ws_cps(ws, len + 1)) return DP_ENOMEM;
    size_t n = 0, i = 0;
    while (i < len) {
        uint32_t c;
        size_t k;
        if (s[i] < 0x80) {
            c = s[i];
            k = 1;
        } else {
            bool ok;
            k = dp_utf8_decode(s + i, len - i, &c, &ok);
            if (!ok) k = 1; /* keep one byte per invalid character */
        }
        ws->cps[n] = c;
        ws->cp_off[n] = (uint32_t)i;
        ws->cp_flags[n] = eng_unicode_flags(c);
        n++;
        i += k;
    }
    ws->cp_off[n] = (uint32_t)len;
    *n_out = n;
    return DP_OK;
}

/* ---- Special tokens and the public entry point ------------------------------------------ */

/* memmem is not in C11 or on every platform: memchr for the first byte, then compare. */
static const uint8_t *find_bytes(const uint8_t *h, size_t hn, const char *nd, size_t nn) {
    if (nn == 0 || hn < nn) return NULL;
    const uint8_t first = (uint8_t)nd[0];
    const uint8_t *end = h + hn - nn + 1;
    for (const uint8_t *p = h; p < end;) {
        p = memchr(p, first, (size_t)(end - p));
        if (!p) return NULL;
        if (memcmp(p, nd, nn) == 0) return p;
        p++;
    }
    return NULL;
}

typedef struct frag {
    size_t start, len; /* raw text */
    int32_t id;        /* >= 0: a special token */
} frag;

typedef struct frag_list {
    frag *v;
    size_t n, cap;
} frag_list;

static bool frag_push(frag_list *l, frag f) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        frag *p = realloc(l->v, cap * sizeof(frag));
        if (!p) return false;
        l->v = p;
        l->cap = cap;
    }
    l->v[l->n++] = f;
    return true;
}

dp_status eng_tokenize(const eng_tokenizer *t, eng_tok_ws *ws_in, const char *text, size_t len, bool add_special,
                       bool parse_special, eng_tokens *out, dp_err *err) {
    if (len > (size_t)UINT32_MAX - 1)
        return dp_err_set(err, DP_ERANGE, "tokenize: text of %zu bytes is over the 4 GiB limit", len);
    eng_tok_ws *ws = ws_in;
    if (!ws && eng_tok_ws_new(&ws)) return dp_err_set(err, DP_ENOMEM, "tokenize: out of memory");
    dp_status st = DP_OK;
    frag_list a = {0}, b = {0};
    const uint8_t *s = (const uint8_t *)text;
    if (add_special && t->add_bos && t->bos >= 0 && eng_tokens_push(out, t->bos)) goto oom;
    if (!frag_push(&a, (frag){0, len, -1})) goto oom;
    for (int32_t k = 0; k < t->n_special; k++) {
        const int32_t id = t->special[k];
        const int ty = t->type[id];
        if (!parse_special && ty != ENG_TOKEN_TYPE_USER_DEFINED) continue;
        const char *tx = t->text + t->text_off[id];
        const size_t tl = t->text_off[id + 1] - t->text_off[id];
        bool any = false;
        for (size_t i = 0; i < a.n && !any; i++)
            if (a.v[i].id < 0 && a.v[i].len >= tl && find_bytes(s + a.v[i].start, a.v[i].len, tx, tl)) any = true;
        if (!any) continue;
        b.n = 0;
        for (size_t i = 0; i < a.n; i++) {
            frag f = a.v[i];
            if (f.id >= 0) {
                if (!frag_push(&b, f)) goto oom;
                continue;
            }
            size_t pos = f.start, end = f.start + f.len;
            while (pos < end) {
                const uint8_t *hit = find_bytes(s + pos, end - pos, tx, tl);
                if (!hit) {
                    if (!frag_push(&b, (frag){pos, end - pos, -1})) goto oom;
                    break;
                }
                size_t h = (size_t)(hit - s);
                if (h > pos && !frag_push(&b, (frag){pos, h - pos, -1})) goto oom;
                if (!frag_push(&b, (frag){h, tl, id})) goto oom;
                pos = h + tl;
            }
        }
        frag_list tmp = a;
        a = b;
        b = tmp;
    }
    for (size_t i = 0; i < a.n; i++) {
        if (a.v[i].id >= 0) {
            if (eng_tokens_push(out, a.v[i].id)) goto oom;
            continue;
        }
        if (!a.v[i].len) continue;
        size_t n_cp;
        const uint8_t *fs = s + a.v[i].start;
        if ((st = decode_fragment(ws, fs, a.v[i].len, &n_cp))) goto oom;
        if ((st = pretokenize(t, ws, fs, n_cp, out))) goto oom;
    }
    if (add_special && t->add_eos && t->eos >= 0 && eng_tokens_push(out, t->eos)) goto oom;
    goto done;
oom:
    st = dp_err_set(err, DP_ENOMEM, "tokenize: out of memory (text of %zu bytes)", len);
done:
    free(a.v);
    free(b.v);
    if (!ws_in) eng_tok_ws_free(ws);
    return st;
}

/* ---- Detokenization --------------------------------------------------------------------- */

size_t eng_token_to_piece(const eng_tokenizer *t, int32_t id, bool special, const char **bytes) {
    *bytes = "";
    if (id < 0 || id >= t->n_vocab) return 0;
    const int ty = t->type[id];
    if (ty == ENG_TOKEN_TYPE_UNUSED) return 0;
    if ((ty == ENG_TOKEN_TYPE_CONTROL || ty == ENG_TOKEN_TYPE_UNKNOWN) && !special) return 0;
    *bytes = (const char *)t->dec + t->dec_off[id];
    return t->dec_off[id + 1] - t->dec_off[id];
}

size_t eng_detok_push(const eng_tokenizer *t, eng_detok *d, int32_t id, bool special, uint8_t *out, size_t cap) {
    const char *p;
    size_t n = eng_token_to_piece(t, id, special, &p);
    if (d->n_pending + n > cap) return 0; /* caller's buffer too small: nothing consumed */
    memcpy(out, d->pending, d->n_pending);
    memcpy(out + d->n_pending, p, n);
    size_t total = d->n_pending + n;
    size_t hold = dp_utf8_incomplete_tail(out, total);
    memcpy(d->pending, out + total - hold, hold);
    d->n_pending = hold;
    return total - hold;
}

size_t eng_detok_flush(eng_detok *d, uint8_t *out) {
    size_t n = d->n_pending;
    memcpy(out, d->pending, n);
    d->n_pending = 0;
    return n;
}
