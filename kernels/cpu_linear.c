/* CPU GEMM with bias: y = x @ w^T + b (PyTorch Linear layout).
 *
 * Why this shape of code: the linear layers dominate the CPU forward, and
 * the build is plain -O2 without -ffast-math, so the compiler only
 * vectorises loops whose floating-point order we spell out ourselves. We
 * therefore turn the dot products around into outer products: a panel of
 * LIN_NR rows of w is packed transposed (k-major, LIN_NR floats per k) into
 * a stack buffer, and a micro-kernel keeps a LIN_MR x LIN_NR tile of
 * outputs in registers, adding x[m, k] * wp[k, 0..NR) for k in increasing
 * order. The inner loop over the LIN_NR columns has a constant trip count
 * and no cross-lane dependency, so it vectorises without reassociation.
 *
 * Summation order of every output element (fixed, independent of threads,
 * tiles and which micro-kernel handled the row):
 *   y = b (or 0); for each K block [k0, k0+LIN_KC): s = 0; s += x*w for k in
 *   order; y += s.
 * Blocking over K bounds the partial sums, which also keeps the rounding
 * error nearer that of a blocked sum than of one long recursive sum.
 *
 * Threads split the output into fixed (M block, N group) tiles, so each
 * output element is owned by exactly one thread. */
#include "kern_cpu.h"

#include <string.h>

enum {
  LIN_MR = 4,   /* rows of x per micro-kernel tile */
  LIN_NR = 8,   /* rows of w (output columns) per packed panel */
  LIN_KC = 256, /* K block: the packed panels of one group stay in L1/L2 */
  LIN_NC = 32,  /* output columns per thread tile: LIN_NC / LIN_NR panels */
  LIN_MC = 64,  /* output rows per thread tile */
};

/* Packs w rows [n0, n0+nc) x cols [k0, k0+kc) into panels of LIN_NR rows,
 * each panel k-major: wp[(p * kc + k) * LIN_NR + j] = w[n0 + p*NR + j, k0 + k].
 * Columns past nc are zero so the micro-kernel never branches on them.
 * w (N, K); wp (LIN_NC / LIN_NR, kc, LIN_NR). */
static void lin_pack(const float *w, int64_t K, int64_t n0, int64_t nc, int64_t k0, int64_t kc,
                     float *wp) {
  int64_t panels = (nc + LIN_NR - 1) / LIN_NR;
  for (int64_t p = 0; p < panels; p++) {
    float *dst = wp + p * kc * LIN_NR;
    for (int j = 0; j < LIN_NR; j++) {
      int64_t n = p * LIN_NR + j;
      if (n < nc) {
        const float *src = w + (n0 + n) * K + k0;
        for (int64_t k = 0; k < kc; k++) dst[k * LIN_NR + j] = src[k];
      } else {
        for (int64_t k = 0; k < kc; k++) dst[k * LIN_NR + j] = 0.0f;
      }
    }
  }
}

/* LIN_MR rows: acc[i][j] = sum_k x[i, k] * wp[k, j] in increasing k.
 * x (LIN_MR rows, stride ldx, kc used); wp (kc, LIN_NR); acc (LIN_MR, LIN_NR).
 * The unroll pragmas matter: fully unrolled, the constant-indexed tile is
 * scalarised and vectorised into registers (8 SSE registers at -O2);
 * without them GCC keeps it on the stack and runs about 30% slower. */
static void lin_kernel_4(const float *x, int64_t ldx, const float *wp, int64_t kc,
                         float acc[LIN_MR][LIN_NR]) {
  float a[LIN_MR][LIN_NR] = {{0}};
  for (int64_t k = 0; k < kc; k++) {
    const float *wk = wp + k * LIN_NR;
#pragma GCC unroll 8
    for (int i = 0; i < LIN_MR; i++) {
      float v = x[i * ldx + k];
#pragma GCC unroll 8
      for (int j = 0; j < LIN_NR; j++) a[i][j] += v * wk[j];
    }
  }
  memcpy(acc, a, sizeof a);
}

/* One row, same order as lin_kernel_4 (used for the M tail).
 * x (kc); wp (kc, LIN_NR); acc (LIN_NR). */
static void lin_kernel_1(const float *x, const float *wp, int64_t kc, float acc[LIN_NR]) {
  float a0[LIN_NR] = {0};
  for (int64_t k = 0; k < kc; k++) {
    const float *wk = wp + k * LIN_NR;
    float v0 = x[k];
#pragma GCC unroll 8
    for (int j = 0; j < LIN_NR; j++) a0[j] += v0 * wk[j];
  }
  memcpy(acc, a0, sizeof a0);
}

void kern_cpu_linear(const float *x, const float *w, const float *b, float *y, int64_t M,
                     int64_t K, int64_t N) {
  if (M <= 0 || N <= 0) return;
  int64_t m_tiles = (M + LIN_MC - 1) / LIN_MC;
  int64_t n_tiles = (N + LIN_NC - 1) / LIN_NC;
  int64_t tiles = m_tiles * n_tiles;

#pragma omp parallel for schedule(static) if (tiles > 1 && M * K * N > (int64_t)1 << 16)
  for (int64_t t = 0; t < tiles; t++) {
    /* N group fastest: neighbouring tiles (one per thread) share rows of x. */
    int64_t m0 = (t / n_tiles) * LIN_MC, n0 = (t % n_tiles) * LIN_NC;
    int64_t mc = M - m0 < LIN_MC ? M - m0 : LIN_MC;
    int64_t nc = N - n0 < LIN_NC ? N - n0 : LIN_NC;
    int64_t panels = (nc + LIN_NR - 1) / LIN_NR;
    float wp[LIN_NC * LIN_KC]; /* (panels, kc, LIN_NR): 32 KiB of stack */
    float acc[LIN_MR][LIN_NR];

    for (int64_t m = m0; m < m0 + mc; m++) {
      float *yr = y + m * N + n0;
      if (b)
        memcpy(yr, b + n0, (size_t)nc * sizeof *yr);
      else
        memset(yr, 0, (size_t)nc * sizeof *yr);
    }
    for (int64_t k0 = 0; k0 < K; k0 += LIN_KC) {
      int64_t kc = K - k0 < LIN_KC ? K - k0 : LIN_KC;
      lin_pack(w, K, n0, nc, k0, kc, wp);
      int64_t m = m0;
      for (; m + LIN_MR <= m0 + mc; m += LIN_MR) {
        for (int64_t p = 0; p < panels; p++) {
          lin_kernel_4(x + m * K + k0, K, wp + p * kc * LIN_NR, kc, acc);
          int64_t ncols = nc - p * LIN_NR < LIN_NR ? nc - p * LIN_NR : LIN_NR;
          for (int i = 0; i < LIN_MR; i++) {
            float *yr = y + (m + i) * N + n0 + p * LIN_NR;
            for (int64_t j = 0; j < ncols; j++) yr[j] += acc[i][j];
          }
        }
      }
      for (; m < m0 + mc; m++) {
        for (int64_t p = 0; p < panels; p++) {
          lin_kernel_1(x + m * K + k0, wp + p * kc * LIN_NR, kc, acc[0]);
          int64_t ncols = nc - p * LIN_NR < LIN_NR ? nc - p * LIN_NR : LIN_NR;
          float *yr = y + m * N + n0 + p * LIN_NR;
          for (int64_t j = 0; j < ncols; j++) yr[j] += acc[0][j];
        }
      }
    }
  }
}
