/* The engine sweep's configurations (vae_engine_cfgs.cuh): the operation
 * graph, the heuristics' configurations read into rows (engine, notes,
 * knob choices), and knob variants built from each engine's knob ranges. */
#include "vae_engine_cfgs.cuh"

#include <cudnn.h>
#include <math.h>
#include <string.h>
#include <time.h>

#define MAX_HEUR 256 /* configurations read from one heuristic */
#define MAX_KNOBS VAE_ENGINE_MAX_KNOBS

/* ---------------------------------------------------------------- rows */

cudnnBackendDescriptor_t veng_pool_new(veng_pool *p, cudnnBackendDescriptorType_t type) {
  cudnnBackendDescriptor_t d = NULL;
  if (p->n >= VENG_POOL_DESCS || cudnnBackendCreateDescriptor(type, &d) != CUDNN_STATUS_SUCCESS)
    return NULL;
  p->d[p->n++] = d;
  return d;
}

void veng_pool_free(veng_pool *p) {
  for (int i = p->n - 1; i >= 0; i--) cudnnBackendDestroyDescriptor(p->d[i]);
  p->n = 0;
}

double veng_now_s(void) {
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
static void read_notes(cudnnBackendDescriptor_t eng, veng_row *w) {
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
static int read_cfg(cudnnBackendDescriptor_t cfg, veng_row *w) {
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

/* The precision's rule on an engine's notes (vae_engine_bench.cu's head). */
static int notes_allowed(const vae_algo_shapes *s, unsigned notes) {
  const int f32 = s->dt == KERN_DTYPE_F32;
  if (notes & (1u << CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION)) return 0;
  if (f32 && (notes & (1u << CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS))) return 0;
  if (f32 && !s->tf32 && (notes & (1u << CUDNN_NUMERICAL_NOTE_TENSOR_CORE))) return 0;
  return 1;
}


static int rows_find(const veng_rows *rs, const vae_engine_key *k) {
  for (int i = 0; i < rs->n; i++)
    if (!rs->r[i].legacy && vae_engine_key_same(&rs->r[i].key, k)) return i;
  return -1;
}

/* Adds cfg (read into a row) unless its key is there: 1 added, 0 not. */
static int rows_add(veng_rows *rs, const vae_algo_shapes *s, cudnnBackendDescriptor_t cfg,
                    const char *src) {
  veng_row w;
  memset(&w, 0, sizeof w);
  if (read_cfg(cfg, &w) != 0) w.note = "engine or knobs unreadable";
  if (w.key.engine >= 0 && rows_find(rs, &w.key) >= 0) return 0;
  if (rs->n >= VENG_MAX_ROWS) {
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

cudnnBackendDescriptor_t veng_graph(cudnnHandle_t dnn, const vae_bench_shape *sh, att_graph *g,
                                    cudnnStatus_t *st, const char **what) {
  att_builder b = {g, CUDNN_STATUS_SUCCESS, NULL};
  cudnnBackendDescriptor_t gr = cuda_vae_conv_graph(
      dnn, sh->bf16 ? KERN_DTYPE_BF16 : KERN_DTYPE_F32, &sh->s->p[sh->i].key, &b);
  *st = b.st;
  *what = b.what;
  return gr;
}

/* The duplicates stay in the pool until the shape's end. */
int veng_heur_rows(veng_rows *rs, veng_pool *p, const vae_algo_shapes *s,
                   cudnnBackendDescriptor_t gr, cudnnBackendHeurMode_t mode, const char *src) {
  cudnnBackendDescriptor_t h = veng_pool_new(p, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
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
    if (!(cfg[i] = veng_pool_new(p, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR))) return -1;
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
static cudnnBackendDescriptor_t make_cfg(veng_pool *p, cudnnBackendDescriptor_t gr,
                                         const vae_engine_key *k) {
  cudnnBackendDescriptor_t eng = veng_pool_new(p, CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t cfg = veng_pool_new(p, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
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
    if (!(kc[i] = veng_pool_new(p, CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR)) ||
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

void veng_knob_rows(veng_rows *rs, veng_pool *p, const vae_algo_shapes *s,
                    cudnnBackendDescriptor_t gr) {
  const int nheur = rs->n;
  for (int i = 0; i < nheur; i++) {
    const veng_row *base = &rs->r[i];
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
        vae_engine_key k = base->key;
        if (k.val[slot] == vals[q]) continue;
        k.val[slot] = vals[q];
        if (rows_find(rs, &k) >= 0) continue;
        if (rs->n >= VENG_MAX_ROWS) {
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
