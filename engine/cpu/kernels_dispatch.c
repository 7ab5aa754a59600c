/*
 * kernels_dispatch.c - picks the fastest vec-dot kernels the running CPU supports.
 *
 * Test for features at run time (the binary is built for baseline x86-64 or any other CPU);
 * SIMD translation units are compiled with their own target flags and only called after the
 * check. Without SIMD kernels the scalar references are used.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "kernels.h"
#include "kernels_amx.h"
#include "kernels_avx2.h"
#include "kernels_avx512.h"
#include "kernels_ref.h"
#include "platform.h"
#include "quant.h"

static bool g_force_scalar, g_no_amx, g_no_avx512;

void eng_cpu_force_scalar(bool on) { g_force_scalar = on; }
void eng_cpu_disable_amx(bool on) { g_no_amx = on; }
void eng_cpu_disable_avx512(bool on) { g_no_avx512 = on; }

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
static int g_avx2 = -1, g_avx512 = -1, g_amx = -1;
static bool have_avx2(void) {
    if (g_avx2 < 0) {
        __builtin_cpu_init();
        unsigned a, b, c, d;
        const bool f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)); /* clang 14 has no "f16c" name */
        g_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
    }
    return g_avx2;
}
/* AVX-512 F/BW/VL/DQ + VNNI (Ice Lake, Sapphire Rapids, Zen 4 and later); the OS must save
 * the zmm state, which __builtin_cpu_supports checks through XGETBV. */
static bool cpu_avx512(void) {
    if (g_avx512 < 0)
        g_avx512 = have_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                   __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                   __builtin_cpu_supports("avx512vnni");
    return g_avx512;
}
static bool have_avx512(void) { return cpu_avx512() && !g_no_avx512; }
/* CPUID leaf 0's vendor string "GenuineIntel" (EBX, EDX, ECX). */
static bool cpu_intel(void) {
    unsigned a, b, c, d;
    return __get_cpuid(0, &a, &b, &c, &d) && b == 0x756e6547u && d == 0x49656e69u && c == 0x6c65746eu;
}
/* AMX-TILE + AMX-INT8 (CPUID 7.0 EDX bits 24, 25) with AVX-512 VBMI (ECX bit 1; every AMX CPU
 * has it, the AMX kernels permute bytes with it), the OS saving the tile state (XCR0 bits 17-18),
 * and the OS's permission for this process to use it; DOCPIPE_NO_AMX=1 opts out. */
static bool have_amx(void) {
#ifdef DP_HAVE_AMX_BUILD
    if (g_amx < 0) {
        unsigned a, b, c, d;
        bool ok = cpu_avx512() && __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d & (1u << 24)) && (d & (1u << 25)) && (c & (1u << 1));
        if (ok) {
            unsigned lo, hi;
            __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
            ok = (lo & 0x60000u) == 0x60000u;
        }
        const char *env = getenv("DOCPIPE_NO_AMX");
        if (env && *env && strcmp(env, "0") != 0) ok = false;
        ok = ok && dp_cpu_request_amx();
        if (ok) eng_amx_init();
        g_amx = ok;
    }
    return g_amx && !g_no_amx && !g_no_avx512 && !g_force_scalar;
#else
    (void)g_amx;
    return false;
#endif
}
#define DP_HAVE_X86 1
#elif defined(_M_X64) && defined(_MSC_VER)
/* MSVC: the same checks from CPUID and XGETBV directly. Leaf 1 ECX: FMA bit 12, OSXSAVE 27, F16C
 * 29; leaf 7 EBX: AVX2 5, AVX512F 16, AVX512DQ 17, AVX512BW 30, AVX512VL 31, ECX: AVX512VNNI
 * 11; XCR0: the OS saves the ymm state (bits 1-2) and the zmm and mask state (5-7). No AMX:
 * its kernels are built with GCC or Clang only. */
#include <intrin.h>
static int g_avx2 = -1, g_avx512 = -1;
static bool cpuid_bit(int leaf, int reg, int bit) {
    int r[4];
    __cpuid(r, 0);
    if (r[0] < leaf) return false;
    __cpuidex(r, leaf, 0);
    return ((unsigned)r[reg] >> bit) & 1u;
}
static bool have_avx2(void) {
    if (g_avx2 < 0)
        g_avx2 = cpuid_bit(1, 2, 27) && (_xgetbv(0) & 0x6u) == 0x6u && cpuid_bit(1, 2, 12) && cpuid_bit(1, 2, 29) &&
                 cpuid_bit(7, 1, 5);
    return g_avx2;
}
static bool cpu_avx512(void) {
    if (g_avx512 < 0)
        g_avx512 = have_avx2() && (_xgetbv(0) & 0xE6u) == 0xE6u && cpuid_bit(7, 1, 16) && cpuid_bit(7, 1, 17) &&
                   cpuid_bit(7, 1, 30) && cpuid_bit(7, 1, 31) && cpuid_bit(7, 2, 11);
    return g_avx512;
}
static bool have_avx512(void) { return cpu_avx512() && !g_no_avx512; }
static bool cpu_intel(void) {
    int r[4];
    __cpuid(r, 0);
    return (unsigned)r[1] == 0x756e6547u && (unsigned)r[3] == 0x49656e69u && (unsigned)r[2] == 0x6c65746eu;
}
static bool have_amx(void) { return false; }
#define DP_HAVE_X86 1
#endif

bool eng_cpu_amx(void) {
#ifdef DP_HAVE_X86
    return have_amx();
#else
    return false;
#endif
}

eng_vec_dot_fn eng_vec_dot_best(int wt) {
#ifdef DP_HAVE_X86
    if (!g_force_scalar && have_avx512()) {
        eng_vec_dot_fn f = eng_vec_dot_avx512(wt);
        if (f) return f;
    }
    if (!g_force_scalar && have_avx2()) {
        eng_vec_dot_fn f = eng_vec_dot_avx2(wt);
        if (f) return f;
    }
#endif
    return eng_vec_dot_ref(wt);
}

eng_vec_dot_pf_fn eng_vec_dot_pf_best(int wt) {
#ifdef DP_HAVE_X86
    if (!g_force_scalar && have_avx512()) return eng_vec_dot_pf_avx512(wt); /* (the same kernels as eng_vec_dot_best) */
#endif
    (void)wt;
    return NULL;
}

eng_vec_dot4r_fn eng_vec_dot4r_best(int wt) {
#ifdef DP_HAVE_X86
    if (!g_force_scalar && have_avx512()) return eng_vec_dot4r_avx512(wt);
    if (!g_force_scalar && have_avx2()) return eng_vec_dot4r_avx2(wt);
#endif
    (void)wt;
    return NULL;
}

size_t eng_vec_dot_pf_lead(void) {
#ifdef DP_HAVE_X86
    /* Measured on one-sequence decode, 2-vCPU VMs: a Sapphire Rapids Xeon decoded 4-11 % faster
     * at 2 KB than at 4-16 KB (its prefetches hold L1 fill buffers until the line arrives, so
     * fewer in flight leave room for the product's own reads); a Zen 4 EPYC 7-13 % slower at
     * 2 KB than anywhere from 4 to 256 KB. Other makes: not measured, the longer lead. */
    return cpu_intel() ? 2048 : 16384;
#else
    return 16384;
#endif
}

eng_vec_dot4_fn eng_vec_dot4_best(int wt) {
#ifdef DP_HAVE_X86
    /* where a type has an AVX-512 dot, only the GEMM matches it bit for bit */
    if (!g_force_scalar && have_avx512() && eng_vec_dot_avx512(wt)) return NULL;
    if (!g_force_scalar && have_avx2()) return eng_vec_dot4_avx2(wt); /* (NULL for the types of its GEMM) */
#endif
    (void)wt;
    return NULL;
}

void eng_act_quantize(int act_type, const float *x, void *y, int64_t k) {
#ifdef DP_HAVE_X86
    if (act_type == ENG_TYPE_Q8_K && !g_force_scalar && have_avx512()) {
        eng_quantize_q8_k_avx512(x, y, k);
        return;
    }
    if (act_type == ENG_TYPE_Q8_K && !g_force_scalar && have_avx2()) {
        eng_quantize_q8_k_avx2(x, y, k);
        return;
    }
    if ((act_type == ENG_TYPE_Q8_0 || act_type == ENG_TYPE_Q8_1) && !g_force_scalar && have_avx2()) {
        eng_quantize_q8_0_avx2(x, y, k, act_type == ENG_TYPE_Q8_1);
        return;
    }
#endif
    eng_act_quantize_ref(act_type, x, y, k);
}

eng_gemm_fn eng_gemm_best(int wt) {
#ifdef DP_HAVE_X86
    eng_gemm_fn f;
#ifdef DP_HAVE_AMX_BUILD
    if (have_amx() && (f = eng_gemm_amx(wt))) return f;
#endif
    /* a type with an AVX-512 dot has only that GEMM to match it bit for bit; the others' dots
     * are the AVX2 ones, so is their GEMM */
    if (!g_force_scalar && have_avx512() && ((f = eng_gemm_avx512(wt)) || eng_vec_dot_avx512(wt))) return f;
    if (!g_force_scalar && have_avx2()) return eng_gemm_avx2(wt);
#endif
    (void)wt;
    return NULL;
}

eng_gemm_prep_fn eng_gemm_prep_best(int wt) {
#ifdef DP_HAVE_X86
    if (!g_force_scalar && have_avx512()) return eng_gemm_prep_avx512(wt);
#endif
    (void)wt;
    return NULL;
}

size_t eng_gemm_ws_size(int64_t k, int n_tok) {
#ifdef DP_HAVE_X86
    size_t n = eng_gemm_ws_avx512(k);
    if (eng_gemm_ws_avx2(k, n_tok) > n) n = eng_gemm_ws_avx2(k, n_tok);
#ifdef DP_HAVE_AMX_BUILD
    if (have_amx() && eng_gemm_ws_amx(k, n_tok) > n) n = eng_gemm_ws_amx(k, n_tok);
#endif
    (void)n_tok;
    return n;
#else
    (void)k;
    (void)n_tok;
    return 0;
#endif
}

eng_delta_step_fn eng_delta_step_best(void) {
#ifdef DP_HAVE_X86
    if (!g_force_scalar && have_avx512()) return eng_delta_step_avx512;
    if (!g_force_scalar && have_avx2()) return eng_delta_step_avx2;
#endif
    return eng_delta_step_ref;
}

eng_kv_dot_fn eng_kv_dot_best(int kv_type, bool exact) {
#ifdef DP_HAVE_X86
    if (!exact && !g_force_scalar && have_avx2()) return kv_type == ENG_TYPE_F16 ? eng_kv_dot_f16_avx2 : eng_kv_dot_f32_avx2;
#endif
    (void)exact;
    return kv_type == ENG_TYPE_F16 ? eng_kv_dot_f16_ref : eng_kv_dot_f32_ref;
}

static void axpy_rows_f16_ref(float *acc, const float *w, const void *v, size_t stride, int n, int hd) {
    for (int p = 0; p < n; p++) eng_kv_axpy_f16_ref(acc, w[p], (const uint8_t *)v + (size_t)p * stride, hd);
}
static void axpy_rows_f32_ref(float *acc, const float *w, const void *v, size_t stride, int n, int hd) {
    for (int p = 0; p < n; p++) eng_kv_axpy_f32_ref(acc, w[p], (const uint8_t *)v + (size_t)p * stride, hd);
}

eng_kv_axpy_rows_fn eng_kv_axpy_rows_best(int kv_type, bool exact) {
#ifdef DP_HAVE_X86
    if (!exact && !g_force_scalar && have_avx2())
        return kv_type == ENG_TYPE_F16 ? eng_kv_axpy_rows_f16_avx2 : eng_kv_axpy_rows_f32_avx2;
#endif
    (void)exact;
    return kv_type == ENG_TYPE_F16 ? axpy_rows_f16_ref : axpy_rows_f32_ref;
}

/* Grouped attention loops: AVX-512 or AVX2 for F16 caches; elsewhere one head at a time through the
 * one-head kernels (the exact path keeps the scalar reference). */

static void kv_dots_generic(bool exact, int kv_type, const float *q, size_t lq, int G, const void *k, size_t kst, int n,
                            int hd, float *s, size_t ls) {
    const eng_kv_dot_fn dot = eng_kv_dot_best(kv_type, exact);
    for (int g = 0; g < G; g++)
        for (int p = 0; p < n; p++) s[(size_t)g * ls + p] = dot(q + (size_t)g * lq, (const uint8_t *)k + (size_t)p * kst, hd);
}

static void kv_mix_generic(bool exact, int kv_type, float *acc, size_t la, int G, const float *w, size_t lw, const void *v,
                           size_t vst, int n, int hd) {
    const eng_kv_axpy_rows_fn rows = eng_kv_axpy_rows_best(kv_type, exact);
    for (int g = 0; g < G; g++) rows(acc + (size_t)g * la, w + (size_t)g * lw, v, vst, n, hd);
}

#define KV_GENERIC(NAME, EX, T)                                                                                      \
    static void kv_dots_##NAME(const float *q, size_t lq, int G, const void *k, size_t kst, int n, int hd, float *s, \
                               size_t ls) {                                                                          \
        kv_dots_generic(EX, T, q, lq, G, k, kst, n, hd, s, ls);                                                      \
    }                                                                                                                \
    static void kv_mix_##NAME(float *acc, size_t la, int G, const float *w, size_t lw, const void *v, size_t vst,    \
                              int n, int hd) {                                                                       \
        kv_mix_generic(EX, T, acc, la, G, w, lw, v, vst, n, hd);                                                     \
    }
KV_GENERIC(f32, false, ENG_TYPE_F32)
KV_GENERIC(f16, false, ENG_TYPE_F16)
KV_GENERIC(f32_exact, true, ENG_TYPE_F32)
KV_GENERIC(f16_exact, true, ENG_TYPE_F16)
#undef KV_GENERIC

eng_kv_dots_fn eng_kv_dots_best(int kv_type, bool exact) {
    const int f = kv_type == ENG_TYPE_F16;
#ifdef DP_HAVE_X86
    if (!exact && f && !g_force_scalar && have_avx2()) return eng_kv_dots_f16_avx2;
#endif
    return exact ? (f ? kv_dots_f16_exact : kv_dots_f32_exact) : (f ? kv_dots_f16 : kv_dots_f32);
}

eng_kv_mix_fn eng_kv_mix_best(int kv_type, bool exact) {
    const int f = kv_type == ENG_TYPE_F16;
#ifdef DP_HAVE_X86
    if (!exact && f && !g_force_scalar && have_avx512()) return eng_kv_mix_f16_avx512;
    if (!exact && f && !g_force_scalar && have_avx2()) return eng_kv_mix_f16_avx2;
#endif
    return exact ? (f ? kv_mix_f16_exact : kv_mix_f32_exact) : (f ? kv_mix_f16 : kv_mix_f32);
}

eng_kv_dots_fn eng_kv_dots_q8_0(bool exact) {
#ifdef DP_HAVE_X86
    if (!exact && !g_force_scalar && have_avx512()) return eng_kv_dots_f32r_avx512;
    if (!exact && !g_force_scalar && have_avx2()) return eng_kv_dots_f32_avx2;
#endif
    return eng_kv_dots_best(ENG_TYPE_F32, exact);
}

eng_kv_mix_fn eng_kv_mix_q8_0(bool exact) {
#ifdef DP_HAVE_X86
    if (!exact && !g_force_scalar && have_avx512()) return eng_kv_mix_f16w_avx512;
    if (!exact && !g_force_scalar && have_avx2()) return eng_kv_mix_f32_avx2;
#endif
    return eng_kv_mix_best(ENG_TYPE_F32, exact);
}

eng_kv_dots_fn eng_kv_dots_q8_0_rows(bool exact) {
#ifdef DP_HAVE_X86
    if (!exact && !g_force_scalar && have_avx512()) return eng_kv_dots_q8_0_avx512;
    if (!exact && !g_force_scalar && have_avx2()) return eng_kv_dots_q8_0_avx2;
#endif
    (void)exact;
    return NULL;
}

eng_kv_mix_fn eng_kv_mix_q8_0_rows(bool exact) {
#ifdef DP_HAVE_X86
    if (!exact && !g_force_scalar && have_avx512()) return eng_kv_mix_q8_0_avx512;
    if (!exact && !g_force_scalar && have_avx2()) return eng_kv_mix_q8_0_avx2;
#endif
    (void)exact;
    return NULL;
}

int eng_kv_q8_0_rows_group(void) {
#ifdef DP_HAVE_X86
    if (!g_force_scalar && have_avx512()) return 6;
    if (!g_force_scalar && have_avx2()) return 4;
#endif
    return 0;
}

eng_kv_dots_fn eng_kv_dots_panels(bool exact) {
#ifdef DP_HAVE_X86
    if (!exact && !g_force_scalar && have_avx512()) return eng_kv_dots_f16p_avx512;
    if (!exact && !g_force_scalar && have_avx2()) return eng_kv_dots_f16p_avx2;
#endif
    (void)exact;
    return NULL;
}

eng_kv_dots_fn eng_kv_dots_widened(bool exact) {
#ifdef DP_HAVE_X86
    if (!exact && !g_force_scalar && have_avx512()) return eng_kv_dots_f16w_avx512;
    if (!exact && !g_force_scalar && have_avx2()) return eng_kv_dots_f16w_avx2;
#endif
    (void)exact;
    return NULL;
}

eng_kv_mix_fn eng_kv_mix_widened(bool exact) {
#ifdef DP_HAVE_X86
    if (!exact && !g_force_scalar && have_avx512()) return eng_kv_mix_f16w_avx512;
    if (!exact && !g_force_scalar && have_avx2()) return eng_kv_mix_f32_avx2;
#endif
    (void)exact;
    return NULL;
}

eng_kv_mix_fn eng_kv_mix_slabs(bool exact) {
#ifdef DP_HAVE_X86
    if (!exact && !g_force_scalar && have_avx512()) return NULL;
    if (!exact && !g_force_scalar && have_avx2()) return eng_kv_mix_slabs_avx2;
#endif
    (void)exact;
    return NULL;
}

eng_kv_axpy_fn eng_kv_axpy_best(int kv_type, bool exact) {
#ifdef DP_HAVE_X86
    if (!exact && !g_force_scalar && have_avx2()) return kv_type == ENG_TYPE_F16 ? eng_kv_axpy_f16_avx2 : eng_kv_axpy_f32_avx2;
#endif
    (void)exact;
    return kv_type == ENG_TYPE_F16 ? eng_kv_axpy_f16_ref : eng_kv_axpy_f32_ref;
}

eng_delta_chunk_fn eng_delta_chunk_best(void) {
#ifdef DP_HAVE_X86
    if (!g_force_scalar && have_avx512()) return eng_delta_chunk_avx512;
    if (!g_force_scalar && have_avx2()) return eng_delta_chunk_avx2;
#endif
    return eng_delta_chunk_ref;
}

eng_softmax_tile_fn eng_softmax_tile_best(bool exact) {
#ifdef DP_HAVE_X86
    if (!exact && !g_force_scalar && have_avx512()) return eng_softmax_tile_avx512;
    if (!exact && !g_force_scalar && have_avx2()) return eng_softmax_tile_avx2;
#endif
    (void)exact;
    return eng_softmax_tile_ref;
}

eng_swiglu_fn eng_swiglu_best(bool exact) {
#ifdef DP_HAVE_X86
    if (!exact && !g_force_scalar && have_avx512()) return eng_swiglu_avx512;
    if (!exact && !g_force_scalar && have_avx2()) return eng_swiglu_avx2;
#endif
    (void)exact;
    return eng_swiglu_ref;
}

eng_silu_fn eng_silu_best(bool exact) {
#ifdef DP_HAVE_X86
    if (!exact && !g_force_scalar && have_avx512()) return eng_silu_avx512;
    if (!exact && !g_force_scalar && have_avx2()) return eng_silu_avx2;
#endif
    (void)exact;
    return eng_silu_ref;
}

eng_mul_sigmoid_fn eng_mul_sigmoid_best(bool exact) {
#ifdef DP_HAVE_X86
    if (!exact && !g_force_scalar && have_avx512()) return eng_mul_sigmoid_avx512;
    if (!exact && !g_force_scalar && have_avx2()) return eng_mul_sigmoid_avx2;
#endif
    (void)exact;
    return eng_mul_sigmoid_ref;
}

void eng_f16_to_f32_row(const uint16_t *x, float *y, int64_t n) {
#ifdef DP_HAVE_X86
    if (have_avx2()) {
        eng_f16_to_f32_row_avx2(x, y, n);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++) y[i] = eng_f16_to_f32(x[i]);
}

void eng_q8_0_to_f32_row(const void *x, float *y, int64_t n) {
#ifdef DP_HAVE_X86
    if (have_avx2()) {
        eng_q8_0_to_f32_row_avx2(x, y, n);
        return;
    }
#endif
    eng_dequantize_row(ENG_TYPE_Q8_0, x, y, n);
}

void eng_f32_to_f16_row(const float *x, uint16_t *y, int64_t n) {
#ifdef DP_HAVE_X86
    if (have_avx2()) {
        eng_f32_to_f16_row_avx2(x, y, n);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++) y[i] = eng_f32_to_f16(x[i]);
}

const char *eng_cpu_kernels_built(void) {
#if defined(DP_HAVE_X86) && defined(DP_HAVE_AMX_BUILD)
    return "scalar avx2 avx512-vnni amx";
#elif defined(DP_HAVE_X86)
    return "scalar avx2 avx512-vnni";
#else
    return "scalar";
#endif
}

const char *eng_cpu_kernels_used(void) { return eng_cpu_kernel_name(); }

const char *eng_cpu_kernel_name(void) {
#ifdef DP_HAVE_X86
    if (have_amx()) return "avx512-vnni+amx";
    if (!g_force_scalar && have_avx512()) return "avx512-vnni";
    if (!g_force_scalar && have_avx2()) return "avx2";
#endif
    return "scalar";
}
