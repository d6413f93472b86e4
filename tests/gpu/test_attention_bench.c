/* Attention benchmark of our backends (issue 10): ms and TFLOP/s of the own
 * flash kernel (both tile widths) and cuDNN's fused attention at the Wan
 * shapes, 40 heads x 128: 32,760 and 75,600 tokens, self and cross (512
 * context rows). FLOPs = 4 * Lq * Lk * heads * 128.
 * Before timing, flash and cudnn outputs are compared (relative L2 between
 * them <= 2e-2, both bf16 paths of the same exact attention): a wrong
 * kernel is not timed as a fast one.
 *
 *   test_attention_bench           ctest mode: the 32,760 self shape only,
 *                                  3 timed runs, checks and table
 *   test_attention_bench --bench   all four shapes, 20 timed runs each
 * Output: a table (header lines start with '#') and one JSON line per
 * result prefixed "json ". launch/bench/bench_attention.sh runs this and
 * PyTorch's SDPA side by side. Exit 77 without a CUDA device. */
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kern_attn.h"
#include "kern_dtype.h"
#include "log.h"

#define SP_TEST_CUDA
#include "sp_check.h"

typedef struct bcase {
  int64_t Lq, Lk;
  const char *name;
} bcase;

/* Fills n bf16 values on the device with uniform [-a, a) numbers: a 1 Mi
 * random block made on the host (seeded, printed), copied over and over. */
static void fill_dev(uint16_t *d, int64_t n, float a, uint64_t *state) {
  enum { BLK = 1 << 20 };
  static uint16_t h[BLK];
  for (int i = 0; i < BLK; i++) {
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    float u = (float)((*state >> 40) & 0xffffff) / 16777216.0f;
    h[i] = kern_f32_to_bf16((2.f * u - 1.f) * a);
  }
  for (int64_t off = 0; off < n; off += BLK) {
    int64_t m = n - off < BLK ? n - off : BLK;
    CK(cudaMemcpy(d + off, h, (size_t)m * 2, cudaMemcpyHostToDevice));
  }
}

static double rel_l2_dev(const uint16_t *da, const uint16_t *db, int64_t n) {
  uint16_t *a = malloc((size_t)n * 2), *b = malloc((size_t)n * 2);
  if (!a || !b) {
    fprintf(stderr, "FAIL: out of host memory (%lld elements)\n", (long long)n);
    exit(1);
  }
  CK(cudaMemcpy(a, da, (size_t)n * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(b, db, (size_t)n * 2, cudaMemcpyDeviceToHost));
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; i++) {
    double x = kern_bf16_to_f32(a[i]), y = kern_bf16_to_f32(b[i]);
    num += (x - y) * (x - y);
    den += y * y;
  }
  free(a), free(b);
  return den > 0 ? sqrt(num / den) : sqrt(num);
}

typedef enum { B_FLASH64, B_FLASH32, B_CUDNN } bk;
static const char *bk_name[] = {"flash", "flash-bc32", "cudnn"};

/* ms per call averaged over iters, or -1 when cudnn refuses the shape. */
static double time_backend(bk b, kern_attn_cudnn *cd, kern_attn_params p, int iters,
                           cudaStream_t st) {
  setenv("STATICPIPE_FLASH_BC", b == B_FLASH32 ? "32" : "64", 1);
  for (int w = 0; w < 2; w++) {
    if (b == B_CUDNN) {
      if (kern_attn_cudnn_run(cd, p, st) != SP_OK) return -1;
    } else {
      kern_attn_flash(p, st);
    }
  }
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  CK(cudaEventRecord(e0, st));
  for (int i = 0; i < iters; i++) {
    if (b == B_CUDNN)
      (void)kern_attn_cudnn_run(cd, p, st); /* plan cached above: SP_OK */
    else
      kern_attn_flash(p, st);
  }
  CK(cudaEventRecord(e1, st));
  CK(cudaEventSynchronize(e1));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, e0, e1));
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  unsetenv("STATICPIPE_FLASH_BC");
  return ms / iters;
}

int main(int argc, char **argv) {
  int full = argc > 1 && strcmp(argv[1], "--bench") == 0;
  if (argc > 1 && !full) {
    fprintf(stderr, "usage: %s [--bench]\n", argv[0]);
    return 2;
  }
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    printf("skip: no CUDA device\n");
    return 77;
  }
  struct cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  if (prop.major < 8) {
    printf("skip: %s is sm_%d%d, the flash kernel needs sm_80 or later\n", prop.name, prop.major,
           prop.minor);
    return 77;
  }
  const char *env = getenv("KT_SEED");
  uint64_t seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL);
  static const bcase cases[] = {
      {32760, 32760, "self-32760"},
      {32760, 512, "cross-32760"},
      {75600, 75600, "self-75600"},
      {75600, 512, "cross-75600"},
  };
  const int ncases = full ? 4 : 1, iters = full ? 20 : 3;
  const int64_t heads = 40;
  kern_attn_cudnn *cd = NULL;
  if (kern_attn_cudnn_create(&cd) != SP_OK) cd = NULL; /* cause logged; flash rows only */
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  int fails = 0;
  printf("# attention benchmark, %s (sm_%d%d), cudnn %zu, heads %lld x %d, bf16, seed %llu\n",
         prop.name, prop.major, prop.minor, cd ? (size_t)cudnnGetVersion() : (size_t)0, (long long)heads,
         KERN_ATTN_HD, (unsigned long long)seed);
  printf("# %-12s %-12s %8s %8s %10s %10s\n", "case", "backend", "Lq", "Lk", "ms", "TFLOP/s");
  for (int c = 0; c < ncases; c++) {
    const bcase *bc = &cases[c];
    const int64_t nq = bc->Lq * heads * KERN_ATTN_HD, nk = bc->Lk * heads * KERN_ATTN_HD;
    uint16_t *q, *k, *v, *o1, *o2;
    CK(cudaMalloc((void **)&q, (size_t)nq * 2));
    CK(cudaMalloc((void **)&k, (size_t)nk * 2));
    CK(cudaMalloc((void **)&v, (size_t)nk * 2));
    CK(cudaMalloc((void **)&o1, (size_t)nq * 2));
    CK(cudaMalloc((void **)&o2, (size_t)nq * 2));
    uint64_t s = seed + (uint64_t)c;
    fill_dev(q, nq, 2.f, &s);
    fill_dev(k, nk, 2.f, &s);
    fill_dev(v, nk, 1.f, &s);
    kern_attn_params p = {q, k, v, o1, bc->Lq, bc->Lk, heads, KERN_ATTN_HD, 0.f};
    const double flop = 4.0 * (double)bc->Lq * (double)bc->Lk * (double)heads * KERN_ATTN_HD;
    /* agreement first: flash (each tile width) against cudnn */
    kern_attn_params p2 = p;
    p2.out = o2;
    int have_cudnn = cd && kern_attn_cudnn_run(cd, p2, st) == SP_OK;
    for (int b = B_FLASH64; b <= B_FLASH32 && have_cudnn; b++) {
      setenv("STATICPIPE_FLASH_BC", b == B_FLASH32 ? "32" : "64", 1);
      kern_attn_flash(p, st);
      unsetenv("STATICPIPE_FLASH_BC");
      CK(cudaStreamSynchronize(st));
      double d = rel_l2_dev(o1, o2, nq);
      printf("# %s: %s vs cudnn rel L2 %.3e\n", bc->name, bk_name[b], d);
      if (!(d <= 2e-2)) {
        fprintf(stderr, "FAIL %s: %s and cudnn disagree (rel L2 %.3e)\n", bc->name, bk_name[b], d);
        fails++;
      }
    }
    for (int b = B_FLASH64; b <= B_CUDNN; b++) {
      if (b == B_CUDNN && !have_cudnn) {
        printf("  %-12s %-12s %8lld %8lld %10s %10s\n", bc->name, bk_name[b], (long long)bc->Lq,
               (long long)bc->Lk, "refused", "-");
        continue;
      }
      double ms = time_backend((bk)b, cd, p, iters, st);
      double tf = flop / (ms * 1e-3) / 1e12;
      printf("  %-12s %-12s %8lld %8lld %10.3f %10.1f\n", bc->name, bk_name[b], (long long)bc->Lq,
             (long long)bc->Lk, ms, tf);
      printf("json {\"case\":\"%s\",\"backend\":\"%s\",\"Lq\":%lld,\"Lk\":%lld,\"heads\":%lld,"
             "\"hd\":%d,\"ms\":%.4f,\"tflops\":%.2f,\"gpu\":\"%s\"}\n",
             bc->name, bk_name[b], (long long)bc->Lq, (long long)bc->Lk, (long long)heads,
             KERN_ATTN_HD, ms, tf, prop.name);
      if (!(ms > 0)) {
        fprintf(stderr, "FAIL %s %s: no time measured\n", bc->name, bk_name[b]);
        fails++;
      }
    }
    CK(cudaFree(q));
    CK(cudaFree(k));
    CK(cudaFree(v));
    CK(cudaFree(o1));
    CK(cudaFree(o2));
  }
  kern_attn_cudnn_destroy(cd);
  CK(cudaStreamDestroy(st));
  if (!cd) {
    fprintf(stderr, "FAIL: no cudnn (see the log): the cudnn rows are missing\n");
    fails++;
  }
  return fails ? 1 : 0;
}
