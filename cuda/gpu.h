/*
 * gpu.h - the CUDA backend's C interface (plain C; C++ stays inside the .cu files).
 *
 * Device discovery, and host-to-host entry points into single kernels for the parity tests
 * (the engine reaches the backend through engine/backend.h instead). Every function returns a
 * dp_status; failures carry the CUDA call site and error string.
 */
#ifndef GPU_GPU_H
#define GPU_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gpu_device_info {
    int index;
    char name[256];
    int cc_major, cc_minor;    /* compute capability */
    size_t mem_total, mem_free; /* bytes */
    int n_sm;
} gpu_device_info;

/* Number of usable CUDA devices; 0 (and DP_OK) when there is no driver or no device. */
dp_status gpu_device_count(int *n, dp_err *err);
dp_status gpu_device_get_info(int index, gpu_device_info *info, dp_err *err);

/* Dequantizes n elements (a multiple of the block size) of a tensor of eng_type `type` from
 * host bytes to host floats on device `index`: upload, kernel, download. Used by the parity
 * tests; the engine keeps weights resident instead. DP_EUNSUPPORTED for other types. */
dp_status gpu_dequantize_host(int index, int type, const void *src, size_t src_bytes, float *dst, int64_t n,
                              dp_err *err);

/* y[t][n] = sum_k W[n][k] x[t][k] through the backend's matmul (f16 tensor-core products; f32
 * for F32 weights): W is N rows of K elements of `type` in host memory, x [n_tok][K],
 * y [n_tok][N]. */
dp_status gpu_matmul_host(int index, int type, const void *w, int N, int K, const float *x, int n_tok, float *y,
                          dp_err *err);

#ifdef __cplusplus
}
#endif

#endif /* GPU_GPU_H */
