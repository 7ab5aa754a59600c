/*
 * gguf_writer.c - GGUF v3 writer (see gguf_writer.h).
 *
 * DESIGN: each metadata entry is serialized when it is set (key, type, value bytes), so write
 * is a concatenation. Tensor data is streamed through a bounded buffer (at most ~64 MiB of
 * rows at a time), which is what lets make-test-model and quantize produce multi-GB files in
 * flat memory. Offsets are back to back with alignment padding, the layout the reader demands.
 * Single-threaded; the fill callback may use threads internally.
 */
#include "gguf_writer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dynbuf.h"
#include "platform.h"
#include "quant.h"

typedef struct wkv {
    char *key;
    dp_buf val; /* type id + value, serialized */
} wkv;

typedef struct wtensor {
    eng_gguf_tensor t;
    const void *src; /* borrowed, or NULL */
} wtensor;

struct eng_gguf_writer {
    wkv *kv;
    int64_t n_kv, cap_kv;
    wtensor *tensors;
    int64_t n_tensors, cap_tensors;
    uint32_t alignment;
};

#define WRITER_MAX_VALUE ((size_t)1 << 31)

dp_status eng_gguf_writer_init(eng_gguf_writer **out) {
    eng_gguf_writer *w = calloc(1, sizeof(*w));
    if (!w) return DP_ENOMEM;
    w->alignment = ENG_GGUF_DEFAULT_ALIGNMENT;
    *out = w;
    return DP_OK;
}

void eng_gguf_writer_free(eng_gguf_writer *w) {
    if (!w) return;
    for (int64_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        dp_buf_free(&w->kv[i].val);
    }
    free(w->kv);
    free(w->tensors);
    free(w);
}

static wkv *kv_slot(eng_gguf_writer *w, const char *key) {
    for (int64_t i = 0; i < w->n_kv; i++) {
        if (strcmp(w->kv[i].key, key) == 0) {
            dp_buf_reset(&w->kv[i].val);
            return &w->kv[i];
        }
    }
    if (w->n_kv == w->cap_kv) {
        int64_t cap = w->cap_kv ? 2 * w->cap_kv : 32;
        wkv *p = realloc(w->kv, (size_t)cap * sizeof(*p));
        if (!p) return NULL;
        w->kv = p;
        w->cap_kv = cap;
    }
    wkv *s = &w->kv[w->n_kv];
    s->key = strdup(key);
    if (!s->key) return NULL;
    dp_buf_init(&s->val, WRITER_MAX_VALUE);
    w->n_kv++;
    return s;
}

static dp_status put_u32(dp_buf *b, uint32_t v) {
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    return dp_buf_append(b, x, 4);
}

static dp_status put_u64(dp_buf *b, uint64_t v) {
    uint8_t x[8];
    for (int i = 0; i < 8; i++) x[i] = (uint8_t)(v >> (8 * i));
    return dp_buf_append(b, x, 8);
}

static dp_status put_str(dp_buf *b, const char *s, size_t n) {
    dp_status st = put_u64(b, n);
    return st ? st : dp_buf_append(b, s, n);
}

static dp_status set_scalar(eng_gguf_writer *w, const char *key, eng_gguf_type t, const void *v, size_t n) {
    if (!key[0]) return DP_EINVAL;
    wkv *s = kv_slot(w, key);
    if (!s) return DP_ENOMEM;
    dp_status st = put_u32(&s->val, (uint32_t)t);
    if (!st) st = dp_buf_append(&s->val, v, n); /* host is little-endian (checked in write) */
    if (!st && strcmp(key, "general.alignment") == 0 && t == ENG_GGUF_TYPE_UINT32) {
        uint32_t a;
        memcpy(&a, v, 4);
        if (a == 0 || (a & (a - 1))) return DP_EINVAL;
        w->alignment = a;
    }
    return st;
}

dp_status eng_gguf_writer_set_u8(eng_gguf_writer *w, const char *k, uint8_t v) { return set_scalar(w, k, ENG_GGUF_TYPE_UINT8, &v, 1); }
dp_status eng_gguf_writer_set_i8(eng_gguf_writer *w, const char *k, int8_t v) { return set_scalar(w, k, ENG_GGUF_TYPE_INT8, &v, 1); }
dp_status eng_gguf_writer_set_u16(eng_gguf_writer *w, const char *k, uint16_t v) { return set_scalar(w, k, ENG_GGUF_TYPE_UINT16, &v, 2); }
dp_status eng_gguf_writer_set_i16(eng_gguf_writer *w, const char *k, int16_t v) { return set_scalar(w, k, ENG_GGUF_TYPE_INT16, &v, 2); }
dp_status eng_gguf_writer_set_u32(eng_gguf_writer *w, const char *k, uint32_t v) { return set_scalar(w, k, ENG_GGUF_TYPE_UINT32, &v, 4); }
dp_status eng_gguf_writer_set_i32(eng_gguf_writer *w, const char *k, int32_t v) { return set_scalar(w, k, ENG_GGUF_TYPE_INT32, &v, 4); }
dp_status eng_gguf_writer_set_u64(eng_gguf_writer *w, const char *k, uint64_t v) { return set_scalar(w, k, ENG_GGUF_TYPE_UINT64, &v, 8); }
dp_status eng_gguf_writer_set_i64(eng_gguf_writer *w, const char *k, int64_t v) { return set_scalar(w, k, ENG_GGUF_TYPE_INT64, &v, 8); }
dp_status eng_gguf_writer_set_f32(eng_gguf_writer *w, const char *k, float v) { return set_scalar(w, k, ENG_GGUF_TYPE_FLOAT32, &v, 4); }
dp_status eng_gguf_writer_set_f64(eng_gguf_writer *w, const char *k, double v) { return set_scalar(w, k, ENG_GGUF_TYPE_FLOAT64, &v, 8); }

dp_status eng_gguf_writer_set_bool(eng_gguf_writer *w, const char *k, bool v) {
    uint8_t b = v ? 1 : 0;
    return set_scalar(w, k, ENG_GGUF_TYPE_BOOL, &b, 1);
}

dp_status eng_gguf_writer_set_strn(eng_gguf_writer *w, const char *key, const char *v, size_t len) {
    if (!key[0]) return DP_EINVAL;
    wkv *s = kv_slot(w, key);
    if (!s) return DP_ENOMEM;
    dp_status st = put_u32(&s->val, ENG_GGUF_TYPE_STRING);
    return st ? st : put_str(&s->val, v, len);
}

dp_status eng_gguf_writer_set_str(eng_gguf_writer *w, const char *key, const char *v) {
    return eng_gguf_writer_set_strn(w, key, v, strlen(v));
}

static size_t elem_size(eng_gguf_type t) {
    switch (t) {
    case ENG_GGUF_TYPE_UINT8: case ENG_GGUF_TYPE_INT8: case ENG_GGUF_TYPE_BOOL: return 1;
    case ENG_GGUF_TYPE_UINT16: case ENG_GGUF_TYPE_INT16: return 2;
    case ENG_GGUF_TYPE_UINT32: case ENG_GGUF_TYPE_INT32: case ENG_GGUF_TYPE_FLOAT32: return 4;
    case ENG_GGUF_TYPE_UINT64: case ENG_GGUF_TYPE_INT64: case ENG_GGUF_TYPE_FLOAT64: return 8;
    default: return 0;
    }
}

dp_status eng_gguf_writer_set_arr(eng_gguf_writer *w, const char *key, eng_gguf_type elem, const void *data,
                                  uint64_t n) {
    size_t es = elem_size(elem);
    if (!es || !key[0]) return DP_EINVAL;
    if (n > WRITER_MAX_VALUE / es) return DP_ERANGE;
    wkv *s = kv_slot(w, key);
    if (!s) return DP_ENOMEM;
    dp_status st = put_u32(&s->val, ENG_GGUF_TYPE_ARRAY);
    if (!st) st = put_u32(&s->val, (uint32_t)elem);
    if (!st) st = put_u64(&s->val, n);
    if (!st) st = dp_buf_append(&s->val, data, (size_t)n * es);
    return st;
}

dp_status eng_gguf_writer_set_arr_str(eng_gguf_writer *w, const char *key, const char *const *strs,
                                      const size_t *lens, uint64_t n) {
    if (!key[0]) return DP_EINVAL;
    wkv *s = kv_slot(w, key);
    if (!s) return DP_ENOMEM;
    dp_status st = put_u32(&s->val, ENG_GGUF_TYPE_ARRAY);
    if (!st) st = put_u32(&s->val, ENG_GGUF_TYPE_STRING);
    if (!st) st = put_u64(&s->val, n);
    for (uint64_t i = 0; i < n && !st; i++) st = put_str(&s->val, strs[i], lens ? lens[i] : strlen(strs[i]));
    return st;
}

dp_status eng_gguf_writer_copy_kv(eng_gguf_writer *w, const eng_gguf_kv *kv) {
    char key[65536];
    memcpy(key, kv->key.ptr, (size_t)kv->key.len);
    key[kv->key.len] = '\0';
    if (kv->type == ENG_GGUF_TYPE_STRING) return eng_gguf_writer_set_strn(w, key, kv->strs[0].ptr, (size_t)kv->strs[0].len);
    if (kv->type != ENG_GGUF_TYPE_ARRAY) return set_scalar(w, key, kv->type, kv->data, elem_size(kv->type));
    if (kv->arr_type != ENG_GGUF_TYPE_STRING) return eng_gguf_writer_set_arr(w, key, kv->arr_type, kv->data, kv->n);
    wkv *s = kv_slot(w, key);
    if (!s) return DP_ENOMEM;
    dp_status st = put_u32(&s->val, ENG_GGUF_TYPE_ARRAY);
    if (!st) st = put_u32(&s->val, ENG_GGUF_TYPE_STRING);
    if (!st) st = put_u64(&s->val, kv->n);
    for (uint64_t i = 0; i < kv->n && !st; i++) st = put_str(&s->val, kv->strs[i].ptr, (size_t)kv->strs[i].len);
    return st;
}

bool eng_gguf_writer_has(const eng_gguf_writer *w, const char *key) {
    for (int64_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->kv[i].key, key) == 0) return true;
    return false;
}

dp_status eng_gguf_writer_add_tensor(eng_gguf_writer *w, const char *name, int type, uint32_t n_dims,
                                     const int64_t *ne, const void *data) {
    size_t nl = strlen(name);
    if (nl == 0 || nl >= ENG_GGUF_MAX_NAME || n_dims < 1 || n_dims > ENG_GGUF_MAX_DIMS) return DP_EINVAL;
    const eng_type_traits *tr = eng_type_get(type);
    if (!tr || !tr->blck) return DP_EUNSUPPORTED;
    for (int64_t i = 0; i < w->n_tensors; i++)
        if (strcmp(w->tensors[i].t.name, name) == 0) return DP_EEXIST;
    if (w->n_tensors == w->cap_tensors) {
        int64_t cap = w->cap_tensors ? 2 * w->cap_tensors : 64;
        wtensor *p = realloc(w->tensors, (size_t)cap * sizeof(*p));
        if (!p) return DP_ENOMEM;
        w->tensors = p;
        w->cap_tensors = cap;
    }
    wtensor *t = &w->tensors[w->n_tensors];
    memset(t, 0, sizeof(*t));
    memcpy(t->t.name, name, nl + 1);
    t->t.n_dims = n_dims;
    t->t.type = type;
    int64_t nelem = 1;
    for (int j = 0; j < ENG_GGUF_MAX_DIMS; j++) t->t.ne[j] = j < (int)n_dims ? ne[j] : 1;
    for (int j = 0; j < ENG_GGUF_MAX_DIMS; j++) {
        if (t->t.ne[j] <= 0 || nelem > INT64_MAX / t->t.ne[j]) return DP_EINVAL;
        nelem *= t->t.ne[j];
    }
    if (t->t.ne[0] % tr->blck) return DP_EINVAL;
    t->t.nbytes = (size_t)(nelem / tr->blck) * tr->type_size;
    t->src = data;
    w->n_tensors++;
    return DP_OK;
}

int64_t eng_gguf_writer_n_tensors(const eng_gguf_writer *w) { return w->n_tensors; }

/* ---- Output ----------------------------------------------------------------------------- */

typedef struct bufw {
    dp_file f;
    uint8_t *buf;
    size_t len, cap;
    dp_err *err;
} bufw;

static dp_status bw_flush(bufw *b) {
    dp_status st = dp_file_write(&b->f, b->buf, b->len, b->err);
    b->len = 0;
    return st;
}

static dp_status bw_put(bufw *b, const void *p, size_t n) {
    const uint8_t *s = p;
    while (n) {
        if (b->len == b->cap) {
            dp_status st = bw_flush(b);
            if (st) return st;
        }
        size_t take = b->cap - b->len < n ? b->cap - b->len : n;
        memcpy(b->buf + b->len, s, take);
        b->len += take;
        s += take;
        n -= take;
    }
    return DP_OK;
}

static dp_status bw_zeros(bufw *b, size_t n) {
    static const uint8_t z[64];
    while (n) {
        size_t k = n < sizeof(z) ? n : sizeof(z);
        dp_status st = bw_put(b, z, k);
        if (st) return st;
        n -= k;
    }
    return DP_OK;
}

static dp_status write_header(eng_gguf_writer *w, bufw *b, uint64_t *pos) {
    dp_buf h;
    dp_buf_init(&h, (size_t)1 << 40);
    dp_status st = put_u32(&h, 0x46554747u);
    if (!st) st = put_u32(&h, 3);
    if (!st) st = put_u64(&h, (uint64_t)w->n_tensors);
    if (!st) st = put_u64(&h, (uint64_t)w->n_kv);
    for (int64_t i = 0; i < w->n_kv && !st; i++) {
        st = put_str(&h, w->kv[i].key, strlen(w->kv[i].key));
        if (!st) st = dp_buf_append(&h, w->kv[i].val.data, w->kv[i].val.len);
    }
    uint64_t off = 0;
    for (int64_t i = 0; i < w->n_tensors && !st; i++) {
        eng_gguf_tensor *t = &w->tensors[i].t;
        t->offset = off;
        st = put_str(&h, t->name, strlen(t->name));
        if (!st) st = put_u32(&h, t->n_dims);
        for (uint32_t j = 0; j < t->n_dims && !st; j++) st = put_u64(&h, (uint64_t)t->ne[j]);
        if (!st) st = put_u32(&h, (uint32_t)t->type);
        if (!st) st = put_u64(&h, off);
        off += t->nbytes;
        off += (w->alignment - off % w->alignment) % w->alignment;
    }
    if (!st) st = bw_put(b, h.data, h.len);
    if (!st) st = bw_zeros(b, (w->alignment - h.len % w->alignment) % w->alignment);
    *pos = h.len + (w->alignment - h.len % w->alignment) % w->alignment;
    dp_buf_free(&h);
    return st;
}

dp_status eng_gguf_writer_write(eng_gguf_writer *w, const char *path, eng_gguf_fill_fn fill, void *ud,
                                dp_err *err) {
    const uint16_t probe = 1;
    if (*(const uint8_t *)&probe != 1) return dp_err_set(err, DP_EUNSUPPORTED, "GGUF writer needs a little-endian host");
    char tmp[4096];
    if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
        return dp_err_set(err, DP_EINVAL, "path too long: %s", path);
    bufw b = {.cap = (size_t)4 << 20, .err = err};
    b.buf = malloc(b.cap);
    uint8_t *rows = NULL;
    if (!b.buf) return dp_err_set(err, DP_ENOMEM, "out of memory");
    dp_status st = dp_file_open(&b.f, tmp, DP_FILE_WRITE | DP_FILE_CREATE | DP_FILE_TRUNC, err);
    if (st) goto done;
    uint64_t pos = 0;
    if ((st = write_header(w, &b, &pos))) goto fail;
    const size_t chunk_max = (size_t)64 << 20;
    for (int64_t i = 0; i < w->n_tensors; i++) {
        wtensor *t = &w->tensors[i];
        if (t->src) {
            st = bw_put(&b, t->src, t->t.nbytes);
        } else if (!fill) {
            st = dp_err_set(err, DP_EINVAL, "tensor '%s' has no data and no fill callback", t->t.name);
        } else {
            const int64_t n_rows = t->t.ne[1] * t->t.ne[2] * t->t.ne[3];
            const size_t row_bytes = t->t.nbytes / (size_t)n_rows;
            int64_t per = (int64_t)(chunk_max / row_bytes);
            if (per < 1) per = 1;
            if (per > n_rows) per = n_rows;
            if (!rows) rows = malloc(chunk_max > row_bytes ? chunk_max : row_bytes);
            if (!rows) {
                st = dp_err_set(err, DP_ENOMEM, "out of memory for tensor '%s'", t->t.name);
                goto fail;
            }
            for (int64_t r = 0; r < n_rows && !st; r += per) {
                int64_t n = n_rows - r < per ? n_rows - r : per;
                st = fill(ud, i, &t->t, r, n, rows, err);
                if (!st) st = bw_put(&b, rows, (size_t)n * row_bytes);
            }
        }
        if (st) goto fail;
        pos += t->t.nbytes;
        size_t pad = (size_t)((w->alignment - pos % w->alignment) % w->alignment);
        if (i + 1 < w->n_tensors) {
            if ((st = bw_zeros(&b, pad))) goto fail;
            pos += pad;
        }
    }
    if ((st = bw_flush(&b))) goto fail;
    if ((st = dp_file_sync(&b.f, err))) goto fail;
    if ((st = dp_file_close(&b.f, err))) goto fail;
    if ((st = dp_rename(tmp, path, err))) goto fail;
    {
        char dir[4096];
        snprintf(dir, sizeof(dir), "%s", path);
        char *slash = strrchr(dir, '/');
        if (slash) *slash = '\0';
        else snprintf(dir, sizeof(dir), ".");
        st = dp_dir_sync(slash && slash == dir ? "/" : dir, err);
    }
    goto done;
fail:
    dp_file_close(&b.f, NULL);
    remove(tmp);
done:
    free(rows);
    free(b.buf);
    return st;
}
