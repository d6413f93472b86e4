/* 8-bit attention on the Hopper kernel (kern_attn.h, --attn fa3-int8): the
 * scheme of SageAttention (Zhang et al. 2024) on fa3_kernel.cuh's QK8
 * configuration:
 *   1. K is smoothed: its mean over the tokens, per head and channel, is
 *      subtracted (q . (k - mean) differs from q . k by a constant per
 *      query row, which the softmax removes exactly; real models' keys
 *      share a large per-channel offset, which would otherwise use up the
 *      int8 range);
 *   2. Q (per tile of BM query rows and head) and smoothed K (per tile of
 *      BN keys and head) are quantised to int8, scale amax / 127, round to
 *      nearest even;
 *   3. S = Q K^T runs on the s8 wgmma (s32 accumulators, twice the bf16
 *      rate), scaled back by the two tiles' scales in the softmax; P and V
 *      stay bf16, and so does P V.
 * Why int8 for Q K^T and bf16 for P V: a CPU emulation on the tests'
 * inputs (launch/bench/dev/fa3_int8_emulation.py) puts e4m3 Q K^T at 4.7e-2
 * to 7.3e-2 relative L2 from fp32 attention (3 mantissa bits on peaked
 * scores), per-block int8 Q K^T with bf16 P V at 7.5e-3 to 1.1e-2, and any
 * e4m3 P V at 3.3e-2 or more (P's and V's own rounding, 2.5e-2 each on
 * mean-free values); the bound is 3e-2. The price: only S = Q K^T runs at
 * the 8-bit rate, so the kernel gains some 5-8% over bf16 fa3, not the
 * 1.5-2x of an all-fp8 kernel (fa3_fp8.cu, --attn fa3-fp8, is that form,
 * at the error above).
 * Determinism: the mean is summed in a fixed order (token chunks, then the
 * chunks in order), amax is a max, every other step elementwise; the kernel
 * is the fa3 kernel. So a rerun is bit-identical.
 * The int8 copies, scales and the mean live in the context, grown
 * (cudaMalloc) when a larger shape comes: setup, once per shape, as the
 * cuDNN attention's plan workspace is. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda_check.h"
#include "fa3_8bit.cuh"
#include "fa3_kernel.cuh"
#include "kern_attn.h"

/* The bf16 kernel's tiles with a 3-slot ring (the int8 K tiles are half
 * the size) and, at head dim 128, ping-pong: on an H100
 * (test_attention_bench --fa3-variants, the quantisation passes included)
 * 724 and 739 TFLOP/s at 32,760 and 75,600 tokens against 666 and 649
 * without it in the same run (the softmax's per-score work, fa3_fragment.cuh,
 * is short enough now that the two warpgroups' GEMMs collide unless their
 * turns alternate); head dim 64 (three consumers, no ping-pong): 593. */
typedef fa3_cfg<128, 128, 2, 3, true, true, true> fa3_int8_hd128;
typedef fa3_cfg<64, 128, 3, 3, true, false, true> fa3_int8_hd64;

#define FA3_QUANT_THREADS 128

/* ---- the quantisation passes -------------------------------------------- */

/* mean (heads, hd) = the chunks' sums (fa3_col_partial) in chunk order,
 * / Lk. Block head, thread d. */
__global__ void fa3_kmean_final(const float *__restrict__ part, int nchunks, int Lk, int heads,
                                int hd, float *__restrict__ mean) {
  const int h = blockIdx.x, d = threadIdx.x;
  float acc = 0.f;
  for (int c = 0; c < nchunks; c++) acc += part[((int64_t)c * heads + h) * hd + d];
  mean[h * hd + d] = acc / (float)Lk;
}

/* One tile of R rows of one head (block (tile, head)): x - mean (mean NULL:
 * x) to int8 at scale amax / 127 into q (same layout as x), the scale into
 * scale[head ntiles + tile]. HD / 8 threads share a row, 8 elements (16
 * bytes of bf16) each; the tile is read twice (amax, then the values), the
 * second time from L2. */
template <int HD>
__global__ void __launch_bounds__(FA3_QUANT_THREADS)
    fa3_quant_tiles(const __nv_bfloat16 *__restrict__ x, int L, int heads, int R,
                    const float *__restrict__ mean, int8_t *__restrict__ q,
                    float *__restrict__ scale, int ntiles) {
  __shared__ float red[FA3_QUANT_THREADS / 32];
  const int tile = blockIdx.x, h = blockIdx.y, tid = threadIdx.x;
  const int r0 = tile * R, rows = min(R, L - r0), n8 = rows * (HD / 8);
  const int c8 = tid % (HD / 8); /* this thread's 8 columns, the same in every row it takes */
  float mu[8];
#pragma unroll
  for (int e = 0; e < 8; e++) mu[e] = mean ? mean[h * HD + c8 * 8 + e] : 0.f;
  float amax = 0.f;
  for (int i = tid; i < n8; i += FA3_QUANT_THREADS) {
    const int r = r0 + i / (HD / 8);
    const uint4 u = *reinterpret_cast<const uint4 *>(x + ((int64_t)r * heads + h) * HD + c8 * 8);
    const __nv_bfloat16 *b = reinterpret_cast<const __nv_bfloat16 *>(&u);
#pragma unroll
    for (int e = 0; e < 8; e++) amax = fmaxf(amax, fabsf(__bfloat162float(b[e]) - mu[e]));
  }
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  if (tid % 32 == 0) red[tid / 32] = amax;
  __syncthreads();
#pragma unroll
  for (int w = 0; w < FA3_QUANT_THREADS / 32; w++) amax = fmaxf(amax, red[w]);
  const float inv = amax > 0.f ? 127.f / amax : 0.f;
  if (tid == 0) scale[(int64_t)h * ntiles + tile] = amax / 127.f;
  for (int i = tid; i < n8; i += FA3_QUANT_THREADS) {
    const int r = r0 + i / (HD / 8);
    const int64_t off = ((int64_t)r * heads + h) * HD + c8 * 8;
    const uint4 u = *reinterpret_cast<const uint4 *>(x + off);
    const __nv_bfloat16 *b = reinterpret_cast<const __nv_bfloat16 *>(&u);
    uint32_t w[2] = {0, 0};
#pragma unroll
    for (int e = 0; e < 8; e++) {
      int v = __float2int_rn((__bfloat162float(b[e]) - mu[e]) * inv);
      v = max(-127, min(127, v));
      w[e / 4] |= (uint32_t)(v & 0xff) << (8 * (e % 4));
    }
    *reinterpret_cast<uint2 *>(q + off) = make_uint2(w[0], w[1]);
  }
}

/* ---- the context ------------------------------------------------------------ */

void fa3_grow(void **buf, size_t *cap, size_t bytes) {
  if (bytes <= *cap) return;
  if (*buf) CUDA_CHECK(cudaFree(*buf));
  *buf = NULL;
  *cap = 0;
  CUDA_CHECK(cudaMalloc(buf, bytes));
  *cap = bytes;
}

extern "C" int kern_attn_fa3_int8_create(kern_attn_fa3_int8 **out) {
  char why[192];
  if (!kern_attn_fa3_available(why, sizeof why)) {
    sp_log_error("attention: the 8-bit attention (--attn fa3-int8, fa3-fp8) is not available: %s",
                 why);
    return SP_ERR_RUNTIME;
  }
  kern_attn_fa3_int8 *c = (kern_attn_fa3_int8 *)calloc(1, sizeof *c);
  if (!c) {
    sp_log_error("attention: out of host memory for the fa3-int8 context");
    return SP_ERR_RUNTIME;
  }
  *out = c;
  return SP_OK;
}

extern "C" void kern_attn_fa3_int8_destroy(kern_attn_fa3_int8 *c) {
  if (!c) return;
  void *b[FA3_8BIT_NBUF] = {c->q8, c->k8, c->qscale, c->kscale, c->part, c->kmean,
                            c->vt, c->vscale};
  for (int i = 0; i < FA3_8BIT_NBUF; i++)
    if (b[i]) CUDA_CHECK(cudaFree(b[i]));
  free(c);
}

extern "C" void kern_attn_fa3_int8_blocks(int64_t hd, int *bm, int *bn) {
  *bm = hd == 64 ? fa3_int8_hd64::BM : fa3_int8_hd128::BM;
  *bn = hd == 64 ? fa3_int8_hd64::BN : fa3_int8_hd128::BN;
}

void fa3_int8_quantize(kern_attn_fa3_int8 *c, const kern_attn_params *p, int bm, int bn,
                       fa3_qk8_inputs *in, cudaStream_t stream) {
  const int64_t H = p->heads, hd = p->hd;
  const int nqt = (int)((p->Lq + bm - 1) / bm), nkt = (int)((p->Lk + bn - 1) / bn);
  const int nch = fa3_col_chunks(p->Lk);
  fa3_grow((void **)&c->q8, &c->cap[0], (size_t)(p->Lq * H * hd));
  fa3_grow((void **)&c->k8, &c->cap[1], (size_t)(p->Lk * H * hd));
  fa3_grow((void **)&c->qscale, &c->cap[2], (size_t)(H * nqt) * sizeof(float));
  fa3_grow((void **)&c->kscale, &c->cap[3], (size_t)(H * nkt) * sizeof(float));
  fa3_grow((void **)&c->part, &c->cap[4], (size_t)(nch * H * hd) * sizeof(float));
  fa3_grow((void **)&c->kmean, &c->cap[5], (size_t)(H * hd) * sizeof(float));
  const __nv_bfloat16 *q = reinterpret_cast<const __nv_bfloat16 *>(p->q);
  const __nv_bfloat16 *k = reinterpret_cast<const __nv_bfloat16 *>(p->k);
  fa3_col_partial<false><<<dim3((unsigned)nch, (unsigned)H), (unsigned)hd, 0, stream>>>(
      k, (int)p->Lk, (int)H, (int)hd, c->part);
  CUDA_LAUNCH_CHECK();
  fa3_kmean_final<<<(unsigned)H, (unsigned)hd, 0, stream>>>(c->part, nch, (int)p->Lk, (int)H,
                                                            (int)hd, c->kmean);
  CUDA_LAUNCH_CHECK();
  void (*quant)(const __nv_bfloat16 *, int, int, int, const float *, int8_t *, float *, int) =
      hd == 64 ? fa3_quant_tiles<64> : fa3_quant_tiles<128>;
  quant<<<dim3((unsigned)nqt, (unsigned)H), FA3_QUANT_THREADS, 0, stream>>>(
      q, (int)p->Lq, (int)H, bm, NULL, c->q8, c->qscale, nqt);
  CUDA_LAUNCH_CHECK();
  quant<<<dim3((unsigned)nkt, (unsigned)H), FA3_QUANT_THREADS, 0, stream>>>(
      k, (int)p->Lk, (int)H, bn, c->kmean, c->k8, c->kscale, nkt);
  CUDA_LAUNCH_CHECK();
  in->q = c->q8;
  in->k = c->k8;
  in->qscale = c->qscale;
  in->kscale = c->kscale;
  in->vt = NULL; /* fa3_fp8_quantize_v */
  in->vscale = NULL;
  in->lk16 = 0;
}

extern "C" void kern_attn_fa3_int8_run(kern_attn_fa3_int8 *c, kern_attn_params p,
                                       cudaStream_t stream) {
  char why[192];
  if (!kern_attn_fa3_supported(&p, why, sizeof why)) sp_fatal("attention (fa3-int8): %s", why);
  if (p.hd == 128)
    fa3_8bit_launch<fa3_int8_hd128>(c, &p, stream);
  else
    fa3_8bit_launch<fa3_int8_hd64>(c, &p, stream);
}
