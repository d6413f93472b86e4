/* The GPU's per-row fp8 quantiser (kern_cuda_quantize_fp8_rows, MODEL.md
 * "fp8 weights": a weight's output channels, an activation's tokens)
 * against the CPU's kern_fp8_quantize_rows, which the fp8 model files and
 * the CPU fp8 path use: the bytes and every row's scale must be equal,
 * from fp32 and from bf16 input (bf16-valued rows, so both sides quantise
 * the same numbers), for rows of very different magnitudes, an all-zero
 * row (scale 1), a row whose largest magnitude is negative, widths below,
 * at and above the block's 256 threads, and more rows than the grid's
 * blocks, the stage's widths up to the ffn hidden's 13,824 and one past
 * the widest row held in registers; a second call gives the same bytes. Fresh random inputs each run
 * (SP_SEED=n replays). Exit 77 with one line when there is no CUDA device. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kern_cuda.h"
#include "kern_dtype.h"

#define SP_TEST_CUDA
#include "sp_test.h"

static void *up(const void *h, size_t bytes) {
  void *d = NULL;
  CHECK_CUDA(cudaMalloc(&d, bytes));
  CHECK_CUDA(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
  return d;
}

/* x (rows, cols): each row normal values of its own magnitude, bf16-valued
 * when bf16; row 1 all zero, row 2's largest magnitude negative. */
static void fill_rows(float *x, int64_t rows, int64_t cols, int bf16) {
  for (int64_t r = 0; r < rows; r++) {
    const double mag = r == 1 ? 0.0 : ldexp(1.0, (int)sp_rand_int(-24, 24));
    for (int64_t i = 0; i < cols; i++) {
      float v = (float)(sp_rand_normal() * mag);
      x[r * cols + i] = bf16 ? kern_bf16_to_f32(kern_f32_to_bf16(v)) : v;
    }
  }
  if (rows > 2) x[2 * cols + cols / 2] = -1e3f * (float)ldexp(1.0, 24); /* exact in bf16 */
}

static void check_case(int64_t rows, int64_t cols, int bf16) {
  const int64_t n = rows * cols;
  float *x = sp_test_malloc((size_t)n * sizeof(float));
  fill_rows(x, rows, cols, bf16);
  uint8_t *want = sp_test_malloc((size_t)n), *got = sp_test_malloc((size_t)n);
  uint8_t *again = sp_test_malloc((size_t)n);
  float *want_s = sp_test_malloc((size_t)rows * sizeof(float));
  float *got_s = sp_test_malloc((size_t)rows * sizeof(float));
  kern_fp8_quantize_rows(x, rows, cols, want, want_s);
  void *dx;
  if (bf16) {
    uint16_t *b = sp_test_malloc((size_t)n * 2);
    kern_f32_to_bf16_n(x, b, (size_t)n);
    dx = up(b, (size_t)n * 2);
    free(b);
  } else {
    dx = up(x, (size_t)n * sizeof(float));
  }
  uint8_t *dq = NULL;
  float *ds = NULL;
  CHECK_CUDA(cudaMalloc((void **)&dq, (size_t)n));
  CHECK_CUDA(cudaMalloc((void **)&ds, (size_t)rows * sizeof(float)));
  const kern_dtype dt = bf16 ? KERN_DTYPE_BF16 : KERN_DTYPE_F32;
  kern_cuda_quantize_fp8_rows(dx, dt, rows, cols, dq, ds, 0);
  CHECK_CUDA(cudaMemcpy(got, dq, (size_t)n, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(got_s, ds, (size_t)rows * sizeof(float), cudaMemcpyDeviceToHost));
  kern_cuda_quantize_fp8_rows(dx, dt, rows, cols, dq, ds, 0);
  CHECK_CUDA(cudaMemcpy(again, dq, (size_t)n, cudaMemcpyDeviceToHost));
  int64_t bad = 0, bad_s = 0;
  for (int64_t i = 0; i < n; i++) bad += got[i] != want[i];
  for (int64_t r = 0; r < rows; r++) bad_s += got_s[r] != want_s[r];
  CHECK(bad == 0 && bad_s == 0, "%lld x %lld %s: %lld bytes and %lld scales differ from the CPU",
        (long long)rows, (long long)cols, bf16 ? "bf16" : "fp32", (long long)bad,
        (long long)bad_s);
  CHECK(memcmp(got, again, (size_t)n) == 0, "%lld x %lld: a second call differs",
        (long long)rows, (long long)cols);
  printf("quantize_fp8_rows %lld x %lld from %s: %lld bytes, %lld scales differ\n",
         (long long)rows, (long long)cols, bf16 ? "bf16" : "fp32", (long long)bad,
         (long long)bad_s);
  CHECK_CUDA(cudaFree(dx));
  CHECK_CUDA(cudaFree(dq));
  CHECK_CUDA(cudaFree(ds));
  free(x), free(want), free(got), free(again), free(want_s), free(got_s);
}

int main(void) {
  int ndev = 0;
  cudaError_t e = cudaGetDeviceCount(&ndev);
  if (e != cudaSuccess || ndev == 0) {
    printf("test_fp8_rows: skipped: no CUDA device (cudaGetDeviceCount: %s, %d devices)\n",
           e != cudaSuccess ? cudaGetErrorString(e) : "ok", ndev);
    return 77;
  }
  sp_test_begin("test_fp8_rows");
  /* bf16 rows of a multiple of 8 up to 32,768 wide run the row held in
   * registers (13,824: the ffn hidden, the last warp partly idle; 1,032:
   * likewise); 32,776 the two-pass kernel of 16-byte loads; 300 and 5 the
   * scalar one. */
  const int64_t shapes[][2] = {{3, 5},     {40, 256},   {7, 1536},  {5000, 300},
                               {9, 5120},  {33, 13824}, {11, 1032}, {3, 32776}};
  for (int s = 0; s < 8; s++)
    for (int bf16 = 0; bf16 < 2; bf16++) check_case(shapes[s][0], shapes[s][1], bf16);
  return sp_test_end();
}
