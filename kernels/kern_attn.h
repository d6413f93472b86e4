/* Fast exact attention on the GPU: one call, several backends.
 *
 *   flash  our own flash-attention kernel (cuda/cuda_flash_attn.cu): tensor cores
 *          through mma.sync m16n8k16 bf16 -> fp32, so it runs on sm_80 and
 *          later (RTX 30/40, A100, H100/H200); online softmax in fp32, no
 *          L x L matrix, any Lq and Lk, head_dim 128.
 *   fa3    our own Hopper kernel (cuda/sm90a/): TMA, wgmma, warp
 *          specialisation, sm_90 only, head dim 64 or 128; where it cannot
 *          run (another GPU, a build without sm_90a) the context says why,
 *          once, and does what auto does. fa3-int8 is its 8-bit form
 *          (Q K^T in int8), fa3-fp8 its all-8-bit form (P V in e4m3 as
 *          well), each run only when asked for, on the shapes
 *          kern_attn_8bit_rule gives it (the long self-attention; the
 *          512-key cross-attention runs what auto runs).
 *   cudnn  cuDNN's fused attention built through the backend (graph) API
 *          (cuda/cuda_cudnn_attn.cu); plans are built once per shape and cached.
 *          When cuDNN is missing, too old, or refuses a shape, the call falls
 *          back to `flash` and logs why, once per shape.
 *   simple the correct-first reference of the CUDA backend
 *          (kern_cuda_attention in kern_cuda.h: cuBLASLt GEMMs and an exact
 *          softmax through a scores scratch).
 *   auto   fa3 on sm_90 (in a build with it) where it measured faster than
 *          cuDNN, head dim 128 with at least KERN_ATTN_FA3_MIN_KEYS keys
 *          (kern_attn_auto_rule, kern_attn_backend.h); elsewhere cudnn
 *          where cuDNN takes the shape, else flash. A fixed rule of the
 *          shape, so reruns and every rank and chunk run the same kernel
 *          (a timed pick would follow timing noise and break bit-identical
 *          results).
 *
 * Layout, the same as kern_cuda_attention: token-major with heads
 * interleaved, q (Lq, heads, hd), k, v (Lk, heads, hd), out (Lq, heads, hd),
 * all bf16 passed as uint16_t, row-major, contiguous. out = softmax(scale *
 * q k^T) v per head, no mask. Pointers 16-byte aligned (cudaMalloc: 256).
 *
 * Errors: a bad argument or a failed launch is a hot-path error (sp_fatal,
 * comm/log/log.h). Only the creation of a context returns a status. */
#ifndef KERN_ATTN_H
#define KERN_ATTN_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "kern_attn_backend.h"
#include "kern_cuda.h"

#ifdef __cplusplus
extern "C" {
#endif


/* The one parameter struct of the attention family, passed by value. */
typedef struct kern_attn_params {
  const uint16_t *q; /* (Lq, heads, hd) bf16 */
  const uint16_t *k; /* (Lk, heads, hd) bf16 */
  const uint16_t *v; /* (Lk, heads, hd) bf16 */
  uint16_t *out;     /* (Lq, heads, hd) bf16, must not alias q, k, v */
  int64_t Lq, Lk;    /* >= 1 */
  int64_t heads;     /* >= 1 */
  int64_t hd;        /* head dim: 128 is the one supported by flash/cudnn */
  float scale;       /* softmax scale; 0 means 1/sqrt(hd) */
} kern_attn_params;

/* Head dim the fast backends are built for. */
#define KERN_ATTN_HD 128

/* ---- own flash kernel (cuda/cuda_flash_attn.cu) ------------------------- */

/* Launches the flash kernel on `stream`. Needs sm_80 or later, hd 128,
 * Lq * heads * hd and Lk * heads * hd below 2^31 elements per tensor row
 * index (checked). Deterministic: a rerun is bit-identical. */
void kern_attn_flash(kern_attn_params p, cudaStream_t stream);

/* The checks kern_attn_flash makes, without launching: 1 when it can run
 * p on the current device, else 0 with the reason in why (may be NULL). */
int kern_attn_flash_supported(const kern_attn_params *p, char *why, size_t why_len);

/* The kernel that runs is one instance of a templated kernel
 * (cuda/cuda_flash_attn.cu says which and why); its variants for
 * benchmarks live in tests/gpu/dev/flash_variants.h. */

/* ---- own Hopper kernel (cuda/sm90a/fa3_attn.cu) ------------------------- */

/* The FlashAttention-3 style kernel (cuda/sm90a/fa3_kernel.cuh: TMA,
 * wgmma, warp specialisation, ping-pong, persistent CTAs), head dim 64 or
 * 128, any Lq and Lk. It runs on sm_90 (H100, H200) only, and only in a
 * build whose CUDA architectures include 90 (its wgmma code is sm_90a);
 * elsewhere kern_attn_fa3_supported says why not (a build without it has
 * cuda/nosm90a/fa3_attn_none.c). Deterministic: a rerun is bit-identical.
 * Launches on `stream`; a shape it cannot run is fatal. */
void kern_attn_fa3(kern_attn_params p, cudaStream_t stream);

/* The checks kern_attn_fa3 makes, without launching: 1 when it can run p
 * on the current device, else 0 with the reason in why (may be NULL). */
int kern_attn_fa3_supported(const kern_attn_params *p, char *why, size_t why_len);

/* The shape-free part of those checks: 1 when this build has the kernel and
 * the current device is sm_90, else 0 with the reason in why (may be NULL). */
int kern_attn_fa3_available(char *why, size_t why_len);

/* ---- 8-bit attention on the Hopper kernel (cuda/sm90a/fa3_int8.cu) ------ */

/* SageAttention's scheme on the fa3 kernel: K smoothed (its mean over the
 * tokens subtracted, per head and channel), Q and K quantised to int8 per
 * tile with scale amax / 127, S = Q K^T on the int8 tensor cores, softmax
 * in fp32, P and V bf16 (cuda/sm90a/fa3_int8.cu says why this split, by
 * the error measured against fp32 attention). Same shapes and devices as
 * kern_attn_fa3; deterministic. The context holds the 8-bit copies and
 * scales, grown (cudaMalloc) when a larger shape comes; fa3-fp8
 * (kern_attn_fa3_fp8_run) uses the same context. One per rank; not
 * thread-safe. */
typedef struct kern_attn_fa3_int8 kern_attn_fa3_int8;

/* SP_OK with *out set, or SP_ERR_RUNTIME logged with the reason fa3 is not
 * available (kern_attn_fa3_available), *out untouched. */
int kern_attn_fa3_int8_create(kern_attn_fa3_int8 **out);
void kern_attn_fa3_int8_destroy(kern_attn_fa3_int8 *c);

/* Runs p (bf16 in, bf16 out) on `stream`; a shape kern_attn_fa3 refuses is
 * fatal. */
void kern_attn_fa3_int8_run(kern_attn_fa3_int8 *c, kern_attn_params p, cudaStream_t stream);

/* The query rows (*bm) and keys (*bn) per int8 tile, each with its own
 * scale, of the configuration kern_attn_fa3_int8_run (and
 * kern_attn_fa3_fp8_run) uses for head dim hd (for the tests' CPU
 * emulation of the scheme). */
void kern_attn_fa3_int8_blocks(int64_t hd, int *bm, int *bn);
/* 1 when kern_attn_fa3_fp8_run's kernel for head dim hd takes the softmax's
 * row sum l over the e4m3 P that P V uses (added on the tensor core, each
 * key tile's P V added to O in fp32), 0 when l adds the unrounded fp32 P
 * (for the tests' CPU form of the scheme). */
int kern_attn_fa3_fp8_l_e4m3(int64_t hd);

/* All-8-bit attention (cuda/sm90a/fa3_fp8.cu, --attn fa3-fp8): fa3-int8's
 * Q K^T, then P and V in e4m3 (V per head and channel, scale amax / 448;
 * P scaled by 2^8) and P V on the fp8 tensor cores, fp32 accumulation,
 * bf16 out. Runs p on `stream` with the context of
 * kern_attn_fa3_int8_create; a shape kern_attn_fa3 refuses is fatal.
 * Deterministic. */
void kern_attn_fa3_fp8_run(kern_attn_fa3_int8 *c, kern_attn_params p, cudaStream_t stream);

/* ---- cuDNN fused attention (cuda/cuda_cudnn_attn.cu) -------------------- */

/* A cuDNN handle, its workspace, and the execution plan built for each
 * shape. One per rank and stream user; not thread-safe. */
typedef struct kern_attn_cudnn kern_attn_cudnn;

/* SP_OK with *out set, or SP_ERR_RUNTIME (logged with the cause: no
 * libcudnn at run time, version below 9.0, no device) with *out untouched. */
int kern_attn_cudnn_create(kern_attn_cudnn **out);
void kern_attn_cudnn_destroy(kern_attn_cudnn *c);

/* Runs p through cuDNN on `stream`: SP_OK, or SP_ERR_RUNTIME when cuDNN
 * refuses the shape (no engine builds a plan for it; logged once per shape,
 * nothing launched, the caller falls back). A failure to launch a plan that
 * was built is fatal. */
int kern_attn_cudnn_run(kern_attn_cudnn *c, kern_attn_params p, cudaStream_t stream);

/* ---- the one call ------------------------------------------------------- */

typedef struct kern_attn_ctx kern_attn_ctx;

/* want: the backend asked for (--attn). gemm: the GEMM context the simple
 * backend uses (may be NULL unless want is KERN_ATTN_SIMPLE). cuDNN is tried
 * for cudnn, auto and fa3; when it cannot be created the context still
 * works and runs flash, with the reason logged once. fa3 where the build or
 * the GPU has no fa3 (kern_attn_fa3_available) is logged once and runs what
 * auto runs; so does a shape fa3 refuses (logged once per context). auto
 * uses fa3 where its rule says so and the build and GPU have it, silently
 * otherwise. fa3-int8 and fa3-fp8 have no fallback: the context is refused
 * (SP_ERR_RUNTIME, the requirement logged) where they are not available,
 * and a shape kern_attn_8bit_rule gives the 8-bit kernel and it refuses is
 * fatal at kern_attn_run; the shapes the rule gives to cudnn run what auto
 * runs there (cuDNN is tried for it too). SP_OK or SP_ERR_RUNTIME. */
int kern_attn_ctx_create(kern_attn_backend want, kern_cuda_gemm_ctx *gemm, kern_attn_ctx **out);
void kern_attn_ctx_destroy(kern_attn_ctx *ctx);

/* Attention with the context's backend. scratch/scratch_bytes are used by
 * the simple backend only (kern_cuda_attention_scratch_bytes; NULL, 0 are
 * fine for the others). */
void kern_attn_run(kern_attn_ctx *ctx, kern_attn_params p, void *scratch, size_t scratch_bytes,
                   cudaStream_t stream);

/* The backend the context used for the last kern_attn_run (never AUTO):
 * for logs, the benchmark, and the tests of the fallback. */
kern_attn_backend kern_attn_ctx_last(const kern_attn_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif
