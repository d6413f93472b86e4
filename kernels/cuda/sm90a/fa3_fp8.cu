/* All-8-bit attention on the Hopper kernel (kern_attn.h, --attn fa3-fp8):
 * fa3-int8's Q K^T (fa3_int8.cu: K smoothed, Q and K int8 per tile, S on
 * the s8 wgmma) and P V on the e4m3 wgmma, fa3_kernel.cuh's PV8
 * configuration:
 *   1. V is quantised per (head, channel): sv = amax over that head's keys
 *      of |v| in that channel / 448 (1 for an all-zero channel), code =
 *      e4m3(v 448 / amax) rounded to nearest even, saturating; written
 *      transposed, V^T (heads, HD, Lk16) with Lk16 = Lk rounded up to 16
 *      (the tensor map's rows must be 16-byte multiples), keys at or past
 *      Lk zero, and the keys of each group of 16 in the order
 *      KERN_ATTN_FP8_SLOT (kern_attn_backend.h), so that the consumer's S
 *      accumulator converted to e4m3 in place is the A fragment of the
 *      8-bit wgmma;
 *   2. P = 2^8 2^(s - m) (the running max m subtracted, fa3_fragment.cuh
 *      fa3_softmax_s8 with PLOG2 8) is rounded to e4m3 (nearest even); the
 *      power-of-two factor is exact and puts weights down to 2^-14 in
 *      e4m3's normal range (256, not 448: 448 would add an fp32 rounding
 *      to every P and a correction at the end for 1.75x more range); l
 *      sums the scaled P, so O / l needs no correction;
 *   3. P V on e4m3 wgmmas; the output is (O / l) sv per channel, applied
 *      at the store. Head dim 128 (two consumers, fa3_cfg::PVT): each key
 *      tile's P V on m64n136k32 into a fresh accumulator, added to O in
 *      fp32 (the fp8 wgmma's own accumulation keeps about 13 mantissa
 *      bits), its 8 more columns giving l as the sum of the e4m3 P itself
 *      (no fp32 add per score); head dim 64 (three consumers, no registers
 *      for a second accumulator): O += P V on m64n64k32 and l the fp32
 *      sum of the unrounded P.
 * Error: a CPU emulation (launch/bench/dev/fa3_int8_emulation.py, row
 * "int8 Q K per block, e4m3 P, e4m3 V per channel": P at 448 under the
 * row's final max) predicts 3.3e-2 relative L2 from fp32 attention on the
 * tests' uniform inputs (P's and V's own e4m3 rounding, 3 mantissa bits,
 * on mean-free values) and 3.2e-3 on model-shaped ones; this scheme's exact
 * CPU form (tests/common/sp_test_attn8.c, sp_test_attn_fp8) gives 3.0-3.1e-2
 * on the former, fa3-int8's P V in bf16 0.6-1.4e-2. The gain: P V at twice
 * the bf16 wgmma rate, so both GEMMs run at the 8-bit rate.
 * Determinism: amax is a max, every other step of the passes elementwise;
 * the kernel is the fa3 kernel. A rerun is bit-identical. */
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "cuda_check.h"
#include "fa3_8bit.cuh"
#include "fa3_kernel.cuh"
#include "kern_attn.h"

/* fa3-int8's shipped tiles, ring (3 slots; the V^T slots are half the
 * bf16 ones too) and ping-pong at head dim 128 (838 and 847 TFLOP/s at
 * 32,760 and 75,600 tokens on an H100 against 834 and 823 without). */
typedef fa3_cfg<128, 128, 2, 3, true, true, true, false, true> fa3_fp8_hd128;
typedef fa3_cfg<64, 128, 3, 3, true, false, true, false, true> fa3_fp8_hd64;

/* Threads of the V^T pass, keys per V^T block (one key tile: a row of 128
 * bytes per channel). */
#define FA3_VT_THREADS 256
#define FA3_VT_KEYS 128

/* ---- the V passes ----------------------------------------------------------- */

/* vs (2, heads, hd): [0] the scales amax / 448 (1 where amax is 0), [1]
 * amax, the max of the chunks' maxima (fa3_col_partial). Block head,
 * thread d. */
__global__ void fa3_vamax_final(const float *__restrict__ part, int nchunks, int heads, int hd,
                                float *__restrict__ vs) {
  const int h = blockIdx.x, d = threadIdx.x;
  float amax = 0.f;
  for (int c = 0; c < nchunks; c++) amax = fmaxf(amax, part[((int64_t)c * heads + h) * hd + d]);
  vs[h * hd + d] = amax > 0.f ? amax / 448.f : 1.f;
  vs[(int64_t)heads * hd + h * hd + d] = amax;
}

/* One tile of FA3_VT_KEYS keys of one head (block (tile, head)) to V^T:
 * vt[(head HD + d) lk16 + position] = e4m3(v[key, head, d] 448 / amax[d]),
 * position = the key's 16-group base + KERN_ATTN_FP8_SLOT(key % 16), zero
 * for keys at or past Lk, nothing at or past lk16. Read coalesced (8
 * channels of a key a thread), transposed through shared memory, written
 * as rows of 128 bytes. amax: (heads, HD). */
template <int HD>
__global__ void __launch_bounds__(FA3_VT_THREADS)
    fa3_vt_tiles(const __nv_bfloat16 *__restrict__ v, int Lk, int heads, int64_t lk16,
                 const float *__restrict__ amax, uint8_t *__restrict__ vt) {
  constexpr int PITCH = FA3_VT_KEYS + 4; /* bytes per channel row in shared memory */
  __shared__ __align__(16) uint8_t tr[HD * PITCH];
  static_assert(FA3_VT_THREADS % (HD / 8) == 0, "a thread keeps its 8 channels");
  const int tile = blockIdx.x, h = blockIdx.y, tid = threadIdx.x;
  const int c8 = tid % (HD / 8); /* this thread's 8 channels, the same for every key it takes */
  float inv[8];
#pragma unroll
  for (int e = 0; e < 8; e++) {
    const float a = amax[h * HD + c8 * 8 + e];
    inv[e] = a > 0.f ? 448.f / a : 0.f;
  }
  for (int i = tid; i < FA3_VT_KEYS * (HD / 8); i += FA3_VT_THREADS) {
    const int kl = i / (HD / 8), key = tile * FA3_VT_KEYS + kl;
    const int pos = (kl & ~15) + KERN_ATTN_FP8_SLOT(kl & 15);
    uint4 u = make_uint4(0, 0, 0, 0);
    if (key < Lk)
      u = *reinterpret_cast<const uint4 *>(v + ((int64_t)key * heads + h) * HD + c8 * 8);
    const __nv_bfloat16 *b = reinterpret_cast<const __nv_bfloat16 *>(&u);
#pragma unroll
    for (int e = 0; e < 8; e++)
      tr[(c8 * 8 + e) * PITCH + pos] = (uint8_t)__nv_cvt_float_to_fp8(
          __bfloat162float(b[e]) * inv[e], __NV_SATFINITE, __NV_E4M3);
  }
  __syncthreads();
  constexpr int WORDS = FA3_VT_KEYS / 4; /* 4-byte words per channel row */
  for (int i = tid; i < HD * WORDS; i += FA3_VT_THREADS) {
    const int d = i / WORDS, w = i % WORDS;
    const int64_t col = (int64_t)tile * FA3_VT_KEYS + 4 * w;
    if (col < lk16)
      *reinterpret_cast<uint32_t *>(vt + ((int64_t)h * HD + d) * lk16 + col) =
          *reinterpret_cast<const uint32_t *>(tr + d * PITCH + 4 * w);
  }
}

void fa3_fp8_quantize_v(kern_attn_fa3_int8 *c, const kern_attn_params *p, fa3_qk8_inputs *in,
                        cudaStream_t stream) {
  const int64_t H = p->heads, hd = p->hd, lk16 = (p->Lk + 15) / 16 * 16;
  const int nch = fa3_col_chunks(p->Lk);
  const int ntile = (int)((p->Lk + FA3_VT_KEYS - 1) / FA3_VT_KEYS);
  fa3_grow((void **)&c->part, &c->cap[4], (size_t)(nch * H * hd) * sizeof(float));
  fa3_grow((void **)&c->vt, &c->cap[6], (size_t)(H * hd * lk16));
  fa3_grow((void **)&c->vscale, &c->cap[7], (size_t)(2 * H * hd) * sizeof(float));
  const __nv_bfloat16 *v = reinterpret_cast<const __nv_bfloat16 *>(p->v);
  fa3_col_partial<true><<<dim3((unsigned)nch, (unsigned)H), (unsigned)hd, 0, stream>>>(
      v, (int)p->Lk, (int)H, (int)hd, c->part);
  CUDA_LAUNCH_CHECK();
  fa3_vamax_final<<<(unsigned)H, (unsigned)hd, 0, stream>>>(c->part, nch, (int)H, (int)hd,
                                                            c->vscale);
  CUDA_LAUNCH_CHECK();
  void (*tiles)(const __nv_bfloat16 *, int, int, int64_t, const float *, uint8_t *) =
      hd == 64 ? fa3_vt_tiles<64> : fa3_vt_tiles<128>;
  tiles<<<dim3((unsigned)ntile, (unsigned)H), FA3_VT_THREADS, 0, stream>>>(
      v, (int)p->Lk, (int)H, lk16, c->vscale + H * hd, c->vt);
  CUDA_LAUNCH_CHECK();
  in->vt = c->vt;
  in->vscale = c->vscale;
  in->lk16 = lk16;
}

/* The tests' CPU form takes the tiles from kern_attn_fa3_int8_blocks. */
static_assert(fa3_fp8_hd128::BM == 128 && fa3_fp8_hd128::BN == 128 &&
                  fa3_fp8_hd64::BM == 192 && fa3_fp8_hd64::BN == 128,
              "fa3-fp8's tiles are fa3-int8's (kern_attn_fa3_int8_blocks)");

extern "C" int kern_attn_fa3_fp8_l_e4m3(int64_t hd) {
  return hd == 64 ? fa3_fp8_hd64::PVT : fa3_fp8_hd128::PVT;
}

extern "C" void kern_attn_fa3_fp8_run(kern_attn_fa3_int8 *c, kern_attn_params p,
                                      cudaStream_t stream) {
  char why[192];
  if (!kern_attn_fa3_supported(&p, why, sizeof why)) sp_fatal("attention (fa3-fp8): %s", why);
  if (p.hd == 128)
    fa3_8bit_launch<fa3_fp8_hd128>(c, &p, stream);
  else
    fa3_8bit_launch<fa3_fp8_hd64>(c, &p, stream);
}
