/* cuDNN fused attention through the backend (graph) API, and the one
 * attention call that picks among cudnn, flash, simple, fa3, fa3-int8 and fa3-fp8
 * (kern_attn.h; the graph builders are cudnn_graph.cu, the plan cache
 * cudnn_attn_plan.cu).
 *
 * The graph for a shape is built once and its execution plan cached. Three
 * forms are tried in order, the first one an engine accepts is kept:
 *   1. the single SDPA forward node (CUDNN_BACKEND_OPERATION_SDPA_FWD_-
 *      DESCRIPTOR) of recent cuDNN; older libraries refuse the descriptor;
 *   2. the flash pattern of generic operations that cuDNN's fused-attention
 *      engine recognises: S = Q K^T (matmul), S * scale, M = rowmax,
 *      E = exp(S - M), Z = rowsum(E), P = E / Z, O = P V (matmul);
 *   3. the same with the softmax statistics M + log Z as a real output (the
 *      training form; some versions only fuse that one).
 * All intermediates are virtual fp32, so nothing of size Lq x Lk is ever
 * stored. Only attributes that cuDNN 9.0 already had are used outside form
 * 1, which is only a first try: the library a machine loads may be older
 * than the headers the build used (DESIGN.md "Running on a GPU machine").
 *
 * Tensors are described in cuDNN's (batch, heads, seq, hd) order with our
 * token-major strides: element (0, h, s, d) of q sits at (s * heads + h) *
 * hd + d, so the strides are (L*heads*hd, hd, heads*hd, 1); K^T is the same
 * memory with the last two dims swapped. */
#include <cuda_runtime.h>
#include <cudnn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_check.h"
#include "cudnn_attn_plan.cuh"
#include "kern_attn.h"

enum { UID_Q = 1, UID_K = 2, UID_V = 3, UID_O = 4, UID_SCALE = 5, UID_STATS = 6, UID_VIRT = 100 };

struct kern_attn_cudnn {
  att_engine e;
};

/* The operations of form 1, 2 or 3 for the plan's shape into ops[]. */
static int att_graph_ops(att_builder *b, const att_plan *pl, int form,
                         cudnnBackendDescriptor_t *ops) {
  const att_dims d = att_dims_of(pl);
  const cudnnDataType_t bf = CUDNN_DATA_BFLOAT16, f = CUDNN_DATA_FLOAT;
  int n = 0, u = UID_VIRT;

  cudnnBackendDescriptor_t tS = att_tensor(b, UID_SCALE, d.one, d.one, f, 0, 1);
  cudnnBackendDescriptor_t tQ = att_tensor(b, UID_Q, d.qd, d.qs, bf, 0, 0);
  cudnnBackendDescriptor_t tO = att_tensor(b, UID_O, d.qd, d.qs, bf, 0, 0);
  cudnnBackendDescriptor_t tV = att_tensor(b, UID_V, d.kd, d.ks, bf, 0, 0);
  if (form == 1) {
    cudnnBackendDescriptor_t tK = att_tensor(b, UID_K, d.kd, d.ks, bf, 0, 0);
    cudnnBackendDescriptor_t op =
        att_new(b, CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR, "sdpa fwd op (cuDNN too old?)");
    att_set(b, op, CUDNN_ATTR_OPERATION_SDPA_FWD_QDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &tQ, "q");
    att_set(b, op, CUDNN_ATTR_OPERATION_SDPA_FWD_KDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &tK, "k");
    att_set(b, op, CUDNN_ATTR_OPERATION_SDPA_FWD_VDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &tV, "v");
    att_set(b, op, CUDNN_ATTR_OPERATION_SDPA_FWD_ODESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &tO, "o");
    att_set(b, op, CUDNN_ATTR_OPERATION_SDPA_FWD_SCALEDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &tS,
            "scale");
    att_fin(b, op, "sdpa fwd op");
    ops[n++] = op;
    return n;
  }
  cudnnBackendDescriptor_t tKt = att_tensor(b, UID_K, d.ktd, d.kts, bf, 0, 0);
  cudnnBackendDescriptor_t vS = att_tensor(b, u++, d.sd, d.ss, f, 1, 0);  /* q k^T */
  cudnnBackendDescriptor_t vS1 = att_tensor(b, u++, d.sd, d.ss, f, 1, 0); /* * scale */
  cudnnBackendDescriptor_t vM = att_tensor(b, u++, d.rd, d.rs, f, 1, 0);  /* row max */
  cudnnBackendDescriptor_t vS2 = att_tensor(b, u++, d.sd, d.ss, f, 1, 0); /* - max */
  cudnnBackendDescriptor_t vE = att_tensor(b, u++, d.sd, d.ss, f, 1, 0);  /* exp */
  cudnnBackendDescriptor_t vZ = att_tensor(b, u++, d.rd, d.rs, f, 1, 0);  /* row sum */
  cudnnBackendDescriptor_t vP = att_tensor(b, u++, d.sd, d.ss, f, 1, 0);  /* E / Z */
  ops[n++] = att_matmul(b, tQ, tKt, vS);
  ops[n++] = att_pw(b, CUDNN_POINTWISE_MUL, vS, tS, vS1);
  ops[n++] = att_reduce(b, CUDNN_REDUCE_TENSOR_MAX, vS1, vM);
  ops[n++] = att_pw(b, CUDNN_POINTWISE_SUB, vS1, vM, vS2);
  ops[n++] = att_pw(b, CUDNN_POINTWISE_EXP, vS2, NULL, vE);
  ops[n++] = att_reduce(b, CUDNN_REDUCE_TENSOR_ADD, vE, vZ);
  if (form == 3) {
    cudnnBackendDescriptor_t vL = att_tensor(b, u++, d.rd, d.rs, f, 1, 0);
    cudnnBackendDescriptor_t tSt = att_tensor(b, UID_STATS, d.rd, d.rs, f, 0, 0);
    ops[n++] = att_pw(b, CUDNN_POINTWISE_LOG, vZ, NULL, vL);
    ops[n++] = att_pw(b, CUDNN_POINTWISE_ADD, vM, vL, tSt);
  }
  ops[n++] = att_pw(b, CUDNN_POINTWISE_DIV, vE, vZ, vP);
  ops[n++] = att_matmul(b, vP, tV, tO);
  return n;
}

static int att_form_stats(int form) { return form == 3; }

static const att_forms ATT_BF16_FORMS = {"cudnn", 3, att_graph_ops, att_form_stats, 1, ""};

/* ---- public cuDNN API --------------------------------------------------- */

extern "C" int kern_attn_cudnn_create(kern_attn_cudnn **out) {
  size_t ver = cudnnGetVersion();
  if (ver < 90000) {
    sp_log_warn("attention: cudnn %zu at run time, the fused attention needs 9.0 or later", ver);
    return SP_ERR_RUNTIME;
  }
  kern_attn_cudnn *c = att_context_new<kern_attn_cudnn>("cudnn", ver, 1);
  if (!c) return SP_ERR_RUNTIME;
  *out = c;
  return SP_OK;
}

extern "C" void kern_attn_cudnn_destroy(kern_attn_cudnn *c) { att_context_free(c); }

extern "C" int kern_attn_cudnn_run(kern_attn_cudnn *c, kern_attn_params p, cudaStream_t stream) {
  float scale = att_params_scale(&p, "cudnn");
  int fresh;
  att_plan *pl = att_plan_get(&c->e, &p, scale, &ATT_BF16_FORMS, &fresh);
  if (!pl->ok) return SP_ERR_RUNTIME;
  int64_t uids[6] = {UID_Q, UID_K, UID_V, UID_O, UID_SCALE, UID_STATS};
  void *ptrs[6] = {(void *)p.q, (void *)p.k, (void *)p.v, (void *)p.out, &scale, pl->stats};
  int64_t n = att_form_stats(pl->form) ? 6 : 5;
  att_graph_execute(c->e.handle, pl->g.plan, n, uids, ptrs, c->e.workspace, stream);
  return SP_OK;
}

/* ---- the one call: backend selection ------------------------------------ */

/* The simple backend is kern_cuda_attention (cuda_attention.cu, kern_cuda.h). */

struct kern_attn_ctx {
  kern_attn_backend want;
  kern_cuda_gemm_ctx *gemm;
  kern_attn_cudnn *cudnn; /* NULL: not asked for, or could not be created */
  kern_attn_fa3_int8 *fa3_int8; /* fa3-int8 and fa3-fp8 only */
  int fa3;                /* fa3 or auto asked for, and fa3 in this build and on this GPU */
  int fa3_refusal_logged; /* a shape fa3 refused was logged (once per context) */
  kern_attn_backend last;
};

extern "C" int kern_attn_ctx_create(kern_attn_backend want, kern_cuda_gemm_ctx *gemm,
                                    kern_attn_ctx **out) {
  if (want == KERN_ATTN_SIMPLE && !gemm) {
    sp_log_error("attention: the simple backend needs a GEMM context (got NULL)");
    return SP_ERR_INPUT;
  }
  kern_attn_ctx *ctx = (kern_attn_ctx *)calloc(1, sizeof *ctx);
  if (!ctx) {
    sp_log_error("attention: out of host memory for the attention context");
    return SP_ERR_RUNTIME;
  }
  const int eight = want == KERN_ATTN_FA3_INT8 || want == KERN_ATTN_FA3_FP8;
  if (eight && kern_attn_fa3_int8_create(&ctx->fa3_int8) != SP_OK) {
    free(ctx); /* the requirement is logged above */
    return SP_ERR_RUNTIME;
  }
  ctx->want = want;
  ctx->gemm = gemm;
  ctx->last = want == KERN_ATTN_SIMPLE || eight ? want : KERN_ATTN_FLASH;
  if (want == KERN_ATTN_FA3) {
    char why[192];
    ctx->fa3 = kern_attn_fa3_available(why, sizeof why);
    if (!ctx->fa3) sp_log_warn("attention: --attn fa3 is not available (%s): running what auto "
                               "runs (cudnn, else flash)", why);
  }
  /* auto: fa3 where its rule picks it and it is here, without a word where
   * it is not (another GPU, a build without sm_90a) */
  if (want == KERN_ATTN_AUTO) ctx->fa3 = kern_attn_fa3_available(NULL, 0);
  /* fa3 too: a shape fa3 refuses runs what auto runs; fa3-int8 and
   * fa3-fp8 run it on the short-key shapes (kern_attn_8bit_rule) */
  if (want == KERN_ATTN_CUDNN || want == KERN_ATTN_AUTO || want == KERN_ATTN_FA3 || eight) {
    if (kern_attn_cudnn_create(&ctx->cudnn) != SP_OK) {
      ctx->cudnn = NULL; /* the cause is logged above */
      sp_log_warn("attention: --attn %s without cudnn: using flash", kern_attn_backend_name(want));
    }
  }
  *out = ctx;
  return SP_OK;
}

extern "C" void kern_attn_ctx_destroy(kern_attn_ctx *ctx) {
  if (!ctx) return;
  kern_attn_cudnn_destroy(ctx->cudnn);
  kern_attn_fa3_int8_destroy(ctx->fa3_int8);
  free(ctx);
}

extern "C" kern_attn_backend kern_attn_ctx_last(const kern_attn_ctx *ctx) { return ctx->last; }

static void att_simple(kern_attn_ctx *ctx, const kern_attn_params *p, void *scratch,
                       size_t scratch_bytes, cudaStream_t stream) {
  if (p->scale > 0.f && fabsf(p->scale * sqrtf((float)p->hd) - 1.f) > 1e-6f)
    sp_fatal("attention (simple): scale %g: the simple backend has 1/sqrt(hd) only",
             (double)p->scale);
  if (!ctx->gemm) sp_fatal("attention (simple): no GEMM context in the attention context");
  kern_cuda_attention(ctx->gemm, p->q, p->k, p->v, p->out, p->Lq, p->Lk, p->heads, p->hd, scratch,
                      scratch_bytes, stream);
}

/* cudnn if it takes the shape, else flash. Returns the one that ran. */
static kern_attn_backend att_cudnn_or_flash(kern_attn_ctx *ctx, const kern_attn_params *p,
                                            cudaStream_t stream) {
  if (ctx->cudnn && kern_attn_cudnn_run(ctx->cudnn, *p, stream) == SP_OK) return KERN_ATTN_CUDNN;
  kern_attn_flash(*p, stream);
  return KERN_ATTN_FLASH;
}

/* auto: fa3 where kern_attn_auto_rule picks it (head dim 128, many keys;
 * the H100 measurements are beside the rule in attn_backend.c) and fa3
 * takes the shape, else cudnn where cuDNN takes the shape, else the own
 * flash kernel. A fixed rule of the shape and not a timing: a pick made by
 * measuring would follow timing noise where two kernels are close, and
 * then a rerun, or two ranks holding the same attention, could run
 * different kernels and give different bits. The rule reads the head dim
 * and the key count only, which every chunk of queries and every Ulysses
 * rank of one attention share. cuDNN against flash: launch/bench/RESULTS.md
 * (cuDNN 1.7x to 2x faster at every Wan shape on the H200); on a GPU where
 * cuDNN refuses the shape, flash runs. */
extern "C" void kern_attn_run(kern_attn_ctx *ctx, kern_attn_params p, void *scratch,
                              size_t scratch_bytes, cudaStream_t stream) {
  kern_attn_backend want = ctx->want;
  char why[192];
  if (want == KERN_ATTN_FA3_INT8 || want == KERN_ATTN_FA3_FP8) {
    const kern_attn_shape sh = {p.Lq, p.Lk, p.heads, p.hd};
    if (kern_attn_8bit_rule(&sh, want) == want) { /* a refusal here is fatal */
      if (want == KERN_ATTN_FA3_FP8)
        kern_attn_fa3_fp8_run(ctx->fa3_int8, p, stream);
      else
        kern_attn_fa3_int8_run(ctx->fa3_int8, p, stream);
      ctx->last = want;
      return;
    }
    want = KERN_ATTN_CUDNN; /* the short-key shapes: what auto runs there */
  }
  if (want == KERN_ATTN_AUTO && ctx->fa3) {
    const kern_attn_shape sh = {p.Lq, p.Lk, p.heads, p.hd};
    /* a shape fa3 refuses (alignment, sizes) runs cudnn: a property of the
     * attention's buffers, the same on every rank */
    if (kern_attn_auto_rule(&sh, 1) == KERN_ATTN_FA3 && kern_attn_fa3_supported(&p, NULL, 0)) {
      kern_attn_fa3(p, stream);
      ctx->last = KERN_ATTN_FA3;
      return;
    }
  }
  if (want == KERN_ATTN_FA3) {
    if (ctx->fa3 && kern_attn_fa3_supported(&p, why, sizeof why)) {
      kern_attn_fa3(p, stream);
      ctx->last = KERN_ATTN_FA3;
      return;
    }
    if (ctx->fa3 && !ctx->fa3_refusal_logged) {
      sp_log_warn("attention (fa3): %s: running what auto runs for this shape", why);
      ctx->fa3_refusal_logged = 1;
    }
    want = KERN_ATTN_CUDNN; /* what auto runs where fa3 does not */
  }
  if (want != KERN_ATTN_SIMPLE && !kern_attn_flash_supported(&p, why, sizeof why)) {
    /* outside what flash (and our cudnn graph) are built for */
    if (!ctx->gemm) sp_fatal("attention (%s): %s", kern_attn_backend_name(want), why);
    want = KERN_ATTN_SIMPLE;
  }
  switch (want) {
  case KERN_ATTN_SIMPLE:
    att_simple(ctx, &p, scratch, scratch_bytes, stream);
    ctx->last = KERN_ATTN_SIMPLE;
    return;
  case KERN_ATTN_FLASH:
    kern_attn_flash(p, stream);
    ctx->last = KERN_ATTN_FLASH;
    return;
  case KERN_ATTN_CUDNN:
    ctx->last = att_cudnn_or_flash(ctx, &p, stream);
    return;
  case KERN_ATTN_AUTO:
  case KERN_ATTN_FA3:
  case KERN_ATTN_FA3_INT8:
  case KERN_ATTN_FA3_FP8: break; /* the fa3 ones ran above (or fa3 became cudnn) */
  }
  ctx->last = att_cudnn_or_flash(ctx, &p, stream);
}
