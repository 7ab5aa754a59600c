/*
 * test_model.c - make-test-model: random-weight Qwen models with the real file layout.
 *
 * DESIGN
 * - Layout: tensor names, shapes and metadata keys are those llama.cpp's converter writes for
 *   qwen2 / qwen3 / qwen35 (model-formats.md §3.3-3.5), so the engine cannot tell a test model
 *   from a real one except by its weights. 1-D tensors and ssm_conv1d are F32, as converted.
 * - Determinism: every row of every tensor has its own RNG stream, seeded from (seed, tensor
 *   name, row), so the bytes do not depend on the thread count or chunking.
 * - Vocabulary: unless --vocab-from copies a real tokenizer, a small built-in byte-level BPE
 *   vocabulary: the 256 byte symbols, merges that spell a list of common English words, code
 *   keywords and CJK characters (with and without a leading space), the ChatML specials, and
 *   [PAD<id>] rows up to the embedding size. It tokenizes any text (byte fallback) and is
 *   valid for the same pre-tokenizers as the real files.
 */
#include "engine.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "gguf_writer.h"
#include "parallel.h"
#include "quant.h"
#include "rng.h"
#include "tokenizer.h"

void eng_test_model_defaults(eng_test_model_params *p, eng_arch arch) {
    memset(p, 0, sizeof(*p));
    p->arch = arch;
    p->n_layer = 2;
    p->n_embd = 64;
    p->n_head = 4;
    p->n_head_kv = 2;
    p->n_ff = 128;
    p->n_ctx_train = 32768;
    p->rope_base = 1e6f;
    p->weight_type = ENG_TYPE_F16;
    p->embd_type = -1;
    p->output_type = -1;
    p->seed = 42;
    if (arch == ENG_ARCH_QWEN3) {
        p->head_dim = 32;
        p->n_ctx_train = 40960;
    }
    if (arch == ENG_ARCH_QWEN35) {
        p->n_layer = 4;
        p->head_dim = 32;
        p->n_head_kv = 1;
        p->rope_base = 1e7f;
        p->n_ctx_train = 262144;
        p->ssm_n_group = 2;
        p->ssm_dt_rank = 4;
        p->ssm_d_state = 16;
        p->ssm_conv_kernel = 4;
        p->full_attn_interval = 4;
    }
}

dp_status eng_test_model_shape(eng_test_model_params *p, const char *shape) {
    if (!strcmp(shape, "qwen3-4b")) {
        eng_test_model_defaults(p, ENG_ARCH_QWEN3);
        p->n_layer = 36, p->n_embd = 2560, p->n_head = 32, p->n_head_kv = 8, p->head_dim = 128;
        p->n_ff = 9728, p->n_vocab = 151936, p->rope_base = 1e6f, p->n_ctx_train = 40960;
        p->name = "qwen3-4b-shape (random weights)";
        return DP_OK;
    }
    if (!strcmp(shape, "qwen35-4b")) {
        eng_test_model_defaults(p, ENG_ARCH_QWEN35);
        p->n_layer = 32, p->n_embd = 2560, p->n_head = 16, p->n_head_kv = 4, p->head_dim = 256, p->n_rot = 64;
        p->n_ff = 9216, p->n_vocab = 248320, p->rope_base = 1e7f, p->n_ctx_train = 262144;
        p->ssm_n_group = 16, p->ssm_dt_rank = 32, p->ssm_d_state = 128, p->ssm_conv_kernel = 4;
        p->full_attn_interval = 4;
        p->name = "qwen35-4b-shape (random weights)";
        return DP_OK;
    }
    if (!strcmp(shape, "qwen2.5-3b")) {
        eng_test_model_defaults(p, ENG_ARCH_QWEN2);
        p->n_layer = 36, p->n_embd = 2048, p->n_head = 16, p->n_head_kv = 2, p->head_dim = 128;
        p->n_ff = 11008, p->n_vocab = 151936, p->rope_base = 1e6f, p->n_ctx_train = 32768;
        p->name = "qwen2.5-3b-shape (random weights)";
        return DP_OK;
    }
    return DP_EINVAL;
}

/* ---- Built-in vocabulary ---------------------------------------------------------------- */

static const char *const k_words[] = {
    "the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with", "be", "by", "on", "not",
    "he", "this", "are", "or", "his", "from", "at", "which", "but", "have", "an", "had", "they", "you", "were",
    "their", "one", "all", "we", "can", "her", "has", "there", "been", "if", "more", "when", "will", "would",
    "who", "so", "no", "she", "other", "its", "may", "these", "about", "into", "than", "them", "only", "some",
    "time", "new", "also", "two", "first", "any", "like", "our", "what", "over", "such", "most", "after",
    "document", "summary", "report", "data", "file", "model", "system", "user", "assistant", "text", "line",
    "number", "value", "result", "error", "test", "run", "job", "page", "section", "table", "team", "project",
    "function", "return", "const", "static", "void", "int", "char", "struct", "include", "define", "while",
    "else", "case", "break", "def", "class", "import", "self", "None", "True", "False", "print", "let", "var",
    "fn", "pub", "use", "impl", "string", "list", "main", "null", "size", "type", "name", "index", "count",
    "ing", "ed", "er", "es", "tion", "ly", "ment", "ness", "able", "al", "ic", "ive", "ous", "th", "re", "on",
    "的", "是", "在", "了", "和", "有", "我", "不", "这", "个", "们", "中", "人", "上", "为", "国", "大", "文",
    "档", "数", "据", "报", "告", "总", "结", "模", "型", "系", "统", "。", "，", "：",
    "  ", "    ", "\n\n", "\n", "()", "{}", "();", "==", "!=", "->", "::", "//", "/*", "*/", "...",
};

/* Appends the byte-level encoding of byte b (1 or 2 UTF-8 bytes) to out. */
static size_t enc_byte(int b, char *out) {
    uint32_t cp = eng_byte_to_codepoint(b);
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

typedef struct vocab {
    char **tok;      /* [n] token texts */
    int32_t *type;   /* [n] token types */
    int64_t n, cap;
    char **merges;   /* [n_merges] "left right" */
    int64_t n_merges, cap_merges;
    int64_t *hash;   /* open addressing over token ids, for dedup */
    int64_t hash_cap;
} vocab;

static uint64_t hstr(const char *s) {
    uint64_t h = 1469598103934665603ull;
    while (*s) h = (h ^ (uint8_t)*s++) * 1099511628211ull;
    return h;
}

static int64_t vocab_find(const vocab *v, const char *s) {
    uint64_t i = hstr(s) & (uint64_t)(v->hash_cap - 1);
    while (v->hash[i] >= 0) {
        if (!strcmp(v->tok[v->hash[i]], s)) return v->hash[i];
        i = (i + 1) & (uint64_t)(v->hash_cap - 1);
    }
    return -1;
}

static void hash_put(vocab *v, int64_t id) {
    uint64_t i = hstr(v->tok[id]) & (uint64_t)(v->hash_cap - 1);
    while (v->hash[i] >= 0) i = (i + 1) & (uint64_t)(v->hash_cap - 1);
    v->hash[i] = id;
}

/* Keeps the load factor at most 1/2 so probing always ends. */
static dp_status vocab_rehash(vocab *v, int64_t cap) {
    int64_t *h = malloc((size_t)cap * sizeof(*h));
    if (!h) return DP_ENOMEM;
    free(v->hash);
    v->hash = h;
    v->hash_cap = cap;
    for (int64_t i = 0; i < cap; i++) h[i] = -1;
    for (int64_t id = 0; id < v->n; id++) hash_put(v, id);
    return DP_OK;
}

static dp_status vocab_add(vocab *v, const char *s, int32_t type) {
    if (v->n == v->cap) {
        int64_t cap = v->cap ? v->cap * 2 : 1024;
        char **t = realloc(v->tok, (size_t)cap * sizeof(*t));
        if (!t) return DP_ENOMEM;
        v->tok = t;
        int32_t *ty = realloc(v->type, (size_t)cap * sizeof(*ty));
        if (!ty) return DP_ENOMEM;
        v->type = ty;
        v->cap = cap;
    }
    v->tok[v->n] = strdup(s);
    if (!v->tok[v->n]) return DP_ENOMEM;
    v->type[v->n] = type;
    v->n++;
    if (2 * v->n > v->hash_cap) return vocab_rehash(v, v->hash_cap * 2);
    hash_put(v, v->n - 1);
    return DP_OK;
}

static dp_status vocab_add_merge(vocab *v, const char *l, const char *r) {
    if (v->n_merges == v->cap_merges) {
        int64_t cap = v->cap_merges ? v->cap_merges * 2 : 1024;
        char **m = realloc(v->merges, (size_t)cap * sizeof(*m));
        if (!m) return DP_ENOMEM;
        v->merges = m;
        v->cap_merges = cap;
    }
    size_t nl = strlen(l), nr = strlen(r);
    char *m = malloc(nl + nr + 2);
    if (!m) return DP_ENOMEM;
    memcpy(m, l, nl);
    m[nl] = ' ';
    memcpy(m + nl + 1, r, nr + 1);
    v->merges[v->n_merges++] = m;
    return DP_OK;
}

static void vocab_free(vocab *v) {
    for (int64_t i = 0; i < v->n; i++) free(v->tok[i]);
    for (int64_t i = 0; i < v->n_merges; i++) free(v->merges[i]);
    free(v->tok);
    free(v->type);
    free(v->merges);
    free(v->hash);
    memset(v, 0, sizeof(*v));
}

/* Adds the merges that build word (raw bytes) left to right. */
static dp_status vocab_add_word(vocab *v, const char *word) {
    char cur[256] = "", sym[8];
    size_t n = strlen(word);
    if (n == 0 || n > 60) return DP_OK;
    size_t cl = enc_byte((uint8_t)word[0], cur);
    cur[cl] = '\0';
    for (size_t i = 1; i < n; i++) {
        size_t sl = enc_byte((uint8_t)word[i], sym);
        sym[sl] = '\0';
        char next[256];
        snprintf(next, sizeof(next), "%s%s", cur, sym);
        if (vocab_find(v, next) < 0) {
            dp_status st = vocab_add_merge(v, cur, sym);
            if (!st) st = vocab_add(v, next, 1);
            if (st) return st;
        }
        memcpy(cur, next, strlen(next) + 1);
    }
    return DP_OK;
}

static const char *const k_specials[] = {
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>", "<think>", "</think>",
};

static dp_status vocab_build(vocab *v, eng_arch arch, uint32_t n_vocab_min) {
    memset(v, 0, sizeof(*v));
    dp_status st = vocab_rehash(v, 1 << 12);
    for (int b = 0; b < 256 && !st; b++) {
        char s[3];
        size_t l = enc_byte(b, s);
        s[l] = '\0';
        st = vocab_add(v, s, 1);
    }
    for (size_t i = 0; i < sizeof(k_words) / sizeof(k_words[0]) && !st; i++) {
        char sp[80];
        st = vocab_add_word(v, k_words[i]);
        if (!st && k_words[i][0] != ' ' && k_words[i][0] != '\n') {
            snprintf(sp, sizeof(sp), " %s", k_words[i]);
            st = vocab_add_word(v, sp);
        }
    }
    size_t n_spec = arch == ENG_ARCH_QWEN2 ? 5 : 7;
    for (size_t i = 0; i < n_spec && !st; i++)
        st = vocab_add(v, k_specials[i], k_specials[i][1] == '|' ? 3 : 4);
    while (!st && v->n < (int64_t)n_vocab_min) {
        char pad[32];
        snprintf(pad, sizeof(pad), "[PAD%lld]", (long long)v->n);
        st = vocab_add(v, pad, 5);
    }
    return st;
}

/* ChatML templates in the shapes model-formats.md §6.4 detects (written for these files). */
static const char k_tmpl_qwen2[] =
    "{%- if messages[0]['role'] != 'system' %}{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. "
    "You are a helpful assistant.<|im_end|>\\n' }}{%- endif %}"
    "{%- for message in messages %}{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";
static const char k_tmpl_qwen3[] =
    "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + "
    "'\\n' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}"
    "{%- endif %}{%- endif %}";
static const char k_tmpl_qwen35[] =
    "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content | trim + "
    "'<|im_end|>\\n' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}"
    "{%- else %}{{- '<think>\\n' }}{%- endif %}{%- endif %}";

/* ---- Tensors and weights ---------------------------------------------------------------- */

typedef enum init_kind {
    INIT_NORMAL,   /* N(0, std) */
    INIT_UNIFORM,  /* U(a, b) */
    INIT_NEG_EXP,  /* -exp(U(a, b)) : ssm_a */
} init_kind;

typedef struct tinit {
    init_kind kind;
    float a, b;
} tinit;

typedef struct gen_ctx {
    const eng_test_model_params *p;
    tinit *init;            /* [n_tensors] */
    const eng_gguf_tensor *t;
    int64_t idx, row0;
    void *dst;
    size_t row_bytes;
} gen_ctx;

/* Approximately normal: the sum of four 16-bit uniforms (Irwin-Hall), rescaled to unit
 * variance. Plenty for random weights and far cheaper than Box-Muller. */
static float rand_normal(uint64_t *s) {
    uint64_t r = dp_splitmix64(s);
    float sum = (float)(r & 0xFFFF) + (float)((r >> 16) & 0xFFFF) + (float)((r >> 32) & 0xFFFF) +
                (float)(r >> 48);
    return (sum / 65536.0f - 2.0f) * 1.7320508f;
}

static float rand_uniform(uint64_t *s) { return (float)(dp_splitmix64(s) >> 40) / 16777216.0f; }

static void gen_rows(void *vctx, int64_t lo, int64_t hi) {
    gen_ctx *c = vctx;
    const eng_gguf_tensor *t = c->t;
    const tinit in = c->init[c->idx];
    const int64_t n = t->ne[0];
    float *row = malloc((size_t)n * sizeof(float));
    if (!row) return; /* cannot happen for these sizes; the row stays zero */
    uint64_t name_h = hstr(t->name);
    for (int64_t r = lo; r < hi; r++) {
        uint64_t s = c->p->seed * 0x9E3779B97F4A7C15ull ^ name_h ^ (uint64_t)(c->row0 + r) * 0xD1B54A32D192ED03ull;
        for (int64_t i = 0; i < n; i++) {
            switch (in.kind) {
            case INIT_NORMAL: row[i] = rand_normal(&s) * in.a; break;
            case INIT_UNIFORM: row[i] = in.a + (in.b - in.a) * rand_uniform(&s); break;
            case INIT_NEG_EXP: row[i] = -expf(in.a + (in.b - in.a) * rand_uniform(&s)); break;
            }
        }
        eng_quantize_row(t->type, row, (uint8_t *)c->dst + (size_t)r * c->row_bytes, n);
    }
    free(row);
}

typedef struct fill_ud {
    const eng_test_model_params *p;
    tinit *init;
    int n_threads;
} fill_ud;

static dp_status fill_cb(void *ud, int64_t idx, const eng_gguf_tensor *t, int64_t row0, int64_t n_rows, void *dst,
                         dp_err *err) {
    fill_ud *f = ud;
    gen_ctx c = {f->p, f->init, t, idx, row0, dst, eng_row_size(t->type, t->ne[0])};
    return eng_parallel_for(f->n_threads, n_rows, gen_rows, &c, err);
}

typedef struct tlist {
    eng_gguf_writer *w;
    tinit *init;
    int64_t cap;
    const eng_test_model_params *p;
    dp_status st;
    char bad[160]; /* why st is DP_EINVAL */
} tlist;

/* The type a 2-D weight gets: the first override whose pattern its name contains, else dflt. */
static int weight_type_of(const eng_test_model_params *p, const char *name, int dflt) {
    for (int i = 0; i < p->n_overrides && i < 8; i++)
        if (p->override_pattern[i] && strstr(name, p->override_pattern[i])) return p->override_type[i];
    return dflt;
}

static void add(tlist *l, const char *name, int type, int64_t ne0, int64_t ne1, tinit in) {
    if (l->st) return;
    int64_t ne[2] = {ne0, ne1};
    int64_t i = eng_gguf_writer_n_tensors(l->w);
    if (i == l->cap) {
        int64_t cap = l->cap ? l->cap * 2 : 256;
        tinit *p = realloc(l->init, (size_t)cap * sizeof(*p));
        if (!p) {
            l->st = DP_ENOMEM;
            return;
        }
        l->init = p;
        l->cap = cap;
    }
    const eng_type_traits *tr = eng_type_get(type);
    if (ne0 % tr->blck) {
        snprintf(l->bad, sizeof(l->bad), "%s: width %lld is not a multiple of %s's block of %lld", name,
                 (long long)ne0, tr->name, (long long)tr->blck);
        l->st = DP_EINVAL;
        return;
    }
    l->init[i] = in;
    l->st = eng_gguf_writer_add_tensor(l->w, name, type, ne1 > 1 ? 2 : 1, ne, NULL);
}

/* A projection: weight type, N(0, 1/fan_in). */
static void addw(tlist *l, const char *name, int64_t in, int64_t out) {
    add(l, name, weight_type_of(l->p, name, l->p->weight_type), in, out, (tinit){INIT_NORMAL, 1.0f / sqrtf((float)in), 0});
}

static void addnorm(tlist *l, const char *name, int64_t n) {
    add(l, name, ENG_TYPE_F32, n, 1, (tinit){INIT_UNIFORM, 0.8f, 1.2f});
}

static dp_status add_tensors(tlist *l, const eng_test_model_params *p, uint32_t n_vocab, uint32_t hd) {
    char nm[64];
    const int64_t E = p->n_embd, F = p->n_ff;
    const int et = p->embd_type >= 0 ? p->embd_type : p->weight_type;
    add(l, "token_embd.weight", weight_type_of(p, "token_embd.weight", et), E, n_vocab, (tinit){INIT_NORMAL, 0.15f, 0});
    for (uint32_t i = 0; i < p->n_layer; i++) {
#define NM(s) (snprintf(nm, sizeof(nm), "blk.%u." s, i), nm)
        addnorm(l, NM("attn_norm.weight"), E);
        bool recurrent = p->arch == ENG_ARCH_QWEN35 && (i + 1) % p->full_attn_interval != 0;
        if (p->arch == ENG_ARCH_QWEN35 && recurrent) {
            const int64_t dk = p->ssm_d_state, inner = (int64_t)p->ssm_dt_rank * dk; /* d_v = d_k */
            const int64_t conv_ch = 2 * (int64_t)p->ssm_n_group * dk + inner;
            addw(l, NM("attn_qkv.weight"), E, conv_ch);
            addw(l, NM("attn_gate.weight"), E, inner);
            add(l, NM("ssm_conv1d.weight"), ENG_TYPE_F32, p->ssm_conv_kernel, conv_ch, (tinit){INIT_NORMAL, 0.5f, 0});
            add(l, NM("ssm_dt.bias"), ENG_TYPE_F32, p->ssm_dt_rank, 1, (tinit){INIT_UNIFORM, -1.0f, 1.5f});
            add(l, NM("ssm_a"), ENG_TYPE_F32, p->ssm_dt_rank, 1, (tinit){INIT_NEG_EXP, logf(0.02f), logf(4.0f)});
            addw(l, NM("ssm_beta.weight"), E, p->ssm_dt_rank);
            addw(l, NM("ssm_alpha.weight"), E, p->ssm_dt_rank);
            addnorm(l, NM("ssm_norm.weight"), dk);
            addw(l, NM("ssm_out.weight"), inner, E);
        } else {
            const int64_t q = (int64_t)p->n_head * hd, kv = (int64_t)p->n_head_kv * hd;
            addw(l, NM("attn_q.weight"), E, p->arch == ENG_ARCH_QWEN35 ? 2 * q : q);
            addw(l, NM("attn_k.weight"), E, kv);
            addw(l, NM("attn_v.weight"), E, kv);
            if (p->arch == ENG_ARCH_QWEN2) {
                add(l, NM("attn_q.bias"), ENG_TYPE_F32, q, 1, (tinit){INIT_NORMAL, 0.5f, 0});
                add(l, NM("attn_k.bias"), ENG_TYPE_F32, kv, 1, (tinit){INIT_NORMAL, 0.5f, 0});
                add(l, NM("attn_v.bias"), ENG_TYPE_F32, kv, 1, (tinit){INIT_NORMAL, 0.2f, 0});
            }
            if (p->arch != ENG_ARCH_QWEN2) {
                addnorm(l, NM("attn_q_norm.weight"), hd);
                addnorm(l, NM("attn_k_norm.weight"), hd);
            }
            addw(l, NM("attn_output.weight"), q, E);
        }
        addnorm(l, p->arch == ENG_ARCH_QWEN35 ? NM("post_attention_norm.weight") : NM("ffn_norm.weight"), E);
        addw(l, NM("ffn_gate.weight"), E, F);
        addw(l, NM("ffn_up.weight"), E, F);
        addw(l, NM("ffn_down.weight"), F, E);
#undef NM
    }
    addnorm(l, "output_norm.weight", E);
    if (p->output_type >= 0)
        add(l, "output.weight", weight_type_of(p, "output.weight", p->output_type), E, n_vocab,
            (tinit){INIT_NORMAL, 1.0f / sqrtf((float)E), 0});
    return l->st;
}

static dp_status validate(const eng_test_model_params *p, uint32_t *hd_out, dp_err *err) {
    if (p->arch != ENG_ARCH_QWEN2 && p->arch != ENG_ARCH_QWEN3 && p->arch != ENG_ARCH_QWEN35)
        return dp_err_set(err, DP_EINVAL, "make-test-model: --arch must be qwen2, qwen3 or qwen35");
    if (!p->n_layer || p->n_layer > ENG_MAX_LAYERS || !p->n_embd || !p->n_head || !p->n_head_kv || !p->n_ff)
        return dp_err_set(err, DP_EINVAL, "make-test-model: layers, hidden, heads, kv-heads and ffn must be > 0 "
                          "(layers <= %d)", ENG_MAX_LAYERS);
    if (p->n_head % p->n_head_kv)
        return dp_err_set(err, DP_EINVAL, "make-test-model: --heads %u must be a multiple of --kv-heads %u", p->n_head,
                          p->n_head_kv);
    uint32_t hd = p->head_dim ? p->head_dim : p->n_embd / p->n_head;
    if (!hd || hd % 2) return dp_err_set(err, DP_EINVAL, "make-test-model: head dim %u must be even and > 0", hd);
    /* every weight type must be one the engine runs, with a block that divides the width it is
     * used at (K-quants need multiples of 256: llama.cpp's recipes fall back for narrower rows) */
    const int types[3] = {p->weight_type, p->embd_type, p->output_type};
    const char *what[3] = {"--type", "--token-embedding-type", "--output-tensor-type"};
    for (int i = 0; i < 3 + p->n_overrides && i < 3 + 8; i++) {
        const int t = i < 3 ? types[i] : p->override_type[i - 3];
        if (i > 0 && i < 3 && t < 0) continue;
        const eng_type_traits *tr = eng_type_get(t);
        if (!tr || !tr->from_float || !eng_type_is_supported(t) || t == ENG_TYPE_Q8_K) {
            if (i < 3) return dp_err_set(err, DP_EINVAL, "make-test-model: %s: type %d is not a weight type", what[i], t);
            return dp_err_set(err, DP_EINVAL, "make-test-model: --tensor-type %s: type %d is not a weight type",
                              p->override_pattern[i - 3], t);
        }
    }
    if (p->arch == ENG_ARCH_QWEN35 &&
        (!p->ssm_n_group || !p->ssm_dt_rank || !p->ssm_d_state || !p->ssm_conv_kernel || !p->full_attn_interval ||
         p->ssm_dt_rank % p->ssm_n_group))
        return dp_err_set(err, DP_EINVAL, "make-test-model: qwen35 needs ssm heads (v heads a multiple of k heads), "
                          "state size, conv kernel and attention interval > 0");
    *hd_out = hd;
    return DP_OK;
}

dp_status eng_test_model_write(const eng_test_model_params *p, const char *path, int n_threads, dp_err *err) {
    uint32_t hd = 0;
    dp_status st = validate(p, &hd, err);
    if (st) return st;
    eng_gguf_writer *w = NULL;
    eng_gguf *src = NULL;
    vocab v = {0};
    tlist l = {0};
    if ((st = eng_gguf_writer_init(&w))) return dp_err_set(err, st, "out of memory");
    const char *a = eng_arch_name(p->arch);
    char k[128];
#define KEY(s) (snprintf(k, sizeof(k), "%s.%s", a, s), k)
    eng_gguf_writer_set_str(w, "general.architecture", a);
    eng_gguf_writer_set_str(w, "general.type", "model");
    eng_gguf_writer_set_str(w, "general.name", p->name ? p->name : "docpipe test model (random weights)");
    eng_gguf_writer_set_u32(w, KEY("context_length"), p->n_ctx_train);
    eng_gguf_writer_set_u32(w, KEY("embedding_length"), p->n_embd);
    eng_gguf_writer_set_u32(w, KEY("block_count"), p->n_layer);
    eng_gguf_writer_set_u32(w, KEY("feed_forward_length"), p->n_ff);
    eng_gguf_writer_set_u32(w, KEY("attention.head_count"), p->n_head);
    eng_gguf_writer_set_u32(w, KEY("attention.head_count_kv"), p->n_head_kv);
    eng_gguf_writer_set_f32(w, KEY("rope.freq_base"), p->rope_base);
    eng_gguf_writer_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), 1e-6f);
    if (p->arch != ENG_ARCH_QWEN2 || hd != p->n_embd / p->n_head) {
        eng_gguf_writer_set_u32(w, KEY("attention.key_length"), hd);
        eng_gguf_writer_set_u32(w, KEY("attention.value_length"), hd);
    }
    if (p->arch == ENG_ARCH_QWEN35) {
        uint32_t n_rot = p->n_rot ? p->n_rot : hd / 4;
        /* IMROPE sections (in rotary pairs): 11/11/10 of 32 for the 4B; same proportions */
        int32_t half = (int32_t)n_rot / 2, s0 = (half * 11 + 31) / 32, s1 = s0, s2 = half - s0 - s1;
        if (s2 < 0) s2 = 0;
        int32_t sections[4] = {s0, s1, s2, 0};
        eng_gguf_writer_set_u32(w, KEY("rope.dimension_count"), n_rot);
        eng_gguf_writer_set_arr(w, KEY("rope.dimension_sections"), ENG_GGUF_TYPE_INT32, sections, 4);
        eng_gguf_writer_set_u32(w, KEY("ssm.conv_kernel"), p->ssm_conv_kernel);
        eng_gguf_writer_set_u32(w, KEY("ssm.state_size"), p->ssm_d_state);
        eng_gguf_writer_set_u32(w, KEY("ssm.group_count"), p->ssm_n_group);
        eng_gguf_writer_set_u32(w, KEY("ssm.time_step_rank"), p->ssm_dt_rank);
        eng_gguf_writer_set_u32(w, KEY("ssm.inner_size"), p->ssm_dt_rank * p->ssm_d_state);
        eng_gguf_writer_set_u32(w, KEY("full_attention_interval"), p->full_attn_interval);
    } else if (p->n_rot && p->n_rot != hd) {
        eng_gguf_writer_set_u32(w, KEY("rope.dimension_count"), p->n_rot);
    }
#undef KEY
    /* llama.cpp's file-type number of a file "mostly" of the weight type */
    uint32_t ft = 0;
    switch (p->weight_type) {
    case ENG_TYPE_F16: ft = 1; break;
    case ENG_TYPE_Q4_0: ft = 2; break;
    case ENG_TYPE_Q4_1: ft = 3; break;
    case ENG_TYPE_Q8_0: ft = 7; break;
    case ENG_TYPE_Q5_0: ft = 8; break;
    case ENG_TYPE_Q5_1: ft = 9; break;
    case ENG_TYPE_Q2_K: ft = 10; break;
    case ENG_TYPE_Q3_K: ft = 12; break;
    case ENG_TYPE_Q4_K: ft = 15; break;
    case ENG_TYPE_Q5_K: ft = 17; break;
    case ENG_TYPE_Q6_K: ft = 18; break;
    case ENG_TYPE_BF16: ft = 32; break;
    default: ft = 0;
    }
    eng_gguf_writer_set_u32(w, "general.file_type", ft);
    eng_gguf_writer_set_u32(w, "general.quantization_version", 2);

    /* Tokenizer: copied from a real file, or the built-in one */
    uint32_t n_vocab = p->n_vocab;
    if (p->vocab_from) {
        if ((st = eng_gguf_open(p->vocab_from, &src, err))) {
            dp_err_prefix(err, "--vocab-from");
            goto done;
        }
        const eng_gguf_kv *toks;
        if ((st = eng_gguf_get_arr(src, "tokenizer.ggml.tokens", ENG_GGUF_TYPE_STRING, &toks, err))) goto done;
        for (int64_t i = 0; i < eng_gguf_n_kv(src); i++) {
            const eng_gguf_kv *kv = eng_gguf_kv_at(src, i);
            if (kv->key.len > 10 && !memcmp(kv->key.ptr, "tokenizer.", 10))
                if ((st = eng_gguf_writer_copy_kv(w, kv))) goto done;
        }
        if (n_vocab < toks->n) n_vocab = (uint32_t)toks->n;
    } else {
        if ((st = vocab_build(&v, p->arch, n_vocab))) goto oom;
        if (n_vocab < v.n) n_vocab = (uint32_t)v.n;
        const int64_t eot = vocab_find(&v, "<|endoftext|>"), im_end = vocab_find(&v, "<|im_end|>");
        eng_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
        eng_gguf_writer_set_str(w, "tokenizer.ggml.pre", p->arch == ENG_ARCH_QWEN35 ? "qwen35" : "qwen2");
        if ((st = eng_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v.tok, NULL,
                                              (uint64_t)v.n)))
            goto oom;
        if ((st = eng_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", ENG_GGUF_TYPE_INT32, v.type, (uint64_t)v.n)))
            goto oom;
        if ((st = eng_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", (const char *const *)v.merges, NULL,
                                              (uint64_t)v.n_merges)))
            goto oom;
        eng_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)im_end);
        eng_gguf_writer_set_u32(w, "tokenizer.ggml.padding_token_id", (uint32_t)eot);
        eng_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)eot);
        eng_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", false);
        eng_gguf_writer_set_str(w, "tokenizer.chat_template",
                                p->arch == ENG_ARCH_QWEN2 ? k_tmpl_qwen2 :
                                p->arch == ENG_ARCH_QWEN3 ? k_tmpl_qwen3 : k_tmpl_qwen35);
    }

    l.w = w;
    l.p = p;
    if ((st = add_tensors(&l, p, n_vocab, hd))) {
        if (st == DP_EINVAL) {
            st = dp_err_set(err, st, "make-test-model: %s", l.bad);
            goto done;
        }
        goto oom;
    }
    fill_ud f = {p, l.init, n_threads};
    st = eng_gguf_writer_write(w, path, fill_cb, &f, err);
    goto done;
oom:
    st = dp_err_set(err, st, "make-test-model: cannot build the model description (%s)", dp_status_str(st));
done:
    vocab_free(&v);
    free(l.init);
    eng_gguf_close(src);
    eng_gguf_writer_free(w);
    return st;
}
