/* This rank's stage in the session: loaded once, for the plan's largest
 * latent and laid out for the first job's; a later latent shape re-lays
 * its activations and keeps its weights. */
#include <string.h>

#include "job_session_impl.h"
#include "layout_grid.h"
#include "log.h"
#include "pipeline.h"
#include "progress.h"

/* A loaded stage takes a new latent shape: its activations are laid out
 * again in the room the plan sized for its largest shape; the weights and
 * LoRA pairs stay, nothing is read from the file. */
static int relayout_stage(job_session *s, const int64_t lat[4]) {
  const comm_world *w = s->w;
  comm_set_phase("re-laying its activations");
  const double t0 = comm_now();
  int rc = rank_stage_relayout(s->stage, lat[1], lat[2], lat[3]);
  if ((rc = job_phase(w, rc, "re-laying its activations")) != SP_OK) return rc;
  memcpy(s->stage_lat, lat, sizeof s->stage_lat);
  s->sum.act_bytes = rank_stage_act_bytes(s->stage);
  if (w->rank == 0)
    sp_log_info("run: the latent shape changes to %lldx%lldx%lld (latent frames x height x "
                "width): rank 0 re-laid its activations in %.3f s, every rank keeps its weights "
                "(none read again)",
                (long long)lat[1], (long long)lat[2], (long long)lat[3], comm_now() - t0);
  return SP_OK;
}

int job_stage_ensure(job_session *s, const int64_t lat[4]) {
  const comm_world *w = s->w;
  if (s->stage && memcmp(s->stage_lat, lat, sizeof s->stage_lat) == 0) return SP_OK;
  if (s->stage) return relayout_stage(s, lat);
  comm_set_phase("loading its weights");
  const plan_grid *g = &s->plan.grid;
  const int stage = plan_grid_pos_of(g, w->rank).stage;
  const plan_rank *pr = &s->plan.r[stage];
  const int has_prev = stage > 0, has_next = stage < g->stages - 1;
  const int nbuf = plan_act_buffers(pr->order, s->prompts, has_prev, has_next);
  if (g->seq > 1) job_layout_seq_group(w, g, s->params.timeout, &s->seq);
  rank_stage_cfg scfg = {.first_block = pr->first_block, .last_block = pr->last_block,
                         .embed = !has_prev, .head = !has_next,
                         .prompts = s->prompts, .lat_f = lat[1], .lat_h = lat[2],
                         .lat_w = lat[3], .max_tokens = s->plan.tokens, .device = s->dev,
                         .cuda_device = s->cuda_device, .attn = s->params.attn,
                         .streamed = &s->plan.streamed[pr->first_block],
                         .prefetch_depth = pr->prefetch_depth, .profile = s->params.profile,
                         .swap_experts = pr->experts_mode == PLAN_EXPERTS_SWAP,
                         .act_buffers = nbuf, .chunk_rows = pr->chunk_rows,
                         .mem_trace = s->params.mem_trace,
                         .plan_peak_bytes = (double)pr->peak_bytes,
                         .lora_block_elems = s->lora_block_elems,
                         .lora_rank = s->lora_rank,
                         .seq = g->seq > 1 ? &s->seq : NULL, .tp = s->tp,
                         .precision = job_precision(&s->params, rank_model_get_info(s->m)),
                         .w8a8_epilogue = s->plan.w8a8_epilogue,
                         .fp8_fast_accum = s->params.fp8_fast_accum,
                         .cache = s->cache_any};
  double t0 = comm_now();
  sp_progress_begin("reading weights", NULL, 0); /* each group read adds its bytes */
  int rc = rank_stage_load(s->m, &scfg, &s->stage, &s->sum.bytes_loaded);
  sp_progress_end();
  s->sum.load_s += comm_now() - t0;
  if (rc == SP_OK) s->sum.weights_s += rank_stage_get_stats(s->stage)->weights_s;
  if ((rc = job_phase(w, rc, "loading its weights")) != SP_OK) return rc;
  memcpy(s->stage_lat, lat, sizeof s->stage_lat);
  /* The probe times the chain of a plain pipeline's ranks. */
  if (s->params.probe_links && g->replicas == 1 && g->seq == 1) {
    comm_set_phase("probing the links between stages");
    rank_pipeline_probe(w, s->tp, s->stage, s->params.timeout, &s->sum.link_gbs);
  }
  s->sum.act_bytes = rank_stage_act_bytes(s->stage);
  return SP_OK;
}
