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
 *   VAE_ENGINE_KNOB_VALUES values, each other value with the other knobs as the
 *   heuristic chose them, while the shape has fewer than MAX_ROWS rows;
 * - the rows run in that order; past SHAPE_BUDGET_S seconds of the shape
 *   only the pick and each heuristic's first configuration still run (the
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

#include "cudnn_graph.cuh"
#include "lib_check.cuh"
#include "log.h"
#include "vae_bench_util.h"
#include "vae_engine_bench.h"
#include "vae_engine_key.h"

#define MAX_ROWS 64          /* configurations of a shape, the pick included */
#define MAX_HEUR 256         /* configurations read from one heuristic */
#define MAX_KNOBS VAE_ENGINE_MAX_KNOBS
#define SHAPE_BUDGET_S 3.0   /* wall seconds of a shape after which only firsts run */
#define POOL_DESCS 4096      /* backend descriptors a shape keeps alive */

enum { UID_X = 1, UID_W = 2, UID_Y = 3 };

/* A configuration's key (vae_engine_key.h). */
typedef vae_engine_key eng_key;

/* ---------------------------------------------------------------- rows */

/* One configuration of a shape. */
typedef struct erow {
  eng_key key;
  const char *src; /* "legacy", "A", "B", "fallback", "knob" */
  cudnnBackendDescriptor_t cfg;
  unsigned notes, behavior; /* bit n: numerical / behaviour note n */
  int notes_known, det, allowed, planned, fits, ran, bitrep, legacy;
  cudnnStatus_t status;
  const char *note; /* why it did not run, besides a status */
  int64_t ws;
  double plan_ms, first_ms, ms, rel_l2;
  int64_t ndiff;
} erow;

/* The backend descriptors of a shape: destroyed together at its end. */
typedef struct pool {
  cudnnBackendDescriptor_t d[POOL_DESCS];
  int n;
} pool;

static cudnnBackendDescriptor_t pool_new(pool *p, cudnnBackendDescriptorType_t type) {
  cudnnBackendDescriptor_t d = NULL;
  if (p->n >= POOL_DESCS || cudnnBackendCreateDescriptor(type, &d) != CUDNN_STATUS_SUCCESS)
    return NULL;
  p->d[p->n++] = d;
  return d;
}

static void pool_free(pool *p) {
  for (int i = p->n - 1; i >= 0; i--) cudnnBackendDestroyDescriptor(p->d[i]);
  p->n = 0;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Descriptors only read from: created for one query, destroyed after. */
typedef struct scratch {
  cudnnBackendDescriptor_t d[MAX_KNOBS + 1];
  int n;
} scratch;

static cudnnBackendDescriptor_t scratch_new(scratch *t, cudnnBackendDescriptorType_t type) {
  cudnnBackendDescriptor_t d = NULL;
  if (t->n >= MAX_KNOBS + 1 || cudnnBackendCreateDescriptor(type, &d) != CUDNN_STATUS_SUCCESS)
    return NULL;
  t->d[t->n++] = d;
  return d;
}

static void scratch_free(scratch *t) {
  for (int i = t->n - 1; i >= 0; i--) cudnnBackendDestroyDescriptor(t->d[i]);
  t->n = 0;
}

/* The engine's notes into w (notes_known set when cuDNN said). */
static void read_notes(cudnnBackendDescriptor_t eng, erow *w) {
  int64_t n = 0;
  cudnnBackendNumericalNote_t nn[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  if (cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                               CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n, nn) == CUDNN_STATUS_SUCCESS) {
    w->notes_known = 1;
    for (int64_t i = 0; i < n && i < CUDNN_NUMERICAL_NOTE_TYPE_COUNT; i++)
      if ((int)nn[i] >= 0 && (int)nn[i] < 32) w->notes |= 1u << (int)nn[i];
  }
  cudnnBackendBehaviorNote_t bn[CUDNN_BEHAVIOR_NOTE_TYPE_COUNT];
  if (cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                               CUDNN_BEHAVIOR_NOTE_TYPE_COUNT, &n, bn) == CUDNN_STATUS_SUCCESS)
    for (int64_t i = 0; i < n && i < CUDNN_BEHAVIOR_NOTE_TYPE_COUNT; i++)
      if ((int)bn[i] >= 0 && (int)bn[i] < 32) w->behavior |= 1u << (int)bn[i];
}

/* Reads cfg's engine (its global index and notes) and knob choices into
 * w. 0, or -1 when cuDNN would not say (the row then keeps engine -1). */
static int read_cfg(cudnnBackendDescriptor_t cfg, erow *w) {
  w->key.engine = -1;
  scratch t = {{NULL}, 0};
  int rc = -1;
  cudnnBackendDescriptor_t eng = scratch_new(&t, CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  int64_t n = 0;
  if (!eng ||
      cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                               &n, &eng) != CUDNN_STATUS_SUCCESS ||
      cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n,
                               &w->key.engine) != CUDNN_STATUS_SUCCESS) {
    w->key.engine = -1;
    scratch_free(&t);
    return -1;
  }
  read_notes(eng, w);
  cudnnBackendDescriptor_t kc[MAX_KNOBS];
  int made = 0;
  while (made < MAX_KNOBS && (kc[made] = scratch_new(&t, CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR)))
    made++;
  if (made == MAX_KNOBS &&
      cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES,
                               CUDNN_TYPE_BACKEND_DESCRIPTOR, MAX_KNOBS, &n,
                               kc) == CUDNN_STATUS_SUCCESS) {
    rc = 0;
    w->key.nknobs = 0;
    for (int64_t i = 0; i < n && i < MAX_KNOBS && rc == 0; i++) {
      cudnnBackendKnobType_t kt;
      int64_t v = 0, m = 0;
      if (cudnnBackendGetAttribute(kc[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE,
                                   1, &m, &kt) != CUDNN_STATUS_SUCCESS ||
          cudnnBackendGetAttribute(kc[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1,
                                   &m, &v) != CUDNN_STATUS_SUCCESS) {
        rc = -1;
        break;
      }
      w->key.type[w->key.nknobs] = (int64_t)kt;
      w->key.val[w->key.nknobs++] = v;
    }
    vae_engine_key_sort(&w->key);
  }
  scratch_free(&t);
  if (rc != 0) w->key.engine = -1; /* knobs unknown: never a duplicate of another */
  return rc;
}

/* The precision's rule on an engine's notes (see the head). */
static int notes_allowed(const vae_algo_shapes *s, unsigned notes) {
  const int f32 = s->dt == KERN_DTYPE_F32;
  if (notes & (1u << CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION)) return 0;
  if (f32 && (notes & (1u << CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS))) return 0;
  if (f32 && !s->tf32 && (notes & (1u << CUDNN_NUMERICAL_NOTE_TENSOR_CORE))) return 0;
  return 1;
}

/* The rows of a shape, the configurations they own in the pool. */
typedef struct rows {
  erow r[MAX_ROWS];
  int n;
  int offered[3]; /* configurations each heuristic mode gave */
  int variants;   /* knob variants added */
  int dropped;    /* distinct configurations past MAX_ROWS */
  int skipped;    /* rows not run: past the shape's SHAPE_BUDGET_S */
} rows;

static int rows_find(const rows *rs, const eng_key *k) {
  for (int i = 0; i < rs->n; i++)
    if (!rs->r[i].legacy && vae_engine_key_same(&rs->r[i].key, k)) return i;
  return -1;
}

/* Adds cfg (read into a row) unless its key is there: 1 added, 0 not. */
static int rows_add(rows *rs, const vae_algo_shapes *s, cudnnBackendDescriptor_t cfg,
                    const char *src) {
  erow w;
  memset(&w, 0, sizeof w);
  if (read_cfg(cfg, &w) != 0) w.note = "engine or knobs unreadable";
  if (w.key.engine >= 0 && rows_find(rs, &w.key) >= 0) return 0;
  if (rs->n >= MAX_ROWS) {
    rs->dropped++;
    return 0;
  }
  w.src = src;
  w.cfg = cfg;
  w.det = w.notes_known && !(w.notes & (1u << CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC));
  w.allowed = w.notes_known && notes_allowed(s, w.notes);
  w.ws = -1;
  w.plan_ms = w.first_ms = w.ms = w.rel_l2 = NAN;
  rs->r[rs->n++] = w;
  return 1;
}

/* ---------------------------------------------------------------- the graph */

/* The convolution's operation graph (see the head), built into g; NULL with
 * *what set when cuDNN refused a descriptor. */
static cudnnBackendDescriptor_t conv_graph(cudnnHandle_t dnn, const vae_bench_shape *sh,
                                           att_graph *g, cudnnStatus_t *st, const char **what) {
  const cuda_vae_conv_key *k = &sh->s->p[sh->i].key;
  const cudnnDataType_t t = sh->bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
  int To, Ho, Wo;
  cuda_vae_conv_out_dims(k, &To, &Ho, &Wo);
  const int64_t T = k->T, H = k->H, W = k->W, ci = k->ci, co = k->co;
  const int64_t kt = k->kt, kh = k->kh, kw = k->kw;
  /* dims in cuDNN's (N, C, D, H, W) order, strides of channels-last
   * buffers; the filter (K, C, T, R, S) stored (K, T, R, S, C) */
  const int64_t xd[5] = {1, ci, T, H, W}, xs[5] = {T * H * W * ci, 1, H * W * ci, W * ci, ci};
  const int64_t wd[5] = {co, ci, kt, kh, kw},
                ws[5] = {kt * kh * kw * ci, 1, kh * kw * ci, kw * ci, ci};
  const int64_t yd[5] = {1, co, To, Ho, Wo},
                ys[5] = {(int64_t)To * Ho * Wo * co, 1, (int64_t)Ho * Wo * co, Wo * co, co};
  att_builder b = {g, CUDNN_STATUS_SUCCESS, NULL};
  cudnnBackendDescriptor_t X = att_tensor_nd(&b, UID_X, 5, xd, xs, t, 0, 0);
  cudnnBackendDescriptor_t Wt = att_tensor_nd(&b, UID_W, 5, wd, ws, t, 0, 0);
  cudnnBackendDescriptor_t Y = att_tensor_nd(&b, UID_Y, 5, yd, ys, t, 0, 0);
  const int64_t nsp = 3, pad[3] = {0, k->valid ? 0 : kh / 2, k->valid ? 0 : kw / 2};
  const int64_t stride[3] = {k->st, k->ss, k->ss}, dil[3] = {1, 1, 1};
  const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  cudnnBackendDescriptor_t cd = att_new(&b, CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, "conv desc");
  att_set(&b, cd, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp, "conv comp");
  att_set(&b, cd, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode,
          "conv mode");
  att_set(&b, cd, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &nsp, "conv dims");
  att_set(&b, cd, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 3, dil, "conv dilations");
  att_set(&b, cd, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 3, stride,
          "conv strides");
  att_set(&b, cd, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 3, pad, "conv pre pad");
  att_set(&b, cd, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 3, pad,
          "conv post pad");
  att_fin(&b, cd, "conv desc");
  const float alpha = 1.0f, beta = 0.0f;
  cudnnBackendDescriptor_t op =
      att_new(&b, CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, "conv op");
  att_set(&b, op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
          &X, "conv x");
  att_set(&b, op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
          &Wt, "conv w");
  att_set(&b, op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
          &Y, "conv y");
  att_set(&b, op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
          CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cd, "conv op desc");
  att_set(&b, op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha,
          "conv alpha");
  att_set(&b, op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta,
          "conv beta");
  att_fin(&b, op, "conv op");
  cudnnBackendDescriptor_t gr = att_new(&b, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "graph");
  att_set(&b, gr, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &dnn, "graph handle");
  att_set(&b, gr, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op,
          "graph ops");
  att_fin(&b, gr, "operation graph");
  *st = b.st;
  *what = b.what;
  return b.st == CUDNN_STATUS_SUCCESS ? gr : NULL;
}

/* The configurations heuristic `mode` gives for graph gr, added to rs (the
 * duplicates destroyed with the pool). Returns how many it gave, -1 when it
 * failed. */
static int heur_rows(rows *rs, pool *p, const vae_algo_shapes *s, cudnnBackendDescriptor_t gr,
                     cudnnBackendHeurMode_t mode, const char *src) {
  cudnnBackendDescriptor_t h = pool_new(p, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  if (!h) return -1;
  if (cudnnBackendSetAttribute(h, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH,
                               CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &gr) != CUDNN_STATUS_SUCCESS ||
      cudnnBackendSetAttribute(h, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1,
                               &mode) != CUDNN_STATUS_SUCCESS ||
      cudnnBackendFinalize(h) != CUDNN_STATUS_SUCCESS)
    return -1;
  int64_t count = 0;
  if (cudnnBackendGetAttribute(h, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                               &count, NULL) != CUDNN_STATUS_SUCCESS)
    return -1;
  if (count > MAX_HEUR) count = MAX_HEUR;
  if (count <= 0) return 0;
  cudnnBackendDescriptor_t cfg[MAX_HEUR];
  for (int64_t i = 0; i < count; i++)
    if (!(cfg[i] = pool_new(p, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR))) return -1;
  int64_t got = 0;
  if (cudnnBackendGetAttribute(h, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                               count, &got, cfg) != CUDNN_STATUS_SUCCESS)
    return -1;
  if (got > count) got = count;
  for (int64_t i = 0; i < got; i++) rows_add(rs, s, cfg[i], src);
  return (int)got;
}

/* A configuration of engine `engine` of graph gr with knob choices k:
 * NULL when cuDNN refuses it. */
static cudnnBackendDescriptor_t make_cfg(pool *p, cudnnBackendDescriptor_t gr, const eng_key *k) {
  cudnnBackendDescriptor_t eng = pool_new(p, CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t cfg = pool_new(p, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
  if (!eng || !cfg) return NULL;
  if (cudnnBackendSetAttribute(eng, CUDNN_ATTR_ENGINE_OPERATION_GRAPH,
                               CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &gr) != CUDNN_STATUS_SUCCESS ||
      cudnnBackendSetAttribute(eng, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1,
                               &k->engine) != CUDNN_STATUS_SUCCESS ||
      cudnnBackendFinalize(eng) != CUDNN_STATUS_SUCCESS)
    return NULL;
  cudnnBackendDescriptor_t kc[MAX_KNOBS];
  for (int i = 0; i < k->nknobs; i++) {
    const cudnnBackendKnobType_t t = (cudnnBackendKnobType_t)k->type[i];
    if (!(kc[i] = pool_new(p, CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR)) ||
        cudnnBackendSetAttribute(kc[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1,
                                 &t) != CUDNN_STATUS_SUCCESS ||
        cudnnBackendSetAttribute(kc[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1,
                                 &k->val[i]) != CUDNN_STATUS_SUCCESS ||
        cudnnBackendFinalize(kc[i]) != CUDNN_STATUS_SUCCESS)
      return NULL;
  }
  if (cudnnBackendSetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                               &eng) != CUDNN_STATUS_SUCCESS ||
      (k->nknobs > 0 &&
       cudnnBackendSetAttribute(cfg, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES,
                                CUDNN_TYPE_BACKEND_DESCRIPTOR, k->nknobs,
                                kc) != CUDNN_STATUS_SUCCESS) ||
      cudnnBackendFinalize(cfg) != CUDNN_STATUS_SUCCESS)
    return NULL;
  return cfg;
}

/* A knob's range: its type and the values min..max in steps of stride. */
typedef struct knob_range {
  int64_t type, min, max, stride;
} knob_range;

/* The knob ranges of engine `engine` of graph gr into kr (at most
 * MAX_KNOBS): their count, -1 when cuDNN would not say. */
static int knob_ranges(cudnnBackendDescriptor_t gr, int64_t engine, knob_range *kr) {
  scratch t = {{NULL}, 0};
  cudnnBackendDescriptor_t eng = scratch_new(&t, CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t ki[MAX_KNOBS];
  int made = 0;
  while (made < MAX_KNOBS && (ki[made] = scratch_new(&t, CUDNN_BACKEND_KNOB_INFO_DESCRIPTOR)))
    made++;
  int64_t n = 0;
  if (!eng || made < MAX_KNOBS ||
      cudnnBackendSetAttribute(eng, CUDNN_ATTR_ENGINE_OPERATION_GRAPH,
                               CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &gr) != CUDNN_STATUS_SUCCESS ||
      cudnnBackendSetAttribute(eng, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1,
                               &engine) != CUDNN_STATUS_SUCCESS ||
      cudnnBackendFinalize(eng) != CUDNN_STATUS_SUCCESS ||
      cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_KNOB_INFO, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                               MAX_KNOBS, &n, ki) != CUDNN_STATUS_SUCCESS) {
    scratch_free(&t);
    return -1;
  }
  int got = 0;
  for (int64_t i = 0; i < n && i < MAX_KNOBS; i++) {
    cudnnBackendKnobType_t kt;
    int64_t m = 0;
    knob_range r;
    if (cudnnBackendGetAttribute(ki[i], CUDNN_ATTR_KNOB_INFO_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &m,
                                 &kt) != CUDNN_STATUS_SUCCESS ||
        cudnnBackendGetAttribute(ki[i], CUDNN_ATTR_KNOB_INFO_MINIMUM_VALUE, CUDNN_TYPE_INT64, 1,
                                 &m, &r.min) != CUDNN_STATUS_SUCCESS ||
        cudnnBackendGetAttribute(ki[i], CUDNN_ATTR_KNOB_INFO_MAXIMUM_VALUE, CUDNN_TYPE_INT64, 1,
                                 &m, &r.max) != CUDNN_STATUS_SUCCESS ||
        cudnnBackendGetAttribute(ki[i], CUDNN_ATTR_KNOB_INFO_STRIDE, CUDNN_TYPE_INT64, 1, &m,
                                 &r.stride) != CUDNN_STATUS_SUCCESS)
      continue;
    r.type = (int64_t)kt;
    kr[got++] = r;
  }
  scratch_free(&t);
  return got;
}

/* Knob variants of the heuristics' engines (see the head), added to rs
 * until it is full. */
static void knob_rows(rows *rs, pool *p, const vae_algo_shapes *s, cudnnBackendDescriptor_t gr) {
  const int nheur = rs->n;
  for (int i = 0; i < nheur; i++) {
    const erow *base = &rs->r[i];
    if (base->legacy || base->key.engine < 0 ||
        (base->behavior & (1u << CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION)))
      continue;
    int seen = 0; /* the first row of each engine only */
    for (int q = 0; q < i && !seen; q++)
      seen = !rs->r[q].legacy && rs->r[q].key.engine == base->key.engine;
    if (seen) continue;
    knob_range kr[MAX_KNOBS];
    const int nk = knob_ranges(gr, base->key.engine, kr);
    for (int a = 0; a < nk; a++) {
      const knob_range *r = &kr[a];
      int64_t vals[VAE_ENGINE_KNOB_VALUES];
      const int nv = vae_engine_knob_values(r->min, r->max, r->stride, vals);
      int slot = -1;
      for (int q = 0; q < base->key.nknobs && slot < 0; q++)
        if (base->key.type[q] == r->type) slot = q;
      if (slot < 0) continue; /* a knob the heuristic did not set: its default unknown */
      for (int q = 0; q < nv; q++) {
        eng_key k = base->key;
        if (k.val[slot] == vals[q]) continue;
        k.val[slot] = vals[q];
        if (rows_find(rs, &k) >= 0) continue;
        if (rs->n >= MAX_ROWS) {
          rs->dropped++;
          continue;
        }
        cudnnBackendDescriptor_t cfg = make_cfg(p, gr, &k);
        if (!cfg) continue; /* cuDNN refuses the combination before any plan */
        if (rows_add(rs, s, cfg, "knob")) rs->variants++;
      }
    }
  }
}

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

static cudnnBackendDescriptor_t variant_pack(pool *p, const vae_bench_shape *sh, void *y) {
  cudnnBackendDescriptor_t vp = pool_new(p, CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  const int64_t uids[3] = {UID_X, UID_W, UID_Y};
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
static void measure_row(vae_bench_shape *sh, pool *p, erow *w) {
  if (!w->cfg) return;
  cudnnBackendDescriptor_t plan = pool_new(p, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
  if (!plan) {
    w->note = "descriptor pool full";
    return;
  }
  const double t0 = now_s();
  int64_t n = 0;
  w->status = cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE,
                                       1, &sh->dnn);
  if (w->status == CUDNN_STATUS_SUCCESS)
    w->status = cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                         CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &w->cfg);
  if (w->status == CUDNN_STATUS_SUCCESS) w->status = cudnnBackendFinalize(plan);
  w->plan_ms = 1e3 * (now_s() - t0);
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

static void legacy_row(vae_bench_shape *sh, erow *w) {
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

static const char *row_status(const erow *w) {
  if (w->note) return w->note;
  if (!w->cfg && !w->legacy) return "no configuration";
  return cudnnGetErrorString(w->status);
}

static void print_block(const vae_bench_shape *sh, const rows *rs, int best, const char *gnote) {
  vae_bench_shape_head(sh);
  printf("#   configurations: heuristic A %d, B %d, fallback %d (-1: the heuristic failed); %d "
         "knob variants; %d rows not run (past %.1f s a shape), %d more dropped (past %d "
         "rows)%s%s\n",
         rs->offered[0], rs->offered[1], rs->offered[2], rs->variants, rs->skipped,
         SHAPE_BUDGET_S, rs->dropped, MAX_ROWS, gnote ? "; " : "", gnote ? gnote : "");
  printf("#   %-22s %-8s %-3s %-4s %-16s %-12s %9s %4s %8s %9s %9s %6s %10s  %s | %s\n", "engine",
         "src", "det", "prec", "notes", "behavior", "ws_MiB", "fits", "plan_ms", "median_ms",
         "first_ms", "rerun", "rel_l2", "mark / status", "knobs");
  for (int j = 0; j < rs->n; j++) {
    const erow *w = &rs->r[j];
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

static void json_knobs(vae_jbuf *j, const eng_key *k) {
  vae_jadd(j, "\"knobs\":[");
  for (int i = 0; i < k->nknobs; i++)
    vae_jadd(j, "%s[%lld,%lld]", i ? "," : "", (long long)k->type[i], (long long)k->val[i]);
  vae_jadd(j, "]");
}

static void json_block(vae_jbuf *j, const vae_bench_shape *sh, const rows *rs, int best,
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
    const erow *w = &rs->r[q];
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
  const double t0 = now_s();
  rows *rs = (rows *)calloc(1, sizeof *rs);
  pool *p = (pool *)calloc(1, sizeof *p);
  att_graph *g = (att_graph *)calloc(1, sizeof *g);
  if (!rs || !p || !g) sp_fatal("vae_engine_bench: out of host memory");
  legacy_row(sh, &rs->r[rs->n++]);
  cudnnStatus_t st;
  const char *what = NULL;
  char gnote[160];
  const char *gn = NULL;
  cudnnBackendDescriptor_t gr = conv_graph(sh->dnn, sh, g, &st, &what);
  if (!gr) {
    snprintf(gnote, sizeof gnote, "operation graph refused at %s: %s", what ? what : "?",
             cudnnGetErrorString(st));
    gn = gnote;
  } else {
    const cudnnBackendHeurMode_t modes[3] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_B,
                                             CUDNN_HEUR_MODE_FALLBACK};
    const char *const src[3] = {"A", "B", "fallback"};
    for (int m = 0; m < 3; m++) rs->offered[m] = heur_rows(rs, p, sh->s, gr, modes[m], src[m]);
    knob_rows(rs, p, sh->s, gr);
  }
  int best = -1;
  for (int q = 0; q < rs->n; q++) {
    erow *w = &rs->r[q];
    /* the first row of each heuristic runs whatever the time */
    int first = 1;
    for (int e = 1; e < q && first; e++) first = strcmp(rs->r[e].src, w->src) != 0;
    first &= strcmp(w->src, "knob") != 0;
    if (!w->legacy && !first && now_s() > t0 + SHAPE_BUDGET_S) {
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
  pool_free(p);
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
