/* The VAE convolution benchmarks' shared driver and row helpers
 * (vae_bench_util.h).
 *
 * Per shape: x (T, H, W, ci) uniform in [-1, 1), w (co, kt, kh, kw, ci)
 * uniform in +-1/sqrt(fan-in), in the decoder's storage type, from the
 * seed and the shape's index; the descriptors of cuda_vae_conv_descs_make
 * with the math type the decoder asks the heuristic with; the decoder's
 * pick, run as the decoder runs it, into yref. A row's timing: one run
 * into ya (timed alone: "first"), VAE_BENCH_WARM untimed runs and
 * VAE_BENCH_REPS runs between CUDA events into yb, the median of those;
 * a row whose first run takes over VAE_BENCH_SLOW_MS runs once more,
 * timed, without warm-up. */
#include "vae_bench_util.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_check.h"
#include "lib_check.cuh"
#include "log.h"
#include "vae_algo_kern.h"

#define JSON_CAP ((size_t)4 << 20)

void vae_jadd(vae_jbuf *j, const char *fmt, ...) {
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

void vae_jnum(vae_jbuf *j, const char *key, double v) {
  if (isfinite(v))
    vae_jadd(j, "\"%s\":%.4g", key, v);
  else
    vae_jadd(j, "\"%s\":null", key);
}

const char *vae_math_name(cudnnMathType_t m) {
  switch (m) {
    case CUDNN_DEFAULT_MATH: return "default";
    case CUDNN_TENSOR_OP_MATH: return "tensor_op";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: return "tensor_op_conv";
    case CUDNN_FMA_MATH: return "fma";
    default: return "?";
  }
}

/* ---------------------------------------------------------------- rows */

int vae_bench_ws_reserve(vae_bench_shape *sh, size_t need) {
  if (need <= sh->ws_bytes) return 0;
  void *p = NULL;
  if (cudaMalloc(&p, need) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  if (sh->ws) CUDA_CHECK(cudaFree(sh->ws));
  sh->ws = p;
  sh->ws_bytes = need;
  return 0;
}

/* Frees the workspace: a large one (an FFT's) would otherwise crowd the
 * next shapes' operands out. */
static void ws_release(vae_bench_shape *sh) {
  if (sh->ws) CUDA_CHECK(cudaFree(sh->ws));
  sh->ws = NULL;
  sh->ws_bytes = 0;
}

cudnnStatus_t vae_bench_legacy(vae_bench_shape *sh, cudnnConvolutionFwdAlgo_t a, size_t ws,
                               void *y) {
  const float alpha = 1.0f, beta = 0.0f;
  return cudnnConvolutionForward(sh->dnn, &alpha, sh->d.xd, sh->x, sh->d.wd, sh->w, sh->d.cd, a,
                                 sh->ws, ws, &beta, sh->d.yd, y);
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

vae_bench_timing vae_bench_time(vae_bench_shape *sh, vae_bench_conv_fn f, void *ctx) {
  enum { NEV = 2 * (VAE_BENCH_REPS + 1) };
  vae_bench_timing t = {CUDNN_STATUS_SUCCESS, 0, NAN, NAN};
  cudaEvent_t ev[NEV];
  for (int i = 0; i < NEV; i++) CUDA_CHECK(cudaEventCreate(&ev[i]));
  CUDA_CHECK(cudaMemsetAsync(sh->ya, 0xff, sh->y_bytes, sh->stream));
  CUDA_CHECK(cudaMemsetAsync(sh->yb, 0xff, sh->y_bytes, sh->stream));
  CUDA_CHECK(cudaEventRecord(ev[0], sh->stream));
  t.status = f(ctx, sh->ya);
  CUDA_CHECK(cudaEventRecord(ev[1], sh->stream));
  CUDA_CHECK(cudaEventSynchronize(ev[1]));
  float ms = 0.0f;
  CUDA_CHECK(cudaEventElapsedTime(&ms, ev[0], ev[1]));
  t.first_ms = ms;
  if (t.status == CUDNN_STATUS_SUCCESS) {
    const int slow = t.first_ms > VAE_BENCH_SLOW_MS;
    const int warm = slow ? 0 : VAE_BENCH_WARM, reps = slow ? 1 : VAE_BENCH_REPS;
    for (int i = 0; i < warm && t.status == CUDNN_STATUS_SUCCESS; i++) t.status = f(ctx, sh->yb);
    int done = 0;
    for (; done < reps && t.status == CUDNN_STATUS_SUCCESS; done++) {
      CUDA_CHECK(cudaEventRecord(ev[2 + 2 * done], sh->stream));
      t.status = f(ctx, sh->yb);
      CUDA_CHECK(cudaEventRecord(ev[3 + 2 * done], sh->stream));
    }
    CUDA_CHECK(cudaStreamSynchronize(sh->stream));
    double v[VAE_BENCH_REPS];
    for (int i = 0; i < done; i++) {
      CUDA_CHECK(cudaEventElapsedTime(&ms, ev[2 + 2 * i], ev[3 + 2 * i]));
      v[i] = ms;
    }
    if (t.status == CUDNN_STATUS_SUCCESS) {
      qsort(v, (size_t)done, sizeof *v, cmp_double);
      t.ms = done % 2 ? v[done / 2] : 0.5 * (v[done / 2 - 1] + v[done / 2]);
      t.ran = 1;
    }
  }
  for (int i = 0; i < NEV; i++) CUDA_CHECK(cudaEventDestroy(ev[i]));
  return t;
}

vae_bench_check vae_bench_compare(vae_bench_shape *sh) {
  const vae_algo_diff rerun = vae_algo_compare(sh->ya, sh->yb, sh->ny, sh->bf16, sh->stream);
  const vae_algo_diff ref = vae_algo_compare(sh->ya, sh->yref, sh->ny, sh->bf16, sh->stream);
  vae_bench_check c;
  c.ndiff = rerun.ndiff;
  c.bitrep = rerun.ndiff == 0;
  c.rel_l2 = ref.r2 > 0.0 ? sqrt(ref.d2 / ref.r2) : NAN;
  return c;
}

void vae_bench_shape_head(const vae_bench_shape *sh) {
  const cuda_vae_conv_pick *p = &sh->s->p[sh->i];
  const cuda_vae_conv_key *k = &p->key;
  printf("\n# shape %d: x (%lld, %lld, %lld, %lld) -> %lld, kernel %dx%dx%d, stride %d/%d%s; "
         "%lld runs a decode; pick %s (%s), %.1f MiB workspace of %.1f%s\n",
         sh->i, (long long)k->T, (long long)k->H, (long long)k->W, (long long)k->ci,
         (long long)k->co, k->kt, k->kh, k->kw, k->st, k->ss, k->valid ? ", no padding" : "",
         (long long)p->runs, cuda_vae_conv_algo_name(p->algo), vae_math_name(p->math),
         (double)p->ws / (1 << 20), (double)sh->s->ws_limit / (1 << 20),
         p->engine >= 0 ? "; the decoder runs its engine rule's plan instead" : "");
}

void vae_bench_shape_json_head(vae_jbuf *j, const vae_bench_shape *sh) {
  const cuda_vae_conv_pick *p = &sh->s->p[sh->i];
  const cuda_vae_conv_key *k = &p->key;
  vae_jadd(j, "%s{\"x\":[%lld,%lld,%lld,%lld],\"co\":%lld,\"kernel\":[%d,%d,%d],"
              "\"stride\":[%d,%d],\"valid\":%d,\"runs\":%lld,\"pick\":\"%s\","
              "\"pick_math\":\"%s\",\"decoder_engine\":%lld,",
           sh->i ? "," : "", (long long)k->T, (long long)k->H, (long long)k->W,
           (long long)k->ci, (long long)k->co, k->kt, k->kh, k->kw, k->st, k->ss, k->valid,
           (long long)p->runs, cuda_vae_conv_algo_name(p->algo), vae_math_name(p->math),
           (long long)p->engine);
}

/* ---------------------------------------------------------------- shapes */

static void bufs_free(vae_bench_shape *sh) {
  void **p[5] = {&sh->x, &sh->w, &sh->yref, &sh->ya, &sh->yb};
  for (int i = 0; i < 5; i++) {
    if (*p[i]) CUDA_CHECK(cudaFree(*p[i]));
    *p[i] = NULL;
  }
}

/* x, w and three outputs (E bytes an element): 0, or -1 with everything
 * freed and the CUDA error cleared. */
static int bufs_alloc(vae_bench_shape *sh, int64_t nx, int64_t nw, int64_t ny, int E) {
  void **p[5] = {&sh->x, &sh->w, &sh->yref, &sh->ya, &sh->yb};
  const int64_t n[5] = {nx, nw, ny, ny, ny};
  for (int i = 0; i < 5; i++)
    if (cudaMalloc(p[i], (size_t)(n[i] * E)) != cudaSuccess) {
      (void)cudaGetLastError();
      *p[i] = NULL;
      bufs_free(sh);
      return -1;
    }
  return 0;
}

/* Shape sh->i: operands, the pick's output into yref, kind's rows. */
static vae_bench_result bench_shape(vae_bench_shape *sh, uint64_t seed, const vae_bench_kind *k,
                                    vae_jbuf *j) {
  vae_bench_result res = {0, NAN, NAN};
  const vae_algo_shapes *s = sh->s;
  const int i = sh->i;
  const cuda_vae_conv_pick *p = &s->p[i];
  const cuda_vae_conv_key *key = &p->key;
  const int E = sh->bf16 ? 2 : 4;
  int To, Ho, Wo;
  cuda_vae_conv_out_dims(key, &To, &Ho, &Wo);
  const int64_t fan = key->ci * key->kt * key->kh * key->kw;
  const int64_t nx = key->T * key->H * key->W * key->ci, nw = key->co * fan;
  sh->ny = (int64_t)To * Ho * Wo * key->co;
  sh->y_bytes = (size_t)(sh->ny * E);
  if (bufs_alloc(sh, nx, nw, sh->ny, E) != 0) {
    printf("\n# shape %d: x (%lld, %lld, %lld, %lld) -> %lld: no device memory for its "
           "operands; not measured\n",
           i, (long long)key->T, (long long)key->H, (long long)key->W, (long long)key->ci,
           (long long)key->co);
    return res;
  }
  vae_algo_fill(sh->x, nx, sh->bf16, 1.0f, seed + 2 * (uint64_t)i, sh->stream);
  vae_algo_fill(sh->w, nw, sh->bf16, 1.0f / sqrtf((float)fan), seed + 2 * (uint64_t)i + 1,
                sh->stream);
  cuda_vae_conv_descs_make(s->dt, cuda_vae_conv_ask_math(s->dt, s->tf32), key, &sh->d);
  /* The decoder's pick, as it runs it: the reference output. */
  CUDNN_CHECK(cudnnSetConvolutionMathType(sh->d.cd, p->math));
  if (vae_bench_ws_reserve(sh, p->ws) != 0)
    sp_fatal("vae_bench: shape %d: no device memory for the pick's %zu workspace bytes", i,
             p->ws);
  CUDA_CHECK(cudaMemsetAsync(sh->yref, 0xff, sh->y_bytes, sh->stream));
  CUDNN_CHECK(vae_bench_legacy(sh, p->algo, p->ws, sh->yref));
  CUDNN_CHECK(cudnnSetConvolutionMathType(sh->d.cd, cuda_vae_conv_ask_math(s->dt, s->tf32)));
  res = k->rows(sh, j, k->user);
  fflush(stdout);
  cuda_vae_conv_descs_free(&sh->d);
  bufs_free(sh);
  ws_release(sh);
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

/* The totals' table and the JSON's tail; prints the JSON line and writes
 * it to path (NULL: not). 1 when either failed, else failed. */
static int finish(vae_jbuf *j, const double *cur, const double *best, int failed,
                  const char *path) {
  double cur_all = 0.0, best_all = 0.0;
  printf("\n# decode totals (median ms x runs a decode): class, pick, best deterministic "
         "bit-reproducible within the workspace, saving\n");
  vae_jadd(j, "],\"classes\":{");
  for (int c = 0; c < CLASSES; c++) {
    cur_all += cur[c];
    best_all += best[c];
    printf("    %-6s %10.2f %10.2f %10.2f\n", class_name[c], cur[c], best[c], cur[c] - best[c]);
    vae_jadd(j, "%s\"%s\":{\"pick_ms\":%.3f,\"best_ms\":%.3f}", c ? "," : "", class_name[c],
             cur[c], best[c]);
  }
  printf("    %-6s %10.2f %10.2f %10.2f\n", "all", cur_all, best_all, cur_all - best_all);
  vae_jadd(j, "},\"decode_conv_ms\":%.3f,\"decode_conv_best_ms\":%.3f,\"saving_ms\":%.3f,"
              "\"complete\":%s}",
           cur_all, best_all, cur_all - best_all, failed ? "false" : "true");
  if (j->full) {
    fprintf(stderr, "vae_bench: the JSON line passed %zu bytes; not printed\n", j->cap);
    return 1;
  }
  printf("%s\n", j->b);
  if (path) {
    FILE *f = fopen(path, "w");
    int bad = !f;
    if (f) {
      bad |= fprintf(f, "%s\n", j->b) < 0;
      bad |= fclose(f) != 0;
    }
    if (bad) {
      fprintf(stderr, "vae_bench: cannot write %s\n", path);
      failed = 1;
    }
  }
  return failed;
}

int vae_bench_drive(const vae_algo_shapes *s, const vae_algo_opts *o, const vae_bench_kind *k) {
  vae_bench_shape sh;
  memset(&sh, 0, sizeof sh);
  sh.s = s;
  sh.bf16 = s->dt != KERN_DTYPE_F32;
  CUDA_CHECK(cudaStreamCreateWithFlags(&sh.stream, cudaStreamNonBlocking));
  CUDNN_CHECK(cudnnCreate(&sh.dnn));
  CUDNN_CHECK(cudnnSetStream(sh.dnn, sh.stream));
  vae_jbuf j = {malloc(JSON_CAP), 0, JSON_CAP, 0};
  if (!j.b) sp_fatal("vae_bench: out of host memory");
  j.b[0] = '\0';
  struct cudaDeviceProp prop;
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  printf("# VAE decoder convolutions, %s, latent %lld frames of %lldx%lld, on %s, cudnn %zu: "
         "%d shapes\n%s\n",
         o->precision, (long long)o->frames, (long long)o->h, (long long)o->w, prop.name,
         cudnnGetVersion(), s->n, k->legend);
  vae_jadd(&j, "{\"bench\":\"%s\",\"precision\":\"%s\",\"latent\":[%lld,%lld,%lld],"
               "\"device\":\"%s\",\"cudnn\":%zu,\"ws_limit\":%zu,\"warm\":%d,\"reps\":%d,"
               "\"shapes\":[",
           k->bench, o->precision, (long long)o->frames, (long long)o->h, (long long)o->w,
           prop.name, cudnnGetVersion(), s->ws_limit, VAE_BENCH_WARM, VAE_BENCH_REPS);
  double cur[CLASSES] = {0}, best[CLASSES] = {0};
  int failed = 0;
  for (int i = 0; i < s->n; i++) {
    sh.i = i;
    const vae_bench_result res = bench_shape(&sh, o->seed, k, &j);
    if (!res.measured) {
      failed = 1;
      continue;
    }
    const int c = kernel_class(&s->p[i].key);
    cur[c] += res.pick_ms * (double)s->p[i].runs;
    best[c] += res.best_ms * (double)s->p[i].runs;
  }
  failed = finish(&j, cur, best, failed, o->json_path);
  CUDNN_CHECK(cudnnDestroy(sh.dnn));
  CUDA_CHECK(cudaStreamDestroy(sh.stream));
  free(j.b);
  return failed;
}
