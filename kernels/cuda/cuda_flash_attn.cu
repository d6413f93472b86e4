/* Own flash attention (kern_attn.h): the launcher of the one instance of
 * the kernel (flash_attn_kernel.cuh, which says how it works) that ships,
 * "bc64-lazy": 4 warps (128 query rows) per CTA, 64-key tiles worked on
 * whole, O rescaled only when a row maximum grows. 254 registers, no spill
 * (ptxas -v, sm_90, CUDA 13.0), two CTAs per SM. It is the fastest of the
 * variants timed on the H200 (launch/bench/RESULTS.md, "Attention": 360.6
 * TFLOP/s at self-attention over 32,760 tokens, against 326.9 for the same
 * tiles with eager rescaling and 299-329 for the other tile shapes); the
 * others stay as benchmark variants in tests/gpu/dev/flash_variants.cu. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "cuda_check.h"
#include "flash_attn_kernel.cuh"
#include "kern_attn.h"

/* ---- launcher ----------------------------------------------------------- */

extern "C" int kern_attn_flash_supported(const kern_attn_params *p, char *why, size_t why_len) {
  char tmp[2];
  if (!why) {
    why = tmp;
    why_len = sizeof tmp;
  }
  if (p->hd != FA_HD) {
    snprintf(why, why_len, "head dim %lld: flash supports %d only", (long long)p->hd, FA_HD);
    return 0;
  }
  if (p->Lq < 1 || p->Lk < 1 || p->heads < 1) {
    snprintf(why, why_len, "Lq %lld, Lk %lld, heads %lld: all must be >= 1", (long long)p->Lq,
             (long long)p->Lk, (long long)p->heads);
    return 0;
  }
  /* 32-bit row indices in the kernel (offsets are 64-bit): Lq and Lk plus
   * one tile of the largest variant (the benchmark variants make this check
   * too) and heads * 128 below 2^31; heads is grid.y */
  if (p->Lq > 2147483647LL - FA_BR_MAX || p->Lk > 2147483647LL - FA_BC_MAX || p->heads > 65535) {
    snprintf(why, why_len, "Lq %lld, Lk %lld, heads %lld: beyond 2^31 - %d rows or 65535 heads",
             (long long)p->Lq, (long long)p->Lk, (long long)p->heads, FA_BR_MAX);
    return 0;
  }
  if (!p->q || !p->k || !p->v || !p->out) {
    snprintf(why, why_len, "a NULL q, k, v or out pointer");
    return 0;
  }
  if ((((uintptr_t)p->q | (uintptr_t)p->k | (uintptr_t)p->v | (uintptr_t)p->out) & 15u) != 0) {
    snprintf(why, why_len, "q, k, v, out must be 16-byte aligned (cp.async)");
    return 0;
  }
  if (!(p->scale >= 0.f) || isinf(p->scale)) { /* 0 means 1/sqrt(hd); NaN refused */
    snprintf(why, why_len, "scale %g: must be finite and > 0 (0 picks 1/sqrt(hd))",
             (double)p->scale);
    return 0;
  }
  int dev = 0, major = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) {
    (void)cudaGetLastError();
    snprintf(why, why_len, "no CUDA device");
    return 0;
  }
  if (major < 8) {
    snprintf(why, why_len, "device %d is sm_%d*: flash needs sm_80 or later (bf16 mma.sync)",
             dev, major);
    return 0;
  }
  return 1;
}

extern "C" void kern_attn_flash(kern_attn_params p, cudaStream_t stream) {
  char why[160];
  if (!kern_attn_flash_supported(&p, why, sizeof why)) sp_fatal("attention (flash): %s", why);
  fa_launch<4, 64, 64, true>(&p, stream);
}
