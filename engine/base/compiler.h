/*
 * compiler.h - the few things C11 leaves to the compiler, spelled once for GCC and Clang and once
 * for MSVC: forced inlining (the SIMD kernels' block helpers must inline into their loops to
 * keep their vectors in registers), thread-local storage and count-trailing-zeros. platform.h is
 * the OS's side of the same idea.
 */
#ifndef DP_COMPILER_H
#define DP_COMPILER_H

#include <stdint.h>

#if defined(_MSC_VER) && !defined(__clang__)
#include <intrin.h>
#define DP_ALWAYS_INLINE __forceinline
#define DP_THREAD_LOCAL __declspec(thread)
static __forceinline int dp_ctz32(uint32_t x) { /* x != 0 */
    unsigned long i;
    _BitScanForward(&i, x);
    return (int)i;
}
static __forceinline int dp_ctz64(uint64_t x) { /* x != 0 */
    unsigned long i;
    _BitScanForward64(&i, x);
    return (int)i;
}
#else
#define DP_ALWAYS_INLINE inline __attribute__((always_inline))
#define DP_THREAD_LOCAL _Thread_local
static inline int dp_ctz32(uint32_t x) { return __builtin_ctz(x); }
static inline int dp_ctz64(uint64_t x) { return __builtin_ctzll(x); }
#endif

#endif /* DP_COMPILER_H */
