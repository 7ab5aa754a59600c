/*
 * kernels_avx512.h - the AVX-512 (F, BW, VL, DQ, VNNI) kernels (kernels_avx512.c). Private to the
 * CPU backend: reached through the dispatchers of kernels.h, and by the AMX GEMM for products
 * too small for tiles.
 */
#ifndef ENG_CPU_KERNELS_AVX512_H
#define ENG_CPU_KERNELS_AVX512_H

#include "kernels.h"

/* quantized dot products and GEMM */
eng_vec_dot_fn eng_vec_dot_avx512(int wt);
eng_vec_dot_pf_fn eng_vec_dot_pf_avx512(int wt);
eng_vec_dot4r_fn eng_vec_dot4r_avx512(int wt);
eng_gemm_fn eng_gemm_avx512(int weight_type);
eng_gemm_prep_fn eng_gemm_prep_avx512(int wt);
size_t eng_gemm_ws_avx512(int64_t k);
void eng_quantize_q8_k_avx512(const float *x, void *y, int64_t n);

/* attention rows against the KV cache */
void eng_kv_dots_f16p_avx512(const float *q, size_t lq, int G, const void *k, size_t kst, int n, int hd, float *s,
                             size_t ls);
void eng_kv_dots_f16w_avx512(const float *q, size_t lq, int G, const void *k, size_t kst, int n, int hd, float *s,
                             size_t ls);
void eng_kv_mix_f16_avx512(float *acc, size_t la, int G, const float *w, size_t lw, const void *v, size_t vst, int n,
                           int hd);
void eng_kv_mix_f16w_avx512(float *acc, size_t la, int G, const float *w, size_t lw, const void *v, size_t vst,
                            int n, int hd);
/* a Q8_0 cache's rows (head sizes a multiple of 32), as stored or widened to floats (f32r) */
void eng_kv_dots_q8_0_avx512(const float *q, size_t lq, int G, const void *k, size_t kst, int n, int hd, float *s,
                             size_t ls);
void eng_kv_dots_f32r_avx512(const float *q, size_t lq, int G, const void *k, size_t kst, int n, int hd, float *s,
                             size_t ls);
void eng_kv_mix_q8_0_avx512(float *acc, size_t la, int G, const float *w, size_t lw, const void *v, size_t vst, int n,
                            int hd);
float eng_softmax_tile_avx512(float *s, int n, float scale, float *m, double *l);

/* elementwise */
void eng_swiglu_avx512(const float *g, const float *u, float *out, int64_t n);
void eng_silu_avx512(const float *x, float *out, int64_t n);
void eng_mul_sigmoid_avx512(float *x, const float *g, int64_t n);

/* Gated DeltaNet */
void eng_delta_step_avx512(float *S, const float *k, const float *v, const float *q, float decay, float beta, int dk,
                           int dv, float *o);
void eng_delta_chunk_avx512(int c, const float *const *q, const float *const *k, const float *const *v,
                            const float *beta, const float *g, float *St, int dk, int dv, float *O, float *ws);

#endif /* ENG_CPU_KERNELS_AVX512_H */
