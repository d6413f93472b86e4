/* What the fused cuDNN attention (cuda_cudnn_attn.cu) keeps around its
 * graphs: cuDNN's handle, one workspace as large as the largest plan needs,
 * and the cache of plans, one per shape, each built from the first of the
 * attention's graph forms that an engine accepts. */
#ifndef SP_CUDNN_ATTN_PLAN_CUH
#define SP_CUDNN_ATTN_PLAN_CUH

#include <cudnn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "cudnn_graph.cuh"
#include "kern_attn.h"

#define ATT_MAX_OPS 20 /* the largest form (3) has 10 */

/* One cached shape: the plan and every descriptor it was built from (kept
 * alive with it; destroyed with the engine). ok 0: cuDNN refused every
 * form. */
typedef struct att_plan {
  int64_t Lq, Lk, heads;
  float scale;
  int ok;
  int form;     /* the form built, 1..att_forms.n */
  att_graph g;
  float *stats; /* (heads, Lq) fp32, for the forms with the statistics as an output */
} att_plan;

typedef struct att_engine {
  cudnnHandle_t handle;
  void *workspace; /* the largest any cached plan needs */
  int64_t workspace_bytes;
  att_plan *plans;
  int nplans, cap;
} att_engine;

/* The dims and strides, in elements, of a plan's tensors in cuDNN's
 * (batch, heads, seq, hd) order over token-major memory (element (0, h, s,
 * d) of q at (s * heads + h) * hd + d): q and out (qd, qs), k and v (kd,
 * ks), K^T (ktd, kts: k with the last two dims swapped), the scores (sd,
 * ss), a per-row statistic (rd, rs), a scalar (one). */
typedef struct att_dims {
  int64_t qd[4], qs[4], kd[4], ks[4], ktd[4], kts[4], sd[4], ss[4], rd[4], rs[4], one[4];
} att_dims;

att_dims att_dims_of(const att_plan *pl);

/* The graph forms an attention tries, in order 1..n: name for messages
 * ("cudnn"); ops writes the operations of `form` for the
 * plan's shape into out[ATT_MAX_OPS] and returns their count; has_stats
 * says whether `form` writes the statistics tensor. */
typedef struct att_forms {
  const char *name;
  int n;
  int (*ops)(att_builder *b, const att_plan *pl, int form, cudnnBackendDescriptor_t *out);
  int (*has_stats)(int form);
  int fallback;      /* 1: the caller runs another kernel where every form is refused */
  const char *needs; /* what a refusal may mean, for the message ("" for nothing) */
} att_forms;

/* Opens cuDNN's handle into e (zeroed): SP_OK, or SP_ERR_RUNTIME with the
 * cause logged for cuDNN version ver, as a warning where the caller falls
 * back to another kernel (fallback 1), else as an error. */
int att_engine_open(att_engine *e, size_t ver, int fallback);

/* Frees the plans, the workspace and the handle. */
void att_engine_release(att_engine *e);

/* A zeroed context of an attention (a struct with its att_engine as
 * member e) with cuDNN's handle open; NULL with the cause logged (host
 * memory as an error, the handle as att_engine_open says). name is the
 * backend's, for the message. */
template <typename Ctx>
static Ctx *att_context_new(const char *name, size_t ver, int fallback) {
  Ctx *c = (Ctx *)calloc(1, sizeof *c);
  if (!c) {
    sp_log_error("attention: out of host memory for the %s context", name);
    return NULL;
  }
  if (att_engine_open(&c->e, ver, fallback) != SP_OK) {
    free(c);
    return NULL;
  }
  return c;
}

/* Frees what att_context_new made, with the engine's plans and workspace
 * (att_engine_release); NULL does nothing. */
template <typename Ctx>
static void att_context_free(Ctx *c) {
  if (!c) return;
  att_engine_release(&c->e);
  free(c);
}

/* The softmax scale of p (p->scale, or 1/sqrt(hd) for 0); fatal, naming
 * the backend, unless hd is KERN_ATTN_HD, the sizes >= 1 and the pointers
 * set. */
float att_params_scale(const kern_attn_params *p, const char *name);

/* The cached plan of p's shape and scale, NULL when there is none yet. */
att_plan *att_plan_find(att_engine *e, const kern_attn_params *p, float scale);

/* Adds the plan of p's shape and scale to the cache, built from the first
 * form cuDNN finalises, with its statistics buffer when that form has
 * one. Refused by every form: ok 0, and reasons (reasons_cap bytes) says
 * why for each form. Out of host memory is fatal. */
att_plan *att_plan_build(att_engine *e, const kern_attn_params *p, float scale,
                         const att_forms *f, char *reasons, size_t reasons_cap);

/* The plan of p's shape and scale: the cached one (*fresh 0), or one built
 * now (*fresh 1) with the workspace grown to it. Refused by every form:
 * ok 0, logged once with the reasons, as a warning where f->fallback, else
 * as an error. */
att_plan *att_plan_get(att_engine *e, const kern_attn_params *p, float scale, const att_forms *f,
                       int *fresh);

/* Grows the device buffer *buf of *have bytes to want bytes (contents not
 * kept). Setup only: cudaFree synchronises the device, so work still using
 * the old buffer has finished. */
void att_device_grow(void **buf, int64_t *have, int64_t want);

#endif
