/*
 * delta_chunk_tiled.h - the chunk-wise Gated DeltaNet update of delta_chunk.h with every product a
 * small GEMM on a register tile, included by kernels_avx2.c and kernels_avx512.c with their own
 * vector operations. The state is transposed once into S [dk][dv], so that it is the right-hand
 * side of both Q S and W S, and back at the end; the keys once into K^T for K K^T and Q K^T.
 * The portable form, even compiled for AVX2, runs at a third of this speed or less
 * (bench_delta_chunk): each of its dot products is one chain of adds, and each state row is
 * loaded and stored once per token of the chunk.
 *
 * The includer defines:
 *   DCT_NAME                the function (eng_delta_chunk_fn's arguments)
 *   DCT_FALLBACK            the form for shapes not a multiple of DCT_W or over DCT_MAXD
 *   DCT_V, DCT_W            the vector type and its float lanes
 *   DCT_LOAD(p) DCT_STORE(p, x) DCT_SET1(f) DCT_ZERO() DCT_MUL(a, b)
 *   DCT_FMA(a, b, c)        a b + c
 *   DCT_FNMA(a, b, c)       c - a b
 *   DCT_MR, DCT_NR          the tile: rows, and vectors across (DCT_MR + 1 + DCT_MR * DCT_NR + DCT_NR
 *                           registers at most)
 *   DCT_TRANSPOSE(R, N, src, dst)  dst[j][i] = src[i][j] (row pointers; R, N multiples of DCT_W)
 */
#define DCT_MAXD 256 /* dk, dv at most this (Qwen: 128) */

/* Rows m0 .. m0 + MR of C (row pointers), NR vectors of columns from n0: C = (keep ? cmul C : 0)
 * + amul rs[m] sum_p A[m][p] B[p][n]. */
static DP_ALWAYS_INLINE void dct_tile(const int MR, const int NR, int P, const float *const *A, const float *const *B,
                                      int n0, float *const *Cr, bool keep, float cmul, float amul, const float *rs) {
    DCT_V acc[DCT_MR][DCT_NR];
    for (int m = 0; m < MR; m++)
        for (int v = 0; v < NR; v++) acc[m][v] = DCT_ZERO();
    for (int p = 0; p < P; p++) {
        DCT_V b[DCT_NR];
        for (int v = 0; v < NR; v++) b[v] = DCT_LOAD(B[p] + n0 + DCT_W * v);
        for (int m = 0; m < MR; m++) {
            const DCT_V a = DCT_SET1(A[m][p]);
            for (int v = 0; v < NR; v++) acc[m][v] = DCT_FMA(a, b[v], acc[m][v]);
        }
    }
    for (int m = 0; m < MR; m++) {
        const DCT_V r = DCT_SET1(rs ? amul * rs[m] : amul);
        for (int v = 0; v < NR; v++) {
            float *c = Cr[m] + n0 + DCT_W * v;
            DCT_V x = DCT_MUL(r, acc[m][v]);
            if (keep) x = DCT_FMA(DCT_SET1(cmul), DCT_LOAD(c), x);
            DCT_STORE(c, x);
        }
    }
}

/* C [M][N] from A [M][P] and B [P][N], all as row pointers; N a multiple of DCT_W. Column panels
 * outermost, so one panel of B stays in L1 across the row tiles; a panel's last vectors and a
 * tile's last rows one at a time. tri: A is lower triangular (A[m][p] = 0 for p > m), so a row
 * tile's sum stops at its last row. */
static void dct_gemm(int M, int N, int P, bool tri, const float *const *A, const float *const *B, float *const *Cr,
                     bool keep, float cmul, float amul, const float *rs) {
    const int PW = DCT_W * DCT_NR;
    for (int n0 = 0; n0 < N;) {
        const bool full = N - n0 >= PW;
        for (int m0 = 0; m0 < M;) {
            const bool fullm = M - m0 >= DCT_MR;
            const int mr = fullm ? DCT_MR : 1;
            const int pe = tri && m0 + mr < P ? m0 + mr : P;
            const float *const *a = A + m0;
            float *const *c = Cr + m0;
            const float *r = rs ? rs + m0 : NULL;
            if (fullm && full) dct_tile(DCT_MR, DCT_NR, pe, a, B, n0, c, keep, cmul, amul, r);
            else if (fullm) dct_tile(DCT_MR, 1, pe, a, B, n0, c, keep, cmul, amul, r);
            else if (full) dct_tile(1, DCT_NR, pe, a, B, n0, c, keep, cmul, amul, r);
            else dct_tile(1, 1, pe, a, B, n0, c, keep, cmul, amul, r);
            m0 += mr;
        }
        n0 += full ? PW : DCT_W;
    }
}

static void dct_chunk(int c, const float *const *q, const float *const *k, const float *const *v, const float *beta,
                      const float *g, float *St, int dk, int dv, float *O, float *ws);

/* Subnormal floats are taken as zero, and results that would be subnormal are flushed, within
 * the chunk: the decays exp(G_r - G_s) of a fast-forgetting head span many orders of magnitude
 * across a chunk, so some of its products land below 2^-126, and a multiply-add that meets a
 * subnormal can take a microcode assist (on a Sapphire Rapids, a chunk at a gate of -2 a token
 * took 14 times as long, both kernels: bench_delta_chunk). The values lost are below 1.2e-38,
 * far inside the references' bounds; the control register is restored before returning, so no
 * other kernel sees the mode. */
void DCT_NAME(int c, const float *const *q, const float *const *k, const float *const *v, const float *beta,
              const float *g, float *St, int dk, int dv, float *O, float *ws) {
    const unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | 0x8040u);                                      /* FTZ (bit 15) | DAZ (bit 6) */
    if (dk % DCT_W || dv % DCT_W || dk > DCT_MAXD || dv > DCT_MAXD) /* not a model shape seen so far */
        DCT_FALLBACK(c, q, k, v, beta, g, St, dk, dv, O, ws);
    else
        dct_chunk(c, q, k, v, beta, g, St, dk, dv, O, ws);
    _mm_setcsr(csr);
}

static void dct_chunk(int c, const float *const *q, const float *const *k, const float *const *v, const float *beta,
                      const float *g, float *St, int dk, int dv, float *O, float *ws) {
    enum { C = ENG_DELTA_CHUNK };
    static const float zero[DCT_MAXD];
    const int cp = (c + DCT_W - 1) / DCT_W * DCT_W; /* columns of the c x c products, padded with zeros */
    float *KT = ws, *A = KT + (size_t)dk * C, *QK = A + C * C, *T = QK + C * C, *Tbe = T + C * C,
          *W = Tbe + C * C, *Vt = W + (size_t)C * dk, *S = Vt + (size_t)C * dv;
    float G[C], eg[C], coef[C];
    const float *kpad[C], *ktr[DCT_MAXD], *snr[DCT_MAXD], *str[DCT_MAXD], *qkr[C], *tbr[C], *tber[C], *wr[C], *vtr[C];
    float *ktw[DCT_MAXD], *snw[DCT_MAXD], *stw[DCT_MAXD], *aw[C], *qkw[C], *ww[C], *vtw[C], *ow[C];
    float run = 0;
    for (int r = 0; r < c; r++) {
        run += g[r];
        G[r] = run;
        eg[r] = expf(run);
    }
    for (int r = 0; r < c; r++) coef[r] = expf(G[c - 1] - G[r]);
    for (int r = 0; r < cp; r++) kpad[r] = r < c ? k[r] : zero;
    for (int i = 0; i < dk; i++) ktr[i] = ktw[i] = KT + (size_t)i * C;
    for (int i = 0; i < dk; i++) snr[i] = snw[i] = S + (size_t)i * dv;
    for (int j = 0; j < dv; j++) str[j] = stw[j] = St + (size_t)j * dk;
    for (int r = 0; r < C; r++) {
        aw[r] = A + r * C;
        qkr[r] = qkw[r] = QK + r * C;
        tbr[r] = T + r * C; /* T's rows become T diag(beta) in place once T is complete */
        tber[r] = Tbe + r * C;
        wr[r] = ww[r] = W + (size_t)r * dk;
        vtr[r] = vtw[r] = Vt + (size_t)r * dv;
        ow[r] = O + (size_t)r * dv;
    }
    DCT_TRANSPOSE(cp, dk, kpad, ktw);
    /* K K^T and Q K^T, then A (strictly lower) and the decay mask on Q K^T */
    dct_gemm(c, cp, dk, false, k, ktr, aw, false, 0, 1, NULL);
    dct_gemm(c, cp, dk, false, q, ktr, qkw, false, 0, 1, NULL);
    for (int r = 0; r < c; r++)
        for (int s = 0; s < cp; s++) {
            if (s < r) {
                const float gm = expf(G[r] - G[s]);
                A[r * C + s] = beta[r] * A[r * C + s] * gm;
                QK[r * C + s] *= gm;
            } else {
                A[r * C + s] = 0;
                if (s > r) QK[r * C + s] = 0;
            }
        }
    /* T = (I + A)^-1 row by row: T_r = e_r - sum_{m<r} A_rm T_m (T_m is zero past m) */
    const int nz = cp / DCT_W;
    for (int r = 0; r < c; r++) {
        DCT_V t[C / DCT_W];
        for (int z = 0; z < nz; z++) t[z] = DCT_ZERO();
        for (int m = 0; m < r; m++) {
            const DCT_V a = DCT_SET1(A[r * C + m]);
            for (int z = 0; z < nz; z++) t[z] = DCT_FNMA(a, DCT_LOAD(T + m * C + DCT_W * z), t[z]);
        }
        for (int z = 0; z < nz; z++) DCT_STORE(T + r * C + DCT_W * z, t[z]);
        T[r * C + r] = 1;
    }
    for (int r = 0; r < c; r++)
        for (int s = 0; s < c; s++) {
            T[r * C + s] *= beta[s];
            Tbe[r * C + s] = T[r * C + s] * eg[s];
        }
    /* U = T diag(beta) V into Vt, W = T diag(beta exp G) K */
    dct_gemm(c, dv, c, true, tbr, v, vtw, false, 0, 1, NULL);
    dct_gemm(c, dk, c, true, tber, k, ww, false, 0, 1, NULL);
    DCT_TRANSPOSE(dv, dk, str, snw);
    /* Vt = U - W S, O = diag(exp G) Q S + (Q K^T o Gam) Vt */
    dct_gemm(c, dv, dk, false, wr, snr, vtw, true, 1, -1, NULL);
    dct_gemm(c, dv, dk, false, q, snr, ow, false, 0, 1, eg);
    dct_gemm(c, dv, c, true, qkr, vtr, ow, true, 1, 1, NULL);
    /* S' = exp(G_c) S + (diag(exp(G_c - G)) K)^T Vt */
    for (int i = 0; i < dk; i++)
        for (int r = 0; r < c; r++) KT[(size_t)i * C + r] *= coef[r];
    dct_gemm(dk, dv, c, false, ktr, vtr, snw, true, eg[c - 1], 1, NULL);
    DCT_TRANSPOSE(dk, dv, snr, stw);
}
