/*
 * delta_chunk.h - the chunk-wise Gated DeltaNet update in its plain form, included by
 * kernels_ref.c (DELTA_CHUNK_NAME names the function). The SIMD kernels run the same algebra as
 * register-tiled GEMMs (delta_chunk_tiled.h) and are checked against this one.
 *
 * One chunk of c tokens (rows) of one value head, in the WY form of model-formats.md §4.9, with St
 * the state transposed ([dv][dk], row j = column j of S):
 *   G = cumsum(g), Gam_rs = exp(G_r - G_s) (s <= r), A_rs = beta_r (k_r . k_s) Gam_rs (s < r),
 *   T = (I + A)^-1, U = T diag(beta) V, W = T diag(beta exp(G)) K, Vt = U - W S,
 *   O = diag(exp G) Q S + ((Q K^T) o Gam) Vt, S' = exp(G_c) S + (diag(exp(G_c - G)) K)^T Vt.
 * Every exponent is <= 0, so nothing overflows (underflow to 0 is harmless).
 */
/* Eight partial sums so the compiler can keep them in one vector register (strict IEEE
 * forbids reassociating a single running sum). n is a multiple of 8 for every Qwen shape. */
static inline float DELTA_CHUNK_DOT(const float *a, const float *b, int n) {
    float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) s[j] += a[i + j] * b[i + j];
    for (; i < n; i++) s[0] += a[i] * b[i];
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

void DELTA_CHUNK_NAME(int c, const float *const *q, const float *const *k, const float *const *v, const float *beta,
                      const float *g, float *St, int dk, int dv, float *O, float *ws);
void DELTA_CHUNK_NAME(int c, const float *const *q, const float *const *k, const float *const *v, const float *beta,
                      const float *g, float *St, int dk, int dv, float *O, float *ws) {
    const int C = ENG_DELTA_CHUNK;
    float *G = ws, *T = G + C, *QK = T + C * C, *W = QK + C * C, *Vt = W + (size_t)C * dk, *eg = Vt + (size_t)C * dv;
    float run = 0;
    for (int r = 0; r < c; r++) {
        run += g[r];
        G[r] = run;
        eg[r] = expf(run);
    }
    for (int r = 0; r < c; r++) {
        float Ar[ENG_DELTA_CHUNK];
        for (int s = 0; s < r; s++) Ar[s] = beta[r] * DELTA_CHUNK_DOT(k[r], k[s], dk) * expf(G[r] - G[s]);
        for (int s = 0; s <= r; s++) {
            float t = r == s ? 1.0f : 0.0f;
            for (int m = s; m < r; m++) t -= Ar[m] * T[m * C + s];
            T[r * C + s] = t;
        }
        for (int s = 0; s <= r; s++) QK[r * C + s] = DELTA_CHUNK_DOT(q[r], k[s], dk) * expf(G[r] - G[s]);
    }
    for (int r = 0; r < c; r++) {
        float *u = Vt + (size_t)r * dv, *w = W + (size_t)r * dk;
        for (int j = 0; j < dv; j++) u[j] = 0;
        for (int i = 0; i < dk; i++) w[i] = 0;
        for (int s = 0; s <= r; s++) {
            const float tb = T[r * C + s] * beta[s], tbe = tb * eg[s];
            const float *vs = v[s], *ks = k[s];
            for (int j = 0; j < dv; j++) u[j] += tb * vs[j];
            for (int i = 0; i < dk; i++) w[i] += tbe * ks[i];
        }
    }
    for (int r = 0; r < c; r++) {
        float *vt = Vt + (size_t)r * dv, *o = O + (size_t)r * dv;
        const float *w = W + (size_t)r * dk, *qr = q[r];
        for (int j = 0; j < dv; j++) {
            const float *Sj = St + (size_t)j * dk;
            vt[j] -= DELTA_CHUNK_DOT(w, Sj, dk);
            o[j] = eg[r] * DELTA_CHUNK_DOT(qr, Sj, dk);
        }
    }
    for (int r = 0; r < c; r++) {
        float *o = O + (size_t)r * dv;
        for (int s = 0; s <= r; s++) {
            const float w = QK[r * C + s];
            const float *vt = Vt + (size_t)s * dv;
            for (int j = 0; j < dv; j++) o[j] += w * vt[j];
        }
    }
    const float el = eg[c - 1];
    float coef[ENG_DELTA_CHUNK];
    for (int r = 0; r < c; r++) coef[r] = expf(G[c - 1] - G[r]);
    for (int j = 0; j < dv; j++) {
        float *Sj = St + (size_t)j * dk;
        for (int i = 0; i < dk; i++) Sj[i] *= el;
        for (int r = 0; r < c; r++) {
            const float f = coef[r] * Vt[(size_t)r * dv + j];
            const float *kr = k[r];
            for (int i = 0; i < dk; i++) Sj[i] += f * kr[i];
        }
    }
}
