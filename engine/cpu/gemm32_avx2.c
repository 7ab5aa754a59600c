/*
 * gemm32_avx2.c - GEMMs for the signed 32-value formats (Q8_0, Q4_0, Q5_0) against Q8_0
 * activations on CPUs with AVX2: prompt pieces and batched decode steps. These formats are not
 * rare in the files users bring: llama.cpp's Q4_K_M falls back to Q5_0 and Q8_0 for tensors
 * whose rows are not whole 256-blocks (all but 24 tensors of a Qwen2.5 0.5B Q4_K_M), and Q8_0
 * files are common. Compiled with AVX2/FMA/F16C flags; called only after kernels_dispatch.c
 * checked the CPU.
 *
 * DESIGN
 * - The bits are the one-row dots' (kernels_avx2.c): per row-token pair an 8-lane float sum,
 *   one fma per block of the block's 8 exact int32 lane sums times d_w d_x (the product of two
 *   halves is exact in a float), blocks in order, then hsum8. A per-block scale leaves no
 *   integer sums to carry across blocks, so unlike the K-quant GEMM this one cannot trade the
 *   lanes for rows; what it shares is the loads and the decoding.
 * - A 16-row tile (the claimed one) is decoded once into signed bytes, 32-byte aligned, with its
 *   scales as floats: Q4_0 and Q5_0 values cost a dozen operations a block, which four tokens
 *   did not pay for (their products ran at 60-75 % of Q8_0's).
 * - Register tile of 2 rows x 4 tokens, all blocks: a block's absolute values (the sign trick)
 *   are taken once for four tokens, a token's block loaded once for both rows, a block's eight
 *   products d_w d_x are two vector multiplies and each pair takes its own with an in-lane
 *   permute. Per pair and block that leaves vpsignb, vpmaddubsw, vpmaddwd, vcvtdq2ps, vpermilps
 *   and the fma; the four-token dot this replaces also converted, multiplied and broadcast each
 *   pair's scales in scalar code. Without the small values that let the K-quant GEMM add
 *   products as int16 (a Q8_0 pair sum nears 32767), every 32 multiply-adds pay a vpmaddwd and
 *   a conversion on the multiply pipes, so this GEMM runs at about half the K-quant one's rate.
 * - Loop order per tile: tokens in fours outer, row pairs inner, so the four tokens'
 *   activations (11 KB at K = 2560) stay in L1 while the decoded rows (40 KB) come from L2.
 */
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#include "avx2_blocks.h"
#include "compiler.h"
#include "kernels.h"
#include "kernels_avx2.h"
#include "quant.h"

#define ROWS 16 /* the claimed tile (backend_cpu.c's MM_TILE) */

/* Block b of a row as signed bytes, its scale as a float in *d. */
static DP_ALWAYS_INLINE __m256i block_values(int wt, const uint8_t *row, int64_t b, float *d) {
    if (wt == ENG_TYPE_Q8_0) {
        const eng_block_q8_0 *q = (const eng_block_q8_0 *)(const void *)row + b;
        *d = f16(q->d);
        return _mm256_loadu_si256((const __m256i *)(const void *)q->qs);
    }
    if (wt == ENG_TYPE_Q5_0) {
        const eng_block_q5_0 *q = (const eng_block_q5_0 *)(const void *)row + b;
        *d = f16(q->d);
        return q5_0_values(q);
    }
    const eng_block_q4_0 *q = (const eng_block_q4_0 *)(const void *)row + b;
    *d = f16(q->d);
    return _mm256_sub_epi8(nibbles(q->qs), _mm256_set1_epi8(8));
}

/* Rows q, q + k (RR of them, decoded, k bytes apart) x tokens x .. x + 3 xs (NT):
 * y[t * ldy + r]. dw[16 b + r]: the rows' scales, dx[4 b + t]: the tokens'. */
static DP_ALWAYS_INLINE void tile(int RR, int NT, int64_t k, const int8_t *qr, const uint8_t *x, size_t xs,
                                  const float *dw, const float *dx, float *y, int ldy) {
    const int64_t nb = k / 32;
    __m256 acc[2][4];
    for (int r = 0; r < RR; r++)
        for (int t = 0; t < NT; t++)
            acc[r][t] = _mm256_setzero_ps();
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t b = 0; b < nb; b++) {
        __m256i q[2], aq[2];
        for (int r = 0; r < RR; r++) {
            q[r] = _mm256_load_si256((const __m256i *)(const void *)(qr + (size_t)r * (size_t)k + 32 * b));
            aq[r] = _mm256_sign_epi8(q[r], q[r]);
        }
        /* dd[r] lanes t and 4 + t: d_w(r) d_x(t), the dot's product (exact in a float) */
        const __m256 dx8 = _mm256_broadcast_ps((const __m128 *)(const void *)(dx + 4 * b));
        __m256 dd[2];
        for (int r = 0; r < RR; r++)
            dd[r] = _mm256_mul_ps(_mm256_broadcast_ss(dw + 16 * b + r), dx8);
        for (int t = 0; t < NT; t++) {
            const __m256i xv = _mm256_loadu_si256(
                (const __m256i *)(const void *)(((const eng_block_q8_0 *)(const void *)(x + (size_t)t * xs)) + b)->qs);
            for (int r = 0; r < RR; r++) {
                const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(aq[r], _mm256_sign_epi8(xv, q[r])), ones);
                const __m256 d = t == 0   ? _mm256_permute_ps(dd[r], 0x00)
                                 : t == 1 ? _mm256_permute_ps(dd[r], 0x55)
                                 : t == 2 ? _mm256_permute_ps(dd[r], 0xAA)
                                          : _mm256_permute_ps(dd[r], 0xFF);
                acc[r][t] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p), acc[r][t]);
            }
        }
    }
    for (int r = 0; r < RR; r++)
        for (int t = 0; t < NT; t++)
            y[(size_t)t * ldy + r] = hsum8(acc[r][t]);
}

/* NT tokens against the nr decoded rows of a tile, two at a time. */
static DP_ALWAYS_INLINE void rows_tokens(int NT, int64_t k, const int8_t *qt, int nr, const uint8_t *x, size_t xs,
                                         const float *dw, const float *dx, float *y, int ldy) {
    int r = 0;
    for (; r + 2 <= nr; r += 2)
        tile(2, NT, k, qt + (size_t)r * (size_t)k, x, xs, dw + r, dx, y + r, ldy);
    if (r < nr) tile(1, NT, k, qt + (size_t)r * (size_t)k, x, xs, dw + r, dx, y + r, ldy);
}

/* Scratch: the tile's rows decoded to signed bytes (16 x k), their scales dw[nb][16], and every
 * token's scales, converted once for all the call's tiles: dx[token group][nb][4] (groups of
 * four tokens, the last padded with zeros). */
static DP_ALWAYS_INLINE void gemm32(int wt, int64_t k, const void *w, size_t rb, int64_t r0, int64_t r1, const void *x,
                                    size_t xs, int n_tok, float *y, int ldy, void *ws) {
    const int64_t nb = k / 32;
    const uint8_t *wb = w, *xq = x;
    int8_t *qt = (int8_t *)(((uintptr_t)ws + 63) & ~(uintptr_t)63);
    float *dw = (float *)(void *)(qt + (size_t)ROWS * (size_t)k), *dx = dw + 16 * nb;
    for (int t = 0; t < (n_tok + 3) / 4 * 4; t++) {
        float *d = dx + (size_t)(t / 4) * (size_t)nb * 4 + t % 4;
        const eng_block_q8_0 *xb = t < n_tok ? (const eng_block_q8_0 *)(const void *)(xq + (size_t)t * xs) : NULL;
        for (int64_t b = 0; b < nb; b++)
            d[4 * b] = xb ? f16(xb[b].d) : 0.0f;
    }
    for (int64_t rt = r0; rt < r1; rt += ROWS) {
        const int nr = r1 - rt < ROWS ? (int)(r1 - rt) : ROWS;
        /* decoded once for every token: Q4_0 and Q5_0 values cost a dozen operations a block */
        for (int r = 0; r < nr; r++) {
            const uint8_t *row = wb + (size_t)(rt + r) * rb;
            for (int64_t b = 0; b < nb; b++)
                _mm256_store_si256((__m256i *)(void *)(qt + (size_t)r * (size_t)k + 32 * b),
                                   block_values(wt, row, b, &dw[16 * b + r]));
        }
        float *yt = y + rt;
        int t = 0;
        for (; t + 4 <= n_tok; t += 4)
            rows_tokens(4, k, qt, nr, xq + (size_t)t * xs, xs, dw, dx + (size_t)t * (size_t)nb, yt + (size_t)t * ldy,
                        ldy);
        const float *dxt = dx + (size_t)t * (size_t)nb;
        switch (n_tok - t) {
        case 3: rows_tokens(3, k, qt, nr, xq + (size_t)t * xs, xs, dw, dxt, yt + (size_t)t * ldy, ldy); break;
        case 2: rows_tokens(2, k, qt, nr, xq + (size_t)t * xs, xs, dw, dxt, yt + (size_t)t * ldy, ldy); break;
        case 1: rows_tokens(1, k, qt, nr, xq + (size_t)t * xs, xs, dw, dxt, yt + (size_t)t * ldy, ldy); break;
        default: break;
        }
    }
}

size_t eng_gemm32_ws_avx2(int64_t k, int n_tok) {
    return 64 + (size_t)ROWS * (size_t)k + (size_t)(k / 32) * (16 + (size_t)(n_tok + 3) / 4 * 4) * sizeof(float);
}

static void gemm_q8_0(int64_t k, const void *w, size_t rb, int64_t r0, int64_t r1, const void *x, size_t xs, int n,
                      float *y, int ldy, void *ws) {
    gemm32(ENG_TYPE_Q8_0, k, w, rb, r0, r1, x, xs, n, y, ldy, ws);
}
static void gemm_q5_0(int64_t k, const void *w, size_t rb, int64_t r0, int64_t r1, const void *x, size_t xs, int n,
                      float *y, int ldy, void *ws) {
    gemm32(ENG_TYPE_Q5_0, k, w, rb, r0, r1, x, xs, n, y, ldy, ws);
}
static void gemm_q4_0(int64_t k, const void *w, size_t rb, int64_t r0, int64_t r1, const void *x, size_t xs, int n,
                      float *y, int ldy, void *ws) {
    gemm32(ENG_TYPE_Q4_0, k, w, rb, r0, r1, x, xs, n, y, ldy, ws);
}

eng_gemm_fn eng_gemm32_avx2(int wt) {
    switch (wt) {
    case ENG_TYPE_Q8_0: return gemm_q8_0;
    case ENG_TYPE_Q5_0: return gemm_q5_0;
    case ENG_TYPE_Q4_0: return gemm_q4_0;
    default: return NULL;
    }
}
