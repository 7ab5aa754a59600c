/*
 * kernels_ref.h - the plain scalar references (kernels_ref.c) that the dispatchers of kernels.h
 * fall back to and the SIMD kernels are tested against. (The references that are also public
 * entry points, eng_vec_dot_ref and the DeltaNet steps, are declared in kernels.h.)
 */
#ifndef ENG_CPU_KERNELS_REF_H
#define ENG_CPU_KERNELS_REF_H

#include "kernels.h"

void eng_act_quantize_ref(int act_type, const float *x, void *y, int64_t k);
float eng_kv_dot_f32_ref(const float *q, const void *k, int n);
float eng_kv_dot_f16_ref(const float *q, const void *k, int n);
void eng_kv_axpy_f32_ref(float *acc, float w, const void *v, int n);
void eng_kv_axpy_f16_ref(float *acc, float w, const void *v, int n);
float eng_softmax_tile_ref(float *s, int n, float scale, float *m, double *l);
void eng_swiglu_ref(const float *g, const float *u, float *out, int64_t n);
void eng_mul_sigmoid_ref(float *x, const float *g, int64_t n);
void eng_silu_ref(const float *x, float *out, int64_t n);

#endif /* ENG_CPU_KERNELS_REF_H */
