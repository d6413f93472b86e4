/* The Hopper attention backend (kern_attn.h, --attn fa3): the checks, the
 * tensor maps, and the launch of the one shipped configuration per head dim
 * of the kernel template in fa3_kernel.cuh (which says how it works).
 * Compiled for sm_90a alone; a build without 90 among its CUDA
 * architectures gets nosm90a/fa3_attn_none.c instead.
 *
 * Shipped, the fastest of the variants timed on an H100 (tests/gpu/dev/
 * sm90a/fa3_variants.cu; test_attention_bench --fa3-variants, 40 heads):
 * - head dim 128: 128 query rows per tile (two consumer warpgroups),
 *   128-key tiles in a 2-slot ring, intra-warpgroup overlap, no ping-pong,
 *   a persistent grid: 671-676 TFLOP/s at 32,760 and 75,600 tokens, 510 at
 *   32,760 x 512 (cuDNN in the same run 594, 546, 492). Ping-pong on top
 *   of the overlap measured 1-2% slower; 176-key tiles 1-2% faster on self
 *   attention and 10% slower on the cross shape;
 * - head dim 64: 192 query rows per tile (three consumers), otherwise the
 *   same: 544-566 TFLOP/s at 32,760 tokens against 468-482 with two.
 * Variants with the same head dim and key tile give the same bits. */
#include <cuda.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "cuda_check.h"
#include "fa3_kernel.cuh"
#include "kern_attn.h"

typedef fa3_cfg<128, 128, 2, 2, true, false> fa3_ship_hd128;
typedef fa3_cfg<64, 128, 3, 2, true, false> fa3_ship_hd64;

/* ---- driver entry point and device facts ---------------------------------- */

static PFN_cuTensorMapEncodeTiled_v12000 fa3_encode_fn(void) {
  static PFN_cuTensorMapEncodeTiled_v12000 fn; /* found once per process */
  if (!fn) {
    void *f = NULL;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    cudaError_t e = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000,
                                                     cudaEnableDefault, &q);
    if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || !f)
      sp_fatal("attention (fa3): the driver has no cuTensorMapEncodeTiled (cuda error %d: %s, "
               "query result %d); it needs a CUDA 12.0 or later driver",
               (int)e, cudaGetErrorString(e), (int)q);
    fn = (PFN_cuTensorMapEncodeTiled_v12000)f;
  }
  return fn;
}

void fa3_encode_2d(CUtensorMap *map, const void *ptr, int64_t cols, int64_t rows, int elem_bytes,
                   int box_cols, int box_rows, const char *what) {
  /* dim 0: cols elements of one row (contiguous); dim 1: rows, cols *
   * elem_bytes bytes apart (a multiple of 16, as the copy engine asks); the
   * box's row (128 or 64 bytes) is the swizzle span */
  const cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows};
  const cuuint64_t strides[1] = {(cuuint64_t)(cols * elem_bytes)};
  const cuuint32_t box[2] = {(cuuint32_t)box_cols, (cuuint32_t)box_rows};
  const cuuint32_t estr[2] = {1, 1};
  const int row_bytes = box_cols * elem_bytes;
  CUresult r = fa3_encode_fn()(
      map, elem_bytes == 2 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_UINT8, 2,
      (void *)ptr, dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
      row_bytes == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    sp_fatal("attention (fa3): cuTensorMapEncodeTiled refused %s (%p, %lld rows x %lld columns, "
             "%d-byte elements, box %d x %d): CUresult %d",
             what, ptr, (long long)rows, (long long)cols, elem_bytes, box_cols, box_rows, (int)r);
}

void fa3_encode_map(CUtensorMap *map, const void *ptr, int64_t rows, int64_t heads, int hd,
                    int elem_bytes, int box_cols, int box_rows, const char *what) {
  fa3_encode_2d(map, ptr, heads * hd, rows, elem_bytes, box_cols, box_rows, what);
}

int fa3_sm_count(void) {
  enum { MAXDEV = 64 };
  static int sms[MAXDEV]; /* per device, read once */
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  if (dev >= 0 && dev < MAXDEV && sms[dev] > 0) return sms[dev];
  int n = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
  if (dev >= 0 && dev < MAXDEV) sms[dev] = n;
  return n;
}

/* ---- the backend ------------------------------------------------------------- */

extern "C" int kern_attn_fa3_supported(const kern_attn_params *p, char *why, size_t why_len) {
  char tmp[2];
  if (!why) {
    why = tmp;
    why_len = sizeof tmp;
  }
  if (p->hd != 128 && p->hd != 64) {
    snprintf(why, why_len, "head dim %lld: fa3 supports 64 and 128", (long long)p->hd);
    return 0;
  }
  if (p->Lq < 1 || p->Lk < 1 || p->heads < 1) {
    snprintf(why, why_len, "Lq %lld, Lk %lld, heads %lld: all must be >= 1", (long long)p->Lq,
             (long long)p->Lk, (long long)p->heads);
    return 0;
  }
  /* 32-bit tile and row arithmetic in the kernel (offsets are 64-bit):
   * rows plus one tile, and the tile count, below 2^31 */
  const int64_t lim = 2147483647LL - 256;
  if (p->Lq > lim || p->Lk > lim || p->heads > 65535 || (p->Lq + 127) / 128 * p->heads > lim) {
    snprintf(why, why_len, "Lq %lld, Lk %lld, heads %lld: beyond 2^31 - 256 rows or tiles, or "
             "65535 heads", (long long)p->Lq, (long long)p->Lk, (long long)p->heads);
    return 0;
  }
  if (!p->q || !p->k || !p->v || !p->out) {
    snprintf(why, why_len, "a NULL q, k, v or out pointer");
    return 0;
  }
  if ((((uintptr_t)p->q | (uintptr_t)p->k | (uintptr_t)p->v | (uintptr_t)p->out) & 15u) != 0) {
    snprintf(why, why_len, "q, k, v, out must be 16-byte aligned (tensor maps)");
    return 0;
  }
  if (!(p->scale >= 0.f) || isinf(p->scale)) { /* 0 means 1/sqrt(hd); NaN refused */
    snprintf(why, why_len, "scale %g: must be finite and > 0 (0 picks 1/sqrt(hd))",
             (double)p->scale);
    return 0;
  }
  return kern_attn_fa3_available(why, why_len);
}

extern "C" int kern_attn_fa3_available(char *why, size_t why_len) {
  char tmp[2];
  if (!why) {
    why = tmp;
    why_len = sizeof tmp;
  }
  int dev = 0, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
    (void)cudaGetLastError();
    snprintf(why, why_len, "no CUDA device");
    return 0;
  }
  if (major != 9 || minor != 0) {
    snprintf(why, why_len,
             "device %d is sm_%d%d: fa3 runs on sm_90 (H100, H200) only, its wgmma code is "
             "built for sm_90a",
             dev, major, minor);
    return 0;
  }
  return 1;
}

extern "C" void kern_attn_fa3(kern_attn_params p, cudaStream_t stream) {
  char why[192];
  if (!kern_attn_fa3_supported(&p, why, sizeof why)) sp_fatal("attention (fa3): %s", why);
  if (p.hd == 128)
    fa3_launch<fa3_ship_hd128>(&p, 1, stream);
  else
    fa3_launch<fa3_ship_hd64>(&p, 1, stream);
}
