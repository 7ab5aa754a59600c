/*
 * gguf.h - GGUF v2/v3 reader: validated metadata and zero-copy tensor views over an mmap.
 *
 * File layout (all little-endian; "str" = u64 length + bytes, no NUL):
 *
 *   u32 magic "GGUF" | u32 version (2 or 3) | u64 n_tensors | u64 n_kv
 *   n_kv      x { str key | u32 value_type | value }
 *                 value: scalar of the type, str, or ARRAY = u32 elem_type, u64 n, n elements
 *   n_tensors x { str name | u32 n_dims | u64 ne[n_dims] | u32 ggml_type | u64 offset }
 *   zero padding to ALIGNMENT (general.alignment, u32, default 32)
 *   data section: tensor i at data_start + offset_i, offsets back to back, each aligned
 *
 * The file is hostile input (docs/model-formats.md §1.6). Every length is checked
 * against the bytes left before it is used or allocated, every size computation is overflow
 * checked, and a bad file yields DP_EFORMAT (or DP_EUNSUPPORTED for a type we cannot handle)
 * with "FILE: offset 0x..: what is wrong, what is allowed" in the caller's dp_err. The reader
 * never aborts. All returned pointers point into the mapping and live until eng_gguf_close().
 */
#ifndef ENG_GGUF_H
#define ENG_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

typedef enum eng_gguf_type {
    ENG_GGUF_TYPE_UINT8 = 0,
    ENG_GGUF_TYPE_INT8 = 1,
    ENG_GGUF_TYPE_UINT16 = 2,
    ENG_GGUF_TYPE_INT16 = 3,
    ENG_GGUF_TYPE_UINT32 = 4,
    ENG_GGUF_TYPE_INT32 = 5,
    ENG_GGUF_TYPE_FLOAT32 = 6,
    ENG_GGUF_TYPE_BOOL = 7,
    ENG_GGUF_TYPE_STRING = 8,
    ENG_GGUF_TYPE_ARRAY = 9,
    ENG_GGUF_TYPE_UINT64 = 10,
    ENG_GGUF_TYPE_INT64 = 11,
    ENG_GGUF_TYPE_FLOAT64 = 12,
    ENG_GGUF_TYPE_COUNT,
} eng_gguf_type;

#define ENG_GGUF_MAX_DIMS 4
#define ENG_GGUF_MAX_NAME 64                 /* tensor names are shorter than this */
#define ENG_GGUF_DEFAULT_ALIGNMENT 32
#define ENG_GGUF_MAX_ALIGNMENT (1u << 20)
#define ENG_GGUF_MAX_STRING (16u << 20)      /* one metadata string */
#define ENG_GGUF_MAX_ARRAY (1u << 26)        /* elements in one array */
#define ENG_GGUF_MAX_KV (1u << 16)
#define ENG_GGUF_MAX_TENSORS (1u << 20)

typedef struct eng_gguf eng_gguf;

/* A string inside the mapping: not NUL-terminated; print with "%.*s", (int)s.len, s.ptr. */
typedef struct eng_gguf_str {
    const char *ptr;
    uint64_t len;
} eng_gguf_str;

typedef struct eng_gguf_kv {
    eng_gguf_str key;
    eng_gguf_type type;       /* value type */
    eng_gguf_type arr_type;   /* element type when type == ARRAY */
    uint64_t n;               /* elements (1 for a scalar) */
    const uint8_t *data;      /* scalar or first element, unaligned */
    const eng_gguf_str *strs; /* STRING values: n entries (also for a scalar string) */
    uint64_t file_offset;     /* where the key starts, for messages */
} eng_gguf_kv;

typedef struct eng_gguf_tensor {
    char name[ENG_GGUF_MAX_NAME];
    uint32_t n_dims;
    int64_t ne[ENG_GGUF_MAX_DIMS]; /* ne[0] contiguous; missing dims are 1 */
    int type;                      /* eng_type id */
    uint64_t offset;               /* relative to the data section */
    size_t nbytes;
    const void *data;              /* view into the mapping */
} eng_gguf_tensor;

/* Opens and validates path (mmap'd). *out takes ownership; free with eng_gguf_close(). */
dp_status eng_gguf_open(const char *path, eng_gguf **out, dp_err *err);
/* Same over a caller buffer, which must outlive the result (used by the fuzzer and tests).
 * name appears in messages. */
dp_status eng_gguf_open_buffer(const void *data, size_t size, const char *name, eng_gguf **out,
                               dp_err *err);
void eng_gguf_close(eng_gguf *g);

uint32_t eng_gguf_version(const eng_gguf *g);
uint32_t eng_gguf_alignment(const eng_gguf *g);
uint64_t eng_gguf_data_offset(const eng_gguf *g); /* file offset of the data section */
const char *eng_gguf_path(const eng_gguf *g);     /* borrowed */
size_t eng_gguf_file_size(const eng_gguf *g);

int64_t eng_gguf_n_kv(const eng_gguf *g);
const eng_gguf_kv *eng_gguf_kv_at(const eng_gguf *g, int64_t i);
/* NULL when absent. */
const eng_gguf_kv *eng_gguf_find(const eng_gguf *g, const char *key);

int64_t eng_gguf_n_tensors(const eng_gguf *g);
const eng_gguf_tensor *eng_gguf_tensor_at(const eng_gguf *g, int64_t i);
/* NULL when absent. */
const eng_gguf_tensor *eng_gguf_find_tensor(const eng_gguf *g, const char *name);

const char *eng_gguf_type_name(eng_gguf_type t); /* "UINT32"; borrowed */

/* Typed getters. Absent key: DP_ENOENT. Wrong type or value out of range: DP_EFORMAT with the
 * key, the type found and what is allowed. Integer getters accept any integer width whose
 * value fits (writers differ); float getters accept FLOAT32 and FLOAT64. */
dp_status eng_gguf_get_u32(const eng_gguf *g, const char *key, uint32_t *out, dp_err *err);
dp_status eng_gguf_get_i64(const eng_gguf *g, const char *key, int64_t *out, dp_err *err);
dp_status eng_gguf_get_f32(const eng_gguf *g, const char *key, float *out, dp_err *err);
dp_status eng_gguf_get_bool(const eng_gguf *g, const char *key, bool *out, dp_err *err);
dp_status eng_gguf_get_str(const eng_gguf *g, const char *key, eng_gguf_str *out, dp_err *err);
/* An ARRAY whose elements have type elem (use ENG_GGUF_TYPE_COUNT to accept any). */
dp_status eng_gguf_get_arr(const eng_gguf *g, const char *key, eng_gguf_type elem,
                           const eng_gguf_kv **out, dp_err *err);

/* Element i of an integer scalar or array kv as int64 (any integer width). */
bool eng_gguf_kv_int(const eng_gguf_kv *kv, uint64_t i, int64_t *out);
/* Element i of a FLOAT32/FLOAT64 kv. */
bool eng_gguf_kv_float(const eng_gguf_kv *kv, uint64_t i, double *out);
/* True when the key equals s (NUL-terminated). */
bool eng_gguf_str_eq(eng_gguf_str a, const char *s);

#endif /* ENG_GGUF_H */
