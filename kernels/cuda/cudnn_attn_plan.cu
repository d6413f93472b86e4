/* The plan cache of the fused cuDNN attentions (cudnn_attn_plan.cuh). */
#include <cudnn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_check.h"
#include "cudnn_attn_plan.cuh"

int att_engine_open(att_engine *e, size_t ver, int fallback) {
  cudnnStatus_t s = cudnnCreate(&e->handle);
  if (s == CUDNN_STATUS_SUCCESS) return SP_OK;
  void (*log)(const char *, ...) = fallback ? sp_log_warn : sp_log_error;
  log("attention: cudnnCreate failed (%s), cudnn %zu", cudnnGetErrorString(s), ver);
  return SP_ERR_RUNTIME;
}

float att_params_scale(const kern_attn_params *p, const char *name) {
  if (p->hd != KERN_ATTN_HD || p->Lq < 1 || p->Lk < 1 || p->heads < 1 || !p->q || !p->k ||
      !p->v || !p->out)
    sp_fatal("attention (%s): Lq %lld, Lk %lld, heads %lld, hd %lld: need hd %d, all >= 1, "
             "non-NULL pointers",
             name, (long long)p->Lq, (long long)p->Lk, (long long)p->heads, (long long)p->hd,
             KERN_ATTN_HD);
  return p->scale > 0.f ? p->scale : 1.0f / sqrtf((float)p->hd);
}

att_dims att_dims_of(const att_plan *pl) {
  const int64_t H = pl->heads, Lq = pl->Lq, Lk = pl->Lk, D = KERN_ATTN_HD;
  const att_dims d = {
      {1, H, Lq, D}, {Lq * H * D, D, H * D, 1}, {1, H, Lk, D}, {Lk * H * D, D, H * D, 1},
      {1, H, D, Lk}, {Lk * H * D, D, 1, H * D}, {1, H, Lq, Lk}, {H * Lq * Lk, Lq * Lk, Lk, 1},
      {1, H, Lq, 1}, {H * Lq, Lq, 1, 1},        {1, 1, 1, 1}};
  return d;
}

att_plan *att_plan_find(att_engine *e, const kern_attn_params *p, float scale) {
  for (int i = 0; i < e->nplans; i++) {
    att_plan *pl = &e->plans[i];
    if (pl->Lq == p->Lq && pl->Lk == p->Lk && pl->heads == p->heads && pl->scale == scale)
      return pl;
  }
  return NULL;
}

static void att_plan_release(att_plan *pl) {
  att_graph_release(&pl->g);
  if (pl->stats) CUDA_CHECK(cudaFree(pl->stats));
  pl->stats = NULL;
}

/* A new zeroed entry for p's shape and scale at the end of the cache. */
static att_plan *att_plan_add(att_engine *e, const kern_attn_params *p, float scale,
                              const char *name) {
  if (e->nplans == e->cap) {
    int cap = e->cap ? 2 * e->cap : 8;
    att_plan *np = (att_plan *)realloc(e->plans, (size_t)cap * sizeof *np);
    if (!np) sp_fatal("attention (%s): out of host memory for the plan cache (%d)", name, cap);
    e->plans = np;
    e->cap = cap;
  }
  att_plan *pl = &e->plans[e->nplans++];
  memset(pl, 0, sizeof *pl);
  pl->Lq = p->Lq, pl->Lk = p->Lk, pl->heads = p->heads, pl->scale = scale;
  return pl;
}

/* Appends "form n: what (cuDNN's status)" to reasons; *used counts what it
 * holds (truncated at reasons_cap - 1). */
static void att_reason_add(char *reasons, size_t reasons_cap, size_t *used, int form,
                           const char *what, cudnnStatus_t s) {
  int w = snprintf(reasons + *used, reasons_cap - *used, "%sform %d: %s (%s)",
                   form > 1 ? "; " : "", form, what, cudnnGetErrorString(s));
  if (w > 0) *used = *used + (size_t)w < reasons_cap ? *used + (size_t)w : reasons_cap - 1;
}

att_plan *att_plan_build(att_engine *e, const kern_attn_params *p, float scale,
                         const att_forms *f, char *reasons, size_t reasons_cap) {
  att_plan *pl = att_plan_add(e, p, scale, f->name);
  size_t used = 0;
  for (int form = 1; form <= f->n; form++) {
    const char *what = "";
    att_builder b = {&pl->g, CUDNN_STATUS_SUCCESS, NULL};
    cudnnBackendDescriptor_t ops[ATT_MAX_OPS];
    int nops = f->ops(&b, pl, form, ops);
    cudnnStatus_t s = att_graph_finalize(e->handle, &b, ops, nops, &what);
    if (s == CUDNN_STATUS_SUCCESS) {
      pl->ok = 1;
      pl->form = form;
      break;
    }
    att_reason_add(reasons, reasons_cap, &used, form, what, s);
    att_plan_release(pl);
  }
  if (pl->ok && f->has_stats(pl->form))
    CUDA_CHECK(cudaMalloc((void **)&pl->stats, (size_t)(p->heads * p->Lq) * sizeof(float)));
  return pl;
}

att_plan *att_plan_get(att_engine *e, const kern_attn_params *p, float scale, const att_forms *f,
                       int *fresh) {
  *fresh = 0;
  att_plan *pl = att_plan_find(e, p, scale);
  if (pl) return pl;
  *fresh = 1;
  char reasons[640] = "";
  pl = att_plan_build(e, p, scale, f, reasons, sizeof reasons);
  if (!pl->ok) {
    (f->fallback ? sp_log_warn : sp_log_error)(
        "attention: cudnn %zu refuses %s for Lq %lld, Lk %lld, heads %lld%s: %s%s",
        cudnnGetVersion(), f->name, (long long)p->Lq, (long long)p->Lk, (long long)p->heads,
        f->needs, reasons, f->fallback ? "; using flash" : "");
    return pl;
  }
  att_device_grow(&e->workspace, &e->workspace_bytes, pl->g.workspace);
  sp_log_debug("attention: %s plan for Lq %lld, Lk %lld, heads %lld: form %d, engine %lld, "
               "workspace %lld",
               f->name, (long long)p->Lq, (long long)p->Lk, (long long)p->heads, pl->form,
               (long long)pl->g.engine, (long long)pl->g.workspace);
  if (pl->g.nondet_used)
    sp_log_warn("attention: cudnn %zu offers %s for Lq %lld, Lk %lld, heads %lld only through "
                "engine %lld, which it marks nondeterministic: reruns may differ in the last bits",
                cudnnGetVersion(), f->name, (long long)p->Lq, (long long)p->Lk,
                (long long)p->heads, (long long)pl->g.engine);
  return pl;
}

void att_device_grow(void **buf, int64_t *have, int64_t want) {
  if (want <= *have) return;
  if (*buf) CUDA_CHECK(cudaFree(*buf));
  *buf = NULL;
  CUDA_CHECK(cudaMalloc(buf, (size_t)want));
  *have = want;
}

void att_engine_release(att_engine *e) {
  for (int i = 0; i < e->nplans; i++) att_plan_release(&e->plans[i]);
  free(e->plans);
  if (e->workspace) CUDA_CHECK(cudaFree(e->workspace));
  CUDNN_CHECK(cudnnDestroy(e->handle));
}
