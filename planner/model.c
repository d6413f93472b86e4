/* The memory and time model of one pipeline rank.
 *
 * The memory is the CUDA stage's device layout (layout.c, which the stage
 * carves its arena from); the times are predictions from first principles (tensor sizes of
 * the Wan 2.1 forward, MODEL.md "Cost", and the dense rate of the GPU) that
 * GPU measurements correct. Notation: L tokens, D dim, F ffn_dim, hd
 * head_dim, C context rows (text_len), R chunk rows, M micro-batches, nb
 * blocks of the stage, a = bytes of a bf16 (or fp32) operand = the model's
 * weight dtype. */
#include <math.h>
#include <string.h>

#include "layout.h"
#include "plan.h"
#include "plan_strbuf.h"

void plan_options_default(plan_options *o) {
  memset(o, 0, sizeof *o);
  o->gpu_tflops = 600.0;   /* bf16 dense, about what a tuned H100/H200 GEMM sustains */
  o->fp8_linear_ratio = 0.77; /* plan.h: measured, fp8 GEMMs and quantisers vs bf16 GEMMs */
  o->fp8_fast_linear_ratio = 0.56; /* the same with fast accumulation (plan.h) */
  o->host_link_gbs = 25.0; /* PCIe 4.0 x16 measured ~27 GB/s; pinned copies reach ~25 */
  o->peer_link_gbs = 25.0; /* GPU to GPU without NVLink goes over the same PCIe */
  o->seq_link_gbs = 25.0;  /* the same, between a stage's Ulysses ranks */
  o->prefetch_depth = 2;   /* one slot computes while the next one fills */
  o->reserve_bytes = 1ull << 30; /* CUDA context ~0.5 GiB, cuBLASLt/cuDNN workspaces, NCCL */
  o->auto_margin = 0.05;   /* fragmentation and other processes on the card */
  o->order = PLAN_ORDER_AUTO;
  o->stream_frac = -1.0;   /* the budget decides what streams */
  o->max_rows = 0;         /* the budget decides the chunk rows */
}

void plan_latent_grid(const plan_workload *w, int64_t fhw[3]) {
  const int64_t s = w->vae_stride > 0 ? w->vae_stride : 8;
  fhw[0] = (w->frames - 1) / 4 + 1;
  fhw[1] = w->height / s;
  fhw[2] = w->width / s;
}

int64_t plan_tokens(const plan_workload *w) {
  const int64_t s = w->vae_stride > 0 ? w->vae_stride : 8;
  if (w->frames < 1 || w->height < 2 * s || w->width < 2 * s) return 0;
  int64_t g[3];
  plan_latent_grid(w, g);
  return g[0] * (g[1] / 2) * (g[2] / 2);
}

int64_t plan_rank_tokens(const plan_workload *w) {
  const int64_t L = plan_tokens(w);
  return w->seq > 1 ? plan_seq_rows(L, w->seq, 0) : L;
}

static int64_t context_rows(const plan_model *m, const plan_workload *w) {
  /* The engine zero-pads the context to text_len rows (no mask), so callers
   * pass text_len; 0 means the same. */
  return w->context_len > 0 ? w->context_len : m->text_len;
}

/* The linear layers' FLOPs of one block on L tokens: 12 L D^2 (q, k, v, o
 * of self-attention, 8 L D^2, and q, o of cross-attention, 4 L D^2) and
 * 4 L D F (the two FFN GEMMs). */
static double linear_flops(const plan_model *m, double L) {
  const double D = (double)m->dim, F = (double)m->ffn_dim;
  return 12.0 * L * D * D + 4.0 * L * D * F;
}

double plan_block_flops(const plan_model *m, int64_t tokens, int64_t context_len) {
  double L = (double)tokens, D = (double)m->dim, C = (double)context_len;
  /* The linear layers, then
   * 4 L^2 D:  self-attention scores and weighted sum (2 L^2 D each);
   * 4 L C D:  cross-attention against C context rows.
   * The context k, v (4 C D^2) are computed once per prompt, not per step. */
  return linear_flops(m, L) + 4.0 * L * L * D + 4.0 * L * C * D;
}

const char *plan_order_name(int order) {
  switch (order) {
  case PLAN_ORDER_AUTO: return "auto";
  case PLAN_ORDER_MICRO: return "micro";
  case PLAN_ORDER_BLOCK: return "block";
  default: return NULL;
  }
}

const char *plan_experts_mode_name(int mode) {
  switch (mode) {
  case PLAN_EXPERTS_ONE: return "one";
  case PLAN_EXPERTS_RESIDENT: return "resident";
  case PLAN_EXPERTS_SWAP: return "swap";
  case PLAN_EXPERTS_STREAM: return "stream";
  default: return NULL;
  }
}

int plan_parse_order(const char *s, int *out, char *err, size_t errlen) {
  const int orders[] = {PLAN_ORDER_AUTO, PLAN_ORDER_MICRO, PLAN_ORDER_BLOCK};
  for (int i = 0; s && i < 3; i++)
    if (strcmp(s, plan_order_name(orders[i])) == 0) {
      *out = orders[i];
      return PLAN_OK;
    }
  return plan_fail(err, errlen, "'%s' is not an order: give auto, micro or block", s ? s : "");
}

int plan_act_buffers(int order, int micro_batches, int has_prev, int has_next) {
  int prev = has_prev ? 1 : 0, next = has_next ? 1 : 0;
  /* micro-batch-major: the micro-batch computing, a receive buffer (the
   * next one arrives meanwhile) and a send buffer (the previous one leaves
   * meanwhile); micro-batches flow through, none waits here. */
  int micro = 1 + prev + next;
  /* block-major: a block runs every micro-batch of the step, so all of them
   * are resident at once; they leave together at the end from where they
   * are (no send buffer), and with a previous stage one more buffer takes
   * the next step's first micro-batch while this step finishes. */
  int block = (micro_batches > 1 ? micro_batches : 1) + prev;
  if (order == PLAN_ORDER_MICRO) return micro;
  if (order == PLAN_ORDER_BLOCK) return block;
  return micro > block ? micro : block;
}

uint64_t plan_act_bytes(const plan_model *m, const plan_workload *w, const plan_stage_desc *d) {
  const int nblocks = d->last_block - d->first_block + 1;
  /* The CUDA stage's layout (layout.c) without its weights: they come
   * first, each buffer at an aligned offset, so the arena is the aligned
   * weight bytes plus this total exactly (the caller adds those). */
  plan_rank q = {.first_block = 0,
                 .last_block = nblocks - 1,
                 .has_embed = d->has_embed,
                 .has_head = d->has_head,
                 .order = d->order,
                 .chunk_rows = d->chunk_rows};
  plan_stage_shape s;
  plan_stage_shape_of(m, w, &q, NULL, d->simple_attn, &s);
  s.act_buffers = plan_act_buffers(d->order, w->micro_batches, d->has_prev, d->has_next);
  s.embed_bytes = s.head_bytes = s.block_bytes = 0;
  plan_layout l;
  if (plan_layout_make(&s, &l, NULL, 0) != PLAN_OK) return UINT64_MAX;
  return l.total;
}

/* Milliseconds for `flops` on a device of relative speed `speed`. */
static double compute_ms(const plan_options *o, double speed, double flops) {
  return flops / (o->gpu_tflops * 1e12 * speed) * 1e3;
}

double plan_seq_a2a_ms(const plan_model *m, const plan_workload *w, const plan_options *o) {
  if (w->seq <= 1) return 0.0;
  const double U = (double)w->seq, t = (double)plan_rank_tokens(w), D = (double)m->dim;
  const double a = m->weight_dtype_bytes > 0 ? (double)m->weight_dtype_bytes : 2.0;
  return 4.0 * t * D * a * (U - 1.0) / U / (o->seq_link_gbs * 1e9) * 1e3;
}

/* One block on one micro-batch at a rank holding t of the L tokens: the
 * block's FLOPs for t tokens, but self-attention over all L queries and
 * keys for D/U of the width (the rank's heads after the all-to-all: 4 L^2
 * D / U in place of 4 t^2 D), then the all-to-alls, not overlapped with
 * compute. One rank: t = L and the extra term is exactly 0. */
static double block_ms(const plan_model *m, const plan_workload *w, const plan_options *o,
                       double speed) {
  const int64_t L = plan_tokens(w), t = plan_rank_tokens(w);
  const double U = w->seq > 1 ? (double)w->seq : 1.0, D = (double)m->dim;
  const double attn = 4.0 * D * ((double)L * (double)L / U - (double)t * (double)t);
  /* fp8 W8A8: the linear layers at their measured share of the bf16 time
   * (plan_options.fp8_linear_ratio, fp8_fast_linear_ratio with fast
   * accumulation); attention stays bf16. */
  const double r8 = o->fp8_fast_accum ? o->fp8_fast_linear_ratio : o->fp8_linear_ratio;
  const double saved =
      m->w8a8 == PLAN_W8A8_FP8 ? (1.0 - r8) * linear_flops(m, (double)t) : 0.0;
  return compute_ms(o, speed, plan_block_flops(m, t, context_rows(m, w)) + attn - saved) +
         plan_seq_a2a_ms(m, w, o);
}

/* The timeline of one pass of stage d over its blocks in which every block
 * runs `reps` micro-batches back to back: reps = 1 is one micro-batch of
 * micro-batch-major order, reps = M the whole step of block-major order. */
static double stage_pass_ms(const plan_model *m, const plan_workload *w, const plan_options *o,
                            const plan_stage_desc *d, double reps) {
  const double speed = d->speed;
  const int first = d->first_block, last = d->last_block, depth = d->depth;
  const uint8_t *streamed = d->streamed;
  int64_t L = plan_rank_tokens(w); /* this rank's rows (Ulysses: its slice) */
  double D = (double)m->dim;
  double blk_ms = reps * block_ms(m, w, o, speed);

  /* Pass start: the activations of its micro-batches arrive ([L, D] fp32
   * plus e, e0 each) over the peer link; stage 0 instead embeds the latent
   * (patch GEMM 2 L (in*4) D plus the time MLPs, tiny). The text embedding
   * runs once per prompt and is not counted per step. Block-major waits for
   * all M (the previous stage sends them together when it is done). */
  double start = 0.0;
  const double tt = m->time_tables > 1 ? 2.0 : 1.0; /* TI2V: a second e, e0 */
  if (d->has_prev)
    start += reps * ((double)L * D * 4.0 + 7.0 * D * 4.0 * tt) / (o->peer_link_gbs * 1e9) * 1e3;
  if (d->has_embed)
    start += reps * compute_ms(o, speed,
                               2.0 * (double)L * (double)(m->in_dim * 4) * D +
                                   2.0 * (256.0 * D + D * D + 6.0 * D * D));

  /* The copy engine streams the streamed blocks in order, into `depth`
   * slots used round robin: the copy of the j-th streamed block waits for
   * the engine and for its slot, freed when block j-depth finished
   * computing. A block computes after the one before it, and a streamed
   * block only once its copy is done. Copies may start while the
   * activations are still arriving (they do not depend on them). So a
   * streamed block costs max(compute, bytes / link) when its copy overlaps
   * the blocks before it (all their reps micro-batches), and more when
   * copies queue up. */
  double t = start, engine = 0.0;
  double release[PLAN_MAX_BLOCKS];
  int j = 0;
  for (int i = first; i <= last; i++) {
    double ready = t;
    if (streamed && streamed[i - first]) {
      double slot_free = (depth > 0 && j >= depth) ? release[j - depth] : 0.0;
      double cstart = fmax(engine, slot_free);
      /* one expert's copy: the one the step runs */
      engine = cstart + (double)plan_expert_bytes(m, m->block_bytes[i]) /
                            (o->host_link_gbs * 1e9) * 1e3;
      ready = fmax(ready, engine);
    }
    t = ready + blk_ms;
    if (streamed && streamed[i - first]) release[j++] = t;
  }
  if (d->has_head)
    t += reps * compute_ms(o, speed, 2.0 * (double)L * D * (double)(m->out_dim * 4));
  return t;
}

double plan_stage_ms(const plan_model *m, const plan_workload *w, const plan_options *o,
                     const plan_stage_desc *d) {
  double M = (double)(w->micro_batches > 0 ? w->micro_batches : 1);
  /* block-major: one pass, each block computing all M micro-batches, each
   * streamed block copied once; micro-batch-major: M passes of one
   * micro-batch, each copying every streamed block again. */
  if (d->order == PLAN_ORDER_BLOCK)
    return stage_pass_ms(m, w, o, d, M);
  return M * stage_pass_ms(m, w, o, d, 1.0);
}

double plan_switch_ms(const plan_model *m, const plan_workload *w, const plan_options *o,
                      int order, double speed, int first, int last) {
  const int nb = last - first + 1;
  if (nb < 1) return 0.0;
  /* One pass over the blocks: the whole step block-major, one micro-batch
   * micro-batch-major (the first low-noise pass is the one that waits). */
  double reps = order == PLAN_ORDER_BLOCK ? (double)(w->micro_batches > 0 ? w->micro_batches : 1)
                                          : 1.0;
  double blk = reps * block_ms(m, w, o, speed);
  /* The copies start once the first block's last high-noise use is done,
   * one after another on the copy engine; the rest of that pass runs
   * meanwhile, then each low-noise block waits for its own copy only. */
  double t = (double)(nb - 1) * blk, engine = 0.0;
  const double t0 = t;
  for (int i = first; i <= last; i++) {
    engine += (double)plan_expert_bytes(m, m->block_bytes[i]) / (o->host_link_gbs * 1e9) * 1e3;
    t = fmax(t, engine) + blk;
  }
  double extra = t - (t0 + (double)nb * blk);
  return extra > 0.0 ? extra : 0.0;
}

double plan_pipeline_ms(int order, int micro_batches, int nranks, const double *stage_ms) {
  double M = (double)(micro_batches > 0 ? micro_batches : 1), sum = 0.0, mx = 0.0;
  for (int r = 0; r < nranks; r++) {
    sum += stage_ms[r];
    mx = fmax(mx, stage_ms[r]);
  }
  /* The next step needs the updated latent, so steps do not overlap.
   * Block-major: each stage starts when the one before it has finished the
   * whole step. Micro-batch-major: stage r's time per micro-batch is
   * stage_ms[r] / M; the first micro-batch crosses every stage, and each
   * further one leaves the pipe one slowest-stage time later. */
  if (order == PLAN_ORDER_BLOCK) return sum;
  return sum / M + (M - 1.0) / M * mx;
}
