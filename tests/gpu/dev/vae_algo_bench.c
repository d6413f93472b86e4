/* The VAE decoder's convolution algorithms, measured (vae_algo_bench.h).
 *
 * Per shape: x (T, H, W, ci) uniform in [-1, 1), w (co, kt, kh, kw, ci)
 * uniform in +-1/sqrt(fan-in), in the decoder's storage type; the
 * descriptors of cuda_vae_conv_descs_make with the math type the decoder
 * asks the heuristic with; the heuristic's list
 * (cudnnGetConvolutionForwardAlgorithm_v7, every entry cuDNN returns). The
 * decoder's pick runs first into yref. Then each (algorithm, math type) the
 * list holds, with the math type the decoder would run it with (or the
 * listed one when the precision refuses it: measured, never eligible):
 * one run into ya (timed alone: "first"), BENCH_WARM untimed runs and
 * BENCH_REPS runs between CUDA events into yb, the median of those; an
 * algorithm whose first run takes over BENCH_SLOW_MS runs once more,
 * timed, without warm-up. ya against yb: bit-identical or not; ya against
 * yref: relative L2. An algorithm is eligible for the rule when cuDNN
 * flags it deterministic, the precision allows its math type, its
 * workspace fits the decoder's and a rerun gave the same bits. */
#include "vae_algo_bench.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_check.h"
#include "cuda_vae_conv.h"
#include "lib_check.cuh"
#include "log.h"
#include "vae_algo_kern.h"

#define BENCH_WARM 2
#define BENCH_REPS 5
#define BENCH_SLOW_MS 300.0 /* first run slower than this: one timed rerun only */
#define BENCH_MAX_ROWS 32   /* (algorithm, math) pairs of a shape */
#define JSON_CAP ((size_t)4 << 20)

struct vae_algo_shapes {
  int n;
  cuda_vae_conv_pick *p;
  kern_dtype dt;
  int tf32;
  size_t ws_limit;
};

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

/* ---------------------------------------------------------------- text */

static const char *math_name(cudnnMathType_t m) {
  switch (m) {
    case CUDNN_DEFAULT_MATH: return "default";
    case CUDNN_TENSOR_OP_MATH: return "tensor_op";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: return "tensor_op_conv";
    case CUDNN_FMA_MATH: return "fma";
    default: return "?";
  }
}

/* A bounded JSON text: appends while it fits, remembers that it did not. */
typedef struct jbuf {
  char *b;
  size_t len, cap;
  int full;
} jbuf;

__attribute__((format(printf, 2, 3))) static void jadd(jbuf *j, const char *fmt, ...) {
  if (j->full) return;
  va_list ap;
  va_start(ap, fmt);
  const int n = vsnprintf(j->b + j->len, j->cap - j->len, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= j->cap - j->len) {
    j->full = 1;
    j->b[j->len] = '\0';
    return;
  }
  j->len += (size_t)n;
}

/* A number for the JSON: null when it is not finite. */
static void jnum(jbuf *j, const char *key, double v) {
  if (isfinite(v))
    jadd(j, "\"%s\":%.4g", key, v);
  else
    jadd(j, "\"%s\":null", key);
}

/* ---------------------------------------------------------------- one shape */

/* The device side of a shape's runs. */
typedef struct runner {
  cudnnHandle_t dnn;
  cudaStream_t stream;
  cuda_vae_conv_descs d;
  const void *x, *w;
  void *ws;        /* grown on demand */
  size_t ws_bytes; /* allocated */
} runner;

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

/* Grows the workspace to at least need bytes: 0, or -1 when the device has
 * no memory for it (the CUDA error cleared, the old workspace kept). */
static int ws_reserve(runner *r, size_t need) {
  if (need <= r->ws_bytes) return 0;
  void *p = NULL;
  if (cudaMalloc(&p, need) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  if (r->ws) CUDA_CHECK(cudaFree(r->ws));
  r->ws = p;
  r->ws_bytes = need;
  return 0;
}

/* Frees the workspace: a large one (an FFT's) would otherwise crowd the
 * next shapes' operands out. */
static void ws_release(runner *r) {
  if (r->ws) CUDA_CHECK(cudaFree(r->ws));
  r->ws = NULL;
  r->ws_bytes = 0;
}

static cudnnStatus_t conv(runner *r, cudnnConvolutionFwdAlgo_t a, size_t ws, void *y) {
  const float alpha = 1.0f, beta = 0.0f;
  return cudnnConvolutionForward(r->dnn, &alpha, r->d.xd, r->x, r->d.wd, r->w, r->d.cd, a, r->ws,
                                 ws, &beta, r->d.yd, y);
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Runs row w's algorithm (its math type already set): the first run into
 * ya, then the timed runs into yb (y_bytes each). Fills first_ms, ms and
 * status. */
static void time_row(runner *r, row *w, void *ya, void *yb, size_t y_bytes) {
  cudaEvent_t ev[2 * (BENCH_REPS + 1)];
  for (int i = 0; i < 2 * (BENCH_REPS + 1); i++) CUDA_CHECK(cudaEventCreate(&ev[i]));
  CUDA_CHECK(cudaMemsetAsync(ya, 0xff, y_bytes, r->stream));
  CUDA_CHECK(cudaMemsetAsync(yb, 0xff, y_bytes, r->stream));
  CUDA_CHECK(cudaEventRecord(ev[0], r->stream));
  w->status = conv(r, w->algo, w->ws, ya);
  CUDA_CHECK(cudaEventRecord(ev[1], r->stream));
  CUDA_CHECK(cudaEventSynchronize(ev[1]));
  float ms = 0.0f;
  CUDA_CHECK(cudaEventElapsedTime(&ms, ev[0], ev[1]));
  w->first_ms = ms;
  if (w->status == CUDNN_STATUS_SUCCESS) {
    const int slow = w->first_ms > BENCH_SLOW_MS;
    const int warm = slow ? 0 : BENCH_WARM, reps = slow ? 1 : BENCH_REPS;
    for (int i = 0; i < warm && w->status == CUDNN_STATUS_SUCCESS; i++)
      w->status = conv(r, w->algo, w->ws, yb);
    int done = 0;
    for (; done < reps && w->status == CUDNN_STATUS_SUCCESS; done++) {
      CUDA_CHECK(cudaEventRecord(ev[2 + 2 * done], r->stream));
      w->status = conv(r, w->algo, w->ws, yb);
      CUDA_CHECK(cudaEventRecord(ev[3 + 2 * done], r->stream));
    }
    CUDA_CHECK(cudaStreamSynchronize(r->stream));
    double t[BENCH_REPS];
    for (int i = 0; i < done; i++) {
      CUDA_CHECK(cudaEventElapsedTime(&ms, ev[2 + 2 * i], ev[3 + 2 * i]));
      t[i] = ms;
    }
    if (w->status == CUDNN_STATUS_SUCCESS) {
      qsort(t, (size_t)done, sizeof *t, cmp_double);
      w->ms = done % 2 ? t[done / 2] : 0.5 * (t[done / 2 - 1] + t[done / 2]);
      w->ran = 1;
    }
  }
  for (int i = 0; i < 2 * (BENCH_REPS + 1); i++) CUDA_CHECK(cudaEventDestroy(ev[i]));
}

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

/* The device buffers of a shape. */
typedef struct shape_bufs {
  void *x, *w, *yref, *ya, *yb;
} shape_bufs;

static void bufs_free(shape_bufs *b) {
  void *p[5] = {b->x, b->w, b->yref, b->ya, b->yb};
  for (int i = 0; i < 5; i++)
    if (p[i]) CUDA_CHECK(cudaFree(p[i]));
  memset(b, 0, sizeof *b);
}

/* x, w and three outputs of shape k (E bytes an element): 0, or -1 with
 * everything freed and the CUDA error cleared. */
static int bufs_alloc(shape_bufs *b, int64_t nx, int64_t nw, int64_t ny, int E) {
  memset(b, 0, sizeof *b);
  void **p[5] = {&b->x, &b->w, &b->yref, &b->ya, &b->yb};
  const int64_t n[5] = {nx, nw, ny, ny, ny};
  for (int i = 0; i < 5; i++)
    if (cudaMalloc(p[i], (size_t)(n[i] * E)) != cudaSuccess) {
      (void)cudaGetLastError();
      *p[i] = NULL;
      bufs_free(b);
      return -1;
    }
  return 0;
}

/* The result of a shape for the totals: the pick's median and the best
 * eligible one's (the pick's when none is). */
typedef struct shape_result {
  int measured;
  double pick_ms, best_ms;
} shape_result;

static void print_block(const vae_algo_shapes *s, int i, const row *rows, int n, int best) {
  const cuda_vae_conv_pick *p = &s->p[i];
  const cuda_vae_conv_key *k = &p->key;
  printf("\n# shape %d: x (%lld, %lld, %lld, %lld) -> %lld, kernel %dx%dx%d, stride %d/%d%s; "
         "%lld runs a decode; pick %s (%s), %.1f MiB workspace of %.1f\n",
         i, (long long)k->T, (long long)k->H, (long long)k->W, (long long)k->ci, (long long)k->co,
         k->kt, k->kh, k->kw, k->st, k->ss, k->valid ? ", no padding" : "", (long long)p->runs,
         cuda_vae_conv_algo_name(p->algo), math_name(p->math), (double)p->ws / (1 << 20),
         (double)s->ws_limit / (1 << 20));
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
      snprintf(math, sizeof math, "%s(%s)", math_name(w->run), math_name(w->listed));
    else
      snprintf(math, sizeof math, "%s", math_name(w->run));
    printf("    %-24s %-16s %-3s %-5s %10.1f %4s %9.3f %9.3f %6s %10.3e  %s\n",
           cuda_vae_conv_algo_name(w->algo), math, w->det ? "yes" : "no",
           w->allowed ? "ok" : "no", w->ws_known ? (double)w->ws / (1 << 20) : NAN,
           !w->ws_known ? "-" : w->fits ? "yes" : "no", w->ms,
           w->first_ms, !w->ran ? "-" : w->bitrep ? "same" : "DIFF", w->rel_l2, mark);
  }
}

static void json_block(jbuf *j, const vae_algo_shapes *s, int i, const row *rows, int n,
                       int best, const shape_result *r) {
  const cuda_vae_conv_pick *p = &s->p[i];
  const cuda_vae_conv_key *k = &p->key;
  jadd(j, "%s{\"x\":[%lld,%lld,%lld,%lld],\"co\":%lld,\"kernel\":[%d,%d,%d],\"stride\":[%d,%d],"
          "\"valid\":%d,\"runs\":%lld,\"pick\":\"%s\",\"pick_math\":\"%s\",",
       i ? "," : "", (long long)k->T, (long long)k->H, (long long)k->W, (long long)k->ci,
       (long long)k->co, k->kt, k->kh, k->kw, k->st, k->ss, k->valid, (long long)p->runs,
       cuda_vae_conv_algo_name(p->algo), math_name(p->math));
  jnum(j, "pick_ms", r->pick_ms);
  if (best >= 0)
    jadd(j, ",\"best\":\"%s\",\"best_math\":\"%s\",", cuda_vae_conv_algo_name(rows[best].algo),
         math_name(rows[best].run));
  else
    jadd(j, ",\"best\":null,\"best_math\":null,");
  jnum(j, "best_ms", r->best_ms);
  jadd(j, ",\"algos\":[");
  for (int q = 0; q < n; q++) {
    const row *w = &rows[q];
    jadd(j, "%s{\"algo\":\"%s\",\"math\":\"%s\",\"listed_math\":\"%s\",\"det\":%d,"
            "\"allowed\":%d,\"status\":\"%s\",\"ws\":%lld,\"fits\":%d,\"ran\":%d,",
         q ? "," : "", cuda_vae_conv_algo_name(w->algo), math_name(w->run), math_name(w->listed),
         w->det, w->allowed, w->note ? w->note : cudnnGetErrorString(w->status),
         w->ws_known ? (long long)w->ws : -1LL, w->fits, w->ran);
    jnum(j, "ms", w->ms);
    jadd(j, ",");
    jnum(j, "first_ms", w->first_ms);
    jadd(j, ",\"bitrep\":%d,\"ndiff\":%lld,", w->ran && w->bitrep, (long long)w->ndiff);
    jnum(j, "rel_l2", w->rel_l2);
    jadd(j, "}");
  }
  jadd(j, "]}");
}

/* Every row of shape i that the heuristic supports: workspace, runs,
 * comparisons; the pick's row marked. Returns the best eligible row, -1
 * when none is. */
static int measure_rows(runner *r, const vae_algo_shapes *s, int i, row *rows, int n,
                        const shape_bufs *b, int64_t ny) {
  const cuda_vae_conv_pick *p = &s->p[i];
  const int bf16 = s->dt != KERN_DTYPE_F32, E = bf16 ? 2 : 4;
  int best = -1, pick_found = 0;
  for (int j = 0; j < n; j++) {
    row *w = &rows[j];
    w->pick = !pick_found && w->algo == p->algo && w->run == p->math;
    pick_found |= w->pick;
    if (w->status != CUDNN_STATUS_SUCCESS) continue;
    CUDNN_CHECK(cudnnSetConvolutionMathType(r->d.cd, w->run));
    w->status = cudnnGetConvolutionForwardWorkspaceSize(r->dnn, r->d.xd, r->d.wd, r->d.cd,
                                                        r->d.yd, w->algo, &w->ws);
    if (w->status != CUDNN_STATUS_SUCCESS) continue;
    w->ws_known = 1;
    w->fits = w->ws <= s->ws_limit;
    if (ws_reserve(r, w->ws) != 0) {
      w->note = "no device memory for the workspace";
      continue;
    }
    time_row(r, w, b->ya, b->yb, (size_t)(ny * E));
    if (!w->ran) continue;
    const vae_algo_diff rerun = vae_algo_compare(b->ya, b->yb, ny, bf16, r->stream);
    const vae_algo_diff ref = vae_algo_compare(b->ya, b->yref, ny, bf16, r->stream);
    w->ndiff = rerun.ndiff;
    w->bitrep = rerun.ndiff == 0;
    w->rel_l2 = ref.r2 > 0.0 ? sqrt(ref.d2 / ref.r2) : NAN;
    const int eligible = w->det && w->allowed && w->fits && w->bitrep;
    if (eligible && (best < 0 || w->ms < rows[best].ms)) best = j;
  }
  if (!pick_found)
    fprintf(stderr, "vae_algo_bench: shape %d: the pick %s (%s) is not in cuDNN's list\n", i,
            cuda_vae_conv_algo_name(p->algo), math_name(p->math));
  return best;
}

/* Shape i of s: operands, the pick's output, every row; printed and added
 * to the JSON. */
static shape_result bench_shape(runner *r, const vae_algo_shapes *s, int i, uint64_t seed,
                                int max_algos, cudnnConvolutionFwdAlgoPerf_t *perf, jbuf *j) {
  shape_result res = {0, NAN, NAN};
  const cuda_vae_conv_pick *p = &s->p[i];
  const cuda_vae_conv_key *k = &p->key;
  const int bf16 = s->dt != KERN_DTYPE_F32, E = bf16 ? 2 : 4;
  int To, Ho, Wo;
  cuda_vae_conv_out_dims(k, &To, &Ho, &Wo);
  const int64_t fan = k->ci * k->kt * k->kh * k->kw;
  const int64_t nx = k->T * k->H * k->W * k->ci, nw = k->co * fan;
  const int64_t ny = (int64_t)To * Ho * Wo * k->co;
  shape_bufs b;
  if (bufs_alloc(&b, nx, nw, ny, E) != 0) {
    printf("\n# shape %d: x (%lld, %lld, %lld, %lld) -> %lld: no device memory for its "
           "operands; not measured\n",
           i, (long long)k->T, (long long)k->H, (long long)k->W, (long long)k->ci,
           (long long)k->co);
    return res;
  }
  vae_algo_fill(b.x, nx, bf16, 1.0f, seed + 2 * (uint64_t)i, r->stream);
  vae_algo_fill(b.w, nw, bf16, 1.0f / sqrtf((float)fan), seed + 2 * (uint64_t)i + 1, r->stream);
  r->x = b.x;
  r->w = b.w;
  /* The heuristic is asked with the math type the decoder asks with. */
  cuda_vae_conv_descs_make(s->dt, cuda_vae_conv_ask_math(s->dt, s->tf32), k, &r->d);
  int got = 0;
  CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(r->dnn, r->d.xd, r->d.wd, r->d.cd, r->d.yd,
                                                     max_algos, &got, perf));
  /* The decoder's pick, as it runs it: the reference output. */
  CUDNN_CHECK(cudnnSetConvolutionMathType(r->d.cd, p->math));
  if (ws_reserve(r, p->ws) != 0)
    sp_fatal("vae_algo_bench: shape %d: no device memory for the pick's %zu workspace bytes", i,
             p->ws);
  CUDA_CHECK(cudaMemsetAsync(b.yref, 0xff, (size_t)(ny * E), r->stream));
  CUDNN_CHECK(conv(r, p->algo, p->ws, b.yref));
  row rows[BENCH_MAX_ROWS];
  const int n = list_rows(s, perf, got, rows);
  const int best = measure_rows(r, s, i, rows, n, &b, ny);
  for (int q = 0; q < n; q++)
    if (rows[q].pick && rows[q].ran) res.pick_ms = rows[q].ms;
  res.best_ms = best >= 0 ? rows[best].ms : res.pick_ms;
  res.measured = isfinite(res.pick_ms);
  print_block(s, i, rows, n, best);
  json_block(j, s, i, rows, n, best, &res);
  fflush(stdout);
  cuda_vae_conv_descs_free(&r->d);
  bufs_free(&b);
  ws_release(r);
  return res;
}

/* ---------------------------------------------------------------- the run */

/* Decode totals: the pick's and the best's milliseconds times runs, per
 * kernel class (3x3x3, 3x1x1, 1x3x3, 1x1x1, other). */
enum { CLASSES = 5 };
static const char *const class_name[CLASSES] = {"3x3x3", "3x1x1", "1x3x3", "1x1x1", "other"};
static int kernel_class(const cuda_vae_conv_key *k) {
  if (k->kt == 3 && k->kh == 3 && k->kw == 3) return 0;
  if (k->kt == 3 && k->kh == 1 && k->kw == 1) return 1;
  if (k->kt == 1 && k->kh == 3 && k->kw == 3) return 2;
  if (k->kt == 1 && k->kh == 1 && k->kw == 1) return 3;
  return 4;
}

int vae_algo_bench_run(const vae_algo_shapes *s, const vae_algo_opts *o) {
  runner r;
  memset(&r, 0, sizeof r);
  CUDA_CHECK(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
  CUDNN_CHECK(cudnnCreate(&r.dnn));
  CUDNN_CHECK(cudnnSetStream(r.dnn, r.stream));
  int max_algos = 0;
  CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(r.dnn, &max_algos));
  cudnnConvolutionFwdAlgoPerf_t *perf = calloc((size_t)max_algos, sizeof *perf);
  jbuf j = {malloc(JSON_CAP), 0, JSON_CAP, 0};
  if (!perf || !j.b) sp_fatal("vae_algo_bench: out of host memory");
  j.b[0] = '\0';
  struct cudaDeviceProp prop;
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  printf("# VAE decoder convolutions, %s, latent %lld frames of %lldx%lld, on %s, cudnn %zu: "
         "%d shapes\n",
         o->precision, (long long)o->frames, (long long)o->h, (long long)o->w, prop.name,
         cudnnGetVersion(), s->n);
  printf("# math: run with (in brackets the heuristic's when the precision's rule changes "
         "it); det: cuDNN's flag; prec: the precision allows it; fits: within the decoder's "
         "workspace; median of %d runs after %d warm-up (first: the first run alone); rerun: "
         "bits of a rerun; rel_l2: against the pick's output\n",
         BENCH_REPS, BENCH_WARM);
  jadd(&j, "{\"bench\":\"vae_conv_algos\",\"precision\":\"%s\",\"latent\":[%lld,%lld,%lld],"
           "\"device\":\"%s\",\"cudnn\":%zu,\"ws_limit\":%zu,\"warm\":%d,\"reps\":%d,"
           "\"shapes\":[",
       o->precision, (long long)o->frames, (long long)o->h, (long long)o->w, prop.name,
       cudnnGetVersion(), s->ws_limit, BENCH_WARM, BENCH_REPS);
  double cur[CLASSES] = {0}, best[CLASSES] = {0};
  int failed = 0;
  for (int i = 0; i < s->n; i++) {
    const shape_result res = bench_shape(&r, s, i, o->seed, max_algos, perf, &j);
    if (!res.measured) {
      failed = 1;
      continue;
    }
    const int c = kernel_class(&s->p[i].key);
    cur[c] += res.pick_ms * (double)s->p[i].runs;
    best[c] += res.best_ms * (double)s->p[i].runs;
  }
  double cur_all = 0.0, best_all = 0.0;
  printf("\n# decode totals (median ms x runs a decode): class, pick, best deterministic "
         "bit-reproducible within the workspace, saving\n");
  jadd(&j, "],\"classes\":{");
  for (int c = 0; c < CLASSES; c++) {
    cur_all += cur[c];
    best_all += best[c];
    printf("    %-6s %10.2f %10.2f %10.2f\n", class_name[c], cur[c], best[c], cur[c] - best[c]);
    jadd(&j, "%s\"%s\":{\"pick_ms\":%.3f,\"best_ms\":%.3f}", c ? "," : "", class_name[c], cur[c],
         best[c]);
  }
  printf("    %-6s %10.2f %10.2f %10.2f\n", "all", cur_all, best_all, cur_all - best_all);
  jadd(&j, "},\"decode_conv_ms\":%.3f,\"decode_conv_best_ms\":%.3f,\"saving_ms\":%.3f,"
           "\"complete\":%s}",
       cur_all, best_all, cur_all - best_all, failed ? "false" : "true");
  if (j.full) {
    fprintf(stderr, "vae_algo_bench: the JSON line passed %zu bytes; not printed\n", JSON_CAP);
    failed = 1;
  } else {
    printf("%s\n", j.b);
  }
  if (o->json_path && !j.full) {
    FILE *f = fopen(o->json_path, "w");
    int bad = !f;
    if (f) {
      bad |= fprintf(f, "%s\n", j.b) < 0;
      bad |= fclose(f) != 0;
    }
    if (bad) {
      fprintf(stderr, "vae_algo_bench: cannot write %s\n", o->json_path);
      failed = 1;
    }
  }
  ws_release(&r);
  CUDNN_CHECK(cudnnDestroy(r.dnn));
  CUDA_CHECK(cudaStreamDestroy(r.stream));
  free(perf);
  free(j.b);
  return failed;
}
