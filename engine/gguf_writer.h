/*
 * gguf_writer.h - writes GGUF v3 files (layout in gguf.h): metadata of every type, tensor
 * infos, and aligned tensor data that is either borrowed from memory or produced row by row
 * by a callback (so an 8 GB model never has to sit in memory).
 *
 *   eng_gguf_writer *w;
 *   eng_gguf_writer_init(&w);
 *   eng_gguf_writer_set_str(w, "general.architecture", "qwen3");
 *   eng_gguf_writer_add_tensor(w, "output_norm.weight", ENG_TYPE_F32, 1, ne, data);
 *   eng_gguf_writer_write(w, "out.gguf", NULL, NULL, &err);
 *   eng_gguf_writer_free(w);
 *
 * The file appears atomically: it is written to "PATH.tmp", synced and renamed.
 */
#ifndef ENG_GGUF_WRITER_H
#define ENG_GGUF_WRITER_H

#include <stdbool.h>
#include <stdint.h>

#include "gguf.h"
#include "status.h"

typedef struct eng_gguf_writer eng_gguf_writer;

/* Produces rows [row0, row0 + n_rows) of tensor idx (rows of ne[0] elements) into dst, which
 * holds exactly that many rows in the tensor's type. */
typedef dp_status (*eng_gguf_fill_fn)(void *ud, int64_t idx, const eng_gguf_tensor *t, int64_t row0,
                                      int64_t n_rows, void *dst, dp_err *err);

dp_status eng_gguf_writer_init(eng_gguf_writer **out);
void eng_gguf_writer_free(eng_gguf_writer *w);

/* Setting a key that exists replaces its value (position kept). */
dp_status eng_gguf_writer_set_u8(eng_gguf_writer *w, const char *key, uint8_t v);
dp_status eng_gguf_writer_set_i8(eng_gguf_writer *w, const char *key, int8_t v);
dp_status eng_gguf_writer_set_u16(eng_gguf_writer *w, const char *key, uint16_t v);
dp_status eng_gguf_writer_set_i16(eng_gguf_writer *w, const char *key, int16_t v);
dp_status eng_gguf_writer_set_u32(eng_gguf_writer *w, const char *key, uint32_t v);
dp_status eng_gguf_writer_set_i32(eng_gguf_writer *w, const char *key, int32_t v);
dp_status eng_gguf_writer_set_u64(eng_gguf_writer *w, const char *key, uint64_t v);
dp_status eng_gguf_writer_set_i64(eng_gguf_writer *w, const char *key, int64_t v);
dp_status eng_gguf_writer_set_f32(eng_gguf_writer *w, const char *key, float v);
dp_status eng_gguf_writer_set_f64(eng_gguf_writer *w, const char *key, double v);
dp_status eng_gguf_writer_set_bool(eng_gguf_writer *w, const char *key, bool v);
dp_status eng_gguf_writer_set_str(eng_gguf_writer *w, const char *key, const char *v);
dp_status eng_gguf_writer_set_strn(eng_gguf_writer *w, const char *key, const char *v, size_t len);
/* Array of n fixed-size elements of type elem (not STRING or ARRAY); copies data. */
dp_status eng_gguf_writer_set_arr(eng_gguf_writer *w, const char *key, eng_gguf_type elem, const void *data,
                                  uint64_t n);
/* Array of n strings; lens may be NULL for NUL-terminated strings. Copies. */
dp_status eng_gguf_writer_set_arr_str(eng_gguf_writer *w, const char *key, const char *const *strs,
                                      const size_t *lens, uint64_t n);
/* Copies a metadata entry from a file being read (any type). */
dp_status eng_gguf_writer_copy_kv(eng_gguf_writer *w, const eng_gguf_kv *kv);
bool eng_gguf_writer_has(const eng_gguf_writer *w, const char *key);

/* Adds a tensor; data (borrowed until write returns) may be NULL when a fill callback will
 * produce it. Returns DP_EINVAL for a bad shape or type, DP_EEXIST for a duplicate name. */
dp_status eng_gguf_writer_add_tensor(eng_gguf_writer *w, const char *name, int type, uint32_t n_dims,
                                     const int64_t *ne, const void *data);
int64_t eng_gguf_writer_n_tensors(const eng_gguf_writer *w);

/* Writes the file. fill (optional) is called for tensors added without data. */
dp_status eng_gguf_writer_write(eng_gguf_writer *w, const char *path, eng_gguf_fill_fn fill, void *ud,
                                dp_err *err);

#endif /* ENG_GGUF_WRITER_H */
