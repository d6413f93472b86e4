/* Building cuDNN backend graphs (cudnn_graph.cuh): descriptors recorded in
 * an att_graph so one release frees them all, the first failure kept with
 * what failed, the engine search, and execution. */
#include <cudnn.h>
#include <stdint.h>

#include "cudnn_graph.cuh"

cudnnBackendDescriptor_t att_new(att_builder *b, cudnnBackendDescriptorType_t type,
                                        const char *what) {
  cudnnBackendDescriptor_t d = NULL;
  if (b->st != CUDNN_STATUS_SUCCESS) return NULL;
  if (b->g->ndescs >= ATT_MAX_DESCS) {
    b->st = CUDNN_STATUS_INTERNAL_ERROR;
    b->what = "descriptor table full";
    return NULL;
  }
  cudnnStatus_t s = cudnnBackendCreateDescriptor(type, &d);
  if (s != CUDNN_STATUS_SUCCESS) {
    b->st = s;
    b->what = what;
    return NULL;
  }
  b->g->descs[b->g->ndescs++] = d;
  return d;
}

void att_set(att_builder *b, cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
                    cudnnBackendAttributeType_t type, int64_t n, const void *val, const char *what) {
  if (b->st != CUDNN_STATUS_SUCCESS) return;
  cudnnStatus_t s = cudnnBackendSetAttribute(d, name, type, n, val);
  if (s != CUDNN_STATUS_SUCCESS) {
    b->st = s;
    b->what = what;
  }
}

void att_fin(att_builder *b, cudnnBackendDescriptor_t d, const char *what) {
  if (b->st != CUDNN_STATUS_SUCCESS) return;
  cudnnStatus_t s = cudnnBackendFinalize(d);
  if (s != CUDNN_STATUS_SUCCESS) {
    b->st = s;
    b->what = what;
  }
}

/* One attribute to set: its name, type, value and what to name on failure. */
typedef struct att_attr {
  cudnnBackendAttributeName_t name;
  cudnnBackendAttributeType_t type;
  const void *val;
  const char *what;
} att_attr;

/* A descriptor of `type` with attrs[0..n) set in order, finalised; `what`
 * names its creation and finalisation. */
static cudnnBackendDescriptor_t att_node(att_builder *b, cudnnBackendDescriptorType_t type,
                                         const char *what, const att_attr *attrs, int n) {
  cudnnBackendDescriptor_t d = att_new(b, type, what);
  for (int i = 0; i < n; i++)
    att_set(b, d, attrs[i].name, attrs[i].type, 1, attrs[i].val, attrs[i].what);
  att_fin(b, d, what);
  return d;
}

#define ATT_DESC CUDNN_TYPE_BACKEND_DESCRIPTOR

/* A 4-d tensor: dims, strides, type; virtual or by-value as asked. */
cudnnBackendDescriptor_t att_tensor(att_builder *b, int64_t uid, const int64_t dims[4],
                                           const int64_t strides[4], cudnnDataType_t type,
                                           int is_virtual, int by_value) {
  return att_tensor_nd(b, uid, 4, dims, strides, type, is_virtual, by_value);
}

cudnnBackendDescriptor_t att_tensor_nd(att_builder *b, int64_t uid, int nd, const int64_t *dims,
                                       const int64_t *strides, cudnnDataType_t type,
                                       int is_virtual, int by_value) {
  cudnnBackendDescriptor_t t = att_new(b, CUDNN_BACKEND_TENSOR_DESCRIPTOR, "tensor");
  int64_t align = by_value ? 4 : 16;
  bool virt = is_virtual != 0, byv = by_value != 0;
  att_set(b, t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, "tensor uid");
  att_set(b, t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type, "tensor type");
  att_set(b, t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, nd, dims, "tensor dims");
  att_set(b, t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, nd, strides, "tensor strides");
  att_set(b, t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align, "tensor align");
  if (virt) att_set(b, t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virt, "virtual");
  if (byv) att_set(b, t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &byv, "by value");
  att_fin(b, t, "tensor");
  return t;
}

cudnnBackendDescriptor_t att_matmul(att_builder *b, cudnnBackendDescriptor_t A,
                                    cudnnBackendDescriptor_t B, cudnnBackendDescriptor_t C) {
  const cudnnDataType_t f = CUDNN_DATA_FLOAT;
  const att_attr da[] = {
      {CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &f, "matmul comp type"}};
  cudnnBackendDescriptor_t md = att_node(b, CUDNN_BACKEND_MATMUL_DESCRIPTOR, "matmul desc", da, 1);
  const att_attr oa[] = {{CUDNN_ATTR_OPERATION_MATMUL_ADESC, ATT_DESC, &A, "mm a"},
                         {CUDNN_ATTR_OPERATION_MATMUL_BDESC, ATT_DESC, &B, "mm b"},
                         {CUDNN_ATTR_OPERATION_MATMUL_CDESC, ATT_DESC, &C, "mm c"},
                         {CUDNN_ATTR_OPERATION_MATMUL_DESC, ATT_DESC, &md, "mm d"}};
  return att_node(b, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, "matmul op", oa, 4);
}

/* y = mode(x[, bb]); bb NULL for unary modes. */
cudnnBackendDescriptor_t att_pw(att_builder *b, cudnnPointwiseMode_t mode,
                                cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t bb,
                                cudnnBackendDescriptor_t y) {
  const cudnnDataType_t f = CUDNN_DATA_FLOAT;
  const att_attr da[] = {{CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, &mode, "pw mode"},
                         {CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, &f, "pw prec"}};
  cudnnBackendDescriptor_t pd =
      att_node(b, CUDNN_BACKEND_POINTWISE_DESCRIPTOR, "pointwise desc", da, 2);
  /* the second input only for binary modes, before y */
  const att_attr oa[] = {{CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, ATT_DESC, &pd, "pw desc"},
                         {CUDNN_ATTR_OPERATION_POINTWISE_XDESC, ATT_DESC, &x, "pw x"},
                         {CUDNN_ATTR_OPERATION_POINTWISE_BDESC, ATT_DESC, &bb, "pw b"},
                         {CUDNN_ATTR_OPERATION_POINTWISE_YDESC, ATT_DESC, &y, "pw y"}};
  const att_attr oa_unary[] = {oa[0], oa[1], oa[3]};
  return att_node(b, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, "pointwise op",
                  bb ? oa : oa_unary, bb ? 4 : 3);
}

cudnnBackendDescriptor_t att_reduce(att_builder *b, cudnnReduceTensorOp_t mode,
                                    cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
  const cudnnDataType_t f = CUDNN_DATA_FLOAT;
  const att_attr da[] = {
      {CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, &mode, "reduction op"},
      {CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &f, "reduction comp"}};
  cudnnBackendDescriptor_t rd =
      att_node(b, CUDNN_BACKEND_REDUCTION_DESCRIPTOR, "reduction desc", da, 2);
  const att_attr oa[] = {{CUDNN_ATTR_OPERATION_REDUCTION_XDESC, ATT_DESC, &x, "red x"},
                         {CUDNN_ATTR_OPERATION_REDUCTION_YDESC, ATT_DESC, &y, "red y"},
                         {CUDNN_ATTR_OPERATION_REDUCTION_DESC, ATT_DESC, &rd, "red desc"}};
  return att_node(b, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, "reduction op", oa, 3);
}

/* Whether cuDNN marks cfg's engine CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC
 * (its reruns may differ in the last bits): 1 marked, 0 not marked or its
 * notes unreadable (as before the notes were read). *engine is its global
 * index (-1 unread). */
static int att_engine_nondeterministic(cudnnBackendDescriptor_t cfg, int64_t *engine) {
  *engine = -1;
  cudnnBackendDescriptor_t eng = NULL;
  if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &eng) != CUDNN_STATUS_SUCCESS)
    return 0;
  int64_t n = 0;
  cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  int marked = 0;
  if (cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                               &n, &eng) == CUDNN_STATUS_SUCCESS) {
    if (cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                 CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n,
                                 notes) == CUDNN_STATUS_SUCCESS)
      for (int64_t i = 0; i < n && i < CUDNN_NUMERICAL_NOTE_TYPE_COUNT; i++)
        marked |= notes[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC;
    if (cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n,
                                 engine) != CUDNN_STATUS_SUCCESS)
      *engine = -1;
  }
  cudnnBackendDestroyDescriptor(eng);
  return marked;
}

/* An execution plan of one engine config: SUCCESS with *out and *ws set,
 * else cuDNN's status with neither touched (*what set when the workspace is
 * the reason). */
static cudnnStatus_t att_plan_of(cudnnHandle_t handle, cudnnBackendDescriptor_t cfg,
                                 cudnnBackendDescriptor_t *out, int64_t *ws, const char **what) {
  cudnnBackendDescriptor_t plan = NULL;
  cudnnStatus_t s = cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan);
  if (s != CUDNN_STATUS_SUCCESS) return s;
  int64_t bytes = 0, n = 0;
  s = cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1,
                               &handle);
  if (s == CUDNN_STATUS_SUCCESS)
    s = cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg);
  if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(plan);
  if (s == CUDNN_STATUS_SUCCESS)
    s = cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                 CUDNN_TYPE_INT64, 1, &n, &bytes);
  if (s == CUDNN_STATUS_SUCCESS && (bytes < 0 || bytes > ATT_MAX_WORKSPACE)) {
    s = CUDNN_STATUS_NOT_SUPPORTED;
    *what = "the only engines want a workspace above 1 GiB (not fused)";
  }
  if (s != CUDNN_STATUS_SUCCESS) {
    cudnnBackendDestroyDescriptor(plan);
    return s;
  }
  *out = plan;
  *ws = bytes;
  return s;
}

/* The graph of ops, heuristics (mode A), and the first engine config that
 * finalises with a workspace of at most ATT_MAX_WORKSPACE, taking engines
 * cuDNN marks nondeterministic only when no other finalises (then
 * b->g->nondet_used says so): SUCCESS with b->g's plan, workspace and
 * engine set, or the first failure with *what naming it. */
cudnnStatus_t att_graph_finalize(cudnnHandle_t handle, att_builder *b,
                                 cudnnBackendDescriptor_t *ops, int nops, const char **what) {
  cudnnBackendDescriptor_t g = att_new(b, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "graph");
  att_set(b, g, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle, "graph handle");
  att_set(b, g, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, nops, ops,
          "graph ops");
  att_fin(b, g, "operation graph");
  cudnnBackendDescriptor_t h = att_new(b, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "heuristics");
  cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
  att_set(b, h, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g,
          "heur graph");
  att_set(b, h, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode, "heur mode");
  att_fin(b, h, "engine heuristics");
  if (b->st != CUDNN_STATUS_SUCCESS) {
    *what = b->what;
    return b->st;
  }
  enum { MAXCFG = 8 };
  cudnnBackendDescriptor_t cfg[MAXCFG];
  int ncfg = 0;
  for (; ncfg < MAXCFG; ncfg++) {
    cfg[ncfg] = att_new(b, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "engine config");
    if (b->st != CUDNN_STATUS_SUCCESS) {
      *what = b->what;
      return b->st;
    }
  }
  int64_t got = 0;
  cudnnStatus_t s = cudnnBackendGetAttribute(h, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                             CUDNN_TYPE_BACKEND_DESCRIPTOR, MAXCFG, &got, cfg);
  if (s != CUDNN_STATUS_SUCCESS || got <= 0) {
    *what = "heuristics offered no engine";
    return s != CUDNN_STATUS_SUCCESS ? s : CUDNN_STATUS_NOT_SUPPORTED;
  }
  cudnnStatus_t last = CUDNN_STATUS_NOT_SUPPORTED;
  *what = "no engine config finalised a plan";
  int64_t engine[MAXCFG];
  int nondet[MAXCFG];
  for (int64_t i = 0; i < got; i++) nondet[i] = att_engine_nondeterministic(cfg[i], &engine[i]);
  /* Pass 0 the engines not marked nondeterministic, pass 1 the others. */
  for (int pass = 0; pass < 2; pass++)
    for (int64_t i = 0; i < got; i++) {
      if (nondet[i] != pass) continue;
      s = att_plan_of(handle, cfg[i], &b->g->plan, &b->g->workspace, what);
      if (s == CUDNN_STATUS_SUCCESS) {
        b->g->engine = engine[i];
        b->g->nondet_used = pass;
        return s;
      }
      last = s;
    }
  return last;
}

cudnnStatus_t att_engine_plan(cudnnHandle_t handle, att_builder *b, cudnnBackendDescriptor_t graph,
                              int64_t engine, int nknobs, const int64_t *types,
                              const int64_t *vals, const char **what) {
  cudnnBackendDescriptor_t eng = att_new(b, CUDNN_BACKEND_ENGINE_DESCRIPTOR, "engine");
  att_set(b, eng, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph,
          "engine graph");
  att_set(b, eng, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &engine, "engine index");
  att_fin(b, eng, "engine");
  cudnnBackendDescriptor_t kc[CUDNN_KNOB_TYPE_COUNTS];
  if (nknobs > CUDNN_KNOB_TYPE_COUNTS) nknobs = CUDNN_KNOB_TYPE_COUNTS;
  for (int i = 0; i < nknobs; i++) {
    const cudnnBackendKnobType_t t = (cudnnBackendKnobType_t)types[i];
    kc[i] = att_new(b, CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, "knob choice");
    att_set(b, kc[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &t, "knob type");
    att_set(b, kc[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &vals[i],
            "knob value");
    att_fin(b, kc[i], "knob choice");
  }
  cudnnBackendDescriptor_t cfg = att_new(b, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "engine config");
  att_set(b, cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &eng,
          "config engine");
  if (nknobs > 0)
    att_set(b, cfg, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR, nknobs, kc,
            "config knobs");
  att_fin(b, cfg, "engine config");
  if (b->st != CUDNN_STATUS_SUCCESS) {
    *what = b->what;
    return b->st;
  }
  int64_t idx = -1;
  if (att_engine_nondeterministic(cfg, &idx)) {
    *what = "the engine is marked nondeterministic";
    return CUDNN_STATUS_NOT_SUPPORTED;
  }
  *what = "its execution plan";
  const cudnnStatus_t s = att_plan_of(handle, cfg, &b->g->plan, &b->g->workspace, what);
  if (s == CUDNN_STATUS_SUCCESS) {
    b->g->engine = engine;
    b->g->nondet_used = 0;
  }
  return s;
}

void att_graph_release(att_graph *g) {
  if (g->plan) cudnnBackendDestroyDescriptor(g->plan);
  for (int i = g->ndescs - 1; i >= 0; i--) cudnnBackendDestroyDescriptor(g->descs[i]);
  g->ndescs = 0;
  g->plan = NULL;
  g->workspace = 0;
  g->engine = -1;
  g->nondet_used = 0;
}

void att_graph_execute(cudnnHandle_t handle, cudnnBackendDescriptor_t plan, int64_t n,
                       const int64_t *uids, void *const *ptrs, void *workspace,
                       cudaStream_t stream) {
  CUDNN_CHECK(cudnnSetStream(handle, stream));
  cudnnBackendDescriptor_t vp;
  CUDNN_CHECK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp));
  CUDNN_CHECK(cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n,
                                       uids));
  CUDNN_CHECK(cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
                                       CUDNN_TYPE_VOID_PTR, n, ptrs));
  CUDNN_CHECK(cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR,
                                       1, &workspace));
  CUDNN_CHECK(cudnnBackendFinalize(vp));
  CUDNN_CHECK(cudnnBackendExecute(handle, plan, vp));
  CUDNN_CHECK(cudnnBackendDestroyDescriptor(vp));
}
