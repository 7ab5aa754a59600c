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
 *
 * The public part is declared in engine.h; this header adds what only the engine, its backends
 * and its tests use.
 */
#ifndef ENG_GGUF_H
#define ENG_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "status.h"

#define ENG_GGUF_DEFAULT_ALIGNMENT 32
#define ENG_GGUF_MAX_ALIGNMENT (1u << 20)
#define ENG_GGUF_MAX_STRING (16u << 20)      /* one metadata string */
#define ENG_GGUF_MAX_ARRAY (1u << 26)        /* elements in one array */
#define ENG_GGUF_MAX_KV (1u << 16)
#define ENG_GGUF_MAX_TENSORS (1u << 20)

/* Same over a caller buffer, which must outlive the result (used by the fuzzer and tests).
 * name appears in messages. */
dp_status eng_gguf_open_buffer(const void *data, size_t size, const char *name, eng_gguf **out,
                               dp_err *err);
uint64_t eng_gguf_data_offset(const eng_gguf *g); /* file offset of the data section */
const char *eng_gguf_path(const eng_gguf *g);     /* borrowed */

#endif /* ENG_GGUF_H */
