/*
 * backend_cpu.c - the CPU implementation of backend.h.
 *
 * DESIGN
 * - Every op that is worth it runs as one task on the thread pool. The threads claim work in
 *   runs from a shared counter (16-row tiles of weight rows for matmul, (token cluster, KV
 *   head) pairs for attention, value heads for the DeltaNet recurrence; eng_claim_run), so a
 *   thread that is held up leaves its share to the others; the small elementwise ops take
 *   fixed slices. Results depend neither on the thread count nor on who claimed what: every
 *   output element is computed by one thread in a fixed order, the same whatever the run.
 * - matmul quantizes the activation rows once per call to the weight's vec-dot type
 *   (model-formats.md §2.5), then streams each weight row once for all tokens of the batch; matmul_n
 *   does it once for several weights that read the same rows. In exact mode each weight row is
 *   dequantized to f32 and multiplied in f32 instead.
 * - Scratch is owned per thread and sized on first use; nothing is allocated per token. An op
 *   whose scratch cannot be had does nothing and marks the backend, and the step's sync reports
 *   DP_ENOMEM: a result is never silently wrong.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "kernels.h"
#include "quant.h"
#include "threadpool.h"

typedef struct cpu_be {
    eng_pool *pool;
    bool exact;
    uint8_t *xq;          /* quantized activations */
    size_t xq_cap;
    float **scratch;      /* per thread */
    size_t *scratch_cap;  /* floats */
    int n_threads;
    atomic_size_t oom; /* bytes of scratch an op could not get since the last sync, or 0 */
    int *dn_order;     /* deltanet's grouping of a step's tokens by sequence */
    size_t dn_order_cap;
    /* An F16 cache tiled (K in panels, V per KV head; kernels.h) where the CPU has the kernels
     * that read K so, else whole rows: chosen once, when the backend is made, so the layout
     * kv_store writes is the one attention reads whatever the dispatch says later. */
    eng_kv_dots_fn kt_dots, kt_dots_w;
    size_t pf_lead; /* eng_vec_dot_pf_lead, asked once here (CPUID), not from the workers */
} cpu_be;

static atomic_bool g_fail_scratch;
void eng_backend_cpu_fail_scratch(bool on) { atomic_store(&g_fail_scratch, on); }

/* Every scratch allocation: NULL (and the backend marked) when the memory cannot be had. */
static void *scratch_alloc(cpu_be *c, size_t bytes) {
    void *p = atomic_load(&g_fail_scratch) ? NULL : malloc(bytes);
    if (!p) atomic_store(&c->oom, bytes);
    return p;
}

static float *thread_scratch(cpu_be *c, int ith, size_t n) {
    if (atomic_load(&g_fail_scratch)) { /* (as if the scratch had to grow) */
        atomic_store(&c->oom, n * sizeof(float));
        return NULL;
    }
    if (c->scratch_cap[ith] < n) {
        free(c->scratch[ith]);
        c->scratch[ith] = scratch_alloc(c, n * sizeof(float));
        c->scratch_cap[ith] = c->scratch[ith] ? n : 0;
    }
    return c->scratch[ith];
}

/* ---- matmul ------------------------------------------------------------------------------ */

typedef struct mm_task {
    cpu_be *c;
    int n_w;
    const eng_weight *w[ENG_MATMUL_N];
    float *y[ENG_MATMUL_N];
    int ldy[ENG_MATMUL_N];
    int64_t tile0[ENG_MATMUL_N + 1]; /* weight i's tiles: [tile0[i], tile0[i + 1]) of the joint range */
    const float *x;
    int ldx, n_tok;
    int act;
    size_t xq_row;
    eng_vec_dot_fn dot[ENG_MATMUL_N];
    eng_vec_dot_pf_fn dot_pf[ENG_MATMUL_N]; /* (optional) the dot that fetches ahead itself */
    eng_vec_dot4r_fn dot4r[ENG_MATMUL_N];   /* (optional) four rows of the first token at once */
    eng_vec_dot4_fn dot4[ENG_MATMUL_N]; /* (optional) */
    eng_gemm_fn gemm[ENG_MATMUL_N];     /* (optional) */
    atomic_llong next;                  /* the first 16-row tile no thread has claimed */
} mm_task;

static void mm_quantize(void *arg, int ith, int nth) {
    mm_task *m = arg;
    for (int t = ith; t < m->n_tok; t += nth)
        eng_act_quantize(m->act, m->x + (size_t)t * m->ldx, m->c->xq + (size_t)t * m->xq_row, m->w[0]->ne0);
}

/* The fewest tiles a claim takes. A GEMM call has a fixed cost (the AMX GEMM packs the
 * activations, a few us at K = 2560 against ~5 us a tile at 16 tokens); with runs that start
 * at a quarter of the tiles a matmul makes 10-14 claims, about 1 % of its time. The one-token
 * dots fetch rows ahead within their run. */
#define GEMM_RUN 8
#define DOT_RUN 4
#define MM_TILE 16 /* rows per claimed tile: the GEMMs' row tile */

/* Rows [r0, r1) of weight i: the GEMM, or row dots in tiles of 16 rows x all tokens (a tile's
 * weights, ~23 KB of Q4_K at K = 2560, stay in L1/L2 while every token's activations stream
 * past, four tokens per kernel call; the first token's pass takes four rows per call where the
 * type has a four-row dot, and fetches rows ahead of it, within the run, into L2: through the
 * dot itself where the type has a fetching dot, 2-16 KB ahead (at least the next four rows for a
 * four-row dot), else all at once before the row's product, ~16 KB ahead). */
static void mm_run(mm_task *m, int ith, int i, int64_t r0, int64_t r1, float **ws) {
    const eng_weight *w = m->w[i];
    const int64_t K = w->ne0;
    const uint8_t *wd = w->data, *xq = m->c->xq;
    float *y = m->y[i];
    const int ldy = m->ldy[i];
    if (m->gemm[i]) { /* the GEMM decodes a tile once for every token */
        if (!*ws && !(*ws = thread_scratch(m->c, ith, eng_gemm_ws_size(K, m->n_tok) / sizeof(float) + 1))) return;
        m->gemm[i](K, wd, w->row_bytes, r0, r1, xq, m->xq_row, m->n_tok, y, ldy, *ws);
        return;
    }
    /* the fetching dots spread their fetches through the product; how far ahead suits them
     * depends on the CPU (2 KB on Intel's, 16 KB on the others': eng_vec_dot_pf_lead) */
    const size_t lead = m->dot_pf[i] ? m->c->pf_lead : 16384;
    const int64_t ahead = (int64_t)((lead + w->row_bytes - 1) / w->row_bytes);
    for (int64_t rt = r0; rt < r1; rt += MM_TILE) {
        const int64_t re = rt + MM_TILE < r1 ? rt + MM_TILE : r1;
        int t = 0;
        if (m->dot4[i])
            for (; t + 4 <= m->n_tok; t += 4)
                for (int64_t r = rt; r < re; r++) {
                    if (t == 0 && r + ahead < r1) eng_prefetch_l2(wd + (size_t)(r + ahead) * w->row_bytes, w->row_bytes);
                    float o[4];
                    m->dot4[i](K, wd + (size_t)r * w->row_bytes, xq + (size_t)t * m->xq_row, m->xq_row, o);
                    for (int j = 0; j < 4; j++) y[(size_t)(t + j) * ldy + r] = o[j];
                }
        for (; t < m->n_tok; t++) {
            int64_t r = rt;
            if (t == 0 && m->dot4r[i])
                for (; r + 4 <= re; r += 4) { /* (at least the next four rows ahead: never the ones in hand) */
                    const int64_t a4 = ahead > 4 ? ahead : 4;
                    const uint8_t *row = wd + (size_t)r * w->row_bytes;
                    const uint8_t *next = r + a4 + 4 <= r1 ? row + (size_t)a4 * w->row_bytes : NULL;
                    m->dot4r[i](K, row, w->row_bytes, xq, next, &y[r]);
                }
            for (; r < re; r++) {
                const uint8_t *row = wd + (size_t)r * w->row_bytes;
                const uint8_t *next = t == 0 && r + ahead < r1 ? row + (size_t)ahead * w->row_bytes : NULL;
                float *o = &y[(size_t)t * ldy + r];
                if (t == 0 && m->dot_pf[i]) {
                    *o = m->dot_pf[i](K, row, xq, next);
                } else {
                    if (next) eng_prefetch_l2(next, w->row_bytes);
                    *o = m->dot[i](K, row, xq + (size_t)t * m->xq_row);
                }
            }
        }
    }
}

static void mm_rows(void *arg, int ith, int nth) {
    mm_task *m = arg;
    if (m->c->exact) {
        for (int i = 0; i < m->n_w; i++) {
            const eng_weight *w = m->w[i];
            const int64_t N = w->ne1, K = w->ne0, r0 = N * ith / nth, r1 = N * (ith + 1) / nth;
            float *row = thread_scratch(m->c, ith, 4 * (size_t)K);
            if (!row) return;
            /* four rows dequantized, then each token's x against them at once: the same bits as
             * row by row (eng_dot_f32_x4), in a third less time (four rows' sums are independent
             * chains, where one row's wait on each other's adds) */
            for (int64_t r = r0; r < r1; r += 4) {
                const int nr = r1 - r < 4 ? (int)(r1 - r) : 4;
                for (int j = 0; j < nr; j++)
                    eng_dequantize_row(w->type, (const uint8_t *)w->data + (size_t)(r + j) * w->row_bytes,
                                       row + (size_t)j * K, K);
                for (int t = 0; t < m->n_tok; t++) {
                    const float *xt = m->x + (size_t)t * m->ldx;
                    float *yt = m->y[i] + (size_t)t * m->ldy[i] + r;
                    if (nr == 4)
                        eng_dot_f32_x4(row, (size_t)K, xt, K, yt);
                    else
                        for (int j = 0; j < nr; j++)
                            yt[j] = eng_dot_f32(row + (size_t)j * K, xt, K);
                }
            }
        }
        return;
    }
    /* Whole 16-row tiles of the weights one after another, claimed in runs (eng_claim_run) rather
     * than fixed slices, so a thread held up does not hold up the step; a run that crosses from one
     * weight into the next is done a weight at a time. A row's result does not depend on the run
     * it fell in, so neither do the bits. */
    const int64_t tiles = m->tile0[m->n_w];
    int64_t t0, n;
    float *ws = NULL;
    while ((n = eng_claim_run(&m->next, tiles, nth, m->gemm[0] ? GEMM_RUN : DOT_RUN, &t0)) > 0)
        for (int i = 0; i < m->n_w; i++) {
            const int64_t a = t0 > m->tile0[i] ? t0 : m->tile0[i], e = t0 + n < m->tile0[i + 1] ? t0 + n : m->tile0[i + 1];
            if (a >= e) continue;
            const int64_t N = m->w[i]->ne1, r1 = (e - m->tile0[i]) * MM_TILE;
            mm_run(m, ith, i, (a - m->tile0[i]) * MM_TILE, r1 < N ? r1 : N, &ws);
        }
}

/* The in-place preparation weight i's GEMM wants of the quantized x (or none). */
static eng_gemm_prep_fn mm_prep(const mm_task *m, int i) { return m->gemm[i] ? eng_gemm_prep_best(m->w[i]->type) : NULL; }

/* n weights against one x: the activations quantized once, the weights' tiles claimed as one
 * range, one pool run (a decode step's q/k/v or gate/up products each paid a quantization, a
 * ramp-up and a tail of their own). Weights that cannot share the quantized x (another K,
 * activation type or preparation) go one by one. */
static void cpu_matmul_n(eng_backend *be, int n, const eng_weight *const *w, const float *x, int ldx, int n_tok,
                         float *const *y, const int *ldy) {
    cpu_be *c = be->impl;
    mm_task m = {0};
    bool shared = n <= ENG_MATMUL_N;
    for (int i = 0; i < n && shared; i++) {
        m.w[i] = w[i];
        m.y[i] = y[i];
        m.ldy[i] = ldy[i];
        m.tile0[i + 1] = m.tile0[i] + (w[i]->ne1 + MM_TILE - 1) / MM_TILE;
        if (!c->exact) {
            m.dot[i] = eng_vec_dot_best(w[i]->type);
            m.dot4[i] = eng_vec_dot4_best(w[i]->type);
            m.dot_pf[i] = eng_vec_dot_pf_best(w[i]->type);
            m.dot4r[i] = eng_vec_dot4r_best(w[i]->type);
            if (n_tok >= 2) m.gemm[i] = eng_gemm_best(w[i]->type);
        }
        shared = w[i]->ne0 == w[0]->ne0 && eng_act_type(w[i]->type) == eng_act_type(w[0]->type) && mm_prep(&m, i) == mm_prep(&m, 0);
    }
    if (!shared) {
        for (int i = 0; i < n; i++) cpu_matmul_n(be, 1, &w[i], x, ldx, n_tok, &y[i], &ldy[i]);
        return;
    }
    m.c = c;
    m.n_w = n;
    m.x = x;
    m.ldx = ldx;
    m.n_tok = n_tok;
    if (!c->exact) {
        m.act = eng_act_type(w[0]->type);
        m.xq_row = eng_act_row_size(m.act, w[0]->ne0);
        size_t need = m.xq_row * (size_t)n_tok;
        if (need > c->xq_cap) {
            free(c->xq);
            c->xq = scratch_alloc(c, need);
            c->xq_cap = c->xq ? need : 0;
            if (!c->xq) return;
        }
        /* a decode step's few rows quantize in a microsecond: not worth a pool round trip */
        if ((int64_t)n_tok * w[0]->ne0 <= 16384) mm_quantize(&m, 0, 1);
        else eng_pool_run(c->pool, mm_quantize, &m);
        eng_gemm_prep_fn prep = mm_prep(&m, 0);
        if (prep) prep(c->xq, m.xq_row, n_tok, w[0]->ne0);
    }
    eng_pool_run(c->pool, mm_rows, &m);
}

static void cpu_matmul(eng_backend *be, const eng_weight *w, const float *x, int ldx, int n_tok, float *y, int ldy) {
    cpu_matmul_n(be, 1, &w, x, ldx, n_tok, &y, &ldy);
}

/* ---- small float ops -------------------------------------------------------------------- */

typedef struct norm_task {
    const float *x, *w;
    float *y;
    int ldx, ldy, n_rows, n;
    float eps;
} norm_task;

/* The sum of squares of x[0..n) in double (ggml's precision, where it is one chain of adds), in
 * eight interleaved partial sums (element i in sum i % 8, the eight added in a fixed tree at the
 * end): one chain of dependent adds costs ~4 cycles an element, eight chains the compiler turns
 * into vector adds. A square of a float is exact in a double and each partial sum's order is
 * fixed, so the result is the same bits whether or not the loop is vectorized, on any machine. */
static double sum_squares(const float *x, int n) {
    double s[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++)
            s[j] += (double)x[i + j] * x[i + j];
    for (; i < n; i++)
        s[i % 8] += (double)x[i] * x[i];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

/* Rows in contiguous slices. */
static void norm_rows(void *arg, int ith, int nth) {
    const norm_task *a = arg;
    const int r0 = (int)((int64_t)a->n_rows * ith / nth), r1 = (int)((int64_t)a->n_rows * (ith + 1) / nth);
    for (int r = r0; r < r1; r++) {
        const float *xr = a->x + (size_t)r * a->ldx;
        float *yr = a->y + (size_t)r * a->ldy;
        const double ss = sum_squares(xr, a->n);
        const float scale = 1.0f / sqrtf((float)(ss / a->n) + a->eps);
        for (int i = 0; i < a->n; i++) yr[i] = (xr[i] * scale) * a->w[i];
    }
}

static void cpu_rmsnorm(eng_backend *be, const float *x, int ldx, const float *w, float *y, int ldy, int n_rows, int n,
                        float eps) {
    norm_task a = {x, w, y, ldx, ldy, n_rows, n, eps};
    /* the sum is a chain of dependent adds (~4 cycles an element): a few thousand elements are
     * worth a pool round trip */
    if ((int64_t)n_rows * n < 4096) norm_rows(&a, 0, 1);
    else eng_pool_run(((cpu_be *)be->impl)->pool, norm_rows, &a);
}

static void cpu_rope(eng_backend *be, float *x, int ld, int n_tok, int n_head, int hd, int n_rot, const int32_t *pos,
                     float base, bool neox, const float *freq_div) {
    (void)be;
    /* the angles go through a stack table a piece at a time: a file may give n_rot up to its
     * head size (4096), and each element gets the same operations whatever the piece */
    enum { PIECE = 256 };
    const float theta_scale = powf(base, -2.0f / (float)n_rot);
    const int half = n_rot / 2;
    float cs[PIECE], sn[PIECE];
    for (int t = 0; t < n_tok; t++) {
        /* theta_i = pos * theta_scale^i by repeated multiplication, as ggml builds its cache */
        float theta = (float)pos[t];
        for (int i0 = 0; i0 < half; i0 += PIECE) {
            const int ni = half - i0 < PIECE ? half - i0 : PIECE;
            for (int i = 0; i < ni; i++) {
                const float th = freq_div ? theta / freq_div[i0 + i] : theta;
                cs[i] = cosf(th);
                sn[i] = sinf(th);
                theta *= theta_scale;
            }
            for (int h = 0; h < n_head; h++) {
                float *v = x + (size_t)t * ld + (size_t)h * hd;
                for (int i = 0; i < ni; i++) {
                    const int a = neox ? i0 + i : 2 * (i0 + i), b = neox ? i0 + i + half : 2 * (i0 + i) + 1;
                    const float x0 = v[a], x1 = v[b];
                    v[a] = x0 * cs[i] - x1 * sn[i];
                    v[b] = x0 * sn[i] + x1 * cs[i];
                }
            }
        }
    }
}

/* Cache row (position) r's K into the panels of its block: element (panel, d, lane) of a block
 * of [ENG_KV_BLOCK / ENG_KT_PANEL][kv_dim][ENG_KT_PANEL] halves; and its V into the block's rows
 * of each KV head, [n_head_kv][ENG_KV_BLOCK][hd]. */
static void kv_store_tiled(eng_f16 *kc, eng_f16 *vc, int kv_dim, int hd, const float *k, const float *v, int32_t r) {
    const int off = r % ENG_KV_BLOCK, p0 = off / ENG_KT_PANEL * ENG_KT_PANEL;
    eng_f16 *o = kc + ((size_t)(r - off) + (size_t)p0) * kv_dim + (off - p0);
    eng_f16 h[256];
    for (int d0 = 0; d0 < kv_dim; d0 += 256) {
        const int nd = kv_dim - d0 < 256 ? kv_dim - d0 : 256;
        eng_f32_to_f16_row(k + d0, h, nd);
        for (int d = 0; d < nd; d++) o[(size_t)(d0 + d) * ENG_KT_PANEL] = h[d];
    }
    eng_f16 *vb = vc + (size_t)(r - off) * kv_dim + (size_t)off * hd; /* head 0's row r */
    for (int d0 = 0; d0 < kv_dim; d0 += hd) eng_f32_to_f16_row(v + d0, vb + (size_t)d0 * ENG_KV_BLOCK, hd);
}

static void cpu_kv_store(eng_backend *be, void *kc, void *vc, int kv_type, int kv_dim, int hd, const float *k,
                         const float *v, int ld, int n_tok, const int32_t *slot) {
    const bool tiled = kv_type == ENG_TYPE_F16 && ((cpu_be *)be->impl)->kt_dots;
    for (int t = 0; t < n_tok; t++) {
        const size_t row = (size_t)slot[t] * kv_dim;
        if (kv_type == ENG_TYPE_F32) {
            memcpy((float *)kc + row, k + (size_t)t * ld, (size_t)kv_dim * 4);
            memcpy((float *)vc + row, v + (size_t)t * ld, (size_t)kv_dim * 4);
        } else if (kv_type == ENG_TYPE_Q8_0) {
            /* blocks of 32 never straddle two heads (head sizes are multiples of 32) */
            const size_t rb = eng_row_size(ENG_TYPE_Q8_0, kv_dim);
            eng_quantize_row_q8_0(k + (size_t)t * ld, (uint8_t *)kc + (size_t)slot[t] * rb, kv_dim);
            eng_quantize_row_q8_0(v + (size_t)t * ld, (uint8_t *)vc + (size_t)slot[t] * rb, kv_dim);
        } else {
            if (tiled) {
                kv_store_tiled(kc, vc, kv_dim, hd, k + (size_t)t * ld, v + (size_t)t * ld, slot[t]);
                continue;
            }
            eng_f32_to_f16_row(k + (size_t)t * ld, (eng_f16 *)kc + row, kv_dim);
            eng_f32_to_f16_row(v + (size_t)t * ld, (eng_f16 *)vc + row, kv_dim);
        }
    }
}

typedef struct attn_task {
    cpu_be *c;
    const eng_attn_args *a;
    int cluster; /* tokens per work item */
    atomic_llong next; /* the first work item no thread has claimed */
} attn_task;

/* KV head kvh's part of block ib of token t's sequence: rows (from the head's slice of the
 * first row on) where the block is row by row; where it is per head (rows, hd values per row
 * the head holds before the next head's: ENG_KT_PANEL for K's panels, the block's rows for V),
 * the head's slice of the first panel or its first row. */
static inline const uint8_t *kv_block(const eng_attn_args *a, const void *base, int per_head, int t, int ib, int kvh) {
    const size_t row = eng_row_size(a->kv_type, (int64_t)a->n_head_kv * a->hd);
    const int32_t blk = a->blk_table[(size_t)a->seq[t] * a->blk_stride + ib];
    return (const uint8_t *)base + (size_t)blk * a->blk_size * row +
           eng_row_size(a->kv_type, (int64_t)kvh * a->hd) * (size_t)per_head;
}

/* Rows of the cache block at index ib that token t reads (0 or less: none). */
static inline int rows_in(const eng_attn_args *a, int t, int ib) {
    const int n = a->pos[t] + 1 - ib * a->blk_size;
    return n < a->blk_size ? n : a->blk_size;
}

/* The run of cluster tokens j.. (tokens t0 + j..) whose block tables hold the same cache block
 * at index ib and that read some of its rows: returns its end; *n is the most rows any of them
 * reads (0 or less: token j reads none, the run is j alone). */
static int block_run(const eng_attn_args *a, int t0, int m, int j, int ib, int *n) {
#define BLOCK(t) a->blk_table[(size_t)a->seq[t] * a->blk_stride + ib]
    *n = rows_in(a, t0 + j, ib);
    int j1 = j + 1;
    if (*n > 0)
        for (int r; j1 < m && (r = rows_in(a, t0 + j1, ib)) > 0 && BLOCK(t0 + j1) == BLOCK(t0 + j); j1++)
            *n = r > *n ? r : *n;
#undef BLOCK
    return j1;
}

/* n F16 rows of hd values, stride bytes apart, into floats [n][hd]. The rows (one KV head's
 * slice of each cache row) are a few lines per 4 KB page, too sparse for the hardware
 * prefetcher: they are fetched 8 rows ahead. */
static const float *widen(const uint8_t *rows, size_t stride, int n, int hd, float *out) {
    for (int p = 0; p < n; p++) {
        if (p + 8 < n) eng_prefetch_l2(rows + (size_t)(p + 8) * stride, (size_t)hd * 2);
        eng_f16_to_f32_row((const uint16_t *)(const void *)(rows + (size_t)p * stride), out + (size_t)p * hd, hd);
    }
    return out;
}

/* The same into slabs of ENG_KV_SLAB dimensions (kernels.h), slab stride rows x ENG_KV_SLAB floats;
 * hd at most SLAB_MAX_HD (the row goes through a stack copy: one conversion call per row, not per
 * slab); larger heads keep the widened rows. */
enum { SLAB_MAX_HD = 512 };
static const float *widen_slabs(const uint8_t *rows, size_t stride, int n, int hd, int slab_rows, float *out) {
    float tmp[SLAB_MAX_HD];
    for (int p = 0; p < n; p++) {
        if (p + 8 < n) eng_prefetch_l2(rows + (size_t)(p + 8) * stride, (size_t)hd * 2);
        eng_f16_to_f32_row((const uint16_t *)(const void *)(rows + (size_t)p * stride), tmp, hd);
        for (int d0 = 0; d0 < hd; d0 += ENG_KV_SLAB)
            memcpy(out + ((size_t)(d0 / ENG_KV_SLAB) * slab_rows + p) * ENG_KV_SLAB, tmp + d0,
                   ENG_KV_SLAB * sizeof(float));
    }
    return out;
}

/* The same for Q8_0 rows: each head slice is hd / 32 blocks, dequantized to floats [n][hd]. */
static const float *widen_q8_0(const uint8_t *rows, size_t stride, int n, int hd, float *out) {
    for (int p = 0; p < n; p++) {
        if (p + 8 < n) eng_prefetch_l2(rows + (size_t)(p + 8) * stride, eng_row_size(ENG_TYPE_Q8_0, hd));
        eng_q8_0_to_f32_row(rows + (size_t)p * stride, out + (size_t)p * hd, hd);
    }
    return out;
}

static void scale_row(float *x, int n, float c) {
    for (int e = 0; e < n; e++) x[e] *= c;
}

/* One work item is a cluster of consecutive tokens and a KV head with its group of query heads.
 * The cache is read one block (blk_size rows) at a time in position order, with an online
 * softmax: each query row keeps a running maximum and sum, and its weighted sum of V rows is
 * rescaled when the maximum moves. No row of all scores is kept, so a cluster's size does not
 * shrink with depth. Within the cluster, consecutive tokens whose block tables hold the same
 * cache block at the same index share it: the block's K and V rows are read and converted once
 * for all of them (sequences sharing a prompt prefix by reference, and a prompt piece's tokens
 * over its earlier blocks and the block holding their own positions), and each run of them with
 * the same number of rows in range is scored and mixed together, so each row is read once per
 * token for its group of query heads (4 per KV head in Qwen3-4B). The kernels' arithmetic
 * per (head, row) does not depend on how many heads they get, and every token's tiles are the
 * cache blocks, in position order, so each token's result is the same bits in any cluster: batch
 * invariance holds. */
static void attn_heads(void *arg, int ith, int nth) {
    attn_task *at = arg;
    const eng_attn_args *a = at->a;
    const int hd = a->hd, kv_dim = a->n_head_kv * hd, G = a->n_head / a->n_head_kv, B = a->blk_size, CL = at->cluster;
    const int n_cl = (a->n_tok + CL - 1) / CL, R = CL * G; /* a cluster's query rows */
    const int64_t total = (int64_t)n_cl * a->n_head_kv;
    /* the query rows' scratch, then one block's K and V rows widened to floats: K transposed in
     * panels (B rounded up to ENG_KT_PANEL positions), V [B][hd] */
    const size_t wk_floats = (size_t)(B + ENG_KT_PANEL - 1) / ENG_KT_PANEL * ENG_KT_PANEL * hd;
    float *sc = thread_scratch(at->c, ith, (size_t)R * eng_attn_row_floats(B, hd) + wk_floats + (size_t)B * hd);
    if (!sc) return;
    double *lsum = (double *)(void *)sc;
    float *mx = sc + 2 * (size_t)R, *st = mx + R, *qc = st + (size_t)R * B, *acc = qc + (size_t)R * hd;
    float *wk = acc + (size_t)R * hd, *wv = wk + wk_floats;
    /* The kernels read the rows as stored (an F16 cache's in the backend's tiled layout, kt; a
     * Q8_0 cache's rows where there are kernels for them, q8r). A block that several tokens read
     * is widened to floats once, so the kernels' inner loops skip the conversion (the same
     * values: the same bits); a Q8_0 block is always widened where no kernel reads it as stored. */
    const bool q8 = a->kv_type == ENG_TYPE_Q8_0, kt = a->kv_type == ENG_TYPE_F16 && at->c->kt_dots, ex = at->c->exact;
    const eng_kv_dots_fn q8dots = q8 ? eng_kv_dots_q8_0_rows(ex) : NULL;
    const eng_kv_mix_fn q8mix = q8 ? eng_kv_mix_q8_0_rows(ex) : NULL;
    /* a group the kernels take in several passes would convert each Q8_0 value once per pass,
     * where widening converts it once (AVX2, G 6 in passes of 4, 4096 positions: 0.74x as fast
     * as widening; G 4: 1.17x) */
    const bool q8r = q8dots && q8mix && G <= eng_kv_q8_0_rows_group();
    const eng_kv_dots_fn kdots_w = kt ? at->c->kt_dots_w : q8 ? eng_kv_dots_q8_0(ex) : NULL;
    /* an F16 block's V widened into slabs where there is a kernel for them */
    const eng_kv_mix_fn vmix_s = kt && hd % ENG_KV_SLAB == 0 && hd <= SLAB_MAX_HD ? eng_kv_mix_slabs(ex) : NULL;
    const eng_kv_mix_fn vmix_w = vmix_s ? vmix_s : kt ? eng_kv_mix_widened(ex) : q8 ? eng_kv_mix_q8_0(ex) : NULL;
    const eng_kv_dots_fn kdots = q8 ? (q8r ? q8dots : kdots_w) : kt ? at->c->kt_dots : eng_kv_dots_best(a->kv_type, ex);
    const eng_kv_mix_fn vmix = q8 ? (q8r ? q8mix : vmix_w) : eng_kv_mix_best(a->kv_type, ex);
    const int min_run = q8 && !q8r ? 1 : 2; /* tokens that share a block before it is widened */
    const eng_softmax_tile_fn softmax = eng_softmax_tile_best(ex);
    const size_t row = eng_row_size(a->kv_type, kv_dim), kpanel = (size_t)ENG_KT_PANEL * row;
    eng_claim it = ENG_CLAIM(&at->next, total, nth, 1);
    for (int64_t i; eng_claim_item(&it, &i);) {
        const int cl = (int)(i / a->n_head_kv), kvh = (int)(i % a->n_head_kv);
        const int t0 = cl * CL, m = a->n_tok - t0 < CL ? a->n_tok - t0 : CL;
        int n_blk = 0;
        for (int j = 0; j < m; j++) {
            const float *q = a->q + (size_t)(t0 + j) * a->ldq + (size_t)kvh * G * hd;
            memcpy(qc + (size_t)j * G * hd, q, (size_t)G * hd * sizeof(float));
            const int nb = (a->pos[t0 + j] + B) / B;
            n_blk = nb > n_blk ? nb : n_blk;
        }
        for (int r = 0; r < m * G; r++) {
            mx[r] = -INFINITY;
            lsum[r] = 0;
        }
        memset(acc, 0, (size_t)m * G * hd * sizeof(float));
        for (int ib = 0; ib < n_blk; ib++)
            for (int j = 0, j1, nw; j < m; j = j1) {
                j1 = block_run(a, t0, m, j, ib, &nw);
                if (nw <= 0) continue;
                const uint8_t *kb = kv_block(a, a->k, kt ? ENG_KT_PANEL : 1, t0 + j, ib, kvh);
                const uint8_t *vb = kv_block(a, a->v, kt ? B : 1, t0 + j, ib, kvh);
                /* a block several tokens read is widened once, its rows up to the furthest any of
                 * them reads; each token then scores and mixes its own rows of it */
                const bool shared = kdots_w && vmix_w && j1 - j >= min_run;
                size_t kst = kt ? kpanel : row, vst = kt ? (size_t)hd * 2 : row;
                const void *kr = kb, *vr = vb;
                if (shared) {
                    if (q8) {
                        kr = widen_q8_0(kb, row, nw, hd, wk);
                        kst = (size_t)hd * 4;
                    } else { /* the head's slice of each panel in range */
                        for (int p0 = 0; p0 < nw; p0 += ENG_KT_PANEL) {
                            const uint8_t *panel = kb + (size_t)(p0 / ENG_KT_PANEL) * kpanel;
                            eng_f16_to_f32_row((const uint16_t *)(const void *)panel, wk + (size_t)p0 * hd,
                                               (int64_t)ENG_KT_PANEL * hd);
                        }
                        kr = wk;
                        kst = (size_t)ENG_KT_PANEL * hd * sizeof(float);
                    }
                    if (vmix_s) {
                        vr = widen_slabs(vb, vst, nw, hd, B, wv);
                        vst = (size_t)B * ENG_KV_SLAB * sizeof(float);
                    } else {
                        vr = q8 ? widen_q8_0(vb, row, nw, hd, wv) : widen(vb, vst, nw, hd, wv);
                        vst = (size_t)hd * 4;
                    }
                }
                for (int u = j, u1; u < j1; u = u1) { /* tokens reading the same rows */
                    const int n = rows_in(a, t0 + u, ib);
                    for (u1 = u + 1; u1 < j1 && rows_in(a, t0 + u1, ib) == n;) u1++;
                    const int r0 = u * G, nr = (u1 - u) * G;
                    float *sr = st + (size_t)r0 * B, *ac = acc + (size_t)r0 * hd;
                    (shared ? kdots_w : kdots)(qc + (size_t)r0 * hd, (size_t)hd, nr, kr, kst, n, hd, sr, (size_t)B);
                    for (int r = r0; r < r0 + nr; r++) {
                        const float c = softmax(st + (size_t)r * B, n, a->scale, mx + r, lsum + r);
                        if (c != 1.0f) scale_row(acc + (size_t)r * hd, hd, c);
                    }
                    (shared ? vmix_w : vmix)(ac, (size_t)hd, nr, sr, (size_t)B, vr, vst, n, hd);
                }
            }
        for (int r = 0; r < m * G; r++) scale_row(acc + (size_t)r * hd, hd, (float)(1.0 / lsum[r]));
        for (int j = 0; j < m; j++)
            memcpy(a->out + (size_t)(t0 + j) * a->ldo + (size_t)kvh * G * hd, acc + (size_t)j * G * hd,
                   (size_t)G * hd * sizeof(float));
    }
}

static void cpu_attention(eng_backend *be, const eng_attn_args *a) {
    cpu_be *c = be->impl;
    attn_task at = {c, a, 1, 0};
    /* Clusters as large as eng_attn_cluster_max allows (each block's K and V rows are read and
     * widened once per cluster: 64 tokens in place of 32 made a prefill at depth 8192 about 4 %
     * faster on a Zen 4, where the widening reads the cache from DRAM), fewer where the threads
     * would get under two work items each (a cluster is one thread's work for a KV head). */
    int cl = eng_attn_cluster_max(a->n_head / a->n_head_kv, a->blk_size, a->hd);
    while (cl > 1 && (int64_t)((a->n_tok + cl - 1) / cl) * a->n_head_kv < 2 * (int64_t)c->n_threads) cl /= 2;
    at.cluster = cl;
    eng_pool_run(c->pool, attn_heads, &at);
}

/* ---- Gated DeltaNet (model-formats.md §4.9), token by token ------------------------------------ */

typedef struct dn_task {
    cpu_be *c;
    const eng_deltanet_args *a;
} dn_task;

static inline float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

/* Causal depthwise conv + SiLU over channel slices; state keeps the last kernel-1 inputs. */
static void dn_conv(void *arg, int ith, int nth) {
    dn_task *d = arg;
    const eng_deltanet_args *a = d->a;
    const int ch_n = 2 * a->n_k * a->dk + a->n_v * a->dv, K = a->kernel;
    const int c0 = ch_n * ith / nth, c1 = ch_n * (ith + 1) / nth, nc = c1 - c0;
    const eng_silu_fn silu = eng_silu_best(d->c->exact);
    /* the thread's taps transposed, [K][nc], so that every pass below runs over contiguous
     * channels and vectorizes; per channel the sum is the scalar one, tap by tap from zero */
    float *wt = thread_scratch(d->c, ith, (size_t)K * nc + 1);
    if (!wt || nc <= 0) return;
    for (int ch = 0; ch < nc; ch++)
        for (int j = 0; j < K; j++) wt[(size_t)j * nc + ch] = a->conv_w[(size_t)(c0 + ch) * K + j];
    for (int t = 0; t < a->n_tok; t++) {
        float *st = a->conv_state + (size_t)a->seq[t] * (K - 1) * ch_n + c0;
        const float *restrict m = a->qkv + (size_t)t * ch_n + c0;
        float *restrict o = a->scratch + (size_t)t * ch_n + c0;
        for (int ch = 0; ch < nc; ch++) o[ch] = 0;
        for (int j = 0; j < K - 1; j++) {
            const float *restrict w = wt + (size_t)j * nc, *restrict sj = st + (size_t)j * ch_n;
            for (int ch = 0; ch < nc; ch++) o[ch] += w[ch] * sj[ch];
        }
        const float *restrict wl = wt + (size_t)(K - 1) * nc;
        for (int ch = 0; ch < nc; ch++) o[ch] += wl[ch] * m[ch];
        /* the window moves on by this token */
        for (int j = 0; j + 1 < K - 1; j++) memcpy(st + (size_t)j * ch_n, st + (size_t)(j + 1) * ch_n, (size_t)nc * sizeof(float));
        if (K > 1) memcpy(st + (size_t)(K - 2) * ch_n, m, (size_t)nc * sizeof(float));
        silu(o, o, nc);
    }
}

/* L2-normalize q and k per key head (q also scaled by 1/sqrt(dk)). */
static void dn_norm(void *arg, int ith, int nth) {
    dn_task *d = arg;
    const eng_deltanet_args *a = d->a;
    const int ch_n = 2 * a->n_k * a->dk + a->n_v * a->dv;
    const float qscale = 1.0f / sqrtf((float)a->dk);
    for (int t = ith; t < a->n_tok; t += nth) {
        float *o = a->scratch + (size_t)t * ch_n;
        for (int part = 0; part < 2; part++) {
            for (int h = 0; h < a->n_k; h++) {
                float *v = o + (size_t)part * a->n_k * a->dk + (size_t)h * a->dk;
                float n = sqrtf((float)sum_squares(v, a->dk));
                const float inv = 1.0f / (n > a->eps ? n : a->eps);
                const float s = part == 0 ? inv * qscale : inv;
                for (int i = 0; i < a->dk; i++) v[i] *= s;
            }
        }
    }
}

#define DN_CHUNK ENG_DELTA_CHUNK
#define DN_CHUNK_MIN 16 /* fewer tokens of a sequence in a step: the recurrence is as cheap */

/* Per-step grouping of the batch's tokens by sequence (built once, read by every head). */
typedef struct dn_groups {
    int *order;  /* token indices, sequence by sequence, each in order */
    int *start;  /* [n_groups + 1] offsets into order */
    int n_groups;
} dn_groups;

typedef struct dn_task2 {
    cpu_be *c;
    const eng_deltanet_args *a;
    dn_groups g;
    atomic_llong next; /* the first value head no thread has claimed */
} dn_task2;

static inline void dn_token(const eng_deltanet_args *a, int t, int h, const float **q, const float **k,
                            const float **v, float *beta, float *g) {
    const int dk = a->dk, ch_n = 2 * a->n_k * dk + a->n_v * a->dv, kh = h % a->n_k;
    const float *row = a->scratch + (size_t)t * ch_n;
    *q = row + (size_t)kh * dk;
    *k = row + (size_t)a->n_k * dk + (size_t)kh * dk;
    *v = row + (size_t)2 * a->n_k * dk + (size_t)h * a->dv;
    *beta = 1.0f / (1.0f + expf(-a->beta_in[(size_t)t * a->n_v + h]));
    *g = a->ssm_a[h] * softplus(a->alpha_in[(size_t)t * a->n_v + h] + a->dt_bias[h]);
}

/* Gated RMSNorm of one head's output o into out: RMSNorm(o; ssm_norm) * silu(z); tmp: dv floats. */
static void dn_gated_norm(const eng_deltanet_args *a, eng_silu_fn silu, int t, int h, const float *o, float *tmp) {
    const int dv = a->dv;
    const float scale = 1.0f / sqrtf((float)(sum_squares(o, dv) / dv) + a->eps);
    const float *z = a->z + (size_t)t * a->n_v * dv + (size_t)h * dv;
    float *out = a->out + (size_t)t * a->n_v * dv + (size_t)h * dv;
    silu(z, tmp, dv);
    for (int j = 0; j < dv; j++) out[j] = (o[j] * scale) * a->norm_w[j] * tmp[j];
}

/* One chunk of c <= DN_CHUNK tokens idx[0..c) of one sequence, value head h, chunk-wise
 * (kernels: eng_delta_chunk_*), then the gated RMSNorm of each output row. */
static void dn_chunk(const eng_deltanet_args *a, int h, const int *idx, int c, float *St, float *ws,
                     eng_delta_chunk_fn chunk, eng_silu_fn silu, float *tmp) {
    const float *q[DN_CHUNK] = {0}, *k[DN_CHUNK] = {0}, *v[DN_CHUNK] = {0};
    float beta[DN_CHUNK] = {0}, g[DN_CHUNK] = {0};
    for (int r = 0; r < c; r++) dn_token(a, idx[r], h, &q[r], &k[r], &v[r], &beta[r], &g[r]);
    float *O = ws;
    chunk(c, q, k, v, beta, g, St, a->dk, a->dv, O, ws + (size_t)DN_CHUNK * a->dv);
    for (int r = 0; r < c; r++) dn_gated_norm(a, silu, idx[r], h, O + (size_t)r * a->dv, tmp);
}

/* The delta rule per value head h (key head h % n_k), then the gated RMSNorm. State row j
 * holds column j of S (dk contiguous floats), so every inner loop is contiguous. A sequence
 * with enough tokens in this step goes chunk-wise, otherwise token by token. */
static void dn_heads(void *arg, int ith, int nth) {
    dn_task2 *d = arg;
    const eng_deltanet_args *a = d->a;
    const int dk = a->dk, dv = a->dv, C = DN_CHUNK;
    const eng_delta_step_fn step = d->c->exact ? eng_delta_step_ref : eng_delta_step_best();
    const eng_delta_chunk_fn chunk = d->c->exact ? eng_delta_chunk_ref : eng_delta_chunk_best();
    const eng_silu_fn silu = eng_silu_best(d->c->exact);
    float *buf = thread_scratch(d->c, ith, (size_t)C * dv + ENG_DELTA_CHUNK_WS(C, dk, dv) + 2 * (size_t)dv);
    if (!buf) return;
    float *tmp = buf + (size_t)C * dv + ENG_DELTA_CHUNK_WS(C, dk, dv) + dv;
    eng_claim it = ENG_CLAIM(&d->next, a->n_v, nth, 1);
    for (int64_t hi; eng_claim_item(&it, &hi);) {
        const int h = (int)hi; /* < n_v */
        for (int gi = 0; gi < d->g.n_groups; gi++) {
            const int *idx = d->g.order + d->g.start[gi];
            const int n = d->g.start[gi + 1] - d->g.start[gi];
            float *S = a->ssm_state + ((size_t)a->seq[idx[0]] * a->n_v + h) * (size_t)dv * dk;
            if (a->chunked && n >= DN_CHUNK_MIN) {
                for (int c0 = 0; c0 < n; c0 += C) dn_chunk(a, h, idx + c0, n - c0 < C ? n - c0 : C, S, buf, chunk, silu, tmp);
                continue;
            }
            for (int r = 0; r < n; r++) {
                const float *q, *k, *v;
                float beta, g;
                dn_token(a, idx[r], h, &q, &k, &v, &beta, &g);
                float *o = buf;
                step(S, k, v, q, expf(g), beta, dk, dv, o);
                dn_gated_norm(a, silu, idx[r], h, o, tmp);
            }
        }
    }
}

static void cpu_deltanet(eng_backend *be, const eng_deltanet_args *a) {
    cpu_be *c = be->impl;
    dn_task d = {c, a};
    eng_pool_run(c->pool, dn_conv, &d);
    eng_pool_run(c->pool, dn_norm, &d);
    /* group the tokens by sequence, keeping their order: a stable counting sort on the
     * sequence id (linear; a prompt step can hold thousands of tokens) */
    int max_seq = 0;
    for (int t = 0; t < a->n_tok; t++) max_seq = a->seq[t] > max_seq ? a->seq[t] : max_seq;
    const size_t n_cnt = (size_t)max_seq + 2;
    dn_task2 d2 = {c, a, {NULL, NULL, 0}, 0};
    const size_t need = 2 * (size_t)a->n_tok + 1 + 2 * n_cnt;
    if (need > c->dn_order_cap) { /* grows to the largest step once; never per token */
        free(c->dn_order);
        c->dn_order = scratch_alloc(c, need * sizeof(int));
        c->dn_order_cap = c->dn_order ? need : 0;
        if (!c->dn_order) return; /* marked: the step's sync reports it */
    }
    int *mem = c->dn_order;
    int *cnt = mem + 2 * (size_t)a->n_tok + 1, *start = cnt + n_cnt; /* after order[n_tok], start[n_tok + 1] */
    d2.g.order = mem;
    d2.g.start = mem + a->n_tok;
    memset(cnt, 0, n_cnt * sizeof(int));
    for (int t = 0; t < a->n_tok; t++) cnt[a->seq[t]]++;
    for (int q = 0, at = 0; q <= max_seq; q++) {
        start[q] = at;
        if (cnt[q]) d2.g.start[d2.g.n_groups++] = at;
        at += cnt[q];
    }
    d2.g.start[d2.g.n_groups] = a->n_tok;
    for (int t = 0; t < a->n_tok; t++) d2.g.order[start[a->seq[t]]++] = t;
    eng_pool_run(c->pool, dn_heads, &d2);
}

/* Elementwise ops over [0, n) in slices of whole 64-element pieces, so every element goes
 * through the same lanes of the same kernel whatever the thread count. */
typedef struct elem_task {
    int op; /* ELEM_* */
    bool exact;
    float *x;
    const float *a, *b;
    int64_t n;
} elem_task;
enum { ELEM_SWIGLU, ELEM_MUL_SIGMOID, ELEM_ADD };

static void elem_slices(void *arg, int ith, int nth) {
    const elem_task *t = arg;
    const int64_t pieces = (t->n + 63) / 64, p0 = pieces * ith / nth, p1 = pieces * (ith + 1) / nth;
    const int64_t i0 = p0 * 64, i1 = p1 * 64 < t->n ? p1 * 64 : t->n;
    if (i0 >= i1) return;
    switch (t->op) {
    case ELEM_SWIGLU: eng_swiglu_best(t->exact)(t->a + i0, t->b + i0, t->x + i0, i1 - i0); break;
    case ELEM_MUL_SIGMOID: eng_mul_sigmoid_best(t->exact)(t->x + i0, t->a + i0, i1 - i0); break;
    default:
        for (int64_t i = i0; i < i1; i++) t->x[i] += t->a[i];
        break;
    }
}

static void elem_run(cpu_be *c, elem_task *t) {
    /* a decode step's few thousand elements are done before a pool round trip would be */
    if (t->n < 32768) elem_slices(t, 0, 1);
    else eng_pool_run(c->pool, elem_slices, t);
}

static void cpu_swiglu(eng_backend *be, const float *g, const float *u, float *out, int64_t n) {
    cpu_be *c = be->impl;
    elem_task t = {ELEM_SWIGLU, c->exact, out, g, u, n};
    elem_run(c, &t);
}

static void cpu_add(eng_backend *be, float *x, const float *y, int64_t n) {
    cpu_be *c = be->impl;
    elem_task t = {ELEM_ADD, c->exact, x, y, NULL, n};
    elem_run(c, &t);
}

/* ---- memory and the small ops forward.c needs around the kernels -------------------------- */

static void *cpu_alloc(eng_backend *be, size_t bytes) {
    (void)be;
    return calloc(1, bytes ? bytes : 1);
}

static void cpu_release(eng_backend *be, void *p) {
    (void)be;
    free(p);
}

static void cpu_copy(eng_backend *be, void *dst, const void *src, size_t bytes) {
    (void)be;
    if (bytes) memmove(dst, src, bytes);
}

static void cpu_fill0(eng_backend *be, void *dst, size_t bytes) {
    (void)be;
    if (bytes) memset(dst, 0, bytes);
}

static dp_status cpu_sync(eng_backend *be, dp_err *err) {
    cpu_be *c = be->impl;
    const size_t lost = atomic_exchange(&c->oom, 0);
    if (lost)
        return dp_err_set(err, DP_ENOMEM, "out of memory: the CPU backend could not allocate %zu bytes of scratch, so this step's results are lost",
                          lost);
    return DP_OK;
}

static void cpu_begin_step(eng_backend *be, const eng_step *s) {
    (void)be;
    (void)s;
}

static void cpu_get_rows(eng_backend *be, const eng_weight *w, const int32_t *tok, int n, float *x) {
    (void)be;
    for (int t = 0; t < n; t++)
        eng_dequantize_row(w->type, (const uint8_t *)w->data + (size_t)tok[t] * w->row_bytes, x + (size_t)t * w->ne0,
                           w->ne0);
}

static void cpu_copy2d(eng_backend *be, float *dst, int ldd, const float *src, int lds, int n_rows, int cols) {
    (void)be;
    for (int r = 0; r < n_rows; r++) memmove(dst + (size_t)r * ldd, src + (size_t)r * lds, (size_t)cols * sizeof(float));
}

static void cpu_add_rows(eng_backend *be, float *x, int ld, int n_rows, const float *b, int n) {
    (void)be;
    for (int r = 0; r < n_rows; r++)
        for (int i = 0; i < n; i++) x[(size_t)r * ld + i] += b[i];
}

static void cpu_mul_sigmoid(eng_backend *be, float *x, const float *g, int64_t n) {
    cpu_be *c = be->impl;
    elem_task t = {ELEM_MUL_SIGMOID, c->exact, x, g, NULL, n};
    elem_run(c, &t);
}

static void cpu_free(eng_backend *be) {
    if (!be) return;
    cpu_be *c = be->impl;
    if (c) {
        eng_pool_free(c->pool);
        for (int i = 0; i < c->n_threads; i++) free(c->scratch[i]);
        free(c->scratch);
        free(c->scratch_cap);
        free(c->xq);
        free(c->dn_order);
        free(c);
    }
    free(be);
}

static const eng_backend_ops cpu_ops = {
    /* .name      = */ "cpu",
    /* .host_memory = */ true,
    /* .alloc     = */ cpu_alloc,
    /* .release   = */ cpu_release,
    /* .copy      = */ cpu_copy,
    /* .fill0     = */ cpu_fill0,
    /* .to_host   = */ cpu_copy,
    /* .from_host = */ cpu_copy,
    /* .sync      = */ cpu_sync,
    /* .begin_step = */ cpu_begin_step,
    /* .get_rows  = */ cpu_get_rows,
    /* .copy2d    = */ cpu_copy2d,
    /* .add_rows  = */ cpu_add_rows,
    /* .mul_sigmoid = */ cpu_mul_sigmoid,
    /* .matmul    = */ cpu_matmul,
    /* .matmul_n  = */ cpu_matmul_n,
    /* .rmsnorm   = */ cpu_rmsnorm,
    /* .rope      = */ cpu_rope,
    /* .kv_store  = */ cpu_kv_store,
    /* .attention = */ cpu_attention,
    /* .deltanet  = */ cpu_deltanet,
    /* .swiglu    = */ cpu_swiglu,
    /* .add       = */ cpu_add,
    /* .free      = */ cpu_free,
};

dp_status eng_backend_cpu_new(int n_threads, bool exact, eng_backend **out, dp_err *err) {
    eng_backend *be = calloc(1, sizeof(*be));
    cpu_be *c = calloc(1, sizeof(*c));
    if (!be || !c) {
        free(be);
        free(c);
        return dp_err_set(err, DP_ENOMEM, "out of memory");
    }
    be->ops = &cpu_ops;
    be->impl = c;
    c->exact = exact;
    c->n_threads = n_threads;
    c->kt_dots = eng_kv_dots_panels(exact);
    c->kt_dots_w = c->kt_dots ? eng_kv_dots_widened(exact) : NULL;
    c->pf_lead = eng_vec_dot_pf_lead();
    c->scratch = calloc((size_t)n_threads, sizeof(float *));
    c->scratch_cap = calloc((size_t)n_threads, sizeof(size_t));
    dp_status st = c->scratch && c->scratch_cap ? eng_pool_new(n_threads, &c->pool, err)
                                                : dp_err_set(err, DP_ENOMEM, "out of memory");
    if (st) {
        cpu_free(be);
        return st;
    }
    *out = be;
    return DP_OK;
}
