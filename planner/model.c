/* The memory and time model of one pipeline rank.
 *
 * These are predictions from first principles (tensor sizes of the Wan 2.1
 * forward, MODEL-WAN21.md, and the dense rate of the GPU); a GPU issue
 * measures a real run and corrects the constants. Notation: L tokens, D dim,
 * F ffn_dim, H heads, C context rows, M micro-batches, a = bytes of a bf16
 * (or fp32) operand = the model's weight dtype. */
#include <math.h>
#include <string.h>

#include "plan.h"

void plan_options_default(plan_options *o) {
  memset(o, 0, sizeof *o);
  o->gpu_tflops = 600.0;   /* bf16 dense, about what a tuned H100/H200 GEMM sustains */
  o->host_link_gbs = 25.0; /* PCIe 4.0 x16 measured ~27 GB/s; pinned copies reach ~25 */
  o->peer_link_gbs = 25.0; /* GPU to GPU without NVLink goes over the same PCIe */
  o->prefetch_depth = 2;   /* one slot computes while the next one fills */
  o->reserve_bytes = 1ull << 30; /* CUDA context ~0.5 GiB, cuBLASLt/cuDNN workspaces, NCCL */
  o->auto_margin = 0.05;   /* fragmentation and other processes on the card */
}

int64_t plan_tokens(const plan_workload *w) {
  if (w->frames < 1 || w->height < 16 || w->width < 16) return 0;
  /* Wan's VAE: 4x temporal (first frame alone), 8x spatial; then the 1x2x2 patch. */
  return ((w->frames - 1) / 4 + 1) * (w->height / 16) * (w->width / 16);
}

static int64_t context_rows(const plan_model *m, const plan_workload *w) {
  /* The engine zero-pads the context to text_len rows (no mask), so callers
   * pass text_len; 0 means the same. */
  return w->context_len > 0 ? w->context_len : m->text_len;
}

double plan_block_flops(const plan_model *m, int64_t tokens, int64_t context_len) {
  double L = (double)tokens, D = (double)m->dim, F = (double)m->ffn_dim,
         C = (double)context_len;
  /* 12 L D^2: q, k, v, o projections of self-attention (8 L D^2) and q, o
   *           of cross-attention (4 L D^2);
   * 4 L D F:  the two FFN GEMMs;
   * 4 L^2 D:  self-attention scores and weighted sum (2 L^2 D each);
   * 4 L C D:  cross-attention against C context rows.
   * The context k, v (4 C D^2) are computed once per prompt, not per step. */
  return 12.0 * L * D * D + 4.0 * L * D * F + 4.0 * L * L * D + 4.0 * L * C * D;
}

static uint64_t u(double x) { return x <= 0 ? 0 : (uint64_t)ceil(x); }

uint64_t plan_act_bytes(const plan_model *m, const plan_workload *w, int nblocks, int has_prev,
                        int has_next, int first, int last, int64_t ffn_rows, int64_t proj_rows,
                        int64_t attn_rows) {
  double L = (double)plan_tokens(w), D = (double)m->dim, F = (double)m->ffn_dim,
         H = (double)m->heads, hd = (double)m->head_dim, C = (double)context_rows(m, w),
         M = (double)(w->micro_batches > 0 ? w->micro_batches : 1),
         a = (double)(m->weight_dtype_bytes > 0 ? m->weight_dtype_bytes : 2);
  double Rf = (double)ffn_rows, Rp = (double)proj_rows, Rq = (double)attn_rows;

  /* Residual stream x, fp32 [L, D]: the one being computed, plus a receive
   * buffer (the next micro-batch arrives while this one computes) and a
   * send buffer (the previous one leaves while this one computes). The
   * stage holds one micro-batch's stream at a time: micro-batches flow
   * through, none waits here. */
  double resid = L * D * 4.0;
  double buffers = resid * (1.0 + (has_prev ? 1.0 : 0.0) + (has_next ? 1.0 : 0.0));

  /* Largest transient of a block; chunking bounds the row counts:
   * self-attention: k, v for all L rows [L, D] a each (attention reads every
   *   key), the normed input of a projection chunk [Rp, D] a, q and the
   *   attention output of a query chunk [Rq, D] a each, the o-projection
   *   output before the gated add [Rq, D] fp32, softmax max/sum [Rq, H] fp32;
   * cross-attention: the same without the full k, v (those are the cached
   *   context k, v below);
   * FFN: input chunk [Rf, D] a, hidden [Rf, F] a (GELU in place), output
   *   [Rf, D] fp32 before the gated add. */
  double self = 2.0 * L * D * a + Rp * D * a + Rq * D * (2.0 * a + 4.0) + Rq * H * 8.0;
  double cross = Rp * D * a + Rq * D * (2.0 * a + 4.0) + Rq * H * 8.0;
  double ffn = Rf * D * a + Rf * F * a + Rf * D * 4.0;
  double transient = fmax(self, fmax(cross, ffn));

  /* Context k, v of every block of the stage, [C, D] a each, for each
   * micro-batch (CFG branches have different contexts), computed once per
   * prompt and kept; the embedded context itself [C, D] fp32 per micro-batch
   * arrives once per prompt. */
  double ctx = (double)nblocks * M * 2.0 * C * D * a + (nblocks > 0 ? M * C * D * 4.0 : 0.0);

  /* e [D] and e0 [6, D] fp32 per micro-batch travel with the activations;
   * RoPE cos/sin fp32 for head_dim/2 pairs per token. */
  double small = M * 7.0 * D * 4.0 + L * hd * 4.0;

  double patch_in = (double)(m->in_dim * 4), patch_out = (double)(m->out_dim * 4);
  double ends = 0.0;
  if (first) {
    /* the latent x_t and its patches [L, in*4] fp32, the text embedding
     * input [C, text_dim] fp32 and its output [C, D] fp32 per micro-batch */
    ends += 2.0 * L * patch_in * 4.0 + M * C * ((double)m->text_dim + D) * 4.0;
  }
  if (last) {
    /* the head outputs of every micro-batch [L, out*4] fp32 kept for the CFG
     * combine, and the sampler state: x, the x0 predictions UniPC keeps and
     * the noise, 4 latents */
    ends += M * L * patch_out * 4.0 + 4.0 * L * patch_out * 4.0;
  }
  return u(buffers + transient + ctx + small + ends);
}

/* Milliseconds for `flops` on a device of relative speed `speed`. */
static double compute_ms(const plan_options *o, double speed, double flops) {
  return flops / (o->gpu_tflops * 1e12 * speed) * 1e3;
}

double plan_stage_ms(const plan_model *m, const plan_workload *w, const plan_options *o,
                     double speed, int first, int last, const uint8_t *streamed, int depth,
                     int has_prev, int has_embed, int has_head) {
  int64_t L = plan_tokens(w);
  double D = (double)m->dim;
  double blk_ms = compute_ms(o, speed, plan_block_flops(m, L, context_rows(m, w)));

  /* Stage start: the activations of the micro-batch arrive ([L, D] fp32 plus
   * e, e0) over the peer link; stage 0 instead embeds the latent (patch
   * GEMM 2 L (in*4) D plus the time MLPs, tiny). The text embedding runs
   * once per prompt and is not counted per step. */
  double start = 0.0;
  if (has_prev) start += ((double)L * D * 4.0 + 7.0 * D * 4.0) / (o->peer_link_gbs * 1e9) * 1e3;
  if (has_embed)
    start += compute_ms(o, speed,
                        2.0 * (double)L * (double)(m->in_dim * 4) * D +
                            2.0 * (256.0 * D + D * D + 6.0 * D * D));

  /* Timeline of one micro-batch. The copy engine streams the streamed
   * blocks in order, into `depth` slots used round robin: the copy of the
   * j-th streamed block waits for the engine and for its slot, freed when
   * block j-depth finished computing. A block computes after the one
   * before it, and a streamed block only once its copy is done. Copies may
   * start while the activations are still arriving (they do not depend on
   * them). So a streamed block costs max(compute, bytes / link) when its
   * copy overlaps the blocks before it, and more when copies queue up. */
  double t = start, engine = 0.0;
  double release[PLAN_MAX_BLOCKS];
  int j = 0;
  for (int i = first; i <= last; i++) {
    double ready = t;
    if (streamed && streamed[i - first]) {
      double slot_free = (depth > 0 && j >= depth) ? release[j - depth] : 0.0;
      double cstart = fmax(engine, slot_free);
      engine = cstart + (double)m->block_bytes[i] / (o->host_link_gbs * 1e9) * 1e3;
      ready = fmax(ready, engine);
    }
    t = ready + blk_ms;
    if (streamed && streamed[i - first]) release[j++] = t;
  }
  if (has_head) t += compute_ms(o, speed, 2.0 * (double)L * D * (double)(m->out_dim * 4));
  return t;
}
