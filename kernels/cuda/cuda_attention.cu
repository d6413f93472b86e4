/* Simple, correct attention (kern_cuda.h): exact softmax in fp32 through a
 * scores scratch, queries in chunks so the scratch never holds more than
 * one chunk's scores. This is the reference of the GPU backend; the fast
 * ones are in kern_attn.h.
 *
 * For each chunk of `nq` queries, batched over heads (h = 0..heads-1):
 *   S_h (nq, Lk) fp32 = scale * Q_h K_h^T    cuBLASLt, A = q rows of head h
 *                                            (ld heads*hd, batch stride hd)
 *   P_h (nq, Lk) bf16 = softmax(S_h) per row exact: max, sum of exp, divide
 *   O_h (nq, hd) bf16 = P_h V_h              cuBLASLt, B = v stored (K, N)
 * Q_h, K_h, V_h, O_h are strided views of the (L, heads, hd) tensors, so
 * nothing is transposed or copied. Rows of S and P are padded to a multiple
 * of 8 elements (16 bytes of bf16) so every row start meets the 16-byte
 * alignment the GEMM asks for. */
#include <cuda_bf16.h>
#include <math.h>
#include <string.h>

#include "cuda_check.h"
#include "kern_cuda.h"
#include "layout.h"

#define SOFTMAX_THREADS 256

static int64_t att_ld(int64_t Lk) { return (Lk + 7) / 8 * 8; }
static size_t align256(size_t n) { return (n + 255) / 256 * 256; }

/* The planner owns the formula (it counts this scratch in a stage's
 * layout); the split below (s, then p at align256 of the scores) and the
 * row padding att_ld are the ones it describes. */
extern "C" size_t kern_cuda_attention_scratch_bytes(int64_t chunk, int64_t Lk, int64_t heads) {
  return plan_attn_scratch_bytes(chunk, Lk, heads);
}

/* Sum or max over the CTA in a fixed order; broadcast to all threads. */
__device__ float block_reduce(float v, float *red, int is_max) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int off = 16; off > 0; off >>= 1) {
    float o = __shfl_xor_sync(0xffffffffu, v, off);
    v = is_max ? fmaxf(v, o) : v + o;
  }
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float r = red[0];
  for (int i = 1; i < SOFTMAX_THREADS / 32; i++) r = is_max ? fmaxf(r, red[i]) : r + red[i];
  return r;
}

/* One CTA per score row. s (rows, ld) fp32 -> p (rows, ld) bf16, first Lk
 * columns; the padding columns of p are never read by the P V GEMM (its K
 * is Lk), so they are left alone. */
__global__ void softmax_rows_kernel(const float *s, __nv_bfloat16 *p, int64_t Lk, int64_t ld) {
  __shared__ float red[SOFTMAX_THREADS / 32];
  const float *sr = s + (int64_t)blockIdx.x * ld;   // (Lk)
  __nv_bfloat16 *pr = p + (int64_t)blockIdx.x * ld; // (Lk)
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < Lk; j += SOFTMAX_THREADS) m = fmaxf(m, sr[j]);
  m = block_reduce(m, red, 1);
  float z = 0.0f;
  for (int64_t j = threadIdx.x; j < Lk; j += SOFTMAX_THREADS) z += expf(sr[j] - m);
  z = block_reduce(z, red, 0);
  const float inv = 1.0f / z;
  for (int64_t j = threadIdx.x; j < Lk; j += SOFTMAX_THREADS)
    pr[j] = __float2bfloat16_rn(expf(sr[j] - m) * inv);
}

extern "C" void kern_cuda_attention(kern_cuda_gemm_ctx *ctx, const uint16_t *q,
                                    const uint16_t *k, const uint16_t *v, uint16_t *out,
                                    int64_t Lq, int64_t Lk, int64_t heads, int64_t hd,
                                    void *scratch, size_t scratch_bytes, cudaStream_t stream) {
  if (Lq < 1 || Lk < 1 || heads < 1 || hd < 1 || heads > INT32_MAX / hd)
    sp_fatal("attention: bad shape Lq %lld Lk %lld heads %lld hd %lld (need all >= 1)",
             (long long)Lq, (long long)Lk, (long long)heads, (long long)hd);
  if (hd % 8 != 0)
    sp_fatal("attention: head dim %lld is not a multiple of 8 (the per-head views of q, k, v "
             "must stay 16-byte aligned for the GEMM)",
             (long long)hd);
  if (((uintptr_t)scratch & 255u) != 0)
    sp_fatal("attention: scratch %p is not 256-byte aligned", scratch);
  const size_t one = kern_cuda_attention_scratch_bytes(1, Lk, heads);
  if (!scratch || scratch_bytes < one)
    sp_fatal("attention: scratch of %zu bytes is below the %zu bytes one query needs "
             "(Lk %lld, heads %lld)",
             scratch_bytes, one, (long long)Lk, (long long)heads);
  /* The largest chunk the scratch holds (the byte count is monotone in it). */
  int64_t chunk = (int64_t)(scratch_bytes / one);
  if (chunk > Lq) chunk = Lq;
  while (chunk > 1 && kern_cuda_attention_scratch_bytes(chunk, Lk, heads) > scratch_bytes)
    chunk--;
  if ((int64_t)chunk * heads > INT32_MAX)
    chunk = INT32_MAX / heads; /* one CTA per score row in the softmax grid */

  const int64_t ld = att_ld(Lk), row = heads * hd; /* row: ld of q, k, v, out */
  float *s = (float *)scratch; // (heads, chunk, ld) fp32
  __nv_bfloat16 *p =
      (__nv_bfloat16 *)((char *)scratch + align256((size_t)chunk * heads * ld * sizeof(float)));
  // p: (heads, chunk, ld) bf16
  const float scale = 1.0f / sqrtf((float)hd);

  for (int64_t q0 = 0; q0 < Lq; q0 += chunk) {
    const int64_t nq = Lq - q0 < chunk ? Lq - q0 : chunk;
    kern_cuda_matmul_params mp;
    memset(&mp, 0, sizeof mp);
    /* S_h = scale * Q_h K_h^T: A = Q_h (nq, hd), B = K_h stored (Lk, hd). */
    mp.a = q + q0 * row;
    mp.b = k;
    mp.d = s;
    mp.d_dtype = KERN_DTYPE_F32;
    mp.M = nq; mp.N = Lk; mp.K = hd;
    mp.lda = row; mp.ldb = row; mp.ldd = ld;
    mp.batch = heads;
    mp.stride_a = hd; mp.stride_b = hd; mp.stride_d = nq * ld;
    mp.alpha = scale;
    kern_cuda_matmul(ctx, &mp, stream);

    softmax_rows_kernel<<<(unsigned)(nq * heads), SOFTMAX_THREADS, 0, stream>>>(s, p, Lk, ld);
    CUDA_LAUNCH_CHECK();

    /* O_h = P_h V_h: A = P_h (nq, Lk), B = V_h stored (Lk, hd) = (K, N). */
    memset(&mp, 0, sizeof mp);
    mp.a = (const uint16_t *)p;
    mp.b = v;
    mp.d = out + q0 * row;
    mp.d_dtype = KERN_DTYPE_BF16;
    mp.M = nq; mp.N = hd; mp.K = Lk;
    mp.lda = ld; mp.ldb = row; mp.ldd = row;
    mp.b_kn = 1;
    mp.batch = heads;
    mp.stride_a = nq * ld; mp.stride_b = hd; mp.stride_d = hd;
    mp.alpha = 1.0f;
    kern_cuda_matmul(ctx, &mp, stream);
  }
}
