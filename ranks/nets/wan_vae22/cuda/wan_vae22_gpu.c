/* The Wan 2.2 VAE on a CUDA device (wan_vae22_cuda.h, VAE22.md): the
 * coder of one part, its one allocation carved from the planner's layout
 * (wan_vae22_gpu_layout.c, planner/vae22_layout.c), its weights in their
 * device form, the profiling, the cache rule and the residual and
 * attention blocks both parts run (wan_vae22_gpu_impl.h); and the CUDA
 * backend (wan_vae22_backend.h). */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_check.h"
#include "kern_dtype.h"
#include "log.h"
#include "vae_layout.h"
#include "wan_vae22_backend.h"
#include "wan_vae22_gpu_impl.h"
#include "wan_vae_gpu_core.h"

/* ---------------------------------------------------------------- profiling */

static void prof_drain(wan_vae22_gpu *g) {
  for (int i = 0; i < g->nev; i += 2) {
    float ms = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, g->ev[i], g->ev[i + 1]));
    g->ms[g->ev_op[i / 2]] += ms;
  }
  g->nev = 0;
}

int g22_prof_begin(wan_vae22_gpu *g) {
  if (!g->prof) return -1;
  if (g->nev + 2 > V22_PROF_EVENTS) {
    CUDA_CHECK(cudaStreamSynchronize(g->stream));
    prof_drain(g);
  }
  const int i = g->nev;
  g->nev += 2;
  CUDA_CHECK(cudaEventRecord(g->ev[i], g->stream));
  return i;
}

void g22_prof_end(wan_vae22_gpu *g, int i, wan_vae22_gpu_op op) {
  if (i < 0) return;
  g->ev_op[i / 2] = (int)op;
  CUDA_CHECK(cudaEventRecord(g->ev[i + 1], g->stream));
}

void g22_prof_flush(wan_vae22_gpu *g) {
  if (g->prof) prof_drain(g);
}

void wan_vae22_gpu_profile(wan_vae22_gpu *g, int on) {
  if (on && !g->prof)
    for (int i = 0; i < V22_PROF_EVENTS; i++) CUDA_CHECK(cudaEventCreate(&g->ev[i]));
  if (!on && g->prof) {
    CUDA_CHECK(cudaStreamSynchronize(g->stream));
    for (int i = 0; i < V22_PROF_EVENTS; i++) CUDA_CHECK(cudaEventDestroy(g->ev[i]));
  }
  g->prof = on;
  g->nev = 0;
  memset(g->ms, 0, sizeof g->ms);
}

void wan_vae22_gpu_profile_ms(const wan_vae22_gpu *g, double ms[WAN_VAE22_GPU_OPS]) {
  for (int i = 0; i < WAN_VAE22_GPU_OPS; i++) ms[i] = g->prof ? g->ms[i] : 0.0;
}

/* ---------------------------------------------------------------- create */

static void *buf(wan_vae22_gpu *g, plan_vae22_buf kind, int index) {
  const plan_vae22_buffer *b = plan_vae22_layout_find(g->lay, kind, index);
  if (!b) sp_fatal("vae gpu: the layout has no %s %d", plan_vae22_buf_name(kind), index);
  return g->dev + b->offset;
}

/* The weights converted on the host into one staging buffer, one copy up;
 * the typed fields bound to their device addresses. */
static int upload_weights(wan_vae22_gpu *g, const float *packed) {
  wan_vae_table *t = malloc(sizeof *t);
  uint64_t *off = malloc(WAN_VAE_MAX_TENSORS * sizeof *off);
  char *host = NULL;
  int rc = SP_ERR_RUNTIME;
  if (!t || !off) goto done;
  wan_vae22_table_make(&g->cfg, g->part, &g->wt, t);
  const uint64_t bytes = wan_vae_gpu_form_offsets(t, g->p, WAN_VAE22_GPU_FORM, off);
  const plan_vae22_buffer *wb = plan_vae22_layout_find(g->lay, PLAN_VAE22_WEIGHTS, 0);
  if (!wb || wb->bytes != bytes)
    sp_fatal("vae gpu: weights of %llu bytes, the layout's %llu", (unsigned long long)bytes,
             (unsigned long long)(wb ? wb->bytes : 0));
  if (!(host = calloc(1, bytes ? bytes : 1))) goto done;
  for (int i = 0; i < t->count; i++) {
    wan_vae_gpu_form_convert(&t->t[i], packed + t->t[i].offset, g->p, WAN_VAE22_GPU_FORM,
                             host + off[i]);
    *t->t[i].slot = (const float *)(g->dev + wb->offset + off[i]);
  }
  CUDA_CHECK(cudaMemcpy(g->dev + wb->offset, host, bytes, cudaMemcpyHostToDevice));
  rc = SP_OK;
done:
  if (rc != SP_OK) sp_log_error("vae gpu: out of host memory staging the weights");
  free(host);
  free(t);
  free(off);
  return rc;
}

/* The roles, the caches, the stream, the kernels' contexts. */
static int carve(wan_vae22_gpu *g) {
  g->x = buf(g, PLAN_VAE22_X, 0);
  g->k = buf(g, PLAN_VAE22_K, 0);
  g->io = buf(g, PLAN_VAE22_IO, 0);
  g->frames = buf(g, PLAN_VAE22_FRAMES, 0);
  g->y = buf(g, PLAN_VAE22_Y, 0);
  g->s = buf(g, PLAN_VAE22_S, 0);
  g->r = buf(g, PLAN_VAE22_R, 0);
  g->scores = buf(g, PLAN_VAE22_SCORES, 0);
  g->scores_bytes = plan_vae22_layout_find(g->lay, PLAN_VAE22_SCORES, 0)->bytes;
  for (int i = 0; i < g->lay->n_cache; i++) g->cache[i] = buf(g, PLAN_VAE22_CACHE, i);
  if (g->part == WAN_VAE22_DECODER) {
    const size_t fb = plan_vae22_layout_find(g->lay, PLAN_VAE22_FRAMES, 0)->bytes;
    if (vae_gpu_pinned(fb, "frames", (void **)&g->host_frames) != SP_OK) return SP_ERR_RUNTIME;
  }
  CUDA_CHECK(cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking));
  void *ws = buf(g, PLAN_VAE22_CONV_WS, 0);
  if (kern_cuda_vae_create(g->dt, 0, g->stream, ws, g->lay->conv_ws_bytes,
                           buf(g, PLAN_VAE22_GEMM_WS, 0), PLAN_VAE_GEMM_WS_BYTES,
                           &g->k1) != SP_OK ||
      kern_cuda_vae22_create(g->dt, g->stream, ws, g->lay->conv_ws_bytes, &g->k2) != SP_OK)
    return SP_ERR_RUNTIME;
  return SP_OK;
}

int wan_vae22_gpu_create(const wan_vae22_config *c, wan_vae22_part part, const float *packed,
                         int64_t h, int64_t w, wan_vae_gpu_precision p, wan_vae22_gpu **out) {
  *out = NULL;
  wan_vae22_gpu *g = calloc(1, sizeof *g);
  if (!g || !(g->lay = malloc(sizeof *g->lay))) {
    free(g);
    sp_log_error("vae gpu: out of host memory");
    return SP_ERR_RUNTIME;
  }
  int rc = wan_vae22_gpu_layout(c, part, h, w, p, g->lay);
  if (rc != SP_OK) goto fail;
  g->cfg = *c;
  g->part = part;
  g->h = part == WAN_VAE22_ENCODER ? h / WAN_VAE22_PATCH : h;
  g->w = part == WAN_VAE22_ENCODER ? w / WAN_VAE22_PATCH : w;
  g->p = p;
  g->dt = p == WAN_VAE_GPU_FP32 ? KERN_DTYPE_F32 : KERN_DTYPE_BF16;
  g->E = wan_vae_gpu_elem_bytes(p);
  const cudaError_t e = cudaMalloc((void **)&g->dev, g->lay->total);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    g->dev = NULL;
    sp_log_error("vae gpu: cannot allocate %.2f GiB of device memory for the %s at %lldx%lld in "
                 "%s: %s", (double)g->lay->total / (1 << 30), wan_vae22_part_name(part),
                 (long long)h, (long long)w, kern_dtype_name(g->dt), cudaGetErrorString(e));
    rc = SP_ERR_RUNTIME;
    goto fail;
  }
  if ((rc = upload_weights(g, packed)) != SP_OK || (rc = carve(g)) != SP_OK) goto fail;
  sp_log_info("vae gpu: %s %s for %s %lldx%lld: %.2f GiB of device memory (weights %.1f MiB)",
              kern_dtype_name(g->dt), wan_vae22_part_name(part),
              part == WAN_VAE22_ENCODER ? "video" : "latents", (long long)h, (long long)w,
              (double)g->lay->total / (1 << 30),
              (double)plan_vae22_layout_find(g->lay, PLAN_VAE22_WEIGHTS, 0)->bytes / (1 << 20));
  *out = g;
  return SP_OK;
fail:
  wan_vae22_gpu_free(g);
  return rc;
}

void wan_vae22_gpu_free(wan_vae22_gpu *g) {
  if (!g) return;
  if (g->prof) wan_vae22_gpu_profile(g, 0);
  kern_cuda_vae22_destroy(g->k2);
  kern_cuda_vae_destroy(g->k1);
  if (g->stream) CUDA_CHECK(cudaStreamDestroy(g->stream));
  if (g->host_frames) CUDA_CHECK(cudaFreeHost(g->host_frames));
  if (g->dev) CUDA_CHECK(cudaFree(g->dev));
  free(g->lay);
  free(g);
}

int64_t wan_vae22_gpu_peak_bytes(const wan_vae22_gpu *g) { return (int64_t)g->lay->total; }

const plan_vae22_layout *wan_vae22_gpu_layout_of(const wan_vae22_gpu *g) { return g->lay; }

void g22_reset(wan_vae22_gpu *g) {
  for (int i = 0; i < g->lay->n_cache; i++) {
    const plan_vae22_buffer *b = plan_vae22_layout_find(g->lay, PLAN_VAE22_CACHE, i);
    CUDA_CHECK(cudaMemsetAsync(g->cache[i], 0, b->bytes, g->stream));
    g->started[i] = 0;
  }
}

/* ---------------------------------------------------------------- shared ops */

void g22_fits(const wan_vae22_gpu *g, plan_vae22_buf kind, uint64_t elems) {
  if (elems > g->lay->elems[kind])
    sp_fatal("vae gpu: %s of %llu elements, laid out for %llu", plan_vae22_buf_name(kind),
             (unsigned long long)elems, (unsigned long long)g->lay->elems[kind]);
}

void *g22_at(const wan_vae22_gpu *g, void *p, int64_t elems) {
  return (char *)p + elems * g->E;
}

int g22_next_cache(g22_run *r, int64_t c, int keep) {
  const plan_vae22_layout *l = r->g->lay;
  if (r->idx >= l->n_cache) sp_fatal("vae gpu: more cached ops than the layout has");
  const int k = r->idx++;
  if (l->cache_c[k] != c || l->cache_hw[k] != r->h * r->w || l->cache_t[k] != keep)
    sp_fatal("vae gpu: cache %d laid out for %lld x %lld (%d frames), used for %lld x %lld (%d)",
             k, (long long)l->cache_c[k], (long long)l->cache_hw[k], l->cache_t[k], (long long)c,
             (long long)(r->h * r->w), keep);
  return k;
}

void g22_copy(wan_vae22_gpu *g, void *dst, const void *src, size_t bytes,
              enum cudaMemcpyKind kind) {
  const int i = g22_prof_begin(g);
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, g->stream));
  g22_prof_end(g, i, WAN_VAE22_GPU_OP_COPY);
}

void g22_cache_in(g22_run *r, int k, int64_t c, int keep) {
  wan_vae22_gpu *g = r->g;
  g22_fits(g, PLAN_VAE22_S, (uint64_t)((keep + r->t) * r->h * r->w * c));
  g22_copy(g, g->s, g->cache[k], (size_t)(keep * r->h * r->w * c * g->E),
           cudaMemcpyDeviceToDevice);
}

void g22_cache_out(g22_run *r, int k, int64_t c, int keep) {
  wan_vae22_gpu *g = r->g;
  const int64_t hw = r->h * r->w;
  g22_copy(g, g->cache[k], g22_at(g, g->s, r->t * hw * c), (size_t)(keep * hw * c * g->E),
           cudaMemcpyDeviceToDevice);
}

void *g22_s_frames(const g22_run *r, int64_t c, int keep) {
  return g22_at(r->g, r->g->s, keep * r->h * r->w * c);
}

/* Flat list: kern_cuda_vae_conv's operands and shape, which it passes on, plus the op timed. */
void g22_conv(g22_run *r, const void *x, int64_t T, int64_t ci, const float *w, int64_t co,
              int kt, int kh, int kw, void *y, wan_vae22_gpu_op op) {
  wan_vae22_gpu *g = r->g;
  if (y == g->y) g22_fits(g, PLAN_VAE22_Y, (uint64_t)((T - kt + 1) * r->h * r->w * co));
  const int i = g22_prof_begin(g);
  kern_cuda_vae_conv(g->k1, x, T, r->h, r->w, ci, w, co, kt, kh, kw, y);
  g22_prof_end(g, i, op);
}

/* Flat list: kern_cuda_vae_add's operands, which it passes on. */
void g22_add(g22_run *r, const void *y, const float *by, const void *res, int res_f32,
             const float *br, void *out, int out_f32, int64_t c) {
  wan_vae22_gpu *g = r->g;
  if (out == g->x) g22_fits(g, PLAN_VAE22_X, (uint64_t)(r->t * r->h * r->w * c));
  const int i = g22_prof_begin(g);
  kern_cuda_vae_add(g->k1, y, by, res, res_f32, br, out, out_f32, r->t * r->h * r->w, c);
  g22_prof_end(g, i, WAN_VAE22_GPU_OP_ELEM);
}

void g22_norm_x(g22_run *r, const float *gamma, void *y, int64_t c, int silu) {
  const int i = g22_prof_begin(r->g);
  kern_cuda_vae_norm(r->g->k1, r->g->x, 1, NULL, gamma, y, r->t * r->h * r->w, c, silu);
  g22_prof_end(r->g, i, WAN_VAE22_GPU_OP_NORM);
}

/* RMS norm (+ SiLU) of a conv's raw output x plus its bias into y. */
static void norm(g22_run *r, const void *x, const float *bias, const float *gamma, void *y,
                 int64_t c) {
  const int i = g22_prof_begin(r->g);
  kern_cuda_vae_norm(r->g->k1, x, 0, bias, gamma, y, r->t * r->h * r->w, c, 1);
  g22_prof_end(r->g, i, WAN_VAE22_GPU_OP_NORM);
}

void g22_cached_conv3(g22_run *r, int k, const float *w, int64_t ci, int64_t co) {
  g22_conv(r, r->g->s, WAN_VAE22_CACHE_T + r->t, ci, w, co, 3, 3, 3, r->g->y,
           WAN_VAE22_GPU_OP_CONV3D);
  g22_cache_out(r, k, ci, WAN_VAE22_CACHE_T);
}

void g22_resblock(g22_run *r, const wan_vae_resblock *rb) {
  wan_vae22_gpu *g = r->g;
  const int64_t in = rb->in_dim, out = rb->out_dim, n = r->t * r->h * r->w;
  g22_fits(g, PLAN_VAE22_X, (uint64_t)(n * (in > out ? in : out)));
  if (rb->shortcut_w) {
    /* the conv takes the precision: x through s, which the cached convs refill next */
    g22_fits(g, PLAN_VAE22_R, (uint64_t)(n * out));
    const int i = g22_prof_begin(g);
    kern_cuda_vae_from_f32(g->k1, g->x, g->s, n * in);
    g22_prof_end(g, i, WAN_VAE22_GPU_OP_ELEM);
    g22_conv(r, g->s, r->t, in, rb->shortcut_w, out, 1, 1, 1, g->r, WAN_VAE22_GPU_OP_CONV1);
  }
  int k = g22_next_cache(r, in, WAN_VAE22_CACHE_T);
  g22_cache_in(r, k, in, WAN_VAE22_CACHE_T);
  g22_norm_x(r, rb->norm1_gamma, g22_s_frames(r, in, WAN_VAE22_CACHE_T), in, 1);
  g22_cached_conv3(r, k, rb->conv1_w, in, out);
  k = g22_next_cache(r, out, WAN_VAE22_CACHE_T);
  g22_cache_in(r, k, out, WAN_VAE22_CACHE_T);
  norm(r, g->y, rb->conv1_b, rb->norm2_gamma, g22_s_frames(r, out, WAN_VAE22_CACHE_T), out);
  /* Dropout(0) is the identity. */
  g22_cached_conv3(r, k, rb->conv2_w, out, out);
  if (rb->shortcut_w)
    g22_add(r, g->y, rb->conv2_b, g->r, 0, rb->shortcut_b, g->x, 1, out);
  else
    g22_add(r, g->y, rb->conv2_b, g->x, 1, NULL, g->x, 1, out);
}

void g22_attnblock(g22_run *r, const wan_vae_attn *at) {
  wan_vae22_gpu *g = r->g;
  const int64_t c = at->dim, n = r->t * r->h * r->w;
  g22_fits(g, PLAN_VAE22_S, (uint64_t)(n * c));
  g22_fits(g, PLAN_VAE22_R, (uint64_t)(n * c));
  g22_norm_x(r, at->norm_gamma, g->s, c, 0);
  g22_conv(r, g->s, r->t, c, at->qkv_w, 3 * c, 1, 1, 1, g->y, WAN_VAE22_GPU_OP_CONV1);
  g22_add(r, g->y, at->qkv_b, NULL, 0, NULL, g->y, 0, 3 * c);
  const int i = g22_prof_begin(g);
  kern_cuda_vae_attention(g->k1, g->y, g->r, r->t, r->h * r->w, c, g->scores, g->scores_bytes);
  g22_prof_end(g, i, WAN_VAE22_GPU_OP_ATTN);
  g22_conv(r, g->r, r->t, c, at->proj_w, c, 1, 1, 1, g->s, WAN_VAE22_GPU_OP_CONV1);
  g22_add(r, g->s, at->proj_b, g->x, 1, NULL, g->x, 1, c);
}

/* ---------------------------------------------------------------- backend */

static int gpu_create(const wan_vae22_make *a, void **out) {
  wan_vae22_gpu *g = NULL;
  const int rc = wan_vae22_gpu_create(a->config, a->part, a->packed, a->h, a->w, a->precision,
                                      &g);
  *out = g;
  return rc;
}

static void gpu_destroy(void *d) { wan_vae22_gpu_free(d); }

static int gpu_decode(void *d, const float *latents, int64_t F, wan_vae_frames_fn fn,
                      void *user) {
  return wan_vae22_gpu_decode(d, latents, F, fn, user);
}

static int gpu_encode(void *e, const float *video, int64_t T, float *latents) {
  return wan_vae22_gpu_encode(e, video, T, latents);
}

static int64_t gpu_host_bytes(const void *d) {
  (void)d;
  return 0;
}

static int64_t gpu_device_bytes(const void *d) { return wan_vae22_gpu_peak_bytes(d); }

static const wan_vae22_backend cuda_ops = {.create = gpu_create,
                                           .destroy = gpu_destroy,
                                           .decode = gpu_decode,
                                           .encode = gpu_encode,
                                           .host_bytes = gpu_host_bytes,
                                           .device_bytes = gpu_device_bytes};

const net_backend wan_vae22_cuda = {wan_vae22_net, RANK_DEVICE_CUDA, &cuda_ops};
