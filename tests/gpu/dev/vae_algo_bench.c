/* The VAE decoder's convolution algorithms, measured (vae_algo_bench.h).
 *
 * The shared driver (vae_bench_util.h) gives each shape its operands, the
 * decoder's descriptors and its pick's output yref. Here: the heuristic's
 * list (cudnnGetConvolutionForwardAlgorithm_v7, every entry cuDNN returns,
 * asked with the math type the decoder asks with), then each (algorithm,
 * math type) the list holds, with the math type the decoder would run it
 * with (or the listed one when the precision refuses it: measured, never
 * eligible), timed and compared by the shared helpers. An algorithm is
 * eligible for the rule when cuDNN flags it deterministic, the precision
 * allows its math type, its workspace fits the decoder's and a rerun gave
 * the same bits. */
#include "vae_algo_bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_vae_conv.h"
#include "lib_check.cuh"
#include "log.h"
#include "vae_bench_util.h"

#define BENCH_MAX_ROWS 32 /* (algorithm, math) pairs of a shape */

vae_algo_shapes *vae_algo_shapes_take(const kern_cuda_vae *v) {
  vae_algo_shapes *s = calloc(1, sizeof *s);
  if (!s) {
    sp_log_error("vae_algo_bench: out of host memory");
    return NULL;
  }
  kern_dtype dt;
  int tf32;
  size_t ws;
  const int n = cuda_vae_conv_picks(v, NULL, 0, &dt, &tf32, &ws);
  s->p = calloc((size_t)(n > 0 ? n : 1), sizeof *s->p);
  if (!s->p) {
    free(s);
    sp_log_error("vae_algo_bench: out of host memory for %d shapes", n);
    return NULL;
  }
  s->n = cuda_vae_conv_picks(v, s->p, n, &s->dt, &s->tf32, &s->ws_limit);
  return s;
}

void vae_algo_shapes_free(vae_algo_shapes *s) {
  if (!s) return;
  free(s->p);
  free(s);
}

/* ---------------------------------------------------------------- one shape */

/* One (algorithm, math) row of a shape. */
typedef struct row {
  cudnnConvolutionFwdAlgo_t algo;
  cudnnMathType_t listed, run; /* the heuristic's pairing; the math type it ran with */
  cudnnStatus_t status;        /* the heuristic's, then the workspace query's, then the run's */
  int det, allowed, ws_known, fits, ran, bitrep, pick;
  size_t ws;
  double first_ms, ms, rel_l2;
  int64_t ndiff;
  const char *note; /* why it did not run */
} row;

/* The rows of the heuristic's list perf (got entries), one per (algorithm,
 * math type run with), into rows; returns their count. */
static int list_rows(const vae_algo_shapes *s, const cudnnConvolutionFwdAlgoPerf_t *perf, int got,
                     row *rows) {
  int n = 0;
  for (int i = 0; i < got && n < BENCH_MAX_ROWS; i++) {
    row w;
    memset(&w, 0, sizeof w);
    w.algo = perf[i].algo;
    w.listed = perf[i].mathType;
    w.status = perf[i].status;
    w.det = perf[i].determinism == CUDNN_DETERMINISTIC;
    w.allowed = cuda_vae_conv_run_math(s->dt, s->tf32, w.listed, &w.run);
    if (!w.allowed) w.run = w.listed;
    w.ms = w.first_ms = w.rel_l2 = NAN;
    /* the first entry of a pair, or the first supported one: the one the
     * decoder's walk down the list would meet */
    int dup = -1;
    for (int j = 0; j < n && dup < 0; j++)
      if (rows[j].algo == w.algo && rows[j].run == w.run) dup = j;
    if (dup < 0)
      rows[n++] = w;
    else if (rows[dup].status != CUDNN_STATUS_SUCCESS && w.status == CUDNN_STATUS_SUCCESS)
      rows[dup] = w;
  }
  return n;
}

static void print_block(const vae_bench_shape *sh, const row *rows, int n, int best) {
  vae_bench_shape_head(sh);
  printf("#   %-24s %-16s %-3s %-5s %10s %4s %9s %9s %6s %10s  %s\n", "algo", "math", "det",
         "prec", "ws_MiB", "fits", "median_ms", "first_ms", "rerun", "rel_l2", "mark / status");
  for (int j = 0; j < n; j++) {
    const row *w = &rows[j];
    char mark[96] = "";
    if (w->pick) strcat(mark, "pick ");
    if (j == best) strcat(mark, "best ");
    if (!w->ran)
      snprintf(mark + strlen(mark), sizeof mark - strlen(mark), "%s",
               w->note ? w->note : cudnnGetErrorString(w->status));
    char math[32];
    if (w->run != w->listed)
      snprintf(math, sizeof math, "%s(%s)", vae_math_name(w->run), vae_math_name(w->listed));
    else
      snprintf(math, sizeof math, "%s", vae_math_name(w->run));
    printf("    %-24s %-16s %-3s %-5s %10.1f %4s %9.3f %9.3f %6s %10.3e  %s\n",
           cuda_vae_conv_algo_name(w->algo), math, w->det ? "yes" : "no",
           w->allowed ? "ok" : "no", w->ws_known ? (double)w->ws / (1 << 20) : NAN,
           !w->ws_known ? "-" : w->fits ? "yes" : "no", w->ms,
           w->first_ms, !w->ran ? "-" : w->bitrep ? "same" : "DIFF", w->rel_l2, mark);
  }
}

static void json_block(vae_jbuf *j, const vae_bench_shape *sh, const row *rows, int n, int best,
                       const vae_bench_result *r) {
  vae_bench_shape_json_head(j, sh);
  vae_jnum(j, "pick_ms", r->pick_ms);
  if (best >= 0)
    vae_jadd(j, ",\"best\":\"%s\",\"best_math\":\"%s\",",
             cuda_vae_conv_algo_name(rows[best].algo), vae_math_name(rows[best].run));
  else
    vae_jadd(j, ",\"best\":null,\"best_math\":null,");
  vae_jnum(j, "best_ms", r->best_ms);
  vae_jadd(j, ",\"algos\":[");
  for (int q = 0; q < n; q++) {
    const row *w = &rows[q];
    vae_jadd(j, "%s{\"algo\":\"%s\",\"math\":\"%s\",\"listed_math\":\"%s\",\"det\":%d,"
                "\"allowed\":%d,\"status\":\"%s\",\"ws\":%lld,\"fits\":%d,\"ran\":%d,",
             q ? "," : "", cuda_vae_conv_algo_name(w->algo), vae_math_name(w->run),
             vae_math_name(w->listed), w->det, w->allowed,
             w->note ? w->note : cudnnGetErrorString(w->status),
             w->ws_known ? (long long)w->ws : -1LL, w->fits, w->ran);
    vae_jnum(j, "ms", w->ms);
    vae_jadd(j, ",");
    vae_jnum(j, "first_ms", w->first_ms);
    vae_jadd(j, ",\"bitrep\":%d,\"ndiff\":%lld,", w->ran && w->bitrep, (long long)w->ndiff);
    vae_jnum(j, "rel_l2", w->rel_l2);
    vae_jadd(j, "}");
  }
  vae_jadd(j, "]}");
}

/* A legacy run of one row's algorithm for the shared timer. */
typedef struct legacy_run {
  vae_bench_shape *sh;
  const row *w;
} legacy_run;

static cudnnStatus_t legacy_conv(void *ctx, void *y) {
  const legacy_run *c = ctx;
  return vae_bench_legacy(c->sh, c->w->algo, c->w->ws, y);
}

/* Every row of the shape that the heuristic supports: workspace, runs,
 * comparisons; the pick's row marked. Returns the best eligible row, -1
 * when none is. */
static int measure_rows(vae_bench_shape *sh, row *rows, int n) {
  const vae_algo_shapes *s = sh->s;
  const cuda_vae_conv_pick *p = &s->p[sh->i];
  int best = -1, pick_found = 0;
  for (int j = 0; j < n; j++) {
    row *w = &rows[j];
    w->pick = !pick_found && w->algo == p->algo && w->run == p->math;
    pick_found |= w->pick;
    if (w->status != CUDNN_STATUS_SUCCESS) continue;
    CUDNN_CHECK(cudnnSetConvolutionMathType(sh->d.cd, w->run));
    w->status = cudnnGetConvolutionForwardWorkspaceSize(sh->dnn, sh->d.xd, sh->d.wd, sh->d.cd,
                                                        sh->d.yd, w->algo, &w->ws);
    if (w->status != CUDNN_STATUS_SUCCESS) continue;
    w->ws_known = 1;
    w->fits = w->ws <= s->ws_limit;
    if (vae_bench_ws_reserve(sh, w->ws) != 0) {
      w->note = "no device memory for the workspace";
      continue;
    }
    legacy_run ctx = {sh, w};
    const vae_bench_timing t = vae_bench_time(sh, legacy_conv, &ctx);
    w->status = t.status;
    w->ran = t.ran;
    w->first_ms = t.first_ms;
    w->ms = t.ms;
    if (!w->ran) continue;
    const vae_bench_check c = vae_bench_compare(sh);
    w->ndiff = c.ndiff;
    w->bitrep = c.bitrep;
    w->rel_l2 = c.rel_l2;
    const int eligible = w->det && w->allowed && w->fits && w->bitrep;
    if (eligible && (best < 0 || w->ms < rows[best].ms)) best = j;
  }
  if (!pick_found)
    fprintf(stderr, "vae_algo_bench: shape %d: the pick %s (%s) is not in cuDNN's list\n", sh->i,
            cuda_vae_conv_algo_name(p->algo), vae_math_name(p->math));
  return best;
}

/* The rows of one shape (vae_bench_kind.rows): the heuristic's list, each
 * measured; printed and added to the JSON. */
static vae_bench_result algo_rows(vae_bench_shape *sh, vae_jbuf *j, void *user) {
  (void)user;
  vae_bench_result res = {0, NAN, NAN};
  int max_algos = 0;
  CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(sh->dnn, &max_algos));
  cudnnConvolutionFwdAlgoPerf_t *perf = calloc((size_t)max_algos, sizeof *perf);
  if (!perf) sp_fatal("vae_algo_bench: out of host memory");
  int got = 0;
  CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(sh->dnn, sh->d.xd, sh->d.wd, sh->d.cd,
                                                     sh->d.yd, max_algos, &got, perf));
  row rows[BENCH_MAX_ROWS];
  const int n = list_rows(sh->s, perf, got, rows);
  free(perf);
  const int best = measure_rows(sh, rows, n);
  for (int q = 0; q < n; q++)
    if (rows[q].pick && rows[q].ran) res.pick_ms = rows[q].ms;
  res.best_ms = best >= 0 ? rows[best].ms : res.pick_ms;
  res.measured = isfinite(res.pick_ms);
  print_block(sh, rows, n, best);
  json_block(j, sh, rows, n, best, &res);
  return res;
}

int vae_algo_bench_run(const vae_algo_shapes *s, const vae_algo_opts *o) {
  char legend[512];
  snprintf(legend, sizeof legend,
           "# math: run with (in brackets the heuristic's when the precision's rule changes "
           "it); det: cuDNN's flag; prec: the precision allows it; fits: within the decoder's "
           "workspace; median of %d runs after %d warm-up (first: the first run alone); rerun: "
           "bits of a rerun; rel_l2: against the pick's output",
           VAE_BENCH_REPS, VAE_BENCH_WARM);
  const vae_bench_kind k = {"vae_conv_algos", legend, algo_rows, NULL};
  return vae_bench_drive(s, o, &k);
}
