/* The choice of a run's grid (grid_choice.h).
 *
 * A layout R x S x U is planned as one replica: S stages (plan_make's
 * split, memory and stage timeline, model.c) on each stage's slowest and
 * smallest device, for the largest replica's share of the M micro-batches
 * (plan_grid_owners on the replicas' speeds, each its slowest rank's, as
 * the run shares them under --speed: ceil(M / R) when they are equal),
 * whose ranks hold Ulysses' slices of the tokens (plan_workload.seq = U:
 * plan_rank_tokens, the largest slice of the run's own split). Notation:
 * L tokens, t = ceil(L / U) a rank's rows, D dim, a = weight width (bf16
 * 2), M micro-batches, nb blocks of a stage.
 *
 * Memory of a rank (the CUDA stage's layout, layout.c, with seq = U):
 * - residual stream x (activation buffers), the block transient (normed
 *   input, projections, q, the rank's k and v, attention output, FFN
 *   hidden) and the RoPE tables: t rows each. EXACT for the rank of the
 *   largest slice.
 * - the all-to-all: every token's q, k, v and attention output for H/U
 *   heads (4 L D/U a) and the rank's rows packed for sending (t D a).
 *   EXACT for the all-to-all as the CPU stage runs it (ranks/nets/wan_dit/dit_cpu.c)
 *   and the CUDA stage's arena (ranks/nets/wan_dit/cuda/stage_cuda_seq.c).
 * - context k, v cache and scratch: C rows for every head on every rank
 *   (cross-attention is local), independent of tokens: EXACT.
 * - the end stages' patch tokens and latent: the whole sequence's (each
 *   rank patchifies all of it and gathers the whole velocity): EXACT.
 *
 * Time of a stage per step (micro-batches of one replica), model.c's
 * timeline with the rank's t rows:
 * - projections and FFN 12 t D^2 + 4 t D F, cross-attention 4 t C D:
 *   EXACT; self-attention L queries x L keys for D/U of the width,
 *   4 L^2 D / U: EXACT.
 * - the all-to-alls: 4 per block and micro-batch (q, k, v in, the attention
 *   output back), each sending (U-1)/U of t x D x a bytes from the largest
 *   rank, at the slowest link between two ranks of a stage (every stage
 *   taking the slowest stage's); not overlapped with compute and without a
 *   latency term (APPROXIMATION: 10-20 us per call is < 1% at Wan's
 *   shapes). The head's gather of the velocity (L x 64 fp32) is not
 *   counted (< 0.1 ms at 720p over NVLink).
 * - the activations between stages at the slowest link between a rank and
 *   its peer in the next stage (plan_options.peer_link_gbs for plan_make).
 * Step = the slowest replica's plan_pipeline_ms over its stage times (its
 * share, its ranks' speeds) + the exchange of predictions: a replica
 * receives the predictions of the micro-batches it did not run, each
 * out_dim x voxels x 4 bytes (fp32), 1/U of it per rank, at the slowest
 * link between replicas. */
#include "grid_choice.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_strbuf.h"

void plan_links_default(plan_links *l, const plan_options *o) {
  memset(l, 0, sizeof *l);
  l->nvlink = 0;
  l->pcie_peer_gbs = o->peer_link_gbs;
  l->nvlink_gbs = o->peer_link_gbs;
  l->inter_node_gbs = o->peer_link_gbs;
}

double plan_links_gbs(const plan_links *l, int a, int b) {
  if (l->node[a] != l->node[b]) return l->inter_node_gbs;
  return l->nvlink ? l->nvlink_gbs : l->pcie_peer_gbs;
}

double plan_pcie_gbs(int gen) {
  /* raw x16 rates per direction: 15.75, 31.5, 63, 126 GB/s */
  static const double raw[] = {15.754, 31.508, 63.015, 126.03};
  if (gen < 3 || gen > 6) return 0.0;
  return 0.8 * raw[gen - 3];
}

/* The smallest memory and speed among the devices of stage s (every
 * replica, every Ulysses rank): the stage is planned on that device. */
static plan_device stage_device(const plan_device *devs, plan_grid g, int s) {
  plan_device d = devs[plan_grid_rank(&g, (plan_grid_pos){0, s, 0})];
  for (int r = 0; r < g.replicas; r++)
    for (int u = 0; u < g.seq; u++) {
      const plan_device *x = &devs[plan_grid_rank(&g, (plan_grid_pos){r, s, u})];
      if (x->free_bytes < d.free_bytes) d.free_bytes = x->free_bytes;
      if (x->total_bytes < d.total_bytes) d.total_bytes = x->total_bytes;
      if (x->host_bytes && (!d.host_bytes || x->host_bytes < d.host_bytes))
        d.host_bytes = x->host_bytes;
      if (x->speed < d.speed) d.speed = x->speed;
    }
  return d;
}

/* The slowest link among the U ranks of any stage (0 with U = 1). */
static double seq_gbs(const plan_links *l, plan_grid g) {
  double gbs = 0.0;
  for (int r = 0; r < g.replicas; r++)
    for (int s = 0; s < g.stages; s++)
    for (int u = 0; u < g.seq; u++)
      for (int v = u + 1; v < g.seq; v++) {
        double x = plan_links_gbs(l, plan_grid_rank(&g, (plan_grid_pos){r, s, u}),
                                  plan_grid_rank(&g, (plan_grid_pos){r, s, v}));
        if (gbs == 0.0 || x < gbs) gbs = x;
      }
  return gbs;
}

/* The slowest link between a rank and its peer in the next stage (0 with
 * S = 1). */
static double next_stage_gbs(const plan_links *l, plan_grid g) {
  double gbs = 0.0;
  for (int r = 0; r < g.replicas; r++)
    for (int s = 0; s + 1 < g.stages; s++)
      for (int u = 0; u < g.seq; u++) {
        double x = plan_links_gbs(l, plan_grid_rank(&g, (plan_grid_pos){r, s, u}),
                                  plan_grid_rank(&g, (plan_grid_pos){r, s + 1, u}));
        if (gbs == 0.0 || x < gbs) gbs = x;
      }
  return gbs;
}

/* The slowest link between the last-stage ranks of two replicas (the same
 * u); 0 with R = 1. */
static double replica_gbs(const plan_links *l, plan_grid g) {
  double gbs = 0.0;
  int s = g.stages - 1;
  for (int r = 0; r < g.replicas; r++)
    for (int q = r + 1; q < g.replicas; q++)
      for (int u = 0; u < g.seq; u++) {
        double x = plan_links_gbs(l, plan_grid_rank(&g, (plan_grid_pos){r, s, u}),
                                  plan_grid_rank(&g, (plan_grid_pos){q, s, u}));
        if (gbs == 0.0 || x < gbs) gbs = x;
      }
  return gbs;
}

/* The speed of replica r's stage s: its slowest Ulysses rank's. */
static double replica_stage_speed(const plan_device *devs, plan_grid g, int r, int s) {
  double x = devs[plan_grid_rank(&g, (plan_grid_pos){r, s, 0})].speed;
  for (int u = 1; u < g.seq; u++)
    x = fmin(x, devs[plan_grid_rank(&g, (plan_grid_pos){r, s, u})].speed);
  return x;
}

/* Each replica's share of the M micro-batches (n[r]): plan_grid_owners on
 * the speed of its slowest rank, as the run shares them under --speed. */
static void replica_shares(const plan_device *devs, plan_grid g, int M, int *n) {
  double speed[PLAN_MAX_RANKS];
  int owner[1024];
  for (int r = 0; r < g.replicas; r++) {
    speed[r] = replica_stage_speed(devs, g, r, 0);
    for (int s = 1; s < g.stages; s++)
      speed[r] = fmin(speed[r], replica_stage_speed(devs, g, r, s));
    n[r] = 0;
  }
  plan_grid_owners(&g, speed, M, owner);
  for (int k = 0; k < M; k++) n[owner[k]]++;
}

/* The step's pipeline: replica r runs its n[r] micro-batches through the
 * plan's S stages at its own ranks' speeds (plan_stage_ms as plan_make
 * times a stage); the slowest replica sets it. */
static double replicas_pipeline_ms(const plan_model *m, const plan_device *devs, plan_grid g,
                                   const plan_workload *wu, const plan_options *so,
                                   const plan *p, const int *n) {
  double worst = 0.0;
  for (int r = 0; r < g.replicas; r++) {
    plan_workload wr = *wu;
    wr.micro_batches = n[r];
    double stage_ms[PLAN_MAX_RANKS];
    for (int s = 0; s < g.stages; s++) {
      const plan_rank *q = &p->r[s];
      stage_ms[s] = plan_stage_ms(m, &wr, so, &(plan_stage_desc){.order = q->order,
          .speed = replica_stage_speed(devs, g, r, s), .first_block = q->first_block,
          .last_block = q->last_block, .streamed = &p->streamed[q->first_block],
          .depth = q->prefetch_depth, .has_prev = s > 0, .has_embed = q->has_embed,
          .has_head = q->has_head});
    }
    worst = fmax(worst, plan_pipeline_ms(p->r[0].order, n[r], g.stages, stage_ms));
  }
  return worst;
}

/* The first line of a planner message into why. */
static void first_line(char *why, size_t cap, const char *msg) {
  size_t n = strcspn(msg, "\n");
  if (n >= cap) n = cap - 1;
  memcpy(why, msg, n);
  why[n] = '\0';
}

/* ---- one layout ------------------------------------------------------------ */

void plan_grid_evaluate(const plan_grid_inputs *in, plan_grid g, plan_grid_eval *out) {
  const plan_model *m = in->m;
  const plan_device *devs = in->devs;
  const plan_workload *w = in->w;
  const plan_options *o = in->o;
  const plan_links *links = in->links;
  const int nranks = in->nranks;
  memset(out, 0, sizeof *out);
  out->g = g;
  char err[8192];
  int M = w->micro_batches > 0 ? w->micro_batches : 1;
  if (plan_grid_check(&g, nranks, m->heads, m->num_blocks, M, err, sizeof err) != PLAN_OK) {
    first_line(out->why, sizeof out->why, err);
    return;
  }
  if (M > 1024) {
    snprintf(out->why, sizeof out->why, "%d micro-batches per step, at most 1024", M);
    return;
  }
  const int R = g.replicas, S = g.stages, U = g.seq;
  int share[PLAN_MAX_RANKS], Mr = 0, Mmin = M;
  replica_shares(devs, g, M, share);
  for (int r = 0; r < R; r++) Mr = share[r] > Mr ? share[r] : Mr;
  for (int r = 0; r < R; r++) Mmin = share[r] < Mmin ? share[r] : Mmin;
  plan_workload wu = *w;
  wu.micro_batches = Mr;
  wu.seq = U;
  out->micro_per_replica = Mr;
  out->tokens_per_rank = plan_rank_tokens(&wu);

  plan_budget b;
  if (plan_budget_parse(in->budget, S, &b, err, sizeof err) != PLAN_OK) {
    snprintf(out->why, sizeof out->why, "--budget for %d stage%s: ", S, S == 1 ? "" : "s");
    first_line(out->why + strlen(out->why), sizeof out->why - strlen(out->why), err);
    return;
  }
  plan_device sdev[PLAN_MAX_RANKS];
  for (int s = 0; s < S; s++) sdev[s] = stage_device(devs, g, s);
  plan_options so = *o;
  if (S > 1) so.peer_link_gbs = next_stage_gbs(links, g);
  if (U > 1) so.seq_link_gbs = seq_gbs(links, g);

  plan *p = malloc(sizeof *p);
  if (!p) {
    snprintf(out->why, sizeof out->why, "out of host memory");
    return;
  }
  const plan_inputs pin = {.m = m, .devs = sdev, .nranks = S, .b = &b, .w = &wu, .o = &so};
  if (plan_make(&pin, p, err, sizeof err) != PLAN_OK) {
    first_line(out->why, sizeof out->why, err);
    free(p);
    return;
  }
  for (int s = 0; s < S; s++) {
    const plan_rank *q = &p->r[s];
    double nb = (double)(q->last_block - q->first_block + 1);
    out->a2a_ms += Mr * nb * plan_seq_a2a_ms(m, &wu, &so); /* in the stage times */
    if (q->peak_bytes > out->peak_bytes) out->peak_bytes = q->peak_bytes;
    out->streamed_blocks += q->num_streamed;
  }
  out->order = p->r[0].order;
  out->pipeline_ms = replicas_pipeline_ms(m, devs, g, &wu, &so, p, share);
  if (R > 1) {
    int64_t fhw[3];
    plan_latent_grid(w, fhw);
    double latent = (double)m->out_dim * (double)(fhw[0] * fhw[1] * fhw[2]) * 4.0;
    double others = (double)(M - Mmin); /* the most a replica did not run */
    out->exchange_ms = others * latent / U / (replica_gbs(links, g) * 1e9) * 1e3;
  }
  out->step_ms = out->pipeline_ms + out->exchange_ms;
  out->ok = 1;
  free(p);
}

/* ---- every layout ------------------------------------------------------------ */

int plan_grid_choose(const plan_grid_inputs *in, const plan_grid *only, plan_grid_choice *out,
                     char *err, size_t errlen) {
  if (!in)
    return plan_fail(err, errlen, "grid: missing input");
  const plan_links *links = in->links;
  const int nranks = in->nranks;
  if (!in->m || !in->devs || !in->w || !in->o || !links || !out || nranks < 1 ||
      nranks > PLAN_MAX_RANKS)
    return plan_fail(err, errlen, "grid: missing input or %d ranks outside 1..%d", nranks,
                     PLAN_MAX_RANKS);
  for (int r = 0; r < nranks; r++) {
    double x = links->nvlink ? links->nvlink_gbs : links->pcie_peer_gbs;
    if (!(x > 0.0) || (links->node[r] != links->node[0] && !(links->inter_node_gbs > 0.0)) ||
        links->node[r] < 0)
      return plan_fail(err, errlen,
                       "grid: rank %d's links are not known (node %d, GPU link %g GB/s, "
                       "between nodes %g GB/s): every rate a layout uses must be > 0",
                       r, links->node[r], x, links->inter_node_gbs);
  }
  out->count = 0;
  out->chosen = -1;
  if (only) {
    plan_grid_evaluate(in, *only, &out->e[out->count++]);
  } else {
    /* R ascending, then U ascending: a tie keeps the simpler layout. */
    for (int R = 1; R <= nranks; R++)
      for (int U = 1; R * U <= nranks; U++) {
        if (nranks % (R * U)) continue;
        plan_grid g = {R, nranks / (R * U), U};
        plan_grid_evaluate(in, g, &out->e[out->count++]);
      }
  }
  for (int i = 0; i < out->count; i++)
    if (out->e[i].ok && (out->chosen < 0 || out->e[i].step_ms < out->e[out->chosen].step_ms))
      out->chosen = i;
  if (out->chosen < 0) {
    if (only) {
      char name[48];
      plan_grid_format(only, name, sizeof name);
      return err && errlen ? (snprintf(err, errlen, "--layout %s: %s", name, out->e[0].why),
                              PLAN_EINFEASIBLE)
                           : PLAN_EINFEASIBLE;
    }
    if (err && errlen)
      snprintf(err, errlen, "no layout of %d ranks fits (each refused one's reason is in the "
                            "table)", nranks);
    return PLAN_EINFEASIBLE;
  }
  return PLAN_OK;
}

/* ---- output ------------------------------------------------------------------ */

size_t plan_grid_format_table(const plan_grid_choice *c, char *buf, size_t cap) {
  plan_strbuf sb;
  plan_sb_init(&sb, buf, cap);
  plan_sb_add(&sb, "# layouts considered (R replicas x S stages x U sequence-parallel ranks); "
                   "PREDICTIONS, times per sampling step\n");
  plan_sb_add(&sb, "# %-8s %-6s %5s %9s %5s %8s %10s %10s %9s %9s %10s  %s\n", "layout", "fits",
              "M/rep", "tokens", "order", "streamed", "peak_GiB", "pipe_ms", "a2a_ms", "exch_ms",
              "step_ms", "note");
  for (int i = 0; i < c->count; i++) {
    const plan_grid_eval *e = &c->e[i];
    char name[48];
    plan_grid_format(&e->g, name, sizeof name);
    if (!e->ok) {
      plan_sb_add(&sb, "  %-8s %-6s %5s %9s %5s %8s %10s %10s %9s %9s %10s  refused: %s\n", name,
                  "no", "-", "-", "-", "-", "-", "-", "-", "-", "-", e->why);
      continue;
    }
    plan_sb_add(&sb, "%c %-8s %-6s %5d %9lld %5s %8d %10.2f %10.1f %9.1f %9.2f %10.1f  %s\n",
                i == c->chosen ? '*' : ' ', name, "yes", e->micro_per_replica,
                (long long)e->tokens_per_rank, plan_order_name(e->order), e->streamed_blocks,
                (double)e->peak_bytes / (1024.0 * 1024.0 * 1024.0), e->pipeline_ms, e->a2a_ms,
                e->exchange_ms, e->step_ms, i == c->chosen ? "chosen" : "");
  }
  return sb.len;
}

size_t plan_grid_format_json(const plan_grid_choice *c, char *buf, size_t cap) {
  plan_strbuf sb;
  plan_sb_init(&sb, buf, cap);
  char name[48] = "";
  if (c->chosen >= 0) plan_grid_format(&c->e[c->chosen].g, name, sizeof name);
  plan_sb_add(&sb, "{\"predictions\": true, \"chosen\": %s%s%s, \"layouts\": [",
              c->chosen >= 0 ? "\"" : "", c->chosen >= 0 ? name : "null",
              c->chosen >= 0 ? "\"" : "");
  for (int i = 0; i < c->count; i++) {
    const plan_grid_eval *e = &c->e[i];
    plan_grid_format(&e->g, name, sizeof name);
    plan_sb_add(&sb, "%s\n  {\"layout\": \"%s\", \"replicas\": %d, \"stages\": %d, \"seq\": %d, "
                     "\"ok\": %s",
                i ? "," : "", name, e->g.replicas, e->g.stages, e->g.seq,
                e->ok ? "true" : "false");
    if (!e->ok) {
      plan_sb_add(&sb, ", \"why\": \"");
      for (const char *p = e->why; *p; p++) {
        if (*p == '"' || *p == '\\') plan_sb_add(&sb, "\\%c", *p);
        else if ((unsigned char)*p < 0x20) plan_sb_add(&sb, " ");
        else plan_sb_add(&sb, "%c", *p);
      }
      plan_sb_add(&sb, "\"}");
      continue;
    }
    plan_sb_add(&sb,
                ", \"micro_per_replica\": %d, \"tokens_per_rank\": %lld, \"order\": \"%s\", "
                "\"streamed_blocks\": %d, \"peak_bytes\": %llu, \"pipeline_ms\": %.3f, "
                "\"a2a_ms\": %.3f, \"exchange_ms\": %.3f, \"step_ms\": %.3f}",
                e->micro_per_replica, (long long)e->tokens_per_rank, plan_order_name(e->order),
                e->streamed_blocks, (unsigned long long)e->peak_bytes, e->pipeline_ms, e->a2a_ms,
                e->exchange_ms, e->step_ms);
  }
  plan_sb_add(&sb, "\n]}\n");
  return sb.len;
}
