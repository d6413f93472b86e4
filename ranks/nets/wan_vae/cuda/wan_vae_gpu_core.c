/* The pieces the CUDA VAE decoder and encoder share (wan_vae_gpu_core.h):
 * the allocation carved from the planner's layout, the weights' device
 * form, the profile, and the causal caches, residual and attention blocks
 * as the CPU computes them (wan_vae_cpu_blocks.c).
 *
 * A cached convolution's input is built in the buffer s: the conv's cache
 * (its last 2 input frames, zeros at the start of a run: the causal zero
 * padding) is copied into s's first 2 frames, the producer (norm + SiLU, a
 * copy of x) writes the chunk's t frames right behind them, the conv runs
 * on 2 + t frames without time padding, and the last 2 of those frames go
 * back into the cache: the published cache rule, including a one-frame
 * chunk's shift. */
#include <stdlib.h>
#include <string.h>

#include "cuda_check.h"
#include "kern_dtype.h"
#include "log.h"
#include "wan_vae_gpu_core.h"
#include "wan_vae_gpu_layout.h"

/* ---------------------------------------------------------------- the allocation */

void *vae_gpu_buf(const vae_gpu_core *g, plan_vae_buf kind, int index) {
  const plan_vae_buffer *b = plan_vae_layout_find(g->lay, kind, index);
  if (!b) sp_fatal("vae gpu: the layout has no %s %d", plan_vae_buf_name(kind), index);
  return g->dev + b->offset;
}

int vae_gpu_core_open(vae_gpu_core *g, plan_vae_layout *lay, wan_vae_gpu_precision p,
                      const char *what) {
  memset(g, 0, sizeof *g);
  g->lay = lay;
  g->p = p;
  g->dt = p == WAN_VAE_GPU_BF16 ? KERN_DTYPE_BF16 : KERN_DTYPE_F32;
  g->E = wan_vae_gpu_elem_bytes(p);
  cudaError_t e = cudaMalloc((void **)&g->dev, lay->total);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    g->dev = NULL;
    sp_log_error("vae gpu: cannot allocate %.2f GiB of device memory for the %s in %s: %s",
                 (double)lay->total / (1 << 30), what, wan_vae_gpu_precision_name(p),
                 cudaGetErrorString(e));
    return SP_ERR_RUNTIME;
  }
  g->x = vae_gpu_buf(g, PLAN_VAE_X, 0);
  g->y = vae_gpu_buf(g, PLAN_VAE_Y, 0);
  g->s = vae_gpu_buf(g, PLAN_VAE_S, 0);
  g->r = vae_gpu_buf(g, PLAN_VAE_R, 0);
  g->scores = vae_gpu_buf(g, PLAN_VAE_SCORES, 0);
  g->scores_bytes = plan_vae_layout_find(lay, PLAN_VAE_SCORES, 0)->bytes;
  for (int i = 0; i < lay->n_cache; i++) g->cache[i] = vae_gpu_buf(g, PLAN_VAE_CACHE, i);
  CUDA_CHECK(cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking));
  return kern_cuda_vae_create(g->dt, p == WAN_VAE_GPU_TF32, g->stream,
                              vae_gpu_buf(g, PLAN_VAE_CONV_WS, 0), lay->conv_ws_bytes,
                              vae_gpu_buf(g, PLAN_VAE_GEMM_WS, 0), PLAN_VAE_GEMM_WS_BYTES, &g->k);
}

void vae_gpu_core_close(vae_gpu_core *g) {
  if (g->prof) vae_gpu_profile(g, 0);
  kern_cuda_vae_destroy(g->k);
  if (g->stream) CUDA_CHECK(cudaStreamDestroy(g->stream));
  if (g->dev) CUDA_CHECK(cudaFree(g->dev));
  free(g->lay);
  memset(g, 0, sizeof *g);
}

void vae_gpu_clear_caches(vae_gpu_core *g) {
  for (int i = 0; i < g->lay->n_cache; i++) {
    const plan_vae_buffer *b = plan_vae_layout_find(g->lay, PLAN_VAE_CACHE, i);
    CUDA_CHECK(cudaMemsetAsync(g->cache[i], 0, b->bytes, g->stream));
  }
}

/* ---------------------------------------------------------------- weights */

int vae_gpu_pinned(size_t bytes, const char *what, void **out) {
  const cudaError_t e = cudaMallocHost(out, bytes);
  if (e == cudaSuccess) return SP_OK;
  (void)cudaGetLastError();
  *out = NULL;
  sp_log_error("vae gpu: cannot allocate %.1f MiB of pinned host memory for the %s: %s",
               (double)bytes / (1 << 20), what, cudaGetErrorString(e));
  return SP_ERR_RUNTIME;
}

int vae_gpu_upload(vae_gpu_core *g, const wan_vae_table *t, const float *packed) {
  uint64_t *off = malloc(WAN_VAE_MAX_TENSORS * sizeof *off);
  if (!off) {
    sp_log_error("vae gpu: out of host memory");
    return SP_ERR_RUNTIME;
  }
  const uint64_t wbytes = wan_vae_gpu_form_offsets(t, g->p, WAN_VAE_GPU_FORM, off);
  const plan_vae_buffer *wb = plan_vae_layout_find(g->lay, PLAN_VAE_WEIGHTS, 0);
  if (!wb || wb->bytes != wbytes)
    sp_fatal("vae gpu: weights %llu bytes, layout %llu", (unsigned long long)wbytes,
             (unsigned long long)(wb ? wb->bytes : 0));
  char *host = calloc(1, wbytes ? wbytes : 1);
  if (!host) {
    free(off);
    sp_log_error("vae gpu: out of host memory staging %.1f MiB of weights",
                 (double)wbytes / (1 << 20));
    return SP_ERR_RUNTIME;
  }
  for (int i = 0; i < t->count; i++) {
    wan_vae_gpu_form_convert(&t->t[i], packed + t->t[i].offset, g->p, WAN_VAE_GPU_FORM,
                             host + off[i]);
    *t->t[i].slot = (const float *)(g->dev + wb->offset + off[i]);
  }
  CUDA_CHECK(cudaMemcpy(g->dev + wb->offset, host, wbytes, cudaMemcpyHostToDevice));
  free(host);
  free(off);
  return SP_OK;
}

/* ---------------------------------------------------------------- profiling */

int vae_gpu_prof_begin(vae_gpu_core *g) {
  if (!g->prof) return -1;
  if (g->nev + 2 > VAE_GPU_PROF_EVENTS) {
    CUDA_CHECK(cudaStreamSynchronize(g->stream));
    vae_gpu_prof_flush(g);
  }
  int i = g->nev;
  g->nev += 2;
  CUDA_CHECK(cudaEventRecord(g->ev[i], g->stream));
  return i;
}

void vae_gpu_prof_end(vae_gpu_core *g, int i, wan_vae_gpu_op op) {
  if (i < 0) return;
  g->ev_op[i / 2] = (int)op;
  CUDA_CHECK(cudaEventRecord(g->ev[i + 1], g->stream));
}

void vae_gpu_prof_flush(vae_gpu_core *g) {
  for (int i = 0; g->prof && i < g->nev; i += 2) {
    float ms = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, g->ev[i], g->ev[i + 1]));
    g->ms[g->ev_op[i / 2]] += ms;
  }
  g->nev = 0;
}

void vae_gpu_profile(vae_gpu_core *g, int on) {
  if (on && !g->prof)
    for (int i = 0; i < VAE_GPU_PROF_EVENTS; i++) CUDA_CHECK(cudaEventCreate(&g->ev[i]));
  if (!on && g->prof) {
    CUDA_CHECK(cudaStreamSynchronize(g->stream));
    for (int i = 0; i < VAE_GPU_PROF_EVENTS; i++) CUDA_CHECK(cudaEventDestroy(g->ev[i]));
  }
  g->prof = on;
  g->nev = 0;
  memset(g->ms, 0, sizeof g->ms);
}

/* ---------------------------------------------------------------- caches */

void *vae_gpu_at(const vae_grun *r, void *p, int64_t elems) {
  return (char *)p + elems * r->g->E;
}

int vae_gpu_next_cache(vae_grun *r, int64_t c) {
  const plan_vae_layout *l = r->g->lay;
  if (r->idx >= l->n_cache) sp_fatal("vae gpu: more cached convs than the layout has");
  const int k = r->idx++;
  if (l->cache_c[k] != c || l->cache_hw[k] != r->h * r->w)
    sp_fatal("vae gpu: cache %d laid out for %lld x %lld, used for %lld x %lld", k,
             (long long)l->cache_c[k], (long long)l->cache_hw[k], (long long)c,
             (long long)(r->h * r->w));
  return k;
}

void vae_gpu_cache_in(vae_grun *r, int k, int64_t c) {
  vae_gpu_core *g = r->g;
  const int i = vae_gpu_prof_begin(g);
  const size_t bytes = (size_t)(g->lay->cache_t[k] * r->h * r->w * c * g->E);
  CUDA_CHECK(cudaMemcpyAsync(g->s, g->cache[k], bytes, cudaMemcpyDeviceToDevice, g->stream));
  vae_gpu_prof_end(g, i, WAN_VAE_GPU_OP_COPY);
}

void vae_gpu_cache_out(vae_grun *r, int k, int64_t c) {
  vae_gpu_core *g = r->g;
  const int64_t hw = r->h * r->w;
  const int i = vae_gpu_prof_begin(g);
  CUDA_CHECK(cudaMemcpyAsync(g->cache[k], vae_gpu_at(r, g->s, r->t * hw * c),
                             (size_t)(PLAN_VAE_CACHE_T * hw * c * g->E), cudaMemcpyDeviceToDevice,
                             g->stream));
  vae_gpu_prof_end(g, i, WAN_VAE_GPU_OP_COPY);
}

void *vae_gpu_s_frames(const vae_grun *r, int64_t c) {
  return vae_gpu_at(r, r->g->s, PLAN_VAE_CACHE_T * r->h * r->w * c);
}

/* ---------------------------------------------------------------- ops */

/* Flat list: kern_cuda_vae_conv's operands and shape, which it passes on, plus the op timed. */
void vae_gpu_conv(vae_grun *r, const void *x, int64_t T, int64_t ci, const float *w, int64_t co,
                  int kt, int kh, int kw, void *y, wan_vae_gpu_op op) {
  const int i = vae_gpu_prof_begin(r->g);
  kern_cuda_vae_conv(r->g->k, x, T, r->h, r->w, ci, w, co, kt, kh, kw, y);
  vae_gpu_prof_end(r->g, i, op);
}

void vae_gpu_norm_x(vae_grun *r, const float *gamma, void *y, int64_t c, int silu) {
  const int i = vae_gpu_prof_begin(r->g);
  kern_cuda_vae_norm(r->g->k, r->g->x, 1, NULL, gamma, y, r->t * r->h * r->w, c, silu);
  vae_gpu_prof_end(r->g, i, WAN_VAE_GPU_OP_NORM);
}

void vae_gpu_norm(vae_grun *r, const void *x, const float *bias, const float *gamma, void *y,
                  int64_t c, int silu) {
  const int i = vae_gpu_prof_begin(r->g);
  kern_cuda_vae_norm(r->g->k, x, 0, bias, gamma, y, r->t * r->h * r->w, c, silu);
  vae_gpu_prof_end(r->g, i, WAN_VAE_GPU_OP_NORM);
}

/* Flat list: kern_cuda_vae_add's operands, which it passes on. */
void vae_gpu_add(vae_grun *r, const void *y, const float *by, const void *res, int res_f32,
                 const float *br, void *out, int out_f32, int64_t c) {
  const int i = vae_gpu_prof_begin(r->g);
  kern_cuda_vae_add(r->g->k, y, by, res, res_f32, br, out, out_f32, r->t * r->h * r->w, c);
  vae_gpu_prof_end(r->g, i, WAN_VAE_GPU_OP_ELEM);
}

void vae_gpu_cached_conv3(vae_grun *r, int k, const float *w, int64_t ci, int64_t co) {
  vae_gpu_conv(r, r->g->s, PLAN_VAE_CACHE_T + r->t, ci, w, co, 3, 3, 3, r->g->y,
               WAN_VAE_GPU_OP_CONV3D);
  vae_gpu_cache_out(r, k, ci);
}

/* ---------------------------------------------------------------- blocks */

void vae_gpu_resblock(vae_grun *r, const wan_vae_resblock *rb) {
  vae_gpu_core *g = r->g;
  const int64_t in = rb->in_dim, out = rb->out_dim;
  if (rb->shortcut_w) {
    /* the conv takes dt: x through s, which the cached convs refill next */
    const int i = vae_gpu_prof_begin(g);
    kern_cuda_vae_from_f32(g->k, g->x, g->s, r->t * r->h * r->w * in);
    vae_gpu_prof_end(g, i, WAN_VAE_GPU_OP_ELEM);
    vae_gpu_conv(r, g->s, r->t, in, rb->shortcut_w, out, 1, 1, 1, g->r, WAN_VAE_GPU_OP_CONV1);
  }
  int k = vae_gpu_next_cache(r, in);
  vae_gpu_cache_in(r, k, in);
  vae_gpu_norm_x(r, rb->norm1_gamma, vae_gpu_s_frames(r, in), in, 1);
  vae_gpu_cached_conv3(r, k, rb->conv1_w, in, out);
  k = vae_gpu_next_cache(r, out);
  vae_gpu_cache_in(r, k, out);
  vae_gpu_norm(r, g->y, rb->conv1_b, rb->norm2_gamma, vae_gpu_s_frames(r, out), out, 1);
  /* Dropout(0) is the identity. */
  vae_gpu_cached_conv3(r, k, rb->conv2_w, out, out);
  if (rb->shortcut_w)
    vae_gpu_add(r, g->y, rb->conv2_b, g->r, 0, rb->shortcut_b, g->x, 1, out);
  else
    vae_gpu_add(r, g->y, rb->conv2_b, g->x, 1, NULL, g->x, 1, out);
}

void vae_gpu_attnblock(vae_grun *r, const wan_vae_attn *at) {
  vae_gpu_core *g = r->g;
  const int64_t c = at->dim;
  vae_gpu_norm_x(r, at->norm_gamma, g->s, c, 0);
  vae_gpu_conv(r, g->s, r->t, c, at->qkv_w, 3 * c, 1, 1, 1, g->y, WAN_VAE_GPU_OP_CONV1);
  vae_gpu_add(r, g->y, at->qkv_b, NULL, 0, NULL, g->y, 0, 3 * c);
  const int i = vae_gpu_prof_begin(g);
  kern_cuda_vae_attention(g->k, g->y, g->r, r->t, r->h * r->w, c, g->scores, g->scores_bytes);
  vae_gpu_prof_end(g, i, WAN_VAE_GPU_OP_ATTN);
  vae_gpu_conv(r, g->r, r->t, c, at->proj_w, c, 1, 1, 1, g->s, WAN_VAE_GPU_OP_CONV1);
  vae_gpu_add(r, g->s, at->proj_b, g->x, 1, NULL, g->x, 1, c);
}
