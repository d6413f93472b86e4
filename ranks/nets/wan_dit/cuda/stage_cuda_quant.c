/* A block's linear layers on the CUDA stage with weights as they are
 * stored on the device (MODEL.md "Quantized weights on the GPU"; see
 * stage_cuda_impl.h):
 *
 * - bf16 weights: cuBLASLt's bf16 GEMM (kern_cuda_linear), a bypassed
 *   LoRA pair merged into a copy of the weight first (kern_cuda_lora_merge,
 *   into the stage's one scratch);
 * - the weight-only path (precision bf16, a weight in fp8, int8 or a GGUF
 *   block format): the weight dequantised to bf16 into the stage's one
 *   scratch (kern_cuda_dequant_bf16, the CPU's bf16 dequantisation bit for
 *   bit) right before its GEMM, which then runs as for bf16 (a pair merged
 *   from the dequantised copy into a second one after it);
 * - W8A8 (precision fp8 or int8): the layer's input quantised per token
 *   once for every layer that reads it (rank_cuda_quant_input: the CPU's
 *   rule, kern_cuda_quantize_fp8_rows or _i8_rows; an input a norm makes
 *   quantised by the norm itself, rank_cuda_norm_out, the same bytes
 *   without the bf16 input in memory), the codes' GEMM with
 *   the tokens' and the output channels' scales (kern_cuda_linear_w8a8:
 *   cuBLASLt's outer-vector scales on sm_90, with its fast fp8
 *   accumulation under --fp8-accum fast (cfg.fp8_fast_accum); an fp32
 *   product and one epilogue kernel elsewhere and for int8), bias and
 *   activation in it; a
 *   bypassed LoRA pair on the quantised input dequantised to bf16 (MODEL.md
 *   "fp8 weights", LoRAs): its product added onto the layer's before the
 *   activation.
 *
 * Every path's bits depend on the row only (per-token quantisation, the
 * pinned algorithms of kern_cuda_gemm_pin_rows), so chunking, ranks and
 * reruns change none. CUDA builds only. */
#include <stdio.h>

#include "log.h"
#include "stage_cuda_impl.h"

void rank_cuda_block_view(const wan_layout *l, const void *base, cuda_block *out) {
  wan_block_bf16_bind(l, base, &out->w);
  for (int i = 0; i < l->count; i++) {
    const int j = wan_block_linear_of(i);
    if (j < 0) continue;
    const wan_tensor *t = &l->t[i];
    const char *p = (const char *)base;
    out->lin[j] = (kern_qtensor){kern_dtype_qfmt(t->dtype), p + t->offset,
                                 t->scale_offset ? (const float *)(p + t->scale_offset) : NULL,
                                 t->shape[0], t->numel / t->shape[0]};
  }
}

/* The activation format of the stage's W8A8 precision. */
static kern_qfmt act_fmt(const rank_stage *s) {
  return s->cfg.precision == WAN_PRECISION_FP8 ? KERN_QFMT_E4M3_ROW : KERN_QFMT_I8_ROW;
}

void rank_cuda_quant_input(const rank_stage *s, cuda_stage *c, const uint16_t *x, int64_t rows,
                           int64_t cols, int lora) {
  if (s->cfg.precision == WAN_PRECISION_BF16) return;
  if (s->cfg.precision == WAN_PRECISION_FP8)
    kern_cuda_quantize_fp8_rows(x, KERN_DTYPE_BF16, rows, cols, c->xq, c->xs, c->stream);
  else
    kern_cuda_quantize_i8_rows(x, KERN_DTYPE_BF16, rows, cols, c->xq, c->xs, c->stream);
  rank_cuda_quant_lora(s, c, rows, cols, lora);
}

void rank_cuda_quant_lora(const rank_stage *s, cuda_stage *c, int64_t rows, int64_t cols,
                          int lora) {
  if (s->cfg.precision == WAN_PRECISION_BF16 || !lora) return;
  if (!c->xhat) sp_fatal("internal: a bypassed LoRA pair at W8A8 with no room for its input");
  const kern_qtensor t = {act_fmt(s), c->xq, c->xs, rows, cols};
  kern_cuda_dequant_bf16(&t, c->xhat, c->stream);
}

void rank_cuda_norm_out(const rank_stage *s, const cuda_stage *c, uint16_t *h, int64_t row0,
                        kern_cuda_norm_quant_params *p) {
  if (s->cfg.precision == WAN_PRECISION_BF16) {
    p->h = h + row0 * p->dim;
    p->q = NULL;
    p->qscale = NULL;
    return;
  }
  p->h = NULL;
  p->qfmt = act_fmt(s);
  p->q = (uint8_t *)c->xq + row0 * p->dim; /* a byte a code, e4m3 or int8 */
  p->qscale = c->xs + row0;
}

/* W8A8: the codes' GEMM with both scales, bias and (without a pair) the
 * activation; a pair's product t B'^T added onto y (beta 1) with the
 * activation after it, t = x^ A^T on the dequantised input. */
static void linear_w8a8(const rank_stage *s, cuda_stage *c, const cuda_linear *l) {
  const int pair = l->lora && l->lora->r > 0;
  if (l->w->fmt != act_fmt(s))
    sp_fatal("internal: a %s weight in a %s stage", kern_qfmt_get(l->w->fmt)->name,
             wan_precision_name(s->cfg.precision));
  const kern_cuda_w8a8_params p = {
      .fmt = l->w->fmt, .x_q = c->xq, .sx = c->xs, .w_q = l->w->data, .sw = l->w->scale,
      .bias = l->b, .y = l->y, .y_dtype = l->y_dtype, .M = l->rows, .K = l->in, .N = l->out,
      .act = pair ? KERN_CUDA_ACT_NONE : l->act,
      .path = s->cfg.fp8_fast_accum ? KERN_CUDA_W8A8_FAST_AUTO : KERN_CUDA_W8A8_AUTO,
      .scratch = c->wacc, .scratch_bytes = c->wacc_bytes};
  kern_cuda_linear_w8a8(c->gemm, &p, c->stream);
  if (!pair) return;
  kern_cuda_linear(c->gemm, c->xhat, l->lora->a, NULL, c->lora_t, KERN_DTYPE_BF16, l->rows,
                   l->in, l->lora->r, KERN_CUDA_ACT_NONE, c->stream);
  kern_cuda_matmul_params m;
  kern_cuda_gemm_linear_params(c->lora_t, l->lora->b, NULL, l->y, l->y_dtype, l->rows,
                               l->lora->r, l->out, l->act, 1.0f, &m);
  kern_cuda_matmul(c->gemm, &m, c->stream);
}

void rank_cuda_linear(const rank_stage *s, cuda_stage *c, const cuda_linear *l) {
  if (s->cfg.precision != WAN_PRECISION_BF16) {
    linear_w8a8(s, c, l);
    return;
  }
  const uint16_t *w = l->w->data;
  const int pair = l->lora && l->lora->r > 0;
  /* the scratch: the dequantised weight (dequant_bytes), then from
   * plan_layout_align(dequant_bytes) on the merged copy (PLAN_BUF_DEQUANT),
   * which the merge never writes over its input */
  const uint64_t bytes = (uint64_t)(l->w->rows * l->w->cols) * 2;
  const uint64_t at = plan_layout_align(c->dequant_bytes);
  if ((l->w->fmt != KERN_QFMT_BF16 && bytes > c->dequant_bytes) ||
      (pair && (at > c->wdq_bytes || bytes > c->wdq_bytes - at)) ||
      ((l->w->fmt != KERN_QFMT_BF16 || pair) && !c->wdq))
    sp_fatal("internal: a %s weight of %lld x %lld with %zu bytes of scratch (%zu to dequantise)",
             kern_qfmt_get(l->w->fmt)->name, (long long)l->w->rows, (long long)l->w->cols,
             c->wdq_bytes, c->dequant_bytes);
  if (l->w->fmt != KERN_QFMT_BF16) { /* the weight-only path */
    kern_cuda_dequant_bf16(l->w, c->wdq, c->stream);
    w = c->wdq;
  }
  if (pair) { /* w + B'A into its copy: then one GEMM over x, as without a pair */
    uint16_t *merged = (uint16_t *)((char *)c->wdq + at);
    kern_cuda_lora_merge(c->gemm, w, l->lora->a, l->lora->b, l->lora->r, merged, l->out, l->in,
                         c->stream);
    w = merged;
  }
  kern_cuda_linear(c->gemm, l->x, w, l->b, l->y, l->y_dtype, l->rows, l->in, l->out, l->act,
                   c->stream);
}

int rank_cuda_precision_check(const rank_stage *s, const cuda_stage *c) {
  const wan_precision p = s->cfg.precision;
  if (p == WAN_PRECISION_FP8 && c->sm < 89) {
    sp_log_error("cuda:%d: --precision fp8 needs fp8 tensor cores (sm_89 Ada or sm_90 Hopper), "
                 "this GPU is sm_%d: --precision bf16 runs fp8 weights dequantised for each "
                 "GEMM (the weight-only path)", c->device, c->sm);
    return SP_ERR_INPUT;
  }
  if (s->cfg.fp8_fast_accum && c->sm != 90) { /* its precision: rank_stage_precision_check */
    sp_log_error("cuda:%d: --fp8-accum fast needs an sm_90 GPU (Hopper), where cuBLASLt applies "
                 "the W8A8 scales inside its fp8 GEMM; this GPU is sm_%d, whose fp8 products go "
                 "through an fp32 scratch and an epilogue kernel: leave --fp8-accum out (full)",
                 c->device, c->sm);
    return SP_ERR_INPUT;
  }
  const int need = p == WAN_PRECISION_INT8 || (p == WAN_PRECISION_FP8 && c->sm != 90);
  if (need && !s->cfg.w8a8_epilogue) {
    sp_log_error("cuda:%d: --precision %s on sm_%d takes the W8A8 epilogue's fp32 scratch, which "
                 "the plan did not count (plan.w8a8_epilogue)", c->device,
                 wan_precision_name(p), c->sm);
    return SP_ERR_INPUT;
  }
  return SP_OK;
}
