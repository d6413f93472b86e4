/* A pipeline stage on the CUDA backend (see stage.h), composed from the
 * kernels in kernels/kern_cuda.h; the same ops in the same order as the CPU
 * reference (dit_cpu.c), with bf16 GEMM operands and fp32 everywhere the
 * reference keeps fp32 (residual stream, modulation, norm statistics,
 * softmax, time embedding).
 *
 * Memory: one device arena per stage, laid out by the planner's
 * plan_layout_make (planner/layout.h) before anything is placed: the bf16
 * weights of the stage's resident groups, the slots streamed blocks are
 * copied into, the cross-attention k/v of every prompt slot, the
 * activation buffers, the block transients (at the planner's chunk rows)
 * and the rest; every pointer is the arena plus its buffer's offset. The
 * planner's memory model is the same layout's total, so a plan that fits
 * fits. Nothing is allocated in the step loop. The arena is sized for
 * cfg.max_tokens (the plan's largest shape) and carved for the load's
 * shape; a later shape re-carves everything after the weights, slots and
 * prompt k, v (stage_cuda_layout.c), reading no weight again.
 *
 * Streamed blocks (hybrid residency) live in pinned host memory, loaded
 * once. Each time the stage runs its blocks, a copy stream fills the
 * prefetch_depth device slots in block order, one way (host to device;
 * weights are read-only, so a slot is simply overwritten next time), and
 * the compute stream waits only on the event of the slot it needs: a copy
 * hides behind the compute of the blocks before it. Block-major calls run
 * every micro-batch through a block while it is in its slot.
 *
 * Ulysses (cfg.seq, DESIGN.md "Layouts"): the stage holds its slice of the
 * tokens as the CPU stage does (stage 0 patchifies every token and embeds
 * its rows, the blocks exchange heads in self-attention through the
 * transport's all-to-all, stage_cuda_seq.c, the head makes its rows and
 * gathers the others'), with its GEMMs on the algorithms of every token's
 * rows (rank_cuda_pin_rows). The all-to-alls wait on the host.
 *
 * Two experts (Wan 2.2 A14B): each expert's embedding, head, blocks and
 * prompt k/v are buffers of their own in the arena and set_expert only
 * changes which the calls use; a streamed block has a pinned copy per
 * expert and the current expert's flows through the slots. With
 * cfg.swap_experts the arena holds one copy of the blocks and the first
 * call after set_expert that uses them copies the next expert's over it,
 * block by block, each after its last queued use (issue_swap).
 *
 * The per-step calls only queue work on the compute stream: the activation
 * buffers stay on the device, the transport moves them (ordered against
 * the stream by events), and the host waits only in rank_stage_sync. */
#include "stage_impl.h"


#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "cuda_check.h"
#include "kern_cpu.h"
#include "layout.h"
#include "log.h"
#include "plan.h"
#include "trace_rec.h"
#include "stage_cuda_impl.h"

static cuda_stage *cuda_of(rank_stage *s) { return s->impl; }

/* The typed views of every resident device group, by table index
 * (wan_weights.h; a block's in its own device layout); their contents
 * arrive later, the addresses are final. */
static void bind_weights(rank_stage *s, cuda_stage *c) {
  for (int e = 0; e < s->experts; e++) {
    cuda_expert *x = &c->ex[e];
    if (s->cfg.embed) wan_embed_bf16_bind(&c->l16[WAN_GROUP_EMBED], x->embed_w, &x->embed);
    if (s->cfg.head) wan_head_bf16_bind(&c->l16[WAN_GROUP_HEAD], x->head_w, &x->head);
    for (int b = 0; b < s->nblocks; b++)
      if (x->block_w[b]) rank_cuda_block_view_of(s, c, e, b, x->block_w[b], &x->blocks[b]);
  }
}

static void cuda_destroy(rank_stage *s) {
  cuda_stage *c = cuda_of(s);
  if (!c) return;
  cudaSetDevice(c->device);
  if (c->stream) cudaStreamSynchronize(c->stream);
  if (c->copy) cudaStreamSynchronize(c->copy);
  rank_prof_destroy(c->prof);
  if (c->attn) kern_attn_ctx_destroy(c->attn);
  if (c->gemm) kern_cuda_gemm_ctx_destroy(c->gemm);
  if (c->arena) cudaFree(c->arena);
  if (c->stream) cudaStreamDestroy(c->stream);
  if (c->copy) cudaStreamDestroy(c->copy);
  for (int k = 0; k < c->depth; k++) {
    if (c->copied && c->copied[k]) cudaEventDestroy(c->copied[k]);
    if (c->freed && c->freed[k]) cudaEventDestroy(c->freed[k]);
  }
  for (int e = 0; e < RANK_MODEL_MAX_EXPERTS; e++) {
    cuda_expert *x = &c->ex[e];
    for (int b = 0; b < s->nblocks; b++) {
      if (x->host_w && x->host_w[b]) cudaFreeHost(x->host_w[b]);
      if (x->swap_w && x->swap_w[b]) cudaFreeHost(x->swap_w[b]);
    }
    free(x->host_w);
    free(x->swap_w);
    free(x->blocks);
    free(x->block_w);
  }
  for (int b = 0; c->last_use && b < s->nblocks; b++) {
    if (c->last_use[b]) cudaEventDestroy(c->last_use[b]);
    if (c->swapped[b]) cudaEventDestroy(c->swapped[b]);
  }
  free(c->last_use);
  free(c->swapped);
  free(c->swap_pending);
  free(c->stream_order);
  free(c->slot_w);
  free(c->blay);
  free(c->copied);
  free(c->freed);
  free(c->lora_w);
  for (int e = 0; e < RANK_MODEL_MAX_EXPERTS; e++) free(c->ex[e].lora);
  for (int i = 0; i < CUDA_STAGE_SINUS_RING; i++) {
    if (c->sinus[i]) cudaFreeHost(c->sinus[i]);
    if (c->sinus_used[i]) cudaEventDestroy(c->sinus_used[i]);
  }
  free(c);
  s->impl = NULL;
}

static void cuda_embed_text(rank_stage *s, const float *context, int64_t L, float *ctx) {
  cuda_stage *c = cuda_of(s);
  const wan_config *cf = s->c;
  const int64_t T = cf->text_len, TD = cf->text_dim, D = cf->dim;
  /* Padded context, narrowed to bf16 on the host (a GEMM operand). */
  uint16_t *h = sp_xcalloc((size_t)(T * TD), 2);
  kern_f32_to_bf16_n(context, h, (size_t)(L * TD));
  CUDA_CHECK(cudaMemcpyAsync(c->ctxb, h, (size_t)(T * TD) * 2, cudaMemcpyHostToDevice, c->stream));
  const wan_embed_bf16 *we = &c->x->embed;
  kern_cuda_linear(c->gemm, c->ctxb, we->text_embedding_0_w, we->text_embedding_0_b,
                   c->ctxh, KERN_DTYPE_BF16, T, TD, D, KERN_CUDA_ACT_GELU_TANH, c->stream);
  kern_cuda_linear(c->gemm, c->ctxh, we->text_embedding_2_w, we->text_embedding_2_b,
                   c->ctxf, KERN_DTYPE_F32, T, D, D, KERN_CUDA_ACT_NONE, c->stream);
  CUDA_CHECK(cudaMemcpyAsync(ctx, c->ctxf, (size_t)(T * D) * 4, cudaMemcpyDeviceToHost, c->stream));
  CUDA_CHECK(cudaStreamSynchronize(c->stream));
  free(h);
}

static size_t kv_offset(const rank_stage *s, int slot, int b) {
  return ((size_t)slot * (size_t)s->nblocks + (size_t)b) * (size_t)(s->c->text_len * s->c->dim);
}

static void issue_swap(rank_stage *s, cuda_stage *c);

static void cuda_set_prompt(rank_stage *s, int slot, const float *ctx) {
  cuda_stage *c = cuda_of(s);
  issue_swap(s, c);
  /* Streamed blocks pass through slot 0 here: no copy may still be filling
   * it; a swap's copies are done too. */
  CUDA_CHECK(cudaStreamSynchronize(c->stream));
  if (c->copy) CUDA_CHECK(cudaStreamSynchronize(c->copy));
  if (c->swap_pending) memset(c->swap_pending, 0, (size_t)s->nblocks);
  const cuda_expert *x = c->x;
  const wan_config *cf = s->c;
  const int64_t T = cf->text_len, D = cf->dim;
  CUDA_CHECK(cudaMemcpyAsync(c->ctxf, ctx, (size_t)(T * D) * 4, cudaMemcpyHostToDevice, c->stream));
  kern_cuda_f32_to_bf16(c->ctxf, c->ctxb, T * D, c->stream);
  const int e = (int)(x - c->ex);
  for (int b = 0; b < s->nblocks; b++) {
    const cuda_block *w = &x->blocks[b];
    const wan_block_lora_bf16 *lora = x->lora ? &x->lora[b] : NULL;
    cuda_block in_slot;
    if (x->host_w[b]) { /* once per prompt: a plain copy into slot 0 */
      CUDA_CHECK(cudaMemcpyAsync(c->slot_w[0], x->host_w[b], c->block_bytes,
                                 cudaMemcpyHostToDevice, c->stream));
      rank_cuda_block_view_of(s, c, e, b, c->slot_w[0], &in_slot);
      w = &in_slot;
    }
    uint16_t *k = x->ck + kv_offset(s, slot, b), *v = x->cv + kv_offset(s, slot, b);
    /* The context, quantised per token at W8A8, serves k and v. ctxf is
     * free once narrowed: it takes the k projection before its norm. */
    rank_cuda_quant_input(s, c, c->ctxb, T, D, lora != NULL);
    wan_step_begin(WAN_STEP_CROSS_K);
    rank_cuda_linear(s, c, &(cuda_linear){c->ctxb, RANK_CUDA_W(w, cross_attn_k_w),
                                          use(&w->w, w->w.cross_attn_k_b),
                                          RANK_CUDA_PAIR(lora, cross_attn_k_w), c->ctxf,
                                          KERN_DTYPE_F32, T, D, D, KERN_CUDA_ACT_NONE});
    kern_cuda_rmsnorm_rope(c->ctxf, KERN_DTYPE_F32, use(&w->w, w->w.cross_attn_norm_k_w), NULL,
                           NULL, k, T, cf->heads, wan_head_dim(cf), (float)cf->eps, c->stream);
    wan_step_begin(WAN_STEP_CROSS_V);
    rank_cuda_linear(s, c, &(cuda_linear){c->ctxb, RANK_CUDA_W(w, cross_attn_v_w),
                                          use(&w->w, w->w.cross_attn_v_b),
                                          RANK_CUDA_PAIR(lora, cross_attn_v_w), v,
                                          KERN_DTYPE_BF16, T, D, D, KERN_CUDA_ACT_NONE});
  }
  CUDA_CHECK(cudaStreamSynchronize(c->stream));
}

/* e (dim) and e0 (6, dim) of timestep t into device memory (MODEL 2):
 * the sinusoid in double on the host, into a pinned buffer of the ring
 * whose previous copy is done, then the MLPs in fp32 on the device. */
static void time_mlp(rank_stage *s, cuda_stage *c, double t, float *e, float *e0) {
  const wan_config *cf = s->c;
  const int64_t D = cf->dim;
  const wan_embed_bf16 *we = &c->x->embed;
  int r = c->sinus_next;
  c->sinus_next = (r + 1) % CUDA_STAGE_SINUS_RING;
  CUDA_CHECK(cudaEventSynchronize(c->sinus_used[r]));
  kern_cpu_time_sinusoid(t, cf->freq_dim, c->sinus[r]);
  float *tin = c->tvec, *h = tin + cf->freq_dim, *se = h + D;
  CUDA_CHECK(cudaMemcpyAsync(tin, c->sinus[r], (size_t)cf->freq_dim * 4, cudaMemcpyHostToDevice,
                             c->stream));
  CUDA_CHECK(cudaEventRecord(c->sinus_used[r], c->stream));
  kern_cuda_linear_f32_input(tin, we->time_embedding_0_w, we->time_embedding_0_b, h, 1,
                       cf->freq_dim, D, c->stream);
  kern_cuda_silu(h, KERN_DTYPE_F32, D, c->stream);
  kern_cuda_linear_f32_input(h, we->time_embedding_2_w, we->time_embedding_2_b, e, 1, D, D,
                       c->stream);
  CUDA_CHECK(cudaMemcpyAsync(se, e, (size_t)D * 4, cudaMemcpyDeviceToDevice, c->stream));
  kern_cuda_silu(se, KERN_DTYPE_F32, D, c->stream);
  kern_cuda_linear_f32_input(se, we->time_projection_1_w, we->time_projection_1_b, e0, 1,
                       D, 6 * D, c->stream);
}

static void cuda_embed(rank_stage *s, const float *latent, double t, double t_first, int buf) {
  cuda_stage *c = cuda_of(s);
  const wan_config *cf = s->c;
  const int64_t L = s->tokens, D = cf->dim;
  const int64_t n = cf->in_dim * s->cfg.lat_f * s->cfg.lat_h * s->cfg.lat_w;
  float *x = s->act[buf], *e = x + L * D, *e0 = e + D;
  CUDA_CHECK(cudaMemcpyAsync(c->lat, latent, (size_t)n * 4, cudaMemcpyHostToDevice, c->stream));
  /* The bf16 patches fit in the fp32 patch-token buffer (hb may be a chunk). */
  uint16_t *patches = (uint16_t *)c->tok;
  kern_cuda_patchify(c->lat, patches, KERN_DTYPE_BF16, cf->in_dim, s->cfg.lat_f, s->cfg.lat_h,
                     s->cfg.lat_w, c->stream);
  const wan_embed_bf16 *we = &c->x->embed;
  if (s->cfg.seq) { /* the rank's rows of every token's patches */
    kern_cuda_gemm_pin_rows(c->gemm, rank_cuda_pin_rows(s, c));
    patches += rank_cuda_seq_row0(s) * wan_patch_in(cf);
  }
  kern_cuda_linear(c->gemm, patches, we->patch_embedding_w, we->patch_embedding_b, x,
                   KERN_DTYPE_F32, L, wan_patch_in(cf), D, KERN_CUDA_ACT_NONE, c->stream);
  if (s->cfg.seq) kern_cuda_gemm_pin_rows(c->gemm, 0);
  time_mlp(s, c, t, e, e0);
  /* TI2V: latent frame 0's tokens' own e, e0 (stage.h) */
  if (wan_time_tables(cf) == 2) time_mlp(s, c, t_first, e + 7 * D, e0 + 7 * D);
}

/* e of timestep t into host memory, as cuda_embed makes it (the sinusoid
 * in double on the host, the MLP on the device; e2 holds it), at once:
 * before sampling, TeaCache's criterion. */
static void cuda_time_embed(rank_stage *s, double t, float *e) {
  cuda_stage *c = cuda_of(s);
  const wan_config *cf = s->c;
  const int64_t D = cf->dim;
  float *sin_h = sp_xmalloc((size_t)cf->freq_dim * sizeof *sin_h);
  kern_cpu_time_sinusoid(t, cf->freq_dim, sin_h);
  float *tin = c->tvec, *h = tin + cf->freq_dim;
  const wan_embed_bf16 *we = &c->x->embed;
  CUDA_CHECK(cudaMemcpyAsync(tin, sin_h, (size_t)cf->freq_dim * 4, cudaMemcpyHostToDevice,
                             c->stream));
  kern_cuda_linear_f32_input(tin, we->time_embedding_0_w, we->time_embedding_0_b, h, 1,
                             cf->freq_dim, D, c->stream);
  kern_cuda_silu(h, KERN_DTYPE_F32, D, c->stream);
  kern_cuda_linear_f32_input(h, we->time_embedding_2_w, we->time_embedding_2_b, c->e2, 1, D, D,
                             c->stream);
  CUDA_CHECK(cudaMemcpyAsync(e, c->e2, (size_t)D * 4, cudaMemcpyDeviceToHost, c->stream));
  CUDA_CHECK(cudaStreamSynchronize(c->stream));
  free(sin_h);
}

/* The step cache (stage.h), on the stage's stream. The last stage keeps
 * the residual negated, in - out: a gated add with gate -1 makes it
 * (one rounding, as out - in's), and ADD adds it back with gate -1, so x
 * becomes x + (out - in) bit for bit as on the CPU. */
static void cuda_cache(rank_stage *s, rank_cache_op op, int buf, int k) {
  cuda_stage *c = cuda_of(s);
  const int64_t L = s->tokens, D = s->c->dim;
  float *x = s->act[buf], *r = s->cache[k];
  if (op == RANK_CACHE_TAKE)
    CUDA_CHECK(cudaMemcpyAsync(r, x, (size_t)(L * D) * 4, cudaMemcpyDeviceToDevice, c->stream));
  else if (op == RANK_CACHE_KEEP)
    kern_cuda_gated_add(r, x, KERN_DTYPE_F32, c->cache_neg, L, D, c->stream);
  else
    kern_cuda_gated_add(x, r, KERN_DTYPE_F32, c->cache_neg, L, D, c->stream);
}

/* Starts the copy of the n-th streamed block into its slot, once the
 * compute stream has finished reading the block that was there before. */
static void issue_copy(rank_stage *s, cuda_stage *c, int n, size_t bytes) {
  int k = n % c->depth;
  s->stats.h2d_bytes += bytes;
  CUDA_CHECK(cudaStreamWaitEvent(c->copy, c->freed[k], 0));
  CUDA_CHECK(cudaMemcpyAsync(c->slot_w[k], c->x->host_w[c->stream_order[n]], bytes,
                             cudaMemcpyHostToDevice, c->copy));
  CUDA_CHECK(cudaEventRecord(c->copied[k], c->copy));
}

/* Device memory in use (the whole device, as cudaMemGetInfo sees it) once
 * the queue is drained: after loading, and per block for --mem-trace. */
static double device_used(const cuda_stage *c) {
  size_t free_b = 0, total_b = 0;
  CUDA_CHECK(cudaStreamSynchronize(c->stream));
  CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  return (double)(total_b - free_b);
}

static void cuda_blocks(rank_stage *s, int n, const int *slots, const int *bufs) {
  cuda_stage *c = cuda_of(s);
  const size_t wbytes = c->block_bytes;
  const int trace = s->cfg.mem_trace && !c->mem_traced;
  const double MB = 1e6;
  if (trace)
    sp_log_info("mem-trace: %5s %-9s %11s %11s %11s %11s", "block", "weights", "before_MB",
                "after_MB", "arena_MB", "plan_MB");
  /* While chunking, every GEMM keeps the algorithm of its all-rows shape
   * (see stage_cuda_block.c), on a Ulysses rank that of every token's. */
  const int64_t pin = rank_cuda_pin_rows(s, c);
  if (pin) kern_cuda_gemm_pin_rows(c->gemm, pin);
  issue_swap(s, c);
  int issued = 0, used = 0;
  for (; issued < c->nstreamed && issued < c->depth; issued++) issue_copy(s, c, issued, wbytes);
  for (int b = 0; b < s->nblocks; b++) {
    double before = trace ? device_used(c) : 0;
    const cuda_expert *x = c->x;
    const cuda_block *w = &x->blocks[b];
    cuda_block in_slot;
    int k = -1;
    if (x->host_w[b]) {
      k = used % c->depth;
      CUDA_CHECK(cudaStreamWaitEvent(c->stream, c->copied[k], 0));
      rank_cuda_block_view_of(s, c, (int)(x - c->ex), b, c->slot_w[k], &in_slot);
      w = &in_slot;
    }
    if (c->swap_pending && c->swap_pending[b]) { /* the first use after a swap */
      CUDA_CHECK(cudaStreamWaitEvent(c->stream, c->swapped[b], 0));
      c->swap_pending[b] = 0;
    }
    /* Block-major: every micro-batch while the block is here. */
    for (int j = 0; j < n; j++)
      rank_cuda_block_forward(s, c, w, x->lora ? &x->lora[b] : NULL,
                              x->ck + kv_offset(s, slots[j], b),
                              x->cv + kv_offset(s, slots[j], b), s->act[bufs[j]]);
    if (c->last_use) CUDA_CHECK(cudaEventRecord(c->last_use[b], c->stream));
    if (k >= 0) {
      CUDA_CHECK(cudaEventRecord(c->freed[k], c->stream));
      used++;
      if (issued < c->nstreamed) issue_copy(s, c, issued++, wbytes);
    }
    if (trace) {
      double after = device_used(c);
      if (after > s->stats.device_peak) s->stats.device_peak = (uint64_t)after;
      sp_log_info("mem-trace: %5d %-9s %11.1f %11.1f %11.1f %11.1f", s->cfg.first_block + b,
                  k >= 0 ? "streamed" : "resident", before / MB, after / MB,
                  (double)c->arena_bytes / MB, s->cfg.plan_peak_bytes / MB);
      rank_trace_counter("device memory MB", after / MB);
    }
  }
  if (pin) kern_cuda_gemm_pin_rows(c->gemm, 0);
  if (trace) c->mem_traced = 1;
  if (c->prof) rank_prof_report(c->prof);
}

static void cuda_head(rank_stage *s, int buf, float *out) {
  cuda_stage *c = cuda_of(s);
  const wan_config *cf = s->c;
  const int64_t L = s->tokens, D = cf->dim;
  const int64_t n = cf->out_dim * s->cfg.lat_f * s->cfg.lat_h * s->cfg.lat_w;
  float *x = s->act[buf], *e = x + L * D;
  /* (shift, scale) = head.modulation (2, D) + e (not e0), per time table:
   * TI2V's second (latent frame 0's e, 7 D after the first) for the
   * rank's rows before s->first_tokens, at m + 2 D. */
  const wan_head_bf16 *wh = &c->x->head;
  const int64_t nf0 = s->first_tokens - rank_cuda_seq_row0(s);
  const int64_t nf = nf0 <= 0 ? 0 : nf0 >= L ? L : nf0;
  for (int k = 0; k < (nf > 0 ? 2 : 1); k++) {
    const float *ek = e + 7 * D * k;
    float *e2 = c->e2 + 2 * D * k;
    CUDA_CHECK(cudaMemcpyAsync(e2, ek, (size_t)D * 4, cudaMemcpyDeviceToDevice, c->stream));
    CUDA_CHECK(cudaMemcpyAsync(e2 + D, ek, (size_t)D * 4, cudaMemcpyDeviceToDevice, c->stream));
    kern_cuda_modulation(wh->head_modulation, e2, c->m + 2 * D * k, 2 * D, c->stream);
  }
  const int64_t R = c->rows, po = wan_patch_out(cf), pin = rank_cuda_pin_rows(s, c);
  /* Ulysses: the rank's rows of every token's patches, then the others'. */
  float *tok = c->tok + rank_cuda_seq_row0(s) * po;
  if (pin) kern_cuda_gemm_pin_rows(c->gemm, pin);
  for (int64_t r0 = 0; r0 < L; r0 += R) {
    const int64_t rn = L - r0 < R ? L - r0 : R;
    /* rows r0 .. r0 + na - 1 take the second table */
    const int64_t na = nf - r0 <= 0 ? 0 : nf - r0 >= rn ? rn : nf - r0;
    if (na > 0)
      kern_cuda_layernorm_modulate(x + r0 * D, NULL, NULL, c->m + 2 * D, c->m + 3 * D, c->hb, na,
                                   D, (float)cf->eps, c->stream);
    if (rn > na)
      kern_cuda_layernorm_modulate(x + (r0 + na) * D, NULL, NULL, c->m, c->m + D,
                                   c->hb + na * D, rn - na, D, (float)cf->eps, c->stream);
    kern_cuda_linear(c->gemm, c->hb, wh->head_head_w, wh->head_head_b,
                     tok + r0 * po, KERN_DTYPE_F32, rn, D, po, KERN_CUDA_ACT_NONE, c->stream);
  }
  if (pin) kern_cuda_gemm_pin_rows(c->gemm, 0);
  if (s->cfg.seq) rank_cuda_seq_gather(s, c, c->tok, po);
  kern_cuda_unpatchify(c->tok, c->lat, cf->out_dim, s->cfg.lat_f, s->cfg.lat_h, s->cfg.lat_w,
                       c->stream);
  CUDA_CHECK(cudaMemcpyAsync(out, c->lat, (size_t)n * 4, cudaMemcpyDeviceToHost, c->stream));
}

static void cuda_sync(rank_stage *s) { CUDA_CHECK(cudaStreamSynchronize(cuda_of(s)->stream)); }

/* Bypassed LoRAs: each block's pairs of expert e (blk[nblocks], fp32 host
 * memory) narrowed to bf16 and copied into the block's room of expert e in
 * the arena; the views (the result) point at the same offsets on the
 * device. The room was sized at load for every job's LoRAs
 * (cfg.lora_block_elems, cfg.lora_rank): pairs that need more are a bug
 * of the caller. */
static wan_block_lora_bf16 *lora_upload_expert(rank_stage *s, cuda_stage *c,
                                               const rank_stage_lora_block *blk, int e) {
  wan_block_lora_bf16 *v = sp_xcalloc((size_t)s->nblocks, sizeof *v);
  uint16_t *narrow = NULL;
  size_t cap = 0;
  for (int b = 0; b < s->nblocks; b++) {
    const rank_stage_lora_block *k = &blk[b];
    const size_t n = k->floats;
    if (n > s->cfg.lora_block_elems)
      sp_fatal("internal: block %d's LoRA pairs hold %zu values, the stage's room %llu",
               s->cfg.first_block + b, n, (unsigned long long)s->cfg.lora_block_elems);
    if (n + 1 > cap) {
      cap = n + 1;
      free(narrow);
      narrow = sp_xmalloc(cap * sizeof *narrow);
    }
    kern_f32_to_bf16_n(k->values, narrow, n);
    uint16_t *dev = c->lora_w[(size_t)e * (size_t)s->nblocks + (size_t)b];
    /* Synchronous: narrow is reused for the next block. */
    CUDA_CHECK(cudaMemcpy(dev, narrow, n * sizeof *narrow, cudaMemcpyHostToDevice));
#define DEV_(field, in_, out_)                                                                  \
    v[b].field = (wan_lora_bf16){.a = k->pairs.field.r ? dev + (k->pairs.field.a - k->values) : NULL, \
                                 .b = k->pairs.field.r ? dev + (k->pairs.field.b - k->values) : NULL, \
                                 .r = k->pairs.field.r};
    WAN_BLOCK_LINEARS(DEV_)
#undef DEV_
  }
  free(narrow);
  return v;
}

/* Every expert's pairs of l into its room (lora_upload_expert). */
static void cuda_set_lora(rank_stage *s, const rank_stage_lora *l) {
  cuda_stage *c = cuda_of(s);
  for (int e = 0; e < RANK_MODEL_MAX_EXPERTS; e++) {
    free(c->ex[e].lora);
    c->ex[e].lora = NULL;
  }
  if (!l) return;
  const int w8a8 = s->cfg.precision != WAN_PRECISION_BF16;
  if (l->rank > s->cfg.lora_rank || (w8a8 ? !c->lora_t : !c->wdq))
    sp_fatal("internal: the LoRA pairs' rank exceeds the stage's room (%lld), or no room for "
             "their %s", (long long)s->cfg.lora_rank, w8a8 ? "A x" : "merged weight");
  for (int e = 0; e < s->experts; e++) c->ex[e].lora = lora_upload_expert(s, c, l->block[e], e);
}

/* The switch between experts: the next calls use expert e's groups and
 * its prompts' k/v. Both experts resident: nothing moves. Swapping: the
 * copies are queued by the next call that uses the blocks (issue_swap),
 * not here: host-to-device copies go through the copy engine in the order
 * they are queued, so the step's own small uploads (the latent, the time
 * sinusoid, received activations), queued before the blocks run, must not
 * wait behind the whole share's copies. */
static void cuda_set_expert(rank_stage *s, int e) {
  cuda_stage *c = cuda_of(s);
  c->x = &c->ex[e];
  c->swap_unissued = s->cfg.swap_experts && c->on_device != e;
}

/* A pending swap's copies: each block of the current expert over the
 * device copy on the copy stream once the block's last queued use is done
 * (its event), so the copies overlap the work queued after them; the first
 * use of each block waits for its own copy (cuda_blocks). */
static void issue_swap(rank_stage *s, cuda_stage *c) {
  if (!c->swap_unissued) return;
  const size_t bytes = c->block_bytes;
  for (int b = 0; b < s->nblocks; b++) {
    CUDA_CHECK(cudaStreamWaitEvent(c->copy, c->last_use[b], 0));
    CUDA_CHECK(cudaMemcpyAsync(c->ex[0].block_w[b], c->x->swap_w[b], bytes,
                               cudaMemcpyHostToDevice, c->copy));
    CUDA_CHECK(cudaEventRecord(c->swapped[b], c->copy));
    c->swap_pending[b] = 1;
    s->stats.h2d_bytes += bytes;
  }
  c->on_device = (int)(c->x - c->ex);
  c->swap_unissued = 0;
}

static const wan_dit_backend cuda_ops;

/* The blocks' device layouts at the stage's precision (every expert's:
 * rank_model_device_layout), the bytes of a device block and of the
 * weight-only path's scratch (the planner's counts), and whether this GPU
 * runs that precision. SP_OK, or SP_ERR_INPUT logged. */
static int device_formats(rank_model *m, rank_stage *s, cuda_stage *c,
                          const struct cudaDeviceProp *prop) {
  c->sm = prop->major * 10 + prop->minor;
  if (rank_cuda_precision_check(s, c) != SP_OK) return SP_ERR_INPUT;
  const wan_precision p = s->cfg.precision;
  c->blay = sp_xcalloc((size_t)s->experts * (size_t)s->nblocks, sizeof *c->blay);
  for (int e = 0; e < s->experts; e++)
    for (int b = 0; b < s->nblocks; b++)
      rank_model_device_layout(m, e, s->cfg.first_block + b, p,
                               &c->blay[e * s->nblocks + b]);
  c->block_bytes = (size_t)rank_model_device_block_bytes(m, p);
  c->dequant_bytes = (size_t)rank_model_dequant_bytes(m, p);
  return SP_OK;
}

static int cuda_load(rank_model *m, rank_stage *s, uint64_t *bytes_read) {
  const wan_config *cf = s->c;
  cuda_stage *c = sp_xcalloc(1, sizeof *c);
  s->impl = c;
  s->ops = &cuda_ops;
  c->device = s->cfg.cuda_device;
  CUDA_CHECK(cudaSetDevice(c->device));
  struct cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, c->device));
  char devname[320];
  snprintf(devname, sizeof devname, "cuda:%d %s", c->device, prop.name);
  sp_log_set_device(devname);
  CUDA_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
  s->stream = c->stream;
  c->gemm = kern_cuda_gemm_ctx_create(0);
  if (kern_attn_ctx_create(s->cfg.attn, c->gemm, &c->attn) != SP_OK) {
    cuda_destroy(s);
    return SP_ERR_RUNTIME;
  }
  for (int g = 0; g < 3; g++) wan_layout_make(cf, (wan_group)g, KERN_DTYPE_BF16, &c->l16[g]);
  if (device_formats(m, s, c, &prop) != SP_OK) {
    cuda_destroy(s);
    return SP_ERR_INPUT;
  }
  /* The arena holds the largest shape the stage will be re-laid for (the
   * plan's: its voxels are its tokens through the patch), and this one. */
  const int64_t pv = wan_patch_in(cf) / cf->in_dim;
  const int64_t vmax = s->cfg.max_tokens * pv > rank_cuda_voxels(s) ? s->cfg.max_tokens * pv
                                                                    : rank_cuda_voxels(s);
  /* A Ulysses rank is sized for the largest slice, as the planner counts
   * every rank of a stage (plan_rank_tokens). */
  const int64_t max_rows = s->cfg.seq ? plan_seq_rows(s->cfg.max_tokens, s->cfg.seq->n, 0)
                                      : s->cfg.max_tokens;
  plan_layout *lay = sp_xmalloc(sizeof *lay);
  if (rank_cuda_stage_layout(s, c, s->cfg.max_tokens, max_rows, vmax, lay) != SP_OK) {
    free(lay);
    cuda_destroy(s);
    return SP_ERR_INPUT;
  }
  rank_cuda_setup_streaming(s, c, lay);
  for (int i = 0; i < CUDA_STAGE_SINUS_RING; i++) {
    CUDA_CHECK(cudaMallocHost((void **)&c->sinus[i], (size_t)cf->freq_dim * sizeof(float)));
    CUDA_CHECK(cudaEventCreateWithFlags(&c->sinus_used[i], cudaEventDisableTiming));
  }
  c->arena_bytes = (size_t)lay->total;
  size_t free_b = 0, total_b = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  if (c->arena_bytes > free_b) {
    sp_log_error("cuda:%d: the stage needs %.2f GB of device memory (weights, activations, "
                 "scratch), %.2f GB are free",
                 c->device, (double)c->arena_bytes / 1e9, (double)free_b / 1e9);
    free(lay);
    cuda_destroy(s);
    return SP_ERR_INPUT;
  }
  CUDA_CHECK(cudaMalloc((void **)&c->arena, c->arena_bytes));
  if (rank_cuda_stage_layout(s, c, rank_cuda_seq_tokens(s), s->tokens, rank_cuda_voxels(s),
                             lay) != SP_OK) {
    free(lay);
    cuda_destroy(s);
    return SP_ERR_INPUT;
  }
  rank_cuda_lay_out(s, c, lay, 0);
  free(lay);
  bind_weights(s, c);

  int rc = rank_cuda_place_weights(m, s, c, bytes_read);
  if (rc != SP_OK) {
    cuda_destroy(s);
    return rc;
  }
  rank_cuda_warm_attention(s, c);
  s->stats.streamed = c->nstreamed;
  s->stats.arena_bytes = c->arena_bytes;
  s->stats.device_in_use = s->stats.device_peak = (uint64_t)device_used(c);
  sp_log_info("cuda:%d: arena %.2f GiB (%d resident, %d streamed blocks, %d slots%s); device "
              "memory in use %.2f GiB",
              c->device, (double)c->arena_bytes / (1 << 30), s->nblocks - c->nstreamed,
              c->nstreamed, c->depth,
              s->experts < 2             ? ""
              : s->cfg.swap_experts ? ", 2 experts swapped at the switch"
                                    : ", 2 experts resident",
              (double)s->stats.device_in_use / (1 << 30));
  return SP_OK;
}

static const wan_dit_backend cuda_ops = {
    .load = cuda_load,           .destroy = cuda_destroy,     .embed_text = cuda_embed_text,
    .set_prompt = cuda_set_prompt, .embed = cuda_embed,       .blocks = cuda_blocks,
    .head = cuda_head,           .sync = cuda_sync,           .set_lora = cuda_set_lora,
    .set_expert = cuda_set_expert, .relayout = rank_cuda_relayout,
    .time_embed = cuda_time_embed, .cache = cuda_cache};

const net_backend wan_dit_cuda = {wan_dit_net, RANK_DEVICE_CUDA, &cuda_ops};
