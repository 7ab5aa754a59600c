/*
 * kernels_amx.c - AMX int8 GEMMs for Q4_K, Q5_K, Q6_K and Q8_0 weights (Sapphire Rapids and
 * later Xeons): the products of prompt pieces and batched decode steps. Compiled with AVX-512
 * and AMX-TILE/INT8 flags; called only after kernels_dispatch.c checked the CPU and the OS
 * granted the tile state (dp_cpu_request_amx).
 *
 * DESIGN
 * - One tile multiply is C[16][16] += A[16][64] . B[64][16]: A holds 16 weight rows, B 16
 *   tokens' int8 activations in AMX's layout (4 consecutive K values of a token per dword,
 *   repacked once per call). Row r of C is weight row r against the 16 tokens, one token per
 *   32-bit lane.
 * - K-quant sub-block scales differ per row and sub-block, so they are folded into the weights
 *   while a tile is decoded, into two byte planes. Q4_K/Q5_K split the scale, s = 2^SH sa + sb,
 *   and store q sb and q sa (each fits a byte: see foldw), S = C(lo) + 2^SH C(hi); Q6_K stores
 *   w = (q - 32) * scale, its min term included (|w| <= 2^12), as w = lo + 256 hi,
 *   S = C(lo) + 256 C(hi). The tile unit sums whole 256-blocks with no per-sub-block
 *   work on the vector side: these are exactly the integers S (and, from the Q8_K block sums, M)
 *   of the one-row dots in kernels_avx512.c, folded in the same float order
 *   (acc = fma(S, xd * d, acc), acc = fma(-M, xd * dmin, acc)), so a token's result is
 *   bit-identical whichever kernel ran: batch invariance holds across them. Every sum fits:
 *   |S| <= 1953 * 127 * 256 < 2^31 (Q5_K).
 * - Q8_0 has a float scale per 32-block, so each multiply covers one block (A: 16 rows x 32
 *   bytes) and the vector side folds it: acc = fma(S - 128 sum w, d_w * d_x, acc) (the
 *   activations come biased by 128 from eng_gemm_prep, as for the AVX-512 GEMM).
 * - The tile unit runs beside the vector units; the decode (nibbles, scale fold) is paid once per
 *   tile for every group of 16 tokens. A block's multiply is issued a step at a time between the
 *   rows of a later block's decode, so the two overlap (see decode_block_k).
 * - One group (a decode step of up to 16 sequences): row tiles go in panels that keep a block's
 *   activation tiles loaded (panel_k). On the Sapphire Rapids VMs measured, a tile load (8-9 ns)
 *   does not overlap a multiply (16-18 ns) in the minutes the tile unit runs slow (in the fast
 *   ones both take ~7.5 ns together: tests/bench/bench_int8_peak), so loads saved are time saved. For a few tokens the AVX-512 GEMM is faster (a tile
 *   multiply costs the same for 1 token as for 16) and runs instead: the same bits.
 * - Tile state: each call loads its tile configuration and releases the tiles before returning,
 *   so a pool thread carries no tile state into a context switch (the kernel saves 8 KB of tile
 *   data per switch while tiles are in use).
 *
 * Scratch (ws, eng_gemm_ws_amx bytes): the decoded tile (two planes: 512 bytes per row and
 * 256-block), its per-block tables, the packed activations of every group of 16 tokens, two
 * pairs of stored C tiles, and the float accumulators of every group (or of a panel's tiles).
 */
#include <immintrin.h>
#include <math.h>
#include <stdalign.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "compiler.h"
#include "kernels.h"
#include "kernels_amx.h"
#include "kernels_avx512.h"
#include "kscales.h"
#include "quant.h"
#include "tile_avx512.h"

#define ROWS ENG_TILE_ROWS /* weight rows per tile: A's rows */
#define TOK 16             /* tokens per group: B's dword columns */

typedef struct amx_cfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_cfg;

/* Several groups: tiles 0-3 C, 4-5 A (weights), 6-7 B (activations); one group of K-quant
 * tokens (panel_k): 0-1 C, 2-3 A, 4-7 B, all of them 16 x 64 bytes alike. kb: bytes of K per
 * multiply (64 for the K-quants, 32 for Q8_0). (GCC 12's _tile_loadconfig tells the compiler it reads only 8 bytes,
 * so a configuration filled on the stack may lose its stores: the asm names the whole object.) */
static void amx_configure(int kb) {
#define CFG(KB)                                                                           \
    {1, 0, {0}, {64, 64, 64, 64, KB, KB, 64, 64, 0, 0, 0, 0, 0, 0, 0, 0},                 \
     {TOK, TOK, TOK, TOK, ROWS, ROWS, KB / 4, KB / 4, 0, 0, 0, 0, 0, 0, 0, 0}}
    static const alignas(64) amx_cfg cfg64 = CFG(64), cfg32 = CFG(32);
#undef CFG
    const amx_cfg *c = kb == 32 ? &cfg32 : &cfg64;
    __asm__ volatile("ldtilecfg %0" : : "m"(*c));
}

/* ---- layouts ----------------------------------------------------------------------------- */

/* A decoded K-quant block of 16 rows (three buffers, decoded two blocks ahead of the
 * multiplies): [4 steps][2 planes][16 rows][64 bytes]. Step s of a block holds 64 of its 256 values in an
 * order that suits the decoder (see k_value); the activations are packed in the same order, so
 * the sums are those of the natural order. */
#define WB_K 8192
/* Per block tables: mp[4][16 rows] (Q4_K/Q5_K: the mins of sub-blocks 2i, 2i+1 as int16 pairs,
 * for vpdpwssd against the token's 32-value sums), d[16], dmin[16]. */
#define TAB_K 384
/* Decoded Q8_0 tile, per 32-block: [16 rows][32 bytes]; tables: ws[16] = 128 x the row's
 * weight sum, d[16]. */
#define WB_8 512
#define TAB_8 128
/* Packed activations of a group, per 256-block: 4 steps of [16 dword rows][16 tokens], xd[16],
 * bs[4][16] (int16 pairs: sums of the 32-value sub-blocks 2i, 2i+1). Q8_0, per 32-block:
 * [8 dword rows][16 tokens], xd[16]. */
#define XB_K (4096 + 64 + 256)
#define XB_8 (512 + 64)
#define CBUF (4 * 1024) /* two pairs of stored C tiles (lo, hi) */
#define FACC (16 * 16 * 4) /* one group's or tile's accumulators, [16 rows][16 tokens] floats */
#define PANEL 4            /* row tiles that share a block's activation tiles (one group) */
/* The most packed activations one pass over a run's tiles streams (see gemm_amx): about half
 * of a 2 MB L2, the size on the AMX Xeons, leaving the rest to the weights fetched ahead. */
#define XPASS_BYTES (1024 * 1024)

size_t eng_gemm_ws_amx(int64_t k, int n_tok) {
    const size_t nb = (size_t)(k + 255) / 256, nb8 = (size_t)(k + 31) / 32, groups = (size_t)(n_tok + TOK - 1) / TOK;
    const size_t w_k = 3 * (WB_K + TAB_K), w_8 = nb8 * (WB_8 + TAB_8);
    const size_t x_k = nb * XB_K, x_8 = nb8 * XB_8;
    return 64 + (w_k > w_8 ? w_k : w_8) + groups * (x_k > x_8 ? x_k : x_8) + (groups > PANEL ? groups : PANEL) * FACC + CBUF;
}

/* ---- the value order of a decoded step ------------------------------------------------------ */

enum { KQ4, KQ5, KQ6 };

/* The weight of the hi plane, as a shift: S = C(lo) + 2^plane_shift C(hi). Q4_K and Q5_K split
 * the scale there (foldw), Q6_K splits the product into bytes (fold64). */
static inline int plane_shift(int kind) { return kind == KQ4 ? 4 : kind == KQ5 ? 3 : 8; }

/* decode_block_k reads d, dmin and the scales of Q4_K and Q5_K as one 16-byte run */
_Static_assert(offsetof(eng_block_q4_k, dmin) == 2 && offsetof(eng_block_q4_k, scales) == 4 && offsetof(eng_block_q5_k, dmin) == 2 &&
                   offsetof(eng_block_q5_k, scales) == 4,
               "Q4_K/Q5_K block heads as model-formats.md §2.4 lays them out");

static inline size_t block_bytes(int kind) {
    return kind == KQ4 ? sizeof(eng_block_q4_k) : kind == KQ5 ? sizeof(eng_block_q5_k) : sizeof(eng_block_q6_k);
}

/* Value (0..255) of a block at position p of step s. Q4_K's steps are the low and high nibbles
 * of 64 packed bytes (two 32-value sub-blocks each, 64 apart); Q5_K and Q6_K go in order. */
static inline int k_value(int kind, int s, int p) {
    return kind == KQ4 ? 128 * (s / 2) + 64 * (p / 32) + 32 * (s % 2) + p % 32 : 64 * s + p;
}

/* vpshufb controls for the scales of step s: byte 2m holds the sub-block index of positions
 * 2m, 2m + 1, byte 2m + 1 is 0x80 (zero), so vpmaddubsw takes q * scale of the even value of each
 * pair (fold64 shifts the pattern for the odd one). Built from k_value by eng_amx_init, which
 * kernels_dispatch.c calls once, on the thread that first asks for kernels and before any GEMM
 * runs. */
static alignas(64) uint8_t ctl_even[3][4][64];
void eng_amx_init(void) {
    for (int kind = 0; kind < 3; kind++)
        for (int s = 0; s < 4; s++)
            for (int i = 0; i < 64; i++) {
                const int sub = k_value(kind, s, i) / (kind == KQ6 ? 16 : 32);
                ctl_even[kind][s][i] = i % 2 ? 0x80 : (uint8_t)sub;
            }
}

/* ---- activations ------------------------------------------------------------------------- */

/* Tokens [t0, t0 + nt) of Q8_K rows into one group's packed form (missing tokens zero), in the
 * step order of kind. */
static void pack_q8_k(int kind, const uint8_t *x, size_t xs, int t0, int nt, int64_t nb, uint8_t *xb) {
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *o = xb + (size_t)b * XB_K;
        const eng_block_q8_k *xr[TOK];
        for (int t = 0; t < TOK; t++) xr[t] = t < nt ? (const eng_block_q8_k *)(const void *)(x + (size_t)(t0 + t) * xs) + b : NULL;
        for (int s = 0; s < 4; s++) {
            __m512i v[16];
            for (int t = 0; t < TOK; t++) {
                if (!xr[t]) {
                    v[t] = _mm512_setzero_si512();
                    continue;
                }
                /* positions 0-31 and 32-63 of step s are two runs of 32 values */
                const int8_t *q = xr[t]->qs;
                v[t] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(q + k_value(kind, s, 0)))),
                                          _mm256_loadu_si256((const __m256i *)(q + k_value(kind, s, 32))), 1);
            }
            eng_transpose16(v);
            for (int i = 0; i < 16; i++) _mm512_store_si512(o + 1024 * s + 64 * i, v[i]);
        }
        float *xd = (float *)(void *)(o + 4096);
        int32_t *bs = (int32_t *)(void *)(o + 4096 + 64);
        for (int t = 0; t < TOK; t++) {
            xd[t] = xr[t] ? xr[t]->d : 0.0f;
            for (int i = 0; i < 4; i++) {
                int lo = 0, hi = 0;
                if (xr[t]) { /* |sum of 32 int8| <= 4064: fits int16 */
                    lo = xr[t]->bsums[4 * i] + xr[t]->bsums[4 * i + 1];
                    hi = xr[t]->bsums[4 * i + 2] + xr[t]->bsums[4 * i + 3];
                }
                bs[16 * i + t] = (int32_t)(((uint32_t)(uint16_t)hi << 16) | (uint16_t)lo);
            }
        }
    }
}

/* Q8_0 rows (biased by 128 by eng_gemm_prep: unsigned) into one group's packed form, nb
 * 32-blocks in order. */
static void pack_q8_0(const uint8_t *x, size_t xs, int t0, int nt, int64_t nb, uint8_t *xb) {
    for (int64_t b = 0; b < nb; b += 2) {
        const bool two = b + 1 < nb;
        __m512i v[16];
        for (int t = 0; t < TOK; t++) {
            if (t >= nt) {
                v[t] = _mm512_setzero_si512();
                continue;
            }
            const eng_block_q8_0 *r = (const eng_block_q8_0 *)(const void *)(x + (size_t)(t0 + t) * xs) + b;
            const __m256i lo = _mm256_loadu_si256((const __m256i *)r[0].qs);
            v[t] = _mm512_inserti64x4(_mm512_castsi256_si512(lo), two ? _mm256_loadu_si256((const __m256i *)r[1].qs) : _mm256_setzero_si256(), 1);
        }
        eng_transpose16(v);
        for (int h = 0; h < (two ? 2 : 1); h++) {
            uint8_t *o = xb + (size_t)(b + h) * XB_8;
            for (int i = 0; i < 8; i++) _mm512_store_si512(o + 64 * i, v[8 * h + i]);
            float *xd = (float *)(void *)(o + 512);
            for (int t = 0; t < TOK; t++)
                xd[t] = t < nt ? _cvtsh_ss(((const eng_block_q8_0 *)(const void *)(x + (size_t)(t0 + t) * xs))[b + h].d) : 0.0f;
        }
    }
}

/* ---- weights ----------------------------------------------------------------------------- */

/* Q6_K: the 64 unsigned values q of a step times their scales into the planes (lo, hi): per
 * value (q - 32) * scale = lo + 256 hi, lo unsigned, hi signed. sc holds the block's scales in
 * every 128-bit lane, ce the step's control. (The scales are signed and |w| reaches 2^12,
 * so foldw's byte-wise split does not apply.) */
static inline void fold64(__m512i q, __m512i sc, const uint8_t *ce, uint8_t *lo, uint8_t *hi) {
    /* e: each word's low byte the scale of its value pair; o: the same in the high byte (a shift
     * on port 0 rather than a second shuffle on port 5) */
    const __m512i e = _mm512_shuffle_epi8(sc, _mm512_load_si512(ce)), o = _mm512_slli_epi16(e, 8);
    /* vpmaddubsw: unsigned q times signed scale; |q * scale| <= 63 * 128 */
    __m512i ev = _mm512_maddubs_epi16(q, e), od = _mm512_maddubs_epi16(q, o);
    /* (q - 32) * scale: the offset folded in (vpmaddubsw of 32 and the scale) */
    const __m512i off = _mm512_maddubs_epi16(_mm512_set1_epi8(32), e);
    ev = _mm512_sub_epi16(ev, off);
    od = _mm512_sub_epi16(od, off);
    /* the planes in the values' own order: lo = each word's low byte (ev's in place, od's moved
     * up), hi = the high bytes (ev's moved down, od's in place). Two shifts (p0) and two
     * ternary-logic ops (p0/p5) rather than two vpermt2b (p5-bound, and p5 already shuffles):
     * 6 % less time for a 16-token Q6_K product (bench_gemm q6_k 2560 512 16: 0.133 -> 0.125 ms),
     * and the activations need no reordering. */
    const __m512i m_lo = _mm512_set1_epi16(0x00FF);
    _mm512_store_si512(lo, _mm512_ternarylogic_epi32(m_lo, ev, _mm512_slli_epi16(od, 8), 0xEA)); /* (m & ev) | c */
    _mm512_store_si512(hi, _mm512_ternarylogic_epi32(m_lo, od, _mm512_srli_epi16(ev, 8), 0xAE)); /* (~m & od) | c */
}

/* Q4_K/Q5_K: the 64 values q of a step times their scales into the planes (lo, hi) with the scale
 * split, s = sa 2^SH + sb (Q4_K: SH = 4, sb <= 15, sa <= 3; Q5_K: SH = 3, both <= 7), so that
 * q * sb and q * sa each fit an unsigned byte (<= 225). One vpmullw then multiplies a word's two
 * values at once, (q0 + 256 q1) * s = q0 s + 256 q1 s with no carry between the bytes, and leaves
 * both planes in the values' own order with no byte shuffling, half fold64's work. sb, sa: the
 * split scales in every 128-bit lane; ce: the step's control (word m: the scale of values 2m, 2m + 1). */
static inline void foldw(__m512i q, __m512i sb, __m512i sa, const uint8_t *ce, uint8_t *lo, uint8_t *hi) {
    const __m512i c = _mm512_load_si512(ce);
    _mm512_store_si512(lo, _mm512_mullo_epi16(q, _mm512_shuffle_epi8(sb, c)));
    _mm512_store_si512(hi, _mm512_mullo_epi16(q, _mm512_shuffle_epi8(sa, c)));
}

/* Step j (64 of a block's 256 values) of a multiply: both planes of decoded block A against
 * packed activations B, the hi plane signed for Q6_K. Step 0 clears the products.
 * - Several groups: B's step is loaded into tile 6, A's planes into 4, 5, the products go to C
 *   pair 0 (tiles 0 lo, 1 hi) or 1 (2, 3).
 * - One group (a panel, see panel_k): a block's four B steps stay in tiles 4-7 while the panel's
 *   row tiles pass (loaded by the first, LB), A's planes go to 2, 3, the products to pair 0.
 * (The tile intrinsics take tile numbers as literals.) */
#define MUL_STEP(CL, CH, TA, TH, TB, LB, HS, J, A, B)    \
    do {                                                 \
        if ((J) == 0) {                                  \
            _tile_zero(CL);                              \
            _tile_zero(CH);                              \
        }                                                \
        if (LB) _tile_loadd(TB, (B) + 1024 * (J), 64);   \
        _tile_loadd(TA, (A) + 2048 * (J), 64);           \
        _tile_loadd(TH, (A) + 2048 * (J) + 1024, 64);    \
        _tile_dpbusd(CL, TA, TB);                        \
        if (HS) _tile_dpbssd(CH, TH, TB);                \
        else _tile_dpbusd(CH, TH, TB);                   \
    } while (0)

static DP_ALWAYS_INLINE void mul_step(bool hs, int pair, int j, const uint8_t *A, const uint8_t *B) {
    if (pair) MUL_STEP(2, 3, 4, 5, 6, true, hs, j, A, B);
    else MUL_STEP(0, 1, 4, 5, 6, true, hs, j, A, B);
}

static DP_ALWAYS_INLINE void panel_step(bool hs, bool lb, int j, const uint8_t *A, const uint8_t *B) {
    switch (j) {
    case 0: MUL_STEP(0, 1, 2, 3, 4, lb, hs, 0, A, B); break;
    case 1: MUL_STEP(0, 1, 2, 3, 5, lb, hs, 1, A, B); break;
    case 2: MUL_STEP(0, 1, 2, 3, 6, lb, hs, 2, A, B); break;
    default: MUL_STEP(0, 1, 2, 3, 7, lb, hs, 3, A, B); break;
    }
}

/* A multiply spread over a block's decode (see decode_block_k): decoded block A against packed
 * activations B, into C pair 0, or with B's tiles resident (panel; lb: load them first). */
typedef struct side_mul {
    const uint8_t *A, *B;
    bool panel, lb;
} side_mul;

static DP_ALWAYS_INLINE void side_step(bool hs, const side_mul *m, int j) {
    if (m->panel) panel_step(hs, m->lb, j, m->A, m->B);
    else mul_step(hs, 0, j, m->A, m->B);
}

/* Block w (row 0's block; rows rb apart) of rows [0, nr) into A (missing rows zero) and its
 * tables. Q4_K/Q5_K: the tables (d, dmin, the mins, in row lanes for the fold) come from one byte
 * transpose of the 16 rows' block heads; each row's scales, which only that row's decode uses,
 * from scalar word operations (the vector ports are the ones this loop is short of). Q6_K: d a row
 * at a time. No gathers: they are slow on these VMs. pf: the same block of a later tile, fetched into L2 a row at
 * a time (so the requests queue a few at a time), or NULL; pf2 another such block, or NULL.
 * sm: an earlier block's multiply, a step before every 4 rows, or NULL (tile instructions retire
 * in order and take ~40 cycles each here, so issued together they fill the reorder buffer and
 * stall the decode behind them; spread out, the tile unit works while the vector units decode:
 * 9 % less time for a 16-token Q4_K product). */
static DP_ALWAYS_INLINE void decode_block_k(int kind, const uint8_t *w, size_t rb, int nr, uint8_t *A,
                                                                 uint8_t *tab, const uint8_t *pf, const uint8_t *pf2,
                                                                 const side_mul *sm) {
    static const alignas(64) uint8_t zero_block[256];
    const size_t bb = block_bytes(kind);
    int32_t *mp = (int32_t *)(void *)tab;
    float *d = (float *)(mp + 64), *dm = d + 16;
    const uint8_t *rp[ROWS];
    for (int r = 0; r < ROWS; r++) rp[r] = r < nr ? w + (size_t)r * rb : zero_block;
    if (kind != KQ6) {
        /* a block's first 16 bytes (d, dmin, the 12 scale bytes; the same layout in Q5_K), one
         * row per byte lane (sc goes unused: the row loop unpacks a row's scales itself) */
        __m128i t[16], sc[8], mn[8];
        eng_tile_scale_bytes(rp, 0, t);
        _mm512_store_ps(d, _mm512_cvtph_ps(_mm256_set_m128i(_mm_unpackhi_epi8(t[0], t[1]), _mm_unpacklo_epi8(t[0], t[1]))));
        _mm512_store_ps(dm, _mm512_cvtph_ps(_mm256_set_m128i(_mm_unpackhi_epi8(t[2], t[3]), _mm_unpacklo_epi8(t[2], t[3]))));
        eng_k4_scales16_t(t + offsetof(eng_block_q4_k, scales), sc, mn);
        /* mins as int16 pairs, mp[i][r] = (mn[2i], mn[2i+1]) of row r */
        for (int i = 0; i < 4; i++)
            _mm512_store_si512(mp + 16 * i, _mm512_or_si512(_mm512_cvtepu8_epi32(mn[2 * i]), _mm512_slli_epi32(_mm512_cvtepu8_epi32(mn[2 * i + 1]), 16)));
    }
    for (int r = 0; r < ROWS; r++) {
        if (sm && r % 4 == 0) side_step(kind == KQ6, sm, r / 4);
        uint8_t *o = A + 64 * (size_t)r;
        if (r >= nr) {
            for (int p = 0; p < 8; p++) _mm512_store_si512(o + 1024 * (size_t)p, _mm512_setzero_si512());
            if (kind == KQ6) d[r] = 0.0f;
            continue;
        }
        const uint8_t *blk = rp[r];
        if (pf)
            for (size_t l = 0; l < bb + 63; l += 64) _mm_prefetch((const char *)pf + (size_t)r * rb + l, _MM_HINT_T1);
        if (pf2)
            for (size_t l = 0; l < bb + 63; l += 64) _mm_prefetch((const char *)pf2 + (size_t)r * rb + l, _MM_HINT_T1);
        if (kind == KQ6) {
            const eng_block_q6_k *a6 = (const eng_block_q6_k *)(const void *)blk;
            d[r] = _cvtsh_ss(a6->d);
            const __m512i sc = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)a6->scales));
            for (int h = 0; h < 2; h++) {
                __m512i q[2];
                eng_half_q6_k(a6, h, &q[0], &q[1]);
                for (int v = 0; v < 2; v++) {
                    const int st = 2 * h + v;
                    fold64(q[v], sc, ctl_even[KQ6][st], o + 2048 * (size_t)st, o + 2048 * (size_t)st + 1024);
                }
            }
            continue;
        }
        /* the scales split as s = sa 2^SH + sb (see foldw) */
        const int sh = plane_shift(kind);
        uint32_t u[4];
        eng_k4_unpack_scales(blk + offsetof(eng_block_q4_k, scales), u);
        const uint64_t s8 = u[0] | (uint64_t)u[1] << 32, bm = 0x0101010101010101ull * ((1u << sh) - 1);
        const __m512i sb = _mm512_set1_epi64((long long)(s8 & bm)), sa = _mm512_set1_epi64((long long)((s8 >> sh) & bm));
        if (kind == KQ4) {
            const __m512i m4 = _mm512_set1_epi8(0xF);
            for (int h = 0; h < 2; h++) { /* steps 2h, 2h + 1: the low and high nibbles of 64 bytes */
                const __m512i raw = _mm512_loadu_si512(blk + offsetof(eng_block_q4_k, qs) + 64 * h);
                foldw(_mm512_and_si512(raw, m4), sb, sa, ctl_even[KQ4][2 * h], o + 4096 * (size_t)h, o + 4096 * (size_t)h + 1024);
                foldw(_mm512_and_si512(_mm512_srli_epi16(raw, 4), m4), sb, sa, ctl_even[KQ4][2 * h + 1], o + 4096 * (size_t)h + 2048,
                      o + 4096 * (size_t)h + 3072);
            }
        } else {
            for (int st = 0; st < 4; st++)
                foldw(eng_quarter_q5_k(blk, st), sb, sa, ctl_even[KQ5][st], o + 2048 * (size_t)st, o + 2048 * (size_t)st + 1024);
        }
    }
}

/* Rows [0, nr) of a Q8_0 tile: the int8 weights into wbuf per 32-block [16 rows][32 bytes], per
 * block 128 x each row's weight sum and d. */
static void decode_tile_q8_0(const uint8_t *w, size_t rb, int nr, int64_t K, uint8_t *wbuf, uint8_t *tab) {
    const int64_t nb = K / 32;
    const __m256i ones = _mm256_set1_epi8(1);
    for (int r = 0; r < ROWS; r++) {
        const eng_block_q8_0 *row = (const eng_block_q8_0 *)(const void *)(w + (size_t)r * rb);
        for (int64_t b = 0; b < nb; b++) {
            int32_t *ws = (int32_t *)(void *)(tab + (size_t)b * TAB_8);
            float *d = (float *)(ws + 16);
            uint8_t *o = wbuf + (size_t)b * WB_8 + 32 * (size_t)r;
            if (r >= nr) {
                _mm256_store_si256((__m256i *)(void *)o, _mm256_setzero_si256());
                ws[r] = 0;
                d[r] = 0.0f;
                continue;
            }
            const __m256i v = _mm256_loadu_si256((const __m256i *)row[b].qs);
            _mm256_store_si256((__m256i *)(void *)o, v);
            const __m256i s = _mm256_dpbusd_epi32(_mm256_setzero_si256(), ones, v);
            const __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
            const __m128i q = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4E));
            ws[r] = 128 * _mm_cvtsi128_si32(_mm_add_epi32(q, _mm_shuffle_epi32(q, 0xB1)));
            d[r] = _cvtsh_ss(row[b].d);
        }
    }
}

/* ---- multiplies -------------------------------------------------------------------------- */

/* f[r] (16 tokens) as token rows y[t][r0 + r], rows masked, tokens < nt. */
static inline void store_tokens(const __m512 *f, float *y, int ldy, int nt, __mmask16 rmask) {
    __m512i v[16];
    for (int r = 0; r < ROWS; r++) v[r] = _mm512_castps_si512(f[r]);
    eng_transpose16(v);
    for (int t = 0; t < nt; t++) _mm512_mask_storeu_ps(y + (size_t)t * ldy, rmask, _mm512_castsi512_ps(v[t]));
}

static DP_ALWAYS_INLINE void block_store(int pair, uint8_t *c) {
    if (pair) {
        _tile_stored(2, c, 64);
        _tile_stored(3, c + 1024, 64);
    } else {
        _tile_stored(0, c, 64);
        _tile_stored(1, c + 1024, 64);
    }
}

/* The vector side of a block: f[r] += the block's terms from the stored tiles c (lo, then hi),
 * its tables tab and the group's packed block B. first: f holds nothing yet, so the sums start
 * from +0 in registers, the value a cleared accumulator would load (the same bits), and the
 * accumulators need no memset: clearing them cost 0.8-1.7 % of a 16-sequence decode step in
 * perf, their lines having left L1 while the tile decoded. */
static DP_ALWAYS_INLINE void fold_block(int kind, __m512 *f, const uint8_t *c, const uint8_t *tab,
                                                             const uint8_t *B, bool first) {
    const int32_t *mp = (const int32_t *)(const void *)tab;
    const float *d = (const float *)(mp + 64), *dm = d + 16;
    const __m512 xd = _mm512_load_ps(B + 4096);
    /* loaded once: the accumulators' stores (vector types may alias anything) would otherwise
     * make the compiler reload them, and store f[r] twice, every row */
    __m512i bs[4];
    for (int i = 0; i < 4; i++) bs[i] = _mm512_load_si512(B + 4096 + 64 + 64 * i);
#pragma GCC unroll 16
    for (int r = 0; r < ROWS; r++) {
        const __m512i S = _mm512_add_epi32(_mm512_load_si512(c + 64 * r),
                                           _mm512_slli_epi32(_mm512_load_si512(c + 1024 + 64 * r), plane_shift(kind)));
        __m512 fr = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S), _mm512_mul_ps(xd, _mm512_set1_ps(d[r])), first ? _mm512_setzero_ps() : f[r]);
        if (kind != KQ6) {
            __m512i M = _mm512_setzero_si512();
            for (int i = 0; i < 4; i++) M = _mm512_dpwssd_epi32(M, bs[i], _mm512_set1_epi32(mp[16 * i + r]));
            fr = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(M), _mm512_mul_ps(xd, _mm512_set1_ps(dm[r])), fr);
        }
        f[r] = fr;
    }
}

static inline void prefetch_l1(const uint8_t *p, size_t n) {
    for (size_t l = 0; l < n; l += 64) _mm_prefetch((const char *)p + l, _MM_HINT_T0);
}

/* One K-quant tile (rows [0, nr) at w) against several groups. Software pipeline per block: the
 * tile unit multiplies block b for group 0 (decoded two blocks earlier) while the vector units
 * decode block b + 2, then group g + 1's multiplies run while g is folded (two pairs of C tiles).
 * Everything the tile loads comes from L1: the decoded block, the group's packed activations
 * prefetched one step ahead. pf, pfb: the tile after next, to fetch into L2 a block at a time. */
static DP_ALWAYS_INLINE void tile_k(int kind, const uint8_t *w, size_t rb, int nr, int64_t nb,
                                                         const uint8_t *xb, size_t xg, int groups, int n_tok, uint8_t *wb,
                                                         uint8_t *tab, uint8_t *cbuf, float *facc, float *y, int ldy,
                                                         __mmask16 rmask, const uint8_t *pf, size_t pfb) {
    const size_t bb = block_bytes(kind);
    const bool hs = kind == KQ6;
    /* blocks are decoded two ahead of their multiplies (three buffers): the tile loads then read
     * bytes whose vector stores have long left the store buffer */
    for (int64_t b = 0; b < 2 && b < nb; b++)
        decode_block_k(kind, w + (size_t)b * bb, rb, nr, wb + (size_t)b * WB_K, tab + (size_t)b * TAB_K,
                       pfb ? pf + (size_t)b * bb : NULL, NULL, NULL);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *A = wb + (size_t)(b % 3) * WB_K, *T = tab + (size_t)(b % 3) * TAB_K;
        const side_mul sm = {A, xb + (size_t)b * XB_K, false, true};
        if (b + 2 < nb)
            decode_block_k(kind, w + (size_t)(b + 2) * bb, rb, nr, wb + (size_t)((b + 2) % 3) * WB_K,
                           tab + (size_t)((b + 2) % 3) * TAB_K, pfb ? pf + (size_t)(b + 2) * bb : NULL, NULL, &sm);
        else
            for (int j = 0; j < 4; j++) side_step(hs, &sm, j);
        for (int g = 0; g < groups; g++) {
            const uint8_t *B = xb + (size_t)g * xg + (size_t)b * XB_K;
            if (g + 1 < groups)
                for (int j = 0; j < 4; j++) mul_step(hs, (g + 1) & 1, j, A, B + xg);
            if (g + 2 < groups) prefetch_l1(B + 2 * xg, XB_K);
            else if (g + 2 == groups) prefetch_l1(xb + (size_t)(b + 1) * XB_K, XB_K);
            uint8_t *c = cbuf + 2048 * (size_t)(g & 1);
            block_store(g & 1, c);
            fold_block(kind, (__m512 *)(void *)(facc + (size_t)g * 256), c, T, B, b == 0);
        }
    }
    for (int g = 0; g < groups; g++) {
        const int nt = n_tok - g * TOK < TOK ? n_tok - g * TOK : TOK;
        store_tokens((const __m512 *)(const void *)(facc + (size_t)g * 256), y + (size_t)g * TOK * ldy, ldy, nt, rmask);
    }
}

/* One group (at most 16 tokens: a batched decode step) against a panel of np row tiles (rows
 * [0, nrows) at w, np <= PANEL): the panel's items (block b, tile p) run block by block, so a
 * block's four activation tiles are loaded once for the panel and stay in tiles 4-7; each item
 * then loads only its two weight planes per step (tile loads do not overlap the multiplies here:
 * 12 loads per block and tile became 8 + 4 / np). Items are pipelined as in tile_k: item i + 2
 * decoded while i multiplies, then i folded into its tile's accumulators. pf: the next panel
 * (pnp tiles, pnp <= 2 np) or NULL; item (b, p) fetches block b of its tiles p and p + np. */
static DP_ALWAYS_INLINE void panel_k(int kind, const uint8_t *w, size_t rb, int nrows, int64_t nb,
                                                          const uint8_t *xb, int n_tok, uint8_t *wb, uint8_t *tab,
                                                          uint8_t *cbuf, float *facc, float *y, int ldy, const uint8_t *pf,
                                                          int pnp) {
    const size_t bb = block_bytes(kind);
    const bool hs = kind == KQ6;
    const int np = (nrows + ROWS - 1) / ROWS;
    const int64_t items = nb * np;
#define ITEM_DECODE(I, SM)                                                                                        \
    do {                                                                                                          \
        const int p_ = (int)((I) % np);                                                                           \
        const size_t o_ = (size_t)p_ * ROWS * rb + (size_t)((I) / np) * bb;                                       \
        const uint8_t *pf_ = pf && p_ < pnp ? pf + o_ : NULL;                                                     \
        const uint8_t *pf2_ = pf && p_ + np < pnp ? pf + o_ + (size_t)np * ROWS * rb : NULL;                      \
        decode_block_k(kind, w + o_, rb, nrows - p_ * ROWS < ROWS ? nrows - p_ * ROWS : ROWS,                     \
                       wb + (size_t)((I) % 3) * WB_K, tab + (size_t)((I) % 3) * TAB_K, pf_, pf2_, SM);            \
    } while (0)
    for (int64_t i = 0; i < 2 && i < items; i++) ITEM_DECODE(i, NULL);
    for (int64_t i = 0; i < items; i++) {
        const int p = (int)(i % np);
        const uint8_t *B = xb + (size_t)(i / np) * XB_K;
        const side_mul sm = {wb + (size_t)(i % 3) * WB_K, B, true, p == 0};
        if (i + 2 < items) ITEM_DECODE(i + 2, &sm);
        else
            for (int j = 0; j < 4; j++) side_step(hs, &sm, j);
        block_store(0, cbuf);
        fold_block(kind, (__m512 *)(void *)(facc + (size_t)p * 256), cbuf, tab + (size_t)(i % 3) * TAB_K, B, i < np);
    }
#undef ITEM_DECODE
    for (int p = 0; p < np; p++) {
        const int nr = nrows - p * ROWS < ROWS ? nrows - p * ROWS : ROWS;
        store_tokens((const __m512 *)(const void *)(facc + (size_t)p * 256), y + p * ROWS, ldy, n_tok, (__mmask16)((1u << nr) - 1));
    }
}

static inline void group_q8_0(const uint8_t *wbuf, int64_t nb, const uint8_t *tab, const uint8_t *xb, uint8_t *cbuf, int nt,
                              float *y, int ldy, __mmask16 rmask, const uint8_t *pf, size_t pfb) {
    __m512 f[ROWS];
    for (int r = 0; r < ROWS; r++) f[r] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        for (size_t l = 0; l < pfb; l += 64) _mm_prefetch((const char *)pf + (size_t)b * pfb + l, _MM_HINT_T1);
        const uint8_t *B = xb + (size_t)b * XB_8;
        uint8_t *c = cbuf + 1024 * (size_t)(b & 1);
        _tile_loadd(4, wbuf + (size_t)b * WB_8, 32);
        _tile_loadd(6, B, 64);
        if (b & 1) {
            _tile_zero(1);
            _tile_dpbsud(1, 4, 6);
            _tile_stored(1, c, 64);
        } else {
            _tile_zero(0);
            _tile_dpbsud(0, 4, 6);
            _tile_stored(0, c, 64);
        }
        const int32_t *ws = (const int32_t *)(const void *)(tab + (size_t)b * TAB_8);
        const float *dw = (const float *)(ws + 16);
        const __m512 xd = _mm512_load_ps(B + 512);
#pragma GCC unroll 16
        for (int r = 0; r < ROWS; r++) {
            const __m512i S = _mm512_sub_epi32(_mm512_load_si512(c + 64 * r), _mm512_set1_epi32(ws[r]));
            f[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S), _mm512_mul_ps(_mm512_set1_ps(dw[r]), xd), f[r]);
        }
    }
    store_tokens(f, y, ldy, nt, rmask);
}

/* ---- entry points ------------------------------------------------------------------------ */

static void gemm_amx(int wt, int64_t k, const void *w, size_t rb, int64_t r0, int64_t r1, const void *x, size_t xs,
                     int n_tok, float *y, int ldy, void *ws) {
    /* below this many tokens the AVX-512 GEMM is as fast or faster (single thread, weights from
     * DRAM, K = 2560: Q4_K even at 6 tokens, Q6_K, whose decode costs the AVX-512 kernel more,
     * behind from 2) */
    if (n_tok < (wt == ENG_TYPE_Q6_K ? 3 : 6)) {
        eng_gemm_avx512(wt)(k, w, rb, r0, r1, x, xs, n_tok, y, ldy, ws);
        return;
    }
    const int kind = wt == ENG_TYPE_Q4_K ? KQ4 : wt == ENG_TYPE_Q5_K ? KQ5 : KQ6;
    const bool q8 = wt == ENG_TYPE_Q8_0;
    const int64_t nb = q8 ? k / 32 : k / 256;
    const int groups = (n_tok + TOK - 1) / TOK;
    const size_t xg = (size_t)nb * (q8 ? XB_8 : XB_K); /* one group's packed tokens */
    uint8_t *wbuf = (uint8_t *)(((uintptr_t)ws + 63) & ~(uintptr_t)63);
    uint8_t *tab = wbuf + (q8 ? (size_t)nb * WB_8 : 3 * WB_K), *xb = tab + (q8 ? (size_t)nb * TAB_8 : 3 * TAB_K);
    uint8_t *cbuf = xb + (size_t)groups * xg;
    float *facc = (float *)(void *)(cbuf + CBUF);
    for (int g = 0; g < groups; g++) {
        const int nt = n_tok - g * TOK < TOK ? n_tok - g * TOK : TOK;
        if (q8) pack_q8_0(x, xs, g * TOK, nt, nb, xb + (size_t)g * xg);
        else pack_q8_k(kind, x, xs, g * TOK, nt, nb, xb + (size_t)g * xg);
    }
    amx_configure(q8 ? 32 : 64);
    if (!q8 && groups == 1) {
        /* panels of PANEL tiles; a run's first comes cold from DRAM, so its panels ramp up (1, 2,
         * 4 tiles) while each fetches the next */
        for (int64_t r = r0, np = 1; r < r1; np = np * 2 < PANEL ? np * 2 : PANEL) {
            const int nrows = r1 - r < np * ROWS ? (int)(r1 - r) : (int)np * ROWS;
            const int64_t nx = r + nrows, pn = np * 2 < PANEL ? np * 2 : PANEL;
            const int pnp = nx < r1 ? (int)((r1 - nx < pn * ROWS ? r1 - nx : pn * ROWS) + ROWS - 1) / ROWS : 0;
            const uint8_t *wr = (const uint8_t *)w + (size_t)r * rb, *pf = pnp ? (const uint8_t *)w + (size_t)nx * rb : NULL;
#define PANEL_K(KIND) panel_k(KIND, wr, rb, nrows, nb, xb, n_tok, wbuf, tab, cbuf, facc, y + r, ldy, pf, pnp)
            switch (kind) {
            case KQ4: PANEL_K(KQ4); break;
            case KQ5: PANEL_K(KQ5); break;
            default: PANEL_K(KQ6); break;
            }
#undef PANEL_K
            r += nrows;
        }
        _tile_release();
        return;
    }
    if (q8) {
        for (int64_t r = r0; r < r1; r += ROWS) {
            const int nr = r1 - r < ROWS ? (int)(r1 - r) : ROWS;
            /* a tile fetches the next into L2 while its groups run */
            const uint8_t *wt0 = (const uint8_t *)w + (size_t)r * rb, *pf = wt0 + (size_t)nr * rb;
            const int64_t ahead = r1 - r - nr, nx = ahead < 0 ? 0 : ahead < ROWS ? ahead : ROWS;
            size_t pfb = ((size_t)nx * rb / (size_t)nb + 63) & ~(size_t)63;
            decode_tile_q8_0(wt0, rb, nr, k, wbuf, tab);
            for (int g = 0; g < groups; g++, pfb = 0) {
                const int nt = n_tok - g * TOK < TOK ? n_tok - g * TOK : TOK;
                group_q8_0(wbuf, nb, tab, xb + (size_t)g * xg, cbuf, nt, y + r + (size_t)g * TOK * ldy, ldy,
                           (__mmask16)((1u << nr) - 1), pf, pfb);
            }
        }
        _tile_release();
        return;
    }
    /* Every tile streams the packed activations of all the groups it passes (blocks outer,
     * groups inner), so they must stay in L2: at K = 9728 the 32 groups of a 512-token piece
     * pack 5.4 MB and came from L3, and the product ran at 63 % of its K = 2560 rate (bench_gemm
     * q4_k 9728 2560 512: 40.6 -> 25.1 ms, K = 4096 12.9 -> 9.7 ms). Groups go in passes of
     * at most XPASS_BYTES, as even as the count allows; each pass decodes the run's tiles again,
     * which costs less than the L3 traffic it saves. A token's result does not depend on the
     * pass it fell in. */
    int most = (int)(XPASS_BYTES / xg);
    if (most < 1) most = 1;
    const int passes = (groups + most - 1) / most, pass = (groups + passes - 1) / passes;
    for (int g0 = 0; g0 < groups; g0 += pass) {
        const int ng = groups - g0 < pass ? groups - g0 : pass;
        const uint8_t *xp = xb + (size_t)g0 * xg;
        for (int64_t r = r0; r < r1; r += ROWS) {
            const int nr = r1 - r < ROWS ? (int)(r1 - r) : ROWS;
            const __mmask16 rmask = (__mmask16)((1u << nr) - 1);
            /* a tile fetches the one after next into L2 while it decodes */
            const uint8_t *wt0 = (const uint8_t *)w + (size_t)r * rb, *pf = wt0 + (size_t)nr * rb * 2;
            const int64_t ahead = r1 - r - nr * 2, nx = ahead < 0 ? 0 : ahead < ROWS ? ahead : ROWS;
            const size_t pfb = ((size_t)nx * rb / (size_t)nb + 63) & ~(size_t)63;
            float *yr = y + r + (size_t)g0 * TOK * ldy;
#define TILE_K(KIND) \
    tile_k(KIND, wt0, rb, nr, nb, xp, xg, ng, n_tok - g0 * TOK, wbuf, tab, cbuf, facc, yr, ldy, rmask, pf, pfb)
            switch (kind) {
            case KQ4: TILE_K(KQ4); break;
            case KQ5: TILE_K(KQ5); break;
            default: TILE_K(KQ6); break;
            }
#undef TILE_K
        }
    }
    _tile_release();
}

static void gemm_amx_q4_k(int64_t k, const void *w, size_t rb, int64_t r0, int64_t r1, const void *x, size_t xs, int n,
                          float *y, int ldy, void *ws) {
    gemm_amx(ENG_TYPE_Q4_K, k, w, rb, r0, r1, x, xs, n, y, ldy, ws);
}
static void gemm_amx_q5_k(int64_t k, const void *w, size_t rb, int64_t r0, int64_t r1, const void *x, size_t xs, int n,
                          float *y, int ldy, void *ws) {
    gemm_amx(ENG_TYPE_Q5_K, k, w, rb, r0, r1, x, xs, n, y, ldy, ws);
}
static void gemm_amx_q6_k(int64_t k, const void *w, size_t rb, int64_t r0, int64_t r1, const void *x, size_t xs, int n,
                          float *y, int ldy, void *ws) {
    gemm_amx(ENG_TYPE_Q6_K, k, w, rb, r0, r1, x, xs, n, y, ldy, ws);
}
static void gemm_amx_q8_0(int64_t k, const void *w, size_t rb, int64_t r0, int64_t r1, const void *x, size_t xs, int n,
                          float *y, int ldy, void *ws) {
    gemm_amx(ENG_TYPE_Q8_0, k, w, rb, r0, r1, x, xs, n, y, ldy, ws);
}

eng_gemm_fn eng_gemm_amx(int wt) {
    switch (wt) {
    case ENG_TYPE_Q4_K: return gemm_amx_q4_k;
    case ENG_TYPE_Q5_K: return gemm_amx_q5_k;
    case ENG_TYPE_Q6_K: return gemm_amx_q6_k;
    case ENG_TYPE_Q8_0: return gemm_amx_q8_0;
    default: return NULL;
    }
}
