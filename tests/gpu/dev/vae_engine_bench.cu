/* The VAE decoder's convolutions through cuDNN's backend API, measured
 * (vae_engine_bench.h).
 *
 * Per shape, on the shared driver's operands and reference
 * (vae_bench_util.h):
 * - the decoder's legacy pick, timed and checked like every row (row 0);
 * - the operation graph (kernels/cuda/cudnn_graph.cuh's builder): X (1, ci,
 *   T, H, W) with NDHWC strides, W (co, ci, kt, kh, kw) with the strides of
 *   the decoder's (co, kt, kh, kw, ci) layout, Y (1, co, To, Ho, Wo) NDHWC,
 *   all of the storage type; a convolution of 3 spatial dims, fp32
 *   compute, cross-correlation, padding (0, kh/2, kw/2) before and after
 *   (none for the valid convs), strides (st, ss, ss), dilation 1; alpha 1,
 *   beta 0 (as cuda_vae_conv_descs_make describes it to the legacy API);
 * - the configurations of the heuristics in modes A, B and FALLBACK, in that
 *   order, one row per distinct (engine global index, knob choices);
 * - knob variants: for each engine the heuristics offered, in their order,
 *   unless cuDNN compiles it at run time (its plans take long to make),
 *   each knob whose range (CUDNN_ATTR_ENGINE_KNOB_INFO) has at most
 *   VAE_ENGINE_KNOB_VALUES values, each other value with the other knobs
 *   as the heuristic chose them, while the shape has fewer than
 *   VENG_MAX_ROWS rows (the graph and the configurations: vae_engine_cfgs.cu);
 * - the rows run in that order; past VENG_SHAPE_BUDGET_S seconds of the
 *   shape only the pick and each heuristic's first configuration still run (the
 *   plans of runtime-compiled engines can take a second each), so a shape
 *   takes seconds;
 * - per row: the engine's numerical notes (whether cuDNN marks it
 *   nondeterministic; whether the precision allows it: fp32 and tf32 refuse
 *   down-converting inputs, fp32 refuses tensor cores, as the legacy rule
 *   cuda_vae_conv_run_math does, and every precision refuses a reduced-
 *   precision reduction, the decoder accumulating in fp32) and behaviour
 *   notes; the plan's finalisation (a refusal is the row's status) and its
 *   host time; its workspace against the decoder's; the shared timing and
 *   comparisons. A row is eligible when not marked nondeterministic,
 *   allowed, within the workspace and bit-identical on a rerun; the best is
 *   the fastest eligible row, the pick included. */
#include <cudnn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib_check.cuh"
#include "log.h"
#include "vae_bench_util.h"
#include "vae_engine_bench.h"
#include "vae_engine_cfgs.cuh"

/* ---------------------------------------------------------------- runs */

/* A finalised plan with its variant packs (into ya and into yb). */
typedef struct plan_run {
  cudnnHandle_t dnn;
  cudnnBackendDescriptor_t plan, vpa, vpb;
  const void *ya;
} plan_run;

static cudnnStatus_t plan_conv(void *ctx, void *y) {
  const plan_run *c = (const plan_run *)ctx;
  return cudnnBackendExecute(c->dnn, c->plan, y == c->ya ? c->vpa : c->vpb);
}

static cudnnBackendDescriptor_t variant_pack(veng_pool *p, const vae_bench_shape *sh, void *y) {
  cudnnBackendDescriptor_t vp = veng_pool_new(p, CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  const int64_t uids[3] = {VENG_UID_X, VENG_UID_W, VENG_UID_Y};
  void *ptrs[3] = {sh->x, sh->w, y};
  void *ws = sh->ws;
  if (!vp ||
      cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3,
                               uids) != CUDNN_STATUS_SUCCESS ||
      cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3,
                               ptrs) != CUDNN_STATUS_SUCCESS ||
      cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1,
                               &ws) != CUDNN_STATUS_SUCCESS ||
      cudnnBackendFinalize(vp) != CUDNN_STATUS_SUCCESS)
    return NULL;
  return vp;
}

/* Row w: its plan, workspace, runs and comparisons. */
static void measure_row(vae_bench_shape *sh, veng_pool *p, veng_row *w) {
  if (!w->cfg) return;
  cudnnBackendDescriptor_t plan = veng_pool_new(p, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
  if (!plan) {
    w->note = "descriptor pool full";
    return;
  }
  const double t0 = veng_now_s();
  int64_t n = 0;
  w->status = cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE,
                                       1, &sh->dnn);
  if (w->status == CUDNN_STATUS_SUCCESS)
    w->status = cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                         CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &w->cfg);
  if (w->status == CUDNN_STATUS_SUCCESS) w->status = cudnnBackendFinalize(plan);
  w->plan_ms = 1e3 * (veng_now_s() - t0);
  if (w->status == CUDNN_STATUS_SUCCESS)
    w->status = cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                         CUDNN_TYPE_INT64, 1, &n, &w->ws);
  if (w->status != CUDNN_STATUS_SUCCESS) {
    w->ws = -1;
    return;
  }
  w->planned = 1;
  w->fits = w->ws >= 0 && (size_t)w->ws <= sh->s->ws_limit;
  if (w->ws < 0 || vae_bench_ws_reserve(sh, (size_t)w->ws) != 0) {
    w->note = "no device memory for the workspace";
    return;
  }
  plan_run ctx = {sh->dnn, plan, variant_pack(p, sh, sh->ya), variant_pack(p, sh, sh->yb),
                  sh->ya};
  if (!ctx.vpa || !ctx.vpb) {
    w->note = "variant pack refused";
    return;
  }
  const vae_bench_timing t = vae_bench_time(sh, plan_conv, &ctx);
  w->status = t.status;
  w->ran = t.ran;
  w->first_ms = t.first_ms;
  w->ms = t.ms;
  if (!w->ran) return;
  const vae_bench_check c = vae_bench_compare(sh);
  w->ndiff = c.ndiff;
  w->bitrep = c.bitrep;
  w->rel_l2 = c.rel_l2;
}

/* The decoder's pick through the legacy API, as row 0. */
typedef struct legacy_ctx {
  vae_bench_shape *sh;
  const cuda_vae_conv_pick *p;
} legacy_ctx;

static cudnnStatus_t legacy_conv(void *ctx, void *y) {
  const legacy_ctx *c = (const legacy_ctx *)ctx;
  return vae_bench_legacy(c->sh, c->p->algo, c->p->ws, y);
}

static void legacy_row(vae_bench_shape *sh, veng_row *w) {
  const cuda_vae_conv_pick *p = &sh->s->p[sh->i];
  memset(w, 0, sizeof *w);
  w->legacy = 1;
  w->key.engine = -1;
  w->src = "legacy";
  w->det = w->allowed = w->planned = 1; /* the decoder's rule chose it */
  w->ws = (int64_t)p->ws;
  w->fits = p->ws <= sh->s->ws_limit;
  w->plan_ms = NAN;
  CUDNN_CHECK(cudnnSetConvolutionMathType(sh->d.cd, p->math));
  legacy_ctx ctx = {sh, p};
  const vae_bench_timing t = vae_bench_time(sh, legacy_conv, &ctx);
  w->status = t.status;
  w->ran = t.ran;
  w->first_ms = t.first_ms;
  w->ms = t.ms;
  w->rel_l2 = NAN;
  if (w->ran) {
    const vae_bench_check c = vae_bench_compare(sh);
    w->ndiff = c.ndiff;
    w->bitrep = c.bitrep;
    w->rel_l2 = c.rel_l2;
  }
}

/* ---------------------------------------------------------------- output */

static const char *const note_name[] = {"tc", "down", "rpr", "fft", "nondet",
                                        "wino", "wino4", "wino6", "wino13", "nan"};
static const char *const behavior_name[] = {"rtc", "i8f", "i8b", "graph", "cublaslt"};

/* The set bits of mask as names (n of them known), '+'-joined; "-" when
 * none, "?" when unknown. */
static void bits_text(unsigned mask, int known, const char *const *names, int n, char *out,
                      size_t cap, const char *sep) {
  size_t len = 0;
  out[0] = '\0';
  if (!known) {
    snprintf(out, cap, "?");
    return;
  }
  for (int i = 0; i < 32 && len + 1 < cap; i++) {
    if (!(mask & (1u << i))) continue;
    const int w = i < n ? snprintf(out + len, cap - len, "%s%s", len ? sep : "", names[i])
                        : snprintf(out + len, cap - len, "%s%d", len ? sep : "", i);
    if (w < 0) break;
    len += (size_t)w;
    if (len >= cap) len = cap - 1;
  }
  if (!len) snprintf(out, cap, "-");
}

static const char *row_status(const veng_row *w) {
  if (w->note) return w->note;
  if (!w->cfg && !w->legacy) return "no configuration";
  return cudnnGetErrorString(w->status);
}

static void print_block(const vae_bench_shape *sh, const veng_rows *rs, int best,
                        const char *gnote) {
  vae_bench_shape_head(sh);
  printf("#   configurations: heuristic A %d, B %d, fallback %d (-1: the heuristic failed); %d "
         "knob variants; %d rows not run (past %.1f s a shape), %d more dropped (past %d "
         "rows)%s%s\n",
         rs->offered[0], rs->offered[1], rs->offered[2], rs->variants, rs->skipped,
         VENG_SHAPE_BUDGET_S, rs->dropped, VENG_MAX_ROWS, gnote ? "; " : "", gnote ? gnote : "");
  printf("#   %-22s %-8s %-3s %-4s %-16s %-12s %9s %4s %8s %9s %9s %6s %10s  %s | %s\n", "engine",
         "src", "det", "prec", "notes", "behavior", "ws_MiB", "fits", "plan_ms", "median_ms",
         "first_ms", "rerun", "rel_l2", "mark / status", "knobs");
  for (int j = 0; j < rs->n; j++) {
    const veng_row *w = &rs->r[j];
    char eng[48], notes[64], beh[48], knobs[512], mark[96] = "";
    if (w->legacy) {
      const cuda_vae_conv_pick *p = &sh->s->p[sh->i];
      snprintf(eng, sizeof eng, "%s(%s)", cuda_vae_conv_algo_name(p->algo),
               vae_math_name(p->math));
      snprintf(notes, sizeof notes, "-");
      snprintf(beh, sizeof beh, "-");
    } else {
      snprintf(eng, sizeof eng, "%lld", (long long)w->key.engine);
      bits_text(w->notes, w->notes_known, note_name, 10, notes, sizeof notes, "+");
      bits_text(w->behavior, w->notes_known, behavior_name, 5, beh, sizeof beh, "+");
    }
    vae_engine_key_text(&w->key, knobs, sizeof knobs);
    if (w->legacy) strcat(mark, "pick ");
    if (j == best) strcat(mark, "best ");
    if (!w->ran)
      snprintf(mark + strlen(mark), sizeof mark - strlen(mark), "%s", row_status(w));
    printf("    %-22s %-8s %-3s %-4s %-16s %-12s %9.1f %4s %8.1f %9.3f %9.3f %6s %10.3e  %s | "
           "%s\n",
           eng, w->src, w->det ? "yes" : "no", w->allowed ? "ok" : "no", notes, beh,
           w->ws >= 0 ? (double)w->ws / (1 << 20) : NAN, !w->planned ? "-" : w->fits ? "yes" : "no",
           w->plan_ms, w->ms, w->first_ms, !w->ran ? "-" : w->bitrep ? "same" : "DIFF", w->rel_l2,
           mark, knobs[0] ? knobs : "-");
  }
}

static void json_knobs(vae_jbuf *j, const vae_engine_key *k) {
  vae_jadd(j, "\"knobs\":[");
  for (int i = 0; i < k->nknobs; i++)
    vae_jadd(j, "%s[%lld,%lld]", i ? "," : "", (long long)k->type[i], (long long)k->val[i]);
  vae_jadd(j, "]");
}

static void json_block(vae_jbuf *j, const vae_bench_shape *sh, const veng_rows *rs, int best,
                       const vae_bench_result *r, const char *gnote) {
  vae_bench_shape_json_head(j, sh);
  vae_jnum(j, "pick_ms", r->pick_ms);
  vae_jadd(j, ",\"graph\":\"%s\",\"offered\":{\"A\":%d,\"B\":%d,\"fallback\":%d},"
              "\"variants\":%d,\"skipped\":%d,\"dropped\":%d,",
           gnote ? gnote : "ok", rs->offered[0], rs->offered[1], rs->offered[2], rs->variants,
           rs->skipped, rs->dropped);
  if (best >= 0) {
    vae_jadd(j, "\"best\":{\"engine\":%lld,\"src\":\"%s\",", (long long)rs->r[best].key.engine,
             rs->r[best].src);
    json_knobs(j, &rs->r[best].key);
    vae_jadd(j, "},");
  } else {
    vae_jadd(j, "\"best\":null,");
  }
  vae_jnum(j, "best_ms", r->best_ms);
  vae_jadd(j, ",\"engines\":[");
  for (int q = 0; q < rs->n; q++) {
    const veng_row *w = &rs->r[q];
    char notes[64], beh[48];
    bits_text(w->notes, w->notes_known, note_name, 10, notes, sizeof notes, "+");
    bits_text(w->behavior, w->notes_known, behavior_name, 5, beh, sizeof beh, "+");
    vae_jadd(j, "%s{\"engine\":%lld,\"src\":\"%s\",", q ? "," : "", (long long)w->key.engine,
             w->src);
    json_knobs(j, &w->key);
    vae_jadd(j, ",\"notes\":\"%s\",\"behavior\":\"%s\",\"det\":%d,\"allowed\":%d,"
                "\"status\":\"%s\",\"ws\":%lld,\"fits\":%d,\"ran\":%d,",
             w->legacy ? "-" : notes, w->legacy ? "-" : beh, w->det, w->allowed, row_status(w),
             (long long)w->ws, w->fits, w->ran);
    vae_jnum(j, "plan_ms", w->plan_ms);
    vae_jadd(j, ",");
    vae_jnum(j, "ms", w->ms);
    vae_jadd(j, ",");
    vae_jnum(j, "first_ms", w->first_ms);
    vae_jadd(j, ",\"bitrep\":%d,\"ndiff\":%lld,", w->ran && w->bitrep, (long long)w->ndiff);
    vae_jnum(j, "rel_l2", w->rel_l2);
    vae_jadd(j, "}");
  }
  vae_jadd(j, "]}");
}

/* ---------------------------------------------------------------- one shape */

/* The rows of one shape (vae_bench_kind.rows). */
static vae_bench_result engine_rows(vae_bench_shape *sh, vae_jbuf *j, void *user) {
  (void)user;
  vae_bench_result res = {0, NAN, NAN};
  const double t0 = veng_now_s();
  veng_rows *rs = (veng_rows *)calloc(1, sizeof *rs);
  veng_pool *p = (veng_pool *)calloc(1, sizeof *p);
  att_graph *g = (att_graph *)calloc(1, sizeof *g);
  if (!rs || !p || !g) sp_fatal("vae_engine_bench: out of host memory");
  legacy_row(sh, &rs->r[rs->n++]);
  cudnnStatus_t st;
  const char *what = NULL;
  char gnote[160];
  const char *gn = NULL;
  cudnnBackendDescriptor_t gr = veng_graph(sh->dnn, sh, g, &st, &what);
  if (!gr) {
    snprintf(gnote, sizeof gnote, "operation graph refused at %s: %s", what ? what : "?",
             cudnnGetErrorString(st));
    gn = gnote;
  } else {
    const cudnnBackendHeurMode_t modes[3] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_B,
                                             CUDNN_HEUR_MODE_FALLBACK};
    const char *const src[3] = {"A", "B", "fallback"};
    for (int m = 0; m < 3; m++) rs->offered[m] = veng_heur_rows(rs, p, sh->s, gr, modes[m], src[m]);
    veng_knob_rows(rs, p, sh->s, gr);
  }
  int best = -1;
  for (int q = 0; q < rs->n; q++) {
    veng_row *w = &rs->r[q];
    /* the first row of each heuristic runs whatever the time */
    int first = 1;
    for (int e = 1; e < q && first; e++) first = strcmp(rs->r[e].src, w->src) != 0;
    first &= strcmp(w->src, "knob") != 0;
    if (!w->legacy && !first && veng_now_s() > t0 + VENG_SHAPE_BUDGET_S) {
      w->note = "not run: past the shape's time budget";
      rs->skipped++;
    } else if (!w->legacy) {
      measure_row(sh, p, w);
    }
    const int eligible = w->ran && w->det && w->allowed && w->fits && w->bitrep;
    if (eligible && (best < 0 || w->ms < rs->r[best].ms)) best = q;
  }
  res.pick_ms = rs->r[0].ran ? rs->r[0].ms : NAN;
  res.best_ms = best >= 0 ? rs->r[best].ms : res.pick_ms;
  res.measured = isfinite(res.pick_ms);
  print_block(sh, rs, best, gn);
  json_block(j, sh, rs, best, &res, gn);
  veng_pool_free(p);
  att_graph_release(g);
  free(g);
  free(p);
  free(rs);
  return res;
}

int vae_engine_bench_run(const vae_algo_shapes *s, const vae_algo_opts *o) {
  char legend[768];
  snprintf(legend, sizeof legend,
           "# engines through cuDNN's backend API beside the decoder's legacy pick; src: "
           "heuristic mode A, B, the fallback list or a knob variant; det: not marked "
           "nondeterministic; prec: the precision allows its numerical notes; notes: tc tensor "
           "cores, down down-converts inputs, rpr reduced-precision reduction, nondet, fft, "
           "wino*; behavior: rtc runtime-compiled; fits: within the decoder's workspace; "
           "plan_ms: host time to finalise the plan; median of %d runs after %d warm-up "
           "(first: the first run alone); rerun: bits of a rerun; rel_l2: against the pick's "
           "output; knobs: cudnnBackendKnobType_t number=value",
           VAE_BENCH_REPS, VAE_BENCH_WARM);
  const vae_bench_kind k = {"vae_conv_engines", legend, engine_rows, NULL};
  return vae_bench_drive(s, o, &k);
}
