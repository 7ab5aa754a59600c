/*
 * kernels_dispatch.c - picks the fastest vec-dot kernels the running CPU supports.
 *
 * Test for features at run time (the binary is built for baseline x86-64 or any other CPU);
 * SIMD translation units are compiled with their own target flags and only called after the
 * check. Without SIMD kernels the scalar references are used.
 */
#include <stdbool.h>

#include "kernels.h"

static bool g_force_scalar;

void eng_cpu_force_scalar(bool on) { g_force_scalar = on; }

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
eng_vec_dot_fn eng_vec_dot_avx2(int weight_type);
eng_vec_dot4_fn eng_vec_dot4_avx2(int weight_type);
static bool have_avx2(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
}
#define DP_HAVE_X86 1
#endif

eng_vec_dot_fn eng_vec_dot_best(int wt) {
#ifdef DP_HAVE_X86
    if (!g_force_scalar && have_avx2()) {
        eng_vec_dot_fn f = eng_vec_dot_avx2(wt);
        if (f) return f;
    }
#endif
    return eng_vec_dot_ref(wt);
}

eng_vec_dot4_fn eng_vec_dot4_best(int wt) {
#ifdef DP_HAVE_X86
    if (!g_force_scalar && have_avx2()) return eng_vec_dot4_avx2(wt);
#endif
    (void)wt;
    return NULL;
}

const char *eng_cpu_kernel_name(void) {
#ifdef DP_HAVE_X86
    if (!g_force_scalar && have_avx2()) return "avx2";
#endif
    return "scalar";
}
