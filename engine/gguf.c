/*
 * gguf.c - the GGUF reader (format in gguf.h).
 *
 * DESIGN: one pass over the header with a cursor that knows how many bytes are left; every
 * read goes through rd_*() which refuse to run past the end. Allocations are sized only from
 * counts already proven to fit in the remaining bytes, so a 200-byte file cannot make us
 * allocate more than a few times its size. Duplicate keys and tensor names are found with an
 * open-addressing hash set. Tensor offsets must be back to back in info order (what llama.cpp
 * writes and requires); that also rules out overlaps. Ownership: eng_gguf owns its index
 * arrays and, when opened from a path, the mapping; everything handed out points into them.
 */
#include "gguf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "platform.h"
#include "quant.h"

struct eng_gguf {
    dp_map map;              /* owned when opened from a path */
    const uint8_t *base;     /* file bytes */
    size_t size;             /* file size */
    char path[512];          /* for messages */
    uint32_t version;
    uint32_t alignment;
    uint64_t data_offset;    /* file offset of the data section */
    int64_t n_kv;
    eng_gguf_kv *kv;         /* [n_kv] */
    int64_t n_tensors;
    eng_gguf_tensor *tensors;/* [n_tensors] */
    eng_gguf_str *str_pool;  /* string views for every STRING value, owned */
    uint64_t n_str_pool;
    int64_t *tensor_hash;    /* open addressing over tensor indices, -1 = empty */
    uint64_t tensor_hash_cap;
};

/* ---- Cursor ----------------------------------------------------------------------------- */

typedef struct rd {
    const uint8_t *p;
    size_t size;
    size_t pos;
    const char *path;
    dp_err *err;
} rd;

static dp_status rd_fail(rd *r, size_t at, const char *fmt, ...) DP_PRINTF(3, 4);
static dp_status rd_fail(rd *r, size_t at, const char *fmt, ...) {
    char msg[DP_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return dp_err_set(r->err, DP_EFORMAT, "%s: offset 0x%zx: %s", r->path, at, msg);
}

static inline size_t rd_left(const rd *r) { return r->size - r->pos; }

static dp_status rd_bytes(rd *r, void *out, size_t n, const char *what) {
    if (n > rd_left(r))
        return rd_fail(r, r->pos, "file ends inside %s (%zu bytes needed, %zu left)", what, n, rd_left(r));
    memcpy(out, r->p + r->pos, n);
    r->pos += n;
    return DP_OK;
}

static dp_status rd_u32(rd *r, uint32_t *v, const char *what) {
    uint8_t b[4] = {0};
    dp_status st = rd_bytes(r, b, 4, what);
    if (st) return st;
    *v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    return DP_OK;
}

static dp_status rd_u64(rd *r, uint64_t *v, const char *what) {
    uint8_t b[8] = {0};
    dp_status st = rd_bytes(r, b, 8, what);
    if (st) return st;
    uint64_t x = 0;
    for (int i = 7; i >= 0; i--) x = x << 8 | b[i];
    *v = x;
    return DP_OK;
}

/* A string view; length capped by max and by the bytes left. */
static dp_status rd_str(rd *r, eng_gguf_str *s, uint64_t max, const char *what) {
    size_t at = r->pos;
    uint64_t len;
    dp_status st = rd_u64(r, &len, what);
    if (st) return st;
    if (len > max) return rd_fail(r, at, "%s has length %llu but must be <= %llu", what,
                                  (unsigned long long)len, (unsigned long long)max);
    if (len > rd_left(r))
        return rd_fail(r, at, "%s has length %llu but only %zu bytes are left in the file", what,
                       (unsigned long long)len, rd_left(r));
    s->ptr = (const char *)r->p + r->pos;
    s->len = len;
    r->pos += (size_t)len;
    return DP_OK;
}

static size_t scalar_size(eng_gguf_type t) {
    switch (t) {
    case ENG_GGUF_TYPE_UINT8: case ENG_GGUF_TYPE_INT8: case ENG_GGUF_TYPE_BOOL: return 1;
    case ENG_GGUF_TYPE_UINT16: case ENG_GGUF_TYPE_INT16: return 2;
    case ENG_GGUF_TYPE_UINT32: case ENG_GGUF_TYPE_INT32: case ENG_GGUF_TYPE_FLOAT32: return 4;
    case ENG_GGUF_TYPE_UINT64: case ENG_GGUF_TYPE_INT64: case ENG_GGUF_TYPE_FLOAT64: return 8;
    default: return 0;
    }
}

const char *eng_gguf_type_name(eng_gguf_type t) {
    static const char *const names[] = {"UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "FLOAT32",
                                        "BOOL", "STRING", "ARRAY", "UINT64", "INT64", "FLOAT64"};
    return (unsigned)t < ENG_GGUF_TYPE_COUNT ? names[t] : "invalid";
}

/* ---- Hash set of names ------------------------------------------------------------------ */

static uint64_t hash_bytes(const char *p, size_t n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)p[i]) * 1099511628211ull;
    return h;
}

static uint64_t hash_cap_for(uint64_t n) {
    uint64_t cap = 16;
    while (cap < 2 * n + 1) cap *= 2;
    return cap;
}

/* ---- Parsing ---------------------------------------------------------------------------- */

static dp_status parse_kv(eng_gguf *g, rd *r, int64_t idx, uint64_t *n_str_used) {
    eng_gguf_kv *kv = &g->kv[idx];
    size_t at = r->pos;
    char what[96];
    kv->file_offset = at;
    snprintf(what, sizeof(what), "the key of metadata entry %lld", (long long)idx);
    dp_status st = rd_str(r, &kv->key, 65535, what);
    if (st) return st;
    if (kv->key.len == 0) return rd_fail(r, at, "metadata entry %lld has an empty key", (long long)idx);
    uint32_t type;
    size_t type_at = r->pos;
    if ((st = rd_u32(r, &type, "a metadata value type"))) return st;
    if (type >= ENG_GGUF_TYPE_COUNT)
        return rd_fail(r, type_at, "key '%.*s' has value type %u but must be in [0, %d]", (int)kv->key.len,
                       kv->key.ptr, type, ENG_GGUF_TYPE_COUNT - 1);
    kv->type = (eng_gguf_type)type;
    kv->arr_type = kv->type;
    kv->n = 1;
    eng_gguf_type et = kv->type;
    if (kv->type == ENG_GGUF_TYPE_ARRAY) {
        uint32_t at2;
        size_t at_pos = r->pos;
        if ((st = rd_u32(r, &at2, "an array element type"))) return st;
        if (at2 >= ENG_GGUF_TYPE_COUNT || at2 == ENG_GGUF_TYPE_ARRAY)
            return rd_fail(r, at_pos, "key '%.*s': array element type %u is not allowed (nested arrays are "
                           "refused; scalar or string types 0-8, 10-12)", (int)kv->key.len, kv->key.ptr, at2);
        kv->arr_type = et = (eng_gguf_type)at2;
        size_t n_pos = r->pos;
        if ((st = rd_u64(r, &kv->n, "an array length"))) return st;
        size_t min_elem = et == ENG_GGUF_TYPE_STRING ? 8 : scalar_size(et);
        if (kv->n > ENG_GGUF_MAX_ARRAY)
            return rd_fail(r, n_pos, "key '%.*s': array has %llu elements but must have <= %u", (int)kv->key.len,
                           kv->key.ptr, (unsigned long long)kv->n, ENG_GGUF_MAX_ARRAY);
        if (kv->n > rd_left(r) / min_elem)
            return rd_fail(r, n_pos, "key '%.*s': array of %llu %s elements needs at least %llu bytes but only "
                           "%zu are left in the file", (int)kv->key.len, kv->key.ptr, (unsigned long long)kv->n,
                           eng_gguf_type_name(et), (unsigned long long)(kv->n * min_elem), rd_left(r));
    }
    kv->data = r->p + r->pos;
    if (et == ENG_GGUF_TYPE_STRING) {
        /* n <= bytes left / 8, so the pool grows at most 2x the file size in total */
        if (*n_str_used + kv->n > g->n_str_pool) {
            uint64_t want = g->n_str_pool ? g->n_str_pool : 64;
            while (want < *n_str_used + kv->n) want *= 2;
            eng_gguf_str *p = realloc(g->str_pool, (size_t)want * sizeof(*p));
            if (!p) return dp_err_set(r->err, DP_ENOMEM, "%s: cannot allocate %llu string views", r->path,
                                      (unsigned long long)want);
            g->str_pool = p;
            g->n_str_pool = want;
        }
        /* Store the index (not a pointer) now; the pool may still move. Fixed up after. */
        kv->strs = (const eng_gguf_str *)(uintptr_t)(*n_str_used + 1);
        for (uint64_t i = 0; i < kv->n; i++) {
            char w2[128];
            snprintf(w2, sizeof(w2), "string %llu of key '%.*s'", (unsigned long long)i,
                     (int)(kv->key.len > 64 ? 64 : kv->key.len), kv->key.ptr);
            if ((st = rd_str(r, &g->str_pool[*n_str_used + i], ENG_GGUF_MAX_STRING, w2))) return st;
        }
        *n_str_used += kv->n;
    } else {
        size_t es = scalar_size(et);
        size_t total = (size_t)kv->n * es; /* n <= left / es: no overflow */
        if (total > rd_left(r))
            return rd_fail(r, r->pos, "file ends inside the value of key '%.*s'", (int)kv->key.len, kv->key.ptr);
        if (et == ENG_GGUF_TYPE_BOOL) {
            for (uint64_t i = 0; i < kv->n; i++)
                if (kv->data[i] > 1)
                    return rd_fail(r, r->pos + i, "key '%.*s': bool value %u must be 0 or 1", (int)kv->key.len,
                                   kv->key.ptr, kv->data[i]);
        }
        r->pos += total;
    }
    return DP_OK;
}

static dp_status check_unique_keys(eng_gguf *g, rd *r) {
    uint64_t cap = hash_cap_for((uint64_t)g->n_kv);
    int64_t *h = malloc((size_t)cap * sizeof(*h));
    if (!h) return dp_err_set(r->err, DP_ENOMEM, "%s: out of memory", r->path);
    for (uint64_t i = 0; i < cap; i++) h[i] = -1;
    dp_status st = DP_OK;
    for (int64_t i = 0; i < g->n_kv && !st; i++) {
        const eng_gguf_kv *kv = &g->kv[i];
        uint64_t s = hash_bytes(kv->key.ptr, (size_t)kv->key.len) & (cap - 1);
        while (h[s] >= 0) {
            const eng_gguf_kv *o = &g->kv[h[s]];
            if (o->key.len == kv->key.len && memcmp(o->key.ptr, kv->key.ptr, (size_t)kv->key.len) == 0) {
                st = rd_fail(r, (size_t)kv->file_offset, "duplicate key '%.*s' (first at offset 0x%llx)",
                             (int)kv->key.len, kv->key.ptr, (unsigned long long)o->file_offset);
                break;
            }
            s = (s + 1) & (cap - 1);
        }
        h[s] = i;
    }
    free(h);
    return st;
}

static dp_status parse_tensor(eng_gguf *g, rd *r, int64_t idx) {
    eng_gguf_tensor *t = &g->tensors[idx];
    size_t at = r->pos;
    eng_gguf_str name;
    char what[64];
    snprintf(what, sizeof(what), "the name of tensor %lld", (long long)idx);
    dp_status st = rd_str(r, &name, UINT64_MAX, what);
    if (st) return st;
    if (name.len == 0) return rd_fail(r, at, "tensor %lld has an empty name", (long long)idx);
    if (name.len >= ENG_GGUF_MAX_NAME)
        return rd_fail(r, at, "tensor %lld: name of %llu bytes is too long (must be < %d)", (long long)idx,
                       (unsigned long long)name.len, ENG_GGUF_MAX_NAME);
    if (memchr(name.ptr, 0, (size_t)name.len))
        return rd_fail(r, at, "tensor %lld: name contains a NUL byte", (long long)idx);
    memcpy(t->name, name.ptr, (size_t)name.len);
    t->name[name.len] = '\0';
    size_t nd_at = r->pos;
    if ((st = rd_u32(r, &t->n_dims, "a tensor's n_dims"))) return st;
    if (t->n_dims < 1 || t->n_dims > ENG_GGUF_MAX_DIMS)
        return rd_fail(r, nd_at, "tensor '%s': n_dims is %u but must be in [1, %d]", t->name, t->n_dims,
                       ENG_GGUF_MAX_DIMS);
    int64_t nelem = 1;
    for (int j = 0; j < ENG_GGUF_MAX_DIMS; j++) t->ne[j] = 1;
    for (uint32_t j = 0; j < t->n_dims; j++) {
        size_t ne_at = r->pos;
        uint64_t v;
        if ((st = rd_u64(r, &v, "a tensor dimension"))) return st;
        if (v == 0 || v > (uint64_t)INT64_MAX)
            return rd_fail(r, ne_at, "tensor '%s': ne[%u] is %lld but must be in [1, 2^63-1]", t->name, j,
                           (long long)v);
        if ((int64_t)v > INT64_MAX / nelem)
            return rd_fail(r, ne_at, "tensor '%s': element count overflows at ne[%u] = %llu", t->name, j,
                           (unsigned long long)v);
        t->ne[j] = (int64_t)v;
        nelem *= (int64_t)v;
    }
    uint32_t type;
    size_t type_at = r->pos;
    if ((st = rd_u32(r, &type, "a tensor type"))) return st;
    const eng_type_traits *tr = eng_type_get((int)type);
    if (!tr || !tr->blck) {
        return dp_err_set(r->err, DP_EUNSUPPORTED,
                          "%s: offset 0x%zx: tensor '%s' has type %s (%u), which this engine does not support "
                          "(supported: F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K Q4_K Q5_K Q6_K)",
                          r->path, type_at, t->name, eng_type_name((int)type), type);
    }
    t->type = (int)type;
    if (t->ne[0] % tr->blck)
        return rd_fail(r, type_at, "tensor '%s': ne[0] = %lld is not a multiple of the %s block size %lld", t->name,
                       (long long)t->ne[0], tr->name, (long long)tr->blck);
    /* bytes = nelem / blck * type_size, checked against SIZE_MAX and INT64_MAX */
    uint64_t nblocks = (uint64_t)(nelem / tr->blck);
    if (nblocks > (uint64_t)INT64_MAX / tr->type_size || nblocks > SIZE_MAX / tr->type_size)
        return rd_fail(r, type_at, "tensor '%s': byte size of %llu %s blocks overflows", t->name,
                       (unsigned long long)nblocks, tr->name);
    t->nbytes = (size_t)(nblocks * tr->type_size);
    if ((st = rd_u64(r, &t->offset, "a tensor offset"))) return st;
    return DP_OK;
}

static dp_status insert_tensor_name(eng_gguf *g, rd *r, int64_t idx, size_t at) {
    const eng_gguf_tensor *t = &g->tensors[idx];
    uint64_t s = hash_bytes(t->name, strlen(t->name)) & (g->tensor_hash_cap - 1);
    while (g->tensor_hash[s] >= 0) {
        if (strcmp(g->tensors[g->tensor_hash[s]].name, t->name) == 0)
            return rd_fail(r, at, "duplicate tensor name '%s' (tensors %lld and %lld)", t->name,
                           (long long)g->tensor_hash[s], (long long)idx);
        s = (s + 1) & (g->tensor_hash_cap - 1);
    }
    g->tensor_hash[s] = idx;
    return DP_OK;
}

static dp_status parse(eng_gguf *g, dp_err *err) {
    rd r = {g->base, g->size, 0, g->path, err};
    dp_status st;
    uint32_t magic;
    if (g->size < 4) return rd_fail(&r, 0, "file is %zu bytes, too short for a GGUF header", g->size);
    if ((st = rd_u32(&r, &magic, "the magic"))) return st;
    if (magic != 0x46554747u)
        return rd_fail(&r, 0, "bad magic 0x%08x (a GGUF file starts with the bytes 'GGUF')", magic);
    if ((st = rd_u32(&r, &g->version, "the version"))) return st;
    if ((g->version & 0xFFFF) == 0 && g->version != 0)
        return rd_fail(&r, 4, "version 0x%08x looks byte-swapped (big-endian file?); only little-endian "
                       "versions 2 and 3 are supported", g->version);
    if (g->version == 1) return rd_fail(&r, 4, "GGUF version 1 is obsolete; versions 2 and 3 are supported");
    if (g->version < 2 || g->version > 3)
        return rd_fail(&r, 4, "GGUF version %u is not supported (versions 2 and 3 are)", g->version);
    uint64_t n_tensors, n_kv;
    if ((st = rd_u64(&r, &n_tensors, "the tensor count"))) return st;
    if ((st = rd_u64(&r, &n_kv, "the metadata count"))) return st;
    /* Each tensor info takes >= 33 bytes and each kv >= 13, which bounds the allocations. */
    if (n_tensors > ENG_GGUF_MAX_TENSORS || n_tensors > rd_left(&r) / 33)
        return rd_fail(&r, 8, "tensor count %lld is impossible (must be in [0, %u] and fit in the %zu bytes left)",
                       (long long)n_tensors, ENG_GGUF_MAX_TENSORS, rd_left(&r));
    if (n_kv > ENG_GGUF_MAX_KV || n_kv > rd_left(&r) / 13)
        return rd_fail(&r, 16, "metadata count %lld is impossible (must be in [0, %u] and fit in the %zu bytes left)",
                       (long long)n_kv, ENG_GGUF_MAX_KV, rd_left(&r));
    g->n_kv = (int64_t)n_kv;
    g->n_tensors = (int64_t)n_tensors;
    g->kv = calloc(n_kv ? (size_t)n_kv : 1, sizeof(*g->kv));
    g->tensors = calloc(n_tensors ? (size_t)n_tensors : 1, sizeof(*g->tensors));
    if (!g->kv || !g->tensors) return dp_err_set(err, DP_ENOMEM, "%s: out of memory for the header", g->path);

    uint64_t n_str_used = 0;
    for (int64_t i = 0; i < g->n_kv; i++)
        if ((st = parse_kv(g, &r, i, &n_str_used))) return st;
    for (int64_t i = 0; i < g->n_kv; i++) /* turn pool indices into pointers (no pool: only empty arrays) */
        if (g->kv[i].strs) g->kv[i].strs = g->str_pool ? g->str_pool + ((uintptr_t)g->kv[i].strs - 1) : NULL;
    if ((st = check_unique_keys(g, &r))) return st;

    g->alignment = ENG_GGUF_DEFAULT_ALIGNMENT;
    const eng_gguf_kv *al = eng_gguf_find(g, "general.alignment");
    if (al) {
        if (al->type != ENG_GGUF_TYPE_UINT32)
            return rd_fail(&r, (size_t)al->file_offset, "general.alignment has type %s but must be UINT32",
                           eng_gguf_type_name(al->type));
        uint32_t a;
        memcpy(&a, al->data, 4);
        if (a == 0 || (a & (a - 1)) || a > ENG_GGUF_MAX_ALIGNMENT)
            return rd_fail(&r, (size_t)al->file_offset,
                           "general.alignment is %u but must be a power of two in [1, %u]", a, ENG_GGUF_MAX_ALIGNMENT);
        g->alignment = a;
    }

    g->tensor_hash_cap = hash_cap_for((uint64_t)g->n_tensors);
    g->tensor_hash = malloc((size_t)g->tensor_hash_cap * sizeof(int64_t));
    if (!g->tensor_hash) return dp_err_set(err, DP_ENOMEM, "%s: out of memory", g->path);
    for (uint64_t i = 0; i < g->tensor_hash_cap; i++) g->tensor_hash[i] = -1;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        size_t at = r.pos;
        if ((st = parse_tensor(g, &r, i))) return st;
        if ((st = insert_tensor_name(g, &r, i, at))) return st;
    }

    /* Data section: align the end of the header; offsets must be back to back. */
    uint64_t A = g->alignment;
    uint64_t pad = (A - r.pos % A) % A;
    g->data_offset = (uint64_t)r.pos + pad; /* pos <= size, pad < 2^20: no overflow */
    uint64_t expect = 0;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        eng_gguf_tensor *t = &g->tensors[i];
        if (t->offset != expect)
            return dp_err_set(err, DP_EFORMAT,
                              "%s: tensor '%s' has data offset %llu but must be %llu (tensors are stored back to back "
                              "in info order, each aligned to %u bytes)", g->path, t->name,
                              (unsigned long long)t->offset, (unsigned long long)expect, g->alignment);
        uint64_t end = expect + t->nbytes;
        if (end < expect || g->data_offset + end < end || g->data_offset + end > g->size)
            return dp_err_set(err, DP_EFORMAT,
                              "%s: tensor '%s' data [0x%llx, +%zu) is not within the file (%zu bytes); file truncated?",
                              g->path, t->name, (unsigned long long)(g->data_offset + t->offset), t->nbytes, g->size);
        t->data = g->base + g->data_offset + t->offset;
        /* general.alignment may be 1 or 2; the blocks' f16 and f32 fields must still be readable
         * in place (a Q8_K block starts with a float), so each tensor needs the alignment its
         * block size allows: 4, 2 or 1. Every real file (alignment 32) passes. */
        const eng_type_traits *tr = eng_type_get(t->type);
        const size_t need = tr && tr->type_size % 4 == 0 ? 4 : tr && tr->type_size % 2 == 0 ? 2 : 1;
        if ((uintptr_t)t->data % need)
            return dp_err_set(err, DP_EFORMAT,
                              "%s: tensor '%s' (%s) starts at file offset %llu, not a multiple of %zu as its type "
                              "needs (general.alignment is %u; llama.cpp writes 32)", g->path, t->name,
                              eng_type_name(t->type), (unsigned long long)(g->data_offset + t->offset), need,
                              g->alignment);
        uint64_t padded = end + (A - end % A) % A;
        if (padded < end) return dp_err_set(err, DP_EFORMAT, "%s: data offsets overflow", g->path);
        expect = padded;
    }
    if (g->data_offset > g->size && g->n_tensors > 0)
        return dp_err_set(err, DP_EFORMAT, "%s: the data section starts past the end of the file", g->path);
    return DP_OK;
}

static dp_status open_common(eng_gguf *g, eng_gguf **out, dp_err *err) {
    dp_status st = parse(g, err);
    if (st) {
        eng_gguf_close(g);
        return st;
    }
    *out = g;
    return DP_OK;
}

dp_status eng_gguf_open(const char *path, eng_gguf **out, dp_err *err) {
    *out = NULL;
    eng_gguf *g = calloc(1, sizeof(*g));
    if (!g) return dp_err_set(err, DP_ENOMEM, "out of memory");
    g->map.handle = -1;
    snprintf(g->path, sizeof(g->path), "%s", path);
    dp_status st = dp_map_open(&g->map, path, err);
    if (st) {
        free(g);
        return st;
    }
    g->base = g->map.data;
    g->size = g->map.size;
    return open_common(g, out, err);
}

dp_status eng_gguf_open_buffer(const void *data, size_t size, const char *name, eng_gguf **out, dp_err *err) {
    *out = NULL;
    eng_gguf *g = calloc(1, sizeof(*g));
    if (!g) return dp_err_set(err, DP_ENOMEM, "out of memory");
    g->map.handle = -1;
    snprintf(g->path, sizeof(g->path), "%s", name ? name : "<buffer>");
    g->base = data;
    g->size = size;
    return open_common(g, out, err);
}

void eng_gguf_close(eng_gguf *g) {
    if (!g) return;
    free(g->kv);
    free(g->tensors);
    free(g->str_pool);
    free(g->tensor_hash);
    dp_map_close(&g->map);
    free(g);
}

/* ---- Accessors -------------------------------------------------------------------------- */

uint32_t eng_gguf_version(const eng_gguf *g) { return g->version; }
uint32_t eng_gguf_alignment(const eng_gguf *g) { return g->alignment; }
uint64_t eng_gguf_data_offset(const eng_gguf *g) { return g->data_offset; }
const char *eng_gguf_path(const eng_gguf *g) { return g->path; }
size_t eng_gguf_file_size(const eng_gguf *g) { return g->size; }
int64_t eng_gguf_n_kv(const eng_gguf *g) { return g->n_kv; }
int64_t eng_gguf_n_tensors(const eng_gguf *g) { return g->n_tensors; }

const eng_gguf_kv *eng_gguf_kv_at(const eng_gguf *g, int64_t i) {
    return i >= 0 && i < g->n_kv ? &g->kv[i] : NULL;
}

const eng_gguf_tensor *eng_gguf_tensor_at(const eng_gguf *g, int64_t i) {
    return i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}

bool eng_gguf_str_eq(eng_gguf_str a, const char *s) {
    size_t n = strlen(s);
    return a.len == n && memcmp(a.ptr, s, n) == 0;
}

const eng_gguf_kv *eng_gguf_find(const eng_gguf *g, const char *key) {
    for (int64_t i = 0; i < g->n_kv; i++)
        if (eng_gguf_str_eq(g->kv[i].key, key)) return &g->kv[i];
    return NULL;
}

const eng_gguf_tensor *eng_gguf_find_tensor(const eng_gguf *g, const char *name) {
    if (!g->tensor_hash_cap) return NULL;
    uint64_t s = hash_bytes(name, strlen(name)) & (g->tensor_hash_cap - 1);
    while (g->tensor_hash[s] >= 0) {
        if (strcmp(g->tensors[g->tensor_hash[s]].name, name) == 0) return &g->tensors[g->tensor_hash[s]];
        s = (s + 1) & (g->tensor_hash_cap - 1);
    }
    return NULL;
}

bool eng_gguf_kv_int(const eng_gguf_kv *kv, uint64_t i, int64_t *out) {
    if (i >= kv->n) return false;
    const uint8_t *p = kv->data + i * scalar_size(kv->arr_type);
    switch (kv->arr_type) {
    case ENG_GGUF_TYPE_UINT8: *out = p[0]; return true;
    case ENG_GGUF_TYPE_INT8: *out = (int8_t)p[0]; return true;
    case ENG_GGUF_TYPE_UINT16: { uint16_t v; memcpy(&v, p, 2); *out = v; return true; }
    case ENG_GGUF_TYPE_INT16: { int16_t v; memcpy(&v, p, 2); *out = v; return true; }
    case ENG_GGUF_TYPE_UINT32: { uint32_t v; memcpy(&v, p, 4); *out = v; return true; }
    case ENG_GGUF_TYPE_INT32: { int32_t v; memcpy(&v, p, 4); *out = v; return true; }
    case ENG_GGUF_TYPE_UINT64: { uint64_t v; memcpy(&v, p, 8); if (v > INT64_MAX) return false; *out = (int64_t)v; return true; }
    case ENG_GGUF_TYPE_INT64: { int64_t v; memcpy(&v, p, 8); *out = v; return true; }
    default: return false;
    }
}

bool eng_gguf_kv_float(const eng_gguf_kv *kv, uint64_t i, double *out) {
    if (i >= kv->n) return false;
    if (kv->arr_type == ENG_GGUF_TYPE_FLOAT32) {
        float v;
        memcpy(&v, kv->data + 4 * i, 4);
        *out = v;
        return true;
    }
    if (kv->arr_type == ENG_GGUF_TYPE_FLOAT64) {
        memcpy(out, kv->data + 8 * i, 8);
        return true;
    }
    return false;
}

static dp_status get_scalar(const eng_gguf *g, const char *key, const eng_gguf_kv **kv, dp_err *err) {
    *kv = eng_gguf_find(g, key);
    if (!*kv) return dp_err_set(err, DP_ENOENT, "%s: metadata key '%s' is missing", g->path, key);
    if ((*kv)->type == ENG_GGUF_TYPE_ARRAY)
        return dp_err_set(err, DP_EFORMAT, "%s: metadata key '%s' is an array but must be a single value", g->path, key);
    return DP_OK;
}

dp_status eng_gguf_get_i64(const eng_gguf *g, const char *key, int64_t *out, dp_err *err) {
    const eng_gguf_kv *kv;
    dp_status st = get_scalar(g, key, &kv, err);
    if (st) return st;
    if (!eng_gguf_kv_int(kv, 0, out))
        return dp_err_set(err, DP_EFORMAT, "%s: metadata key '%s' has type %s but must be an integer", g->path, key,
                          eng_gguf_type_name(kv->type));
    return DP_OK;
}

dp_status eng_gguf_get_u32(const eng_gguf *g, const char *key, uint32_t *out, dp_err *err) {
    int64_t v = 0;
    dp_status st = eng_gguf_get_i64(g, key, &v, err);
    if (st) return st;
    if (v < 0 || v > (int64_t)UINT32_MAX)
        return dp_err_set(err, DP_EFORMAT, "%s: metadata key '%s' is %lld but must be in [0, %u]", g->path, key,
                          (long long)v, UINT32_MAX);
    *out = (uint32_t)v;
    return DP_OK;
}

dp_status eng_gguf_get_f32(const eng_gguf *g, const char *key, float *out, dp_err *err) {
    const eng_gguf_kv *kv;
    dp_status st = get_scalar(g, key, &kv, err);
    if (st) return st;
    double v;
    if (!eng_gguf_kv_float(kv, 0, &v))
        return dp_err_set(err, DP_EFORMAT, "%s: metadata key '%s' has type %s but must be FLOAT32", g->path, key,
                          eng_gguf_type_name(kv->type));
    *out = (float)v;
    return DP_OK;
}

dp_status eng_gguf_get_bool(const eng_gguf *g, const char *key, bool *out, dp_err *err) {
    const eng_gguf_kv *kv;
    dp_status st = get_scalar(g, key, &kv, err);
    if (st) return st;
    if (kv->type != ENG_GGUF_TYPE_BOOL)
        return dp_err_set(err, DP_EFORMAT, "%s: metadata key '%s' has type %s but must be BOOL", g->path, key,
                          eng_gguf_type_name(kv->type));
    *out = kv->data[0] != 0;
    return DP_OK;
}

dp_status eng_gguf_get_str(const eng_gguf *g, const char *key, eng_gguf_str *out, dp_err *err) {
    const eng_gguf_kv *kv;
    dp_status st = get_scalar(g, key, &kv, err);
    if (st) return st;
    if (kv->type != ENG_GGUF_TYPE_STRING)
        return dp_err_set(err, DP_EFORMAT, "%s: metadata key '%s' has type %s but must be STRING", g->path, key,
                          eng_gguf_type_name(kv->type));
    *out = kv->strs[0];
    return DP_OK;
}

dp_status eng_gguf_get_arr(const eng_gguf *g, const char *key, eng_gguf_type elem, const eng_gguf_kv **out,
                           dp_err *err) {
    const eng_gguf_kv *kv = eng_gguf_find(g, key);
    if (!kv) return dp_err_set(err, DP_ENOENT, "%s: metadata key '%s' is missing", g->path, key);
    if (kv->type != ENG_GGUF_TYPE_ARRAY)
        return dp_err_set(err, DP_EFORMAT, "%s: metadata key '%s' has type %s but must be an ARRAY", g->path, key,
                          eng_gguf_type_name(kv->type));
    if (elem != ENG_GGUF_TYPE_COUNT && kv->arr_type != elem)
        return dp_err_set(err, DP_EFORMAT, "%s: metadata key '%s' is an array of %s but must be an array of %s",
                          g->path, key, eng_gguf_type_name(kv->arr_type), eng_gguf_type_name(elem));
    *out = kv;
    return DP_OK;
}
