/*
 * kernels.h - CPU compute kernels: dot products of a quantized weight row with a quantized
 * activation row (model-formats.md §2.5), activation quantizers, and the small float ops.
 *
 * Every kernel has a plain scalar reference in kernels_ref.c; SIMD versions (kernels_avx2.c,
 * kernels_avx512.c) are chosen at run time by CPU feature and are tested against the
 * reference (tests/unit/test_kernels.c). Integer block sums are exact, so a SIMD dot differs
 * from the reference only by float summation order.
 */
#ifndef ENG_CPU_KERNELS_H
#define ENG_CPU_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Asks for n bytes at p to be brought into L2 (a hint: no fault, no effect on results). The
 * hardware prefetcher alone falls behind a row-dot stream from DRAM: fetching the weights
 * 16 KB ahead took a one-token Q4_K product from 6.5 to 10.5 GB/s on one Xeon core. */
#if defined(__GNUC__) || defined(__clang__)
static inline void eng_prefetch_l2(const void *p, size_t n) {
    for (size_t l = 0; l < n; l += 64) __builtin_prefetch((const char *)p + l, 0, 2);
}
#elif defined(_MSC_VER) && defined(_M_X64)
#include <xmmintrin.h>
static inline void eng_prefetch_l2(const void *p, size_t n) {
    for (size_t l = 0; l < n; l += 64) _mm_prefetch((const char *)p + l, _MM_HINT_T1);
}
#else
static inline void eng_prefetch_l2(const void *p, size_t n) { (void)p, (void)n; }
#endif

/* The attention kernels' KV cache rows, fetched into L2 a chunk of ch rows ahead: at row p0 of
 * n, rows [p0 + ch, p0 + 2 ch) (at p0 = 0 the first chunk too), bytes of each row. A KV head's
 * slice of a cache row is a few lines in every row (4 of 32 in Qwen3-4B), too sparse for the
 * hardware prefetcher, and in a batched decode step a sequence's own blocks come from DRAM (the
 * weights have passed through the caches since): unfetched, the loads wait on memory a row at
 * a time. */
static inline void eng_prefetch_kv(const void *r, size_t st, int p0, int ch, int n, size_t bytes) {
    const int a = p0 == 0 ? 0 : p0 + ch, e = p0 + 2 * ch < n ? p0 + 2 * ch : n;
    for (int i = a; i < e; i++) eng_prefetch_l2((const char *)r + (size_t)i * st, bytes);
}

/* Activation type a weight type is multiplied with on the fast path (llama.cpp's CPU
 * "vec_dot_type"): K-quants -> Q8_K, Q8_0/Q4_0 -> Q8_0, F16 -> F16, BF16 -> BF16, F32 -> F32.
 * Formats without an integer kernel (Q4_1, Q5_0, Q5_1, Q2_K, Q3_K) use F32 activations and a
 * dequantizing dot. */
int eng_act_type(int weight_type);
/* Bytes of one activation row of k elements in act_type. */
size_t eng_act_row_size(int act_type, int64_t k);
/* Quantizes an activation row the way llama.cpp's x86 path does (Q8_0: round half to even of
 * x * 127 / amax; Q8_K: the reference rule; F16/BF16: round to nearest even). */
void eng_act_quantize(int act_type, const float *x, void *y, int64_t k);

/* sum_i w[i] * x[i] over k elements: w a weight row of weight_type, x an activation row. */
typedef float (*eng_vec_dot_fn)(int64_t k, const void *w, const void *x);

/* The same product, bit for bit, that also fetches into L2 the row's worth of bytes at pf (the
 * row the caller reads next but several; NULL: nothing), the two to five lines that fall in each
 * block's bytes just before it, so that a one-sequence product streaming from DRAM keeps fill
 * buffers free for its own reads. */
typedef float (*eng_vec_dot_pf_fn)(int64_t k, const void *w, const void *x, const void *pf);
/* NULL when the CPU or type has none: the caller fetches ahead with eng_prefetch_l2. */
eng_vec_dot_pf_fn eng_vec_dot_pf_best(int weight_type);
/* How far ahead of the row in hand, in bytes, pf should point: the distance that decoded fastest
 * on this CPU's make (the caller rounds it up to whole rows). Runs CPUID: ask once and keep it. */
size_t eng_vec_dot_pf_lead(void);

/* Four weight rows (w, w + row_bytes, ...) against one activation row, fetching as
 * eng_vec_dot_pf_fn does the four rows' bytes at pf (the same span, four rows on; NULL:
 * nothing): out[j] = vec_dot(k, w + j * row_bytes, x), bit for bit. One-sequence decode: the
 * horizontal sums and the scale arithmetic that end each block are paid once for four rows. */
typedef void (*eng_vec_dot4r_fn)(int64_t k, const void *w, size_t row_bytes, const void *x, const void *pf,
                                 float out[4]);
/* NULL when the CPU or type has none. */
eng_vec_dot4r_fn eng_vec_dot4r_best(int weight_type);

/* One weight row against 4 activation rows at once (x, x + x_stride, ...): the weight blocks
 * are decoded once for all four, which is what makes prompt and batch products compute-bound
 * rather than decode-bound. out[j] = vec_dot(k, w, x + j * x_stride). */
typedef void (*eng_vec_dot4_fn)(int64_t k, const void *w, const void *x, size_t x_stride, float out[4]);
/* NULL when the CPU or type has no 4-row kernel. */
eng_vec_dot4_fn eng_vec_dot4_best(int weight_type);

/* Rows [r0, r1) of a weight matrix (row_bytes apart) times n_tok activation rows (x_stride
 * apart): y[t * ldy + r] = vec_dot(w row r, x row t), bit-identical to eng_vec_dot_best for
 * every token, so a token's result does not depend on its batch. The weight rows are decoded
 * once for all tokens. ws: eng_gemm_ws_size(k, n_tok) bytes of caller scratch. */
typedef void (*eng_gemm_fn)(int64_t k, const void *w, size_t row_bytes, int64_t r0, int64_t r1, const void *x,
                            size_t x_stride, int n_tok, float *y, int ldy, void *ws);
/* NULL when the CPU or type has no GEMM kernel. */
eng_gemm_fn eng_gemm_best(int weight_type);
/* (With AMX, kernels_amx.c, the GEMM multiplies tiles of 16 rows x 16 tokens and hands products
 * of fewer tokens than pays off to the AVX-512 GEMM, which gives the same bits.) */
size_t eng_gemm_ws_size(int64_t k, int n_tok);
/* (optional) Rewrites quantized activation rows in place into the form a type's GEMM reads
 * (Q8_0: bytes biased by 128); called once per product before the GEMM, when the GEMM is the
 * rows' only reader. NULL when the GEMM reads them as quantized. */
typedef void (*eng_gemm_prep_fn)(void *x, size_t x_stride, int n_tok, int64_t k);
eng_gemm_prep_fn eng_gemm_prep_best(int weight_type);

/* The scalar reference for a weight type (never NULL for a supported type). */
eng_vec_dot_fn eng_vec_dot_ref(int weight_type);
/* The fastest implementation this CPU runs. */
eng_vec_dot_fn eng_vec_dot_best(int weight_type);
/* "avx512-vnni+amx", "avx512-vnni", "avx2", "scalar": what the kernels in use are. */
const char *eng_cpu_kernel_name(void);
/* Forces the scalar kernels (tests and --exact comparisons). */
void eng_cpu_force_scalar(bool on);
/* Keeps the AMX kernels out of use (tests compare both GEMMs; also DOCPIPE_NO_AMX=1 in the
 * environment, for tools without AMX support such as valgrind). */
void eng_cpu_disable_amx(bool on);
/* Keeps the AVX-512 (and so the AMX) kernels out of use: tests run the AVX2 kernels on machines
 * that have both. */
void eng_cpu_disable_avx512(bool on);
/* True when the AMX GEMM is in use (CPU, OS permission, not disabled). */
bool eng_cpu_amx(void);

/* One Gated DeltaNet step for one value head (model-formats.md §4.9 step 6). S is [dv][dk] (row j =
 * column j of the state): S *= decay; u = S k; delta = beta (v - u); S += delta k^T; o = S q. */
typedef void (*eng_delta_step_fn)(float *S, const float *k, const float *v, const float *q, float decay, float beta,
                                  int dk, int dv, float *o);
void eng_delta_step_ref(float *S, const float *k, const float *v, const float *q, float decay, float beta, int dk,
                        int dv, float *o);
eng_delta_step_fn eng_delta_step_best(void);
/* Chunk-wise Gated DeltaNet for c <= ENG_DELTA_CHUNK tokens of one value head (q, k, v: row
 * pointers; beta, g: gates; St: [dv][dk] state, updated). Writes O [c][dv] (before the gated
 * norm). ws holds ENG_DELTA_CHUNK_WS floats. See delta_chunk.h and delta_chunk_tiled.h. */
#define ENG_DELTA_CHUNK 64
#define ENG_DELTA_CHUNK_WS(C, dk, dv) \
    ((size_t)(C) * (2 + 4 * (C)) + (size_t)(C) * (2 * (dk) + (dv)) + (size_t)(dk) * (dv))
typedef void (*eng_delta_chunk_fn)(int c, const float *const *q, const float *const *k, const float *const *v,
                                   const float *beta, const float *g, float *St, int dk, int dv, float *O, float *ws);
void eng_delta_chunk_ref(int c, const float *const *q, const float *const *k, const float *const *v,
                         const float *beta, const float *g, float *St, int dk, int dv, float *O, float *ws);
eng_delta_chunk_fn eng_delta_chunk_best(void);

/* Attention inner loops over a cached K or V row of n elements stored as F16 or F32:
 * dot = q . k_row; acc += w * v_row. */
typedef float (*eng_kv_dot_fn)(const float *q, const void *k, int n);
typedef void (*eng_kv_axpy_fn)(float *acc, float w, const void *v, int n);
eng_kv_dot_fn eng_kv_dot_best(int kv_type, bool exact);
eng_kv_axpy_fn eng_kv_axpy_best(int kv_type, bool exact);
/* acc[0..hd) += sum over n rows (stride bytes apart) of w[p] * row p: the same per-element fmas,
 * in the same order, as n calls of the 1-row axpy, with acc kept in registers. */
typedef void (*eng_kv_axpy_rows_fn)(float *acc, const float *w, const void *v, size_t stride, int n, int hd);
eng_kv_axpy_rows_fn eng_kv_axpy_rows_best(int kv_type, bool exact);
/* G query heads that share one KV head (grouped-query attention), so each cached row is read and
 * converted once for all of them: s[g * ls + p] = (q + g * lq) . k row p, for p < n, rows kst
 * bytes apart; acc[g * la + j] += sum over p < n of w[g * lw + p] * v row p [j]. Per (g, p) the
 * arithmetic does not depend on G or n, so a head's result is the same in any grouping. */
typedef void (*eng_kv_dots_fn)(const float *q, size_t lq, int G, const void *k, size_t kst, int n, int hd, float *s,
                               size_t ls);
typedef void (*eng_kv_mix_fn)(float *acc, size_t la, int G, const float *w, size_t lw, const void *v, size_t vst, int n,
                              int hd);
eng_kv_dots_fn eng_kv_dots_best(int kv_type, bool exact);
eng_kv_mix_fn eng_kv_mix_best(int kv_type, bool exact);
/* K of an F16 cache in panels, for the kernels that score with the positions across the
 * vector lanes: a cache block's K is [ENG_KV_BLOCK / ENG_KT_PANEL panels][kv_dim][ENG_KT_PANEL]
 * halves (panel, dimension, position), so one KV head's slice of a panel is hd x ENG_KT_PANEL
 * contiguous halves. eng_kv_dots_panels scores against such slices: k points at the first
 * panel's, n positions from the panel's start, kst the bytes from one panel to the next. NULL
 * where the CPU has no such kernel; then the cache keeps K row by row like V, for
 * eng_kv_dots_best. (Where K is in panels, the cache keeps V per KV head: a block's V is
 * [n_head_kv][ENG_KV_BLOCK][hd], rows hd halves apart, for the same mix kernels.)
 * eng_kv_dots_widened is the same kernel over panels widened to floats
 * (eng_f16_to_f32_row on each head slice; kst again the panel stride, in bytes of floats): the
 * same bits without a conversion in the inner loop, for a block that many tokens read. V is
 * widened row by row for eng_kv_mix_widened (v points at floats, vst the row stride in bytes),
 * the same bits as eng_kv_mix_best over the halves. Each is NULL where there is no such kernel. */
#define ENG_KT_PANEL 64
eng_kv_dots_fn eng_kv_dots_panels(bool exact);
eng_kv_dots_fn eng_kv_dots_widened(bool exact);
eng_kv_mix_fn eng_kv_mix_widened(bool exact);
/* V widened into slabs of ENG_KV_SLAB dimensions for eng_kv_mix_slabs: row p's dimensions
 * d0 .. d0 + 15 at v + (d0 / ENG_KV_SLAB) * vst bytes + p * 64 bytes, so a slab's n rows are
 * contiguous and the kernel runs each head group over all of them with its accumulators in
 * registers (rows hd floats apart put a 16-dimension column of a 256-row block on a few of L1's
 * sets, which is why the row kernels work in chunks of 32 rows and reload the accumulators
 * per chunk). The same bits as eng_kv_mix_best over the halves; hd a multiple of ENG_KV_SLAB.
 * NULL where there is no such kernel (AVX-512 keeps the widened rows). */
#define ENG_KV_SLAB 16
eng_kv_mix_fn eng_kv_mix_slabs(bool exact);
/* The kernels for a Q8_0 cache's rows once widened to floats: grouped kernels over float rows
 * (AVX-512 or AVX2), apart from the F32 cache's own (eval keeps its bits). eng_kv_dots_q8_0_rows
 * and eng_kv_mix_q8_0_rows read the Q8_0 rows as stored (k and v at the head's first block, kst
 * and vst the cache's row size) with the same bits as the widened kernels over
 * eng_q8_0_to_f32_row's floats; NULL where there are none (then every block is widened first).
 * eng_kv_q8_0_rows_group: the most heads for which they convert each stored value once (more
 * heads take several passes, each converting again), 0 where there are none. */
eng_kv_dots_fn eng_kv_dots_q8_0(bool exact);
eng_kv_mix_fn eng_kv_mix_q8_0(bool exact);
eng_kv_dots_fn eng_kv_dots_q8_0_rows(bool exact);
eng_kv_mix_fn eng_kv_mix_q8_0_rows(bool exact);
int eng_kv_q8_0_rows_group(void);

/* One KV tile of an online softmax (attention reads the cache tile by tile and keeps no row of
 * all its scores): with M = max(*m, scale * max s), s[p] = exp(scale * s[p] - M) in place,
 * *l = *l * c + sum of s (in double), *m = M. Returns c = exp(old *m - M), the factor by which
 * the weighted sum over the earlier tiles must be scaled: 0 on the first tile (*m = -inf), exactly
 * 1 where the maximum did not move. */
typedef float (*eng_softmax_tile_fn)(float *s, int n, float scale, float *m, double *l);
/* out[i] = silu(g[i]) * u[i] (SwiGLU) */
typedef void (*eng_swiglu_fn)(const float *g, const float *u, float *out, int64_t n);
/* x[i] *= sigmoid(g[i]) */
typedef void (*eng_mul_sigmoid_fn)(float *x, const float *g, int64_t n);
/* out[i] = silu(x[i]) = x[i] / (1 + exp(-x[i])); out may be x */
typedef void (*eng_silu_fn)(const float *x, float *out, int64_t n);
/* exact: the scalar references (libm expf, the sum in double in index order); otherwise AVX-512
 * versions where the CPU has it, with a polynomial exp within 2 ulp of expf and the softmax sum
 * in double over the vector's lanes: deterministic, so results stay batch-invariant. */
eng_softmax_tile_fn eng_softmax_tile_best(bool exact);
eng_swiglu_fn eng_swiglu_best(bool exact);
eng_mul_sigmoid_fn eng_mul_sigmoid_best(bool exact);
eng_silu_fn eng_silu_best(bool exact);

/* Converts n halves to floats. */
void eng_f16_to_f32_row(const uint16_t *x, float *y, int64_t n);
/* Dequantizes n Q8_0 values (n a multiple of 32): eng_dequantize_row's bits, for the Q8_0 KV cache's
 * rows on their way into the F32 attention kernels. */
void eng_q8_0_to_f32_row(const void *x, float *y, int64_t n);
/* Converts n floats to halves: eng_f32_to_f16's bits (round to nearest even, NaN -> 0x7E00). */
void eng_f32_to_f16_row(const float *x, uint16_t *y, int64_t n);

/* f32 dot product (8 independent partial sums, then summed: deterministic). */
float eng_dot_f32(const float *a, const float *b, int64_t n);
/* Four rows (lda floats apart) against b: out[r] = eng_dot_f32(a + r * lda, b, n), the same
 * bits, with b read once for the four. */
void eng_dot_f32_x4(const float *a, size_t lda, const float *b, int64_t n, float out[4]);

#endif /* ENG_CPU_KERNELS_H */
