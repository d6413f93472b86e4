/* fp8 attention through cuDNN's fused fp8 SDPA forward (Hopper, cuDNN 9.1
 * or later), kern_attn.h "cudnn-fp8".
 *
 * Each call quantises q, k and v to e4m3 with a per-tensor scale computed
 * on the device (kern_cuda_quantize_fp8: amax / 448, no host sync), then
 * runs the graph cuDNN's fp8 flash engine recognises (the pattern of
 * cudnn-frontend's fp8 SDPA forward, written out as backend operations):
 *   S = Q K^T (fp8 in, fp32), S *= attn scale, S *= descale_q, S *= descale_k,
 *   M = rowmax S, E = exp(S - M), Z = rowsum E, stats = M + log Z,
 *   P = E / Z, amax_s = max |P|, P8 = e4m3(P * scale_s),
 *   O = P8 V (fp8 in, fp32), O *= descale_s, O *= descale_v,
 *   out = O * scale_o, amax_o = max |O|.
 * P lies in [0, 1], so scale_s is the fixed 448 (descale_s 1/448): P's
 * largest value lands on e4m3's largest. The softmax and its statistics
 * are fp32. The output is bf16 where the engine offers it (scale_o 1);
 * otherwise e4m3 with scale_o = 448 / amax_v (|O| <= max |v|, a convex
 * combination of v's rows) widened to bf16 by kern_cuda_fp8_to_bf16 with
 * v's dequantisation scale. Forms tried in order, the first one an engine
 * takes is kept per shape: bf16 out with virtual stats, bf16 out with the
 * stats as an output (the training form), then the same two with e4m3 out.
 *
 * Layout as the bf16 graph (cuda_cudnn_attn.cu): (batch, heads, seq, hd)
 * dims over token-major memory, strides in elements (1 byte each here). */
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

enum {
  F8_UID_Q = 1, F8_UID_K, F8_UID_V, F8_UID_O, F8_UID_SCALE, F8_UID_STATS, F8_UID_DQ, F8_UID_DK,
  F8_UID_DV, F8_UID_DS, F8_UID_SS, F8_UID_SO, F8_UID_AMAX_S, F8_UID_AMAX_O, F8_UID_VIRT = 100
};

/* The device scalars, one per 16 bytes (cuDNN's tensor alignment). */
enum { SC_DQ, SC_DK, SC_DV, SC_DS, SC_SS, SC_SO, SC_AQ, SC_AK, SC_AV, SC_AMAX_S, SC_AMAX_O, SC_N };
#define SC(c, i) ((c)->scal + 4 * (i))

#define F8_NFORMS 4 /* the graph forms, tried in order (header comment) */

struct kern_attn_fp8 {
  att_engine e;
  uint8_t *q8, *kv8, *o8; /* e4m3 copies: q (Lq, heads, hd), k then v, out */
  int64_t q_elems, kv_elems; /* capacity of q8 and o8, and of each half of kv8 */
  float *scal;            /* SC_N scalars, device */
};

static int f8_form_out_fp8(int form) { return form >= 3; }
static int f8_form_stats(int form) { return form == 2 || form == 4; }

/* The operations of `form` into ops[]; returns their count. */
static int f8_graph_ops(att_builder *b, const att_plan *pl, int form,
                        cudnnBackendDescriptor_t *ops) {
  const att_dims d = att_dims_of(pl);
  const cudnnDataType_t f8 = CUDNN_DATA_FP8_E4M3, f = CUDNN_DATA_FLOAT;
  const cudnnDataType_t ot = f8_form_out_fp8(form) ? f8 : CUDNN_DATA_BFLOAT16;
  int n = 0, u = F8_UID_VIRT;
#define F8_SCALAR(uid) att_tensor(b, uid, d.one, d.one, f, 0, 0)
#define F8_VIRT(dims, strides, type) att_tensor(b, u++, dims, strides, type, 1, 0)
  cudnnBackendDescriptor_t tQ = att_tensor(b, F8_UID_Q, d.qd, d.qs, f8, 0, 0);
  cudnnBackendDescriptor_t tKt = att_tensor(b, F8_UID_K, d.ktd, d.kts, f8, 0, 0);
  cudnnBackendDescriptor_t tV = att_tensor(b, F8_UID_V, d.kd, d.ks, f8, 0, 0);
  cudnnBackendDescriptor_t tO = att_tensor(b, F8_UID_O, d.qd, d.qs, ot, 0, 0);
  cudnnBackendDescriptor_t tA = att_tensor(b, F8_UID_SCALE, d.one, d.one, f, 0, 1);
  cudnnBackendDescriptor_t tDQ = F8_SCALAR(F8_UID_DQ), tDK = F8_SCALAR(F8_UID_DK);
  cudnnBackendDescriptor_t tDV = F8_SCALAR(F8_UID_DV), tDS = F8_SCALAR(F8_UID_DS);
  cudnnBackendDescriptor_t tSS = F8_SCALAR(F8_UID_SS), tSO = F8_SCALAR(F8_UID_SO);
  cudnnBackendDescriptor_t tAS = F8_SCALAR(F8_UID_AMAX_S), tAO = F8_SCALAR(F8_UID_AMAX_O);
  cudnnBackendDescriptor_t tSt = f8_form_stats(form)
                                     ? att_tensor(b, F8_UID_STATS, d.rd, d.rs, f, 0, 0)
                                     : F8_VIRT(d.rd, d.rs, f);
  cudnnBackendDescriptor_t s0 = F8_VIRT(d.sd, d.ss, f), s1 = F8_VIRT(d.sd, d.ss, f);
  cudnnBackendDescriptor_t s2 = F8_VIRT(d.sd, d.ss, f), s3 = F8_VIRT(d.sd, d.ss, f);
  cudnnBackendDescriptor_t vM = F8_VIRT(d.rd, d.rs, f), s4 = F8_VIRT(d.sd, d.ss, f);
  cudnnBackendDescriptor_t vE = F8_VIRT(d.sd, d.ss, f), vZ = F8_VIRT(d.rd, d.rs, f);
  cudnnBackendDescriptor_t vL = F8_VIRT(d.rd, d.rs, f), vP = F8_VIRT(d.sd, d.ss, f);
  cudnnBackendDescriptor_t vP8 = F8_VIRT(d.sd, d.ss, f8);
  cudnnBackendDescriptor_t o0 = F8_VIRT(d.qd, d.qs, f), o1 = F8_VIRT(d.qd, d.qs, f);
  cudnnBackendDescriptor_t o2 = F8_VIRT(d.qd, d.qs, f);
#undef F8_SCALAR
#undef F8_VIRT
  ops[n++] = att_matmul(b, tQ, tKt, s0);
  ops[n++] = att_pw(b, CUDNN_POINTWISE_MUL, s0, tA, s1);
  ops[n++] = att_pw(b, CUDNN_POINTWISE_MUL, s1, tDQ, s2);
  ops[n++] = att_pw(b, CUDNN_POINTWISE_MUL, s2, tDK, s3);
  ops[n++] = att_reduce(b, CUDNN_REDUCE_TENSOR_MAX, s3, vM);
  ops[n++] = att_pw(b, CUDNN_POINTWISE_SUB, s3, vM, s4);
  ops[n++] = att_pw(b, CUDNN_POINTWISE_EXP, s4, NULL, vE);
  ops[n++] = att_reduce(b, CUDNN_REDUCE_TENSOR_ADD, vE, vZ);
  ops[n++] = att_pw(b, CUDNN_POINTWISE_LOG, vZ, NULL, vL);
  ops[n++] = att_pw(b, CUDNN_POINTWISE_ADD, vM, vL, tSt);
  ops[n++] = att_pw(b, CUDNN_POINTWISE_DIV, vE, vZ, vP);
  ops[n++] = att_reduce(b, CUDNN_REDUCE_TENSOR_AMAX, vP, tAS);
  ops[n++] = att_pw(b, CUDNN_POINTWISE_MUL, vP, tSS, vP8);
  ops[n++] = att_matmul(b, vP8, tV, o0);
  ops[n++] = att_pw(b, CUDNN_POINTWISE_MUL, o0, tDS, o1);
  ops[n++] = att_pw(b, CUDNN_POINTWISE_MUL, o1, tDV, o2);
  ops[n++] = att_pw(b, CUDNN_POINTWISE_MUL, o2, tSO, tO);
  ops[n++] = att_reduce(b, CUDNN_REDUCE_TENSOR_AMAX, o2, tAO);
  return n;
}

static const att_forms F8_FORMS = {"cudnn-fp8", F8_NFORMS, f8_graph_ops, f8_form_stats, 0,
                                   " (needs cuDNN 9.1+ on an sm_90 or later GPU)"};

/* The plan for p's shape, the fp8 copies of q, k, v and the output sized
 * for it when it is built. */
static att_plan *f8_plan_get(kern_attn_fp8 *c, const kern_attn_params *p, float scale) {
  int fresh;
  att_plan *pl = att_plan_get(&c->e, p, scale, &F8_FORMS, &fresh);
  if (!pl->ok || !fresh) return pl;
  const int64_t qn = p->Lq * p->heads * KERN_ATTN_HD, kn = p->Lk * p->heads * KERN_ATTN_HD;
  int64_t have = c->q_elems;
  att_device_grow((void **)&c->q8, &have, qn);
  have = c->q_elems;
  att_device_grow((void **)&c->o8, &have, qn);
  c->q_elems = have;
  have = 2 * c->kv_elems;
  att_device_grow((void **)&c->kv8, &have, 2 * kn);
  c->kv_elems = have / 2;
  return pl;
}

/* The fixed scales of P and the output scale, from v's amax (one thread). */
__global__ void f8_attn_scalars_kernel(float *scal, int out_fp8) {
  scal[4 * SC_SS] = KERN_FP8_E4M3_MAX;
  scal[4 * SC_DS] = 1.0f / KERN_FP8_E4M3_MAX;
  scal[4 * SC_SO] = out_fp8 ? kern_fp8_quant_mul(scal[4 * SC_AV]) : 1.0f;
}

/* ---- public API ---------------------------------------------------------- */

extern "C" int kern_attn_fp8_create(kern_attn_fp8 **out) {
  size_t ver = cudnnGetVersion();
  int dev = 0, major = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) {
    sp_log_error("attention: --attn cudnn-fp8: no CUDA device");
    return SP_ERR_RUNTIME;
  }
  if (ver < 90100 || major < 9) {
    sp_log_error("attention: --attn cudnn-fp8 needs cuDNN 9.1 or later and an sm_90 (Hopper) or "
                 "later GPU; found cuDNN %zu and sm_%d%s",
                 ver, major, major < 9 ? "x (use --attn cudnn or flash)" : "x");
    return SP_ERR_RUNTIME;
  }
  kern_attn_fp8 *c = att_context_new<kern_attn_fp8>("cudnn-fp8", ver, 0);
  if (!c) return SP_ERR_RUNTIME;
  CUDA_CHECK(cudaMalloc((void **)&c->scal, 4 * SC_N * sizeof(float)));
  *out = c;
  return SP_OK;
}

extern "C" void kern_attn_fp8_destroy(kern_attn_fp8 *c) {
  if (!c) return;
  if (c->q8) CUDA_CHECK(cudaFree(c->q8));
  if (c->kv8) CUDA_CHECK(cudaFree(c->kv8));
  if (c->o8) CUDA_CHECK(cudaFree(c->o8));
  CUDA_CHECK(cudaFree(c->scal));
  att_context_free(c);
}

extern "C" int kern_attn_fp8_run(kern_attn_fp8 *c, kern_attn_params p, cudaStream_t stream) {
  float scale = att_params_scale(&p, "cudnn-fp8");
  att_plan *pl = f8_plan_get(c, &p, scale);
  if (!pl->ok) return SP_ERR_RUNTIME;
  const int64_t qn = p.Lq * p.heads * p.hd, kn = p.Lk * p.heads * p.hd;
  uint8_t *k8 = c->kv8, *v8 = c->kv8 + c->kv_elems;
  kern_cuda_quantize_fp8(p.q, KERN_DTYPE_BF16, qn, c->q8, SC(c, SC_DQ), SC(c, SC_AQ), stream);
  kern_cuda_quantize_fp8(p.k, KERN_DTYPE_BF16, kn, k8, SC(c, SC_DK), SC(c, SC_AK), stream);
  kern_cuda_quantize_fp8(p.v, KERN_DTYPE_BF16, kn, v8, SC(c, SC_DV), SC(c, SC_AV), stream);
  const int out_fp8 = f8_form_out_fp8(pl->form);
  f8_attn_scalars_kernel<<<1, 1, 0, stream>>>(c->scal, out_fp8);
  CUDA_LAUNCH_CHECK();
  int64_t uids[14] = {F8_UID_Q,  F8_UID_K,  F8_UID_V,  F8_UID_O,      F8_UID_SCALE,
                      F8_UID_DQ, F8_UID_DK, F8_UID_DV, F8_UID_DS,     F8_UID_SS,
                      F8_UID_SO, F8_UID_AMAX_S, F8_UID_AMAX_O, F8_UID_STATS};
  void *ptrs[14] = {c->q8, k8, v8, out_fp8 ? (void *)c->o8 : (void *)p.out, &scale,
                    SC(c, SC_DQ), SC(c, SC_DK), SC(c, SC_DV), SC(c, SC_DS), SC(c, SC_SS),
                    SC(c, SC_SO), SC(c, SC_AMAX_S), SC(c, SC_AMAX_O), pl->stats};
  att_graph_execute(c->e.handle, pl->g.plan, f8_form_stats(pl->form) ? 14 : 13, uids, ptrs,
                    c->e.workspace, stream);
  if (out_fp8) kern_cuda_fp8_to_bf16(c->o8, SC(c, SC_DV), p.out, qn, stream);
  return SP_OK;
}
