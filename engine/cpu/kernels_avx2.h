/*
 * kernels_avx2.h - the AVX2+FMA+F16C kernels (kernels_avx2.c, gemm_avx2.c, gemm32_avx2.c). Private to the CPU
 * backend: call them only through the dispatchers of kernels.h, which check the CPU first.
 */
#ifndef ENG_CPU_KERNELS_AVX2_H
#define ENG_CPU_KERNELS_AVX2_H

#include "kernels.h"

/* quantized dot products and GEMM (the *_avx2 getters return NULL for a type they lack) */
eng_vec_dot_fn eng_vec_dot_avx2(int wt);
eng_vec_dot4_fn eng_vec_dot4_avx2(int wt);
eng_vec_dot4r_fn eng_vec_dot4r_avx2(int wt);
eng_gemm_fn eng_gemm_avx2(int wt);    /* every type with an AVX2 GEMM */
eng_gemm_fn eng_gemm32_avx2(int wt);  /* Q8_0, Q4_0, Q5_0 (gemm32_avx2.c; through eng_gemm_avx2) */
size_t eng_gemm32_ws_avx2(int64_t k, int n_tok); /* (within eng_gemm_ws_avx2) */
size_t eng_gemm_ws_avx2(int64_t k, int n_tok);
void eng_quantize_q8_k_avx2(const float *x, void *y, int64_t n);
void eng_quantize_q8_0_avx2(const float *x, void *y, int64_t n, bool sums);

/* attention rows against the KV cache */
float eng_kv_dot_f16_avx2(const float *q, const void *k, int n);
float eng_kv_dot_f32_avx2(const float *q, const void *k, int n);
void eng_kv_axpy_f16_avx2(float *acc, float w, const void *v, int n);
void eng_kv_axpy_f32_avx2(float *acc, float w, const void *v, int n);
void eng_kv_axpy_rows_f16_avx2(float *acc, const float *w, const void *v, size_t stride, int n, int hd);
void eng_kv_axpy_rows_f32_avx2(float *acc, const float *w, const void *v, size_t stride, int n, int hd);
void eng_kv_dots_f16_avx2(const float *q, size_t lq, int G, const void *k, size_t kst, int n, int hd, float *s,
                          size_t ls);
void eng_kv_mix_f16_avx2(float *acc, size_t la, int G, const float *w, size_t lw, const void *v, size_t vst, int n,
                         int hd);
void eng_kv_dots_f32_avx2(const float *q, size_t lq, int G, const void *k, size_t kst, int n, int hd, float *s,
                          size_t ls);
void eng_kv_mix_f32_avx2(float *acc, size_t la, int G, const float *w, size_t lw, const void *v, size_t vst, int n,
                         int hd);
void eng_kv_mix_slabs_avx2(float *acc, size_t la, int G, const float *w, size_t lw, const void *v, size_t vst, int n,
                           int hd);
void eng_kv_dots_f16p_avx2(const float *q, size_t lq, int G, const void *k, size_t kst, int n, int hd, float *s,
                           size_t ls);
void eng_kv_dots_f16w_avx2(const float *q, size_t lq, int G, const void *k, size_t kst, int n, int hd, float *s,
                           size_t ls);
void eng_kv_dots_q8_0_avx2(const float *q, size_t lq, int G, const void *k, size_t kst, int n, int hd, float *s,
                           size_t ls);
void eng_kv_mix_q8_0_avx2(float *acc, size_t la, int G, const float *w, size_t lw, const void *v, size_t vst, int n,
                          int hd);
float eng_softmax_tile_avx2(float *s, int n, float scale, float *m, double *l);

/* elementwise */
void eng_swiglu_avx2(const float *g, const float *u, float *out, int64_t n);
void eng_silu_avx2(const float *x, float *out, int64_t n);
void eng_mul_sigmoid_avx2(float *x, const float *g, int64_t n);
void eng_f16_to_f32_row_avx2(const uint16_t *x, float *y, int64_t n);
void eng_f32_to_f16_row_avx2(const float *x, uint16_t *y, int64_t n);
void eng_q8_0_to_f32_row_avx2(const void *x, float *y, int64_t n);

/* Gated DeltaNet */
void eng_delta_step_avx2(float *S, const float *k, const float *v, const float *q, float decay, float beta, int dk,
                         int dv, float *o);
void eng_delta_chunk_avx2(int c, const float *const *q, const float *const *k, const float *const *v,
                          const float *beta, const float *g, float *St, int dk, int dv, float *O, float *ws);

#endif /* ENG_CPU_KERNELS_AVX2_H */
