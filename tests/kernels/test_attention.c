/* kern_cpu_attention against a naive float64 softmax(q k^T / sqrt(hd)) v on
 * fresh random data: lengths that are not multiples of the 64-key tile,
 * rows = 1, Lk = 1, peaked scores (which exercise the online rescaling),
 * bit-identity for 1, 2 and 3 threads, and guard floats after out. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kern_cpu.h"
#include "sp_test.h"

#include <omp.h>

/* Token-major, heads interleaved: q (Lq, heads, hd), k, v (Lk, heads, hd). */
static void ref_attention(const float *q, const float *k, const float *v, double *out,
                          int64_t Lq, int64_t Lk, int64_t heads, int64_t hd) {
  for (int64_t h = 0; h < heads; h++)
    sp_test_attention_ref(q + h * hd, k + h * hd, v + h * hd, out + h * hd, Lq, Lk, hd,
                          heads * hd, heads * hd, 1);
}

/* amp scales q and k: amp 6 gives scores of tens, so the softmax is peaked
 * and the running max changes between tiles. */
static void check(int64_t Lq, int64_t Lk, int64_t heads, int64_t hd, double amp,
                  int threads_check) {
  int64_t nq = Lq * heads * hd, nk = Lk * heads * hd;
  float *q = sp_test_alloc(nq), *k = sp_test_alloc(nk), *v = sp_test_alloc(nk);
  float *out = sp_test_alloc(nq), *out2 = sp_test_alloc(nq);
  double *ref = sp_test_dalloc(nq);
  sp_rand_fill(q, nq, -amp, amp);
  sp_rand_fill(k, nk, -amp, amp);
  sp_rand_fill(v, nk, -1.0, 1.0);

  kern_cpu_attention(q, k, v, out, Lq, Lk, heads, hd);
  ref_attention(q, k, v, ref, Lq, Lk, heads, hd);
  double err = sp_test_rel_l2(out, ref, nq);
  CHECK(err <= SP_TEST_TOL_F32, "attention Lq=%lld Lk=%lld heads=%lld hd=%lld amp=%g: rel L2 %.3g",
           (long long)Lq, (long long)Lk, (long long)heads, (long long)hd, amp, err);
  CHECK(sp_test_guard_ok(out, nq), "attention Lq=%lld Lk=%lld: wrote past out", (long long)Lq,
           (long long)Lk);
  if (threads_check) {
    int nthreads = omp_get_max_threads();
    for (int t = 1; t <= 3; t++) {
      omp_set_num_threads(t);
      kern_cpu_attention(q, k, v, out2, Lq, Lk, heads, hd);
      CHECK(memcmp(out, out2, (size_t)nq * sizeof *out) == 0,
               "attention Lq=%lld Lk=%lld: %d threads differ from %d", (long long)Lq,
               (long long)Lk, t, nthreads);
    }
    omp_set_num_threads(nthreads);
  }
  printf("attention Lq=%lld Lk=%lld heads=%lld hd=%lld amp=%g: rel L2 %.2e\n", (long long)Lq,
         (long long)Lk, (long long)heads, (long long)hd, amp, err);
  free(q), free(k), free(v), free(out), free(out2), free(ref);
}

int main(void) {
  sp_test_begin("test_attention");
  static const int64_t shapes[][4] = {
      {1, 1, 1, 1},   {1, 5, 2, 8},    {3, 64, 1, 16},  {7, 65, 3, 13},  {17, 130, 2, 128},
      {64, 200, 2, 64}, {1, 513, 1, 128}, {100, 1, 2, 32}, {5, 512, 2, 128},
  };
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    check(shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3], 1.0, 0);
    check(shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3], 6.0, 0);
  }
  check(40, 300, 3, 128, 1.0, 1);
  check(40, 300, 3, 128, 6.0, 1);
  return sp_test_end();
}
