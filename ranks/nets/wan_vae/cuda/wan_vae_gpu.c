/* The Wan 2.1 VAE decoder on a CUDA device (wan_vae_gpu.h, VAE.md): the
 * CPU decoder's computation (wan_vae_cpu.c), chunk by chunk with the same
 * causal caches, on channels-last activations in one device allocation
 * laid out by planner/vae_layout.h (through wan_vae_gpu_layout).
 *
 * A cached convolution's input is built in the buffer s: the conv's cache
 * (its last 2 input frames, zeros at the start of a decode: the causal zero
 * padding) is copied into s's first 2 frames, the producer (norm + SiLU,
 * conv2, or a copy of x before a time conv) writes the chunk's t frames
 * right behind them, the conv runs on 2 + t frames without time padding,
 * and the last 2 of those frames go back into the cache: the published
 * cache rule, including a one-frame chunk's shift. Convolutions write their
 * raw output (no bias); the bias is added by the op that reads it (the
 * next norm, the residual add, the unfold, the output frames).
 *
 * The weights are bound through the VAE table to device addresses: the
 * wan_vae_weights fields point into the device allocation, conv weights in
 * the precision's type (bf16 bit patterns in bf16), everything else fp32.
 * The VAE's CUDA backend (wan_vae_backend.h) is this decoder. */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_check.h"
#include "kern_cuda_vae.h"
#include "kern_dtype.h"
#include "log.h"
#include "wan_vae_backend.h"
#include "wan_vae_cuda.h"
#include "wan_vae_gpu_layout.h"

#define PROF_EVENTS 1024 /* event pairs are flushed when full and after each chunk */

struct wan_vae_gpu {
  wan_vae_config cfg;
  int64_t h, w;
  wan_vae_gpu_precision p;
  kern_dtype dt;
  int64_t E; /* bytes per activation element */
  plan_vae_layout *lay;
  char *dev; /* the one device allocation, lay->total bytes */
  wan_vae_weights wt; /* device addresses */
  float *x; /* the residual stream, fp32 in both precisions */
  void *y, *s, *r, *scores;
  size_t scores_bytes;
  float *latent, *frames;
  void *cache[PLAN_VAE_MAX_CACHES];
  int started[PLAN_VAE_MAX_CACHES]; /* upsample3d time conv has run its first chunk */
  float *host_frames; /* pinned, one chunk's (3, t, H, W) */
  cudaStream_t stream;
  kern_cuda_vae *k;
  /* profiling */
  int prof;
  cudaEvent_t ev[PROF_EVENTS];
  int ev_op[PROF_EVENTS / 2];
  int nev;
  double ms[WAN_VAE_GPU_OPS];
};

/* ---------------------------------------------------------------- profiling */

static int prof_begin(wan_vae_gpu *g) {
  if (!g->prof) return -1;
  if (g->nev + 2 > PROF_EVENTS) {
    CUDA_CHECK(cudaStreamSynchronize(g->stream));
    for (int i = 0; i < g->nev; i += 2) {
      float ms = 0.0f;
      CUDA_CHECK(cudaEventElapsedTime(&ms, g->ev[i], g->ev[i + 1]));
      g->ms[g->ev_op[i / 2]] += ms;
    }
    g->nev = 0;
  }
  int i = g->nev;
  g->nev += 2;
  CUDA_CHECK(cudaEventRecord(g->ev[i], g->stream));
  return i;
}

static void prof_end(wan_vae_gpu *g, int i, wan_vae_gpu_op op) {
  if (i < 0) return;
  g->ev_op[i / 2] = (int)op;
  CUDA_CHECK(cudaEventRecord(g->ev[i + 1], g->stream));
}

/* After a stream synchronisation: every recorded pair into the totals. */
static void prof_flush(wan_vae_gpu *g) {
  for (int i = 0; g->prof && i < g->nev; i += 2) {
    float ms = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, g->ev[i], g->ev[i + 1]));
    g->ms[g->ev_op[i / 2]] += ms;
  }
  g->nev = 0;
}

void wan_vae_gpu_profile(wan_vae_gpu *g, int on) {
  if (on && !g->prof)
    for (int i = 0; i < PROF_EVENTS; i++) CUDA_CHECK(cudaEventCreate(&g->ev[i]));
  if (!on && g->prof) {
    CUDA_CHECK(cudaStreamSynchronize(g->stream));
    for (int i = 0; i < PROF_EVENTS; i++) CUDA_CHECK(cudaEventDestroy(g->ev[i]));
  }
  g->prof = on;
  g->nev = 0;
  memset(g->ms, 0, sizeof g->ms);
}

void wan_vae_gpu_profile_ms(const wan_vae_gpu *g, double ms[WAN_VAE_GPU_OPS]) {
  for (int i = 0; i < WAN_VAE_GPU_OPS; i++) ms[i] = g->prof ? g->ms[i] : 0.0;
}

/* ---------------------------------------------------------------- create */

/* The device form of tensor e (wan_vae_gpu_layout.h) into dst:
 * convolution weights (co, ci, kt, kh, kw) -> (co', kt, kh, kw, ci) in the
 * precision's type, the rest fp32; rows past co are zero. */
static void convert_tensor(const wan_vae_tensor *e, const float *src, wan_vae_gpu_precision p,
                           char *dst) {
  const int64_t co = e->shape[0], rows = wan_vae_gpu_rows(e), per_row = e->numel / co;
  if (!wan_vae_gpu_is_conv(e)) {
    memset(dst, 0, (size_t)(rows * per_row) * 4);
    memcpy(dst, src, (size_t)e->numel * 4);
    return;
  }
  const int64_t ci = e->shape[1];
  const int64_t kt = e->ndim == 5 ? e->shape[2] : 1;
  const int64_t kh = e->ndim == 5 ? e->shape[3] : e->shape[2];
  const int64_t kw = e->ndim == 5 ? e->shape[4] : e->shape[3];
  const int64_t taps = kt * kh * kw;
  memset(dst, 0, (size_t)(rows * per_row) * (size_t)wan_vae_gpu_elem_bytes(p));
  for (int64_t o = 0; o < co; o++)
    for (int64_t i = 0; i < ci; i++)
      for (int64_t a = 0; a < taps; a++) {
        const float v = src[(o * ci + i) * taps + a];
        const int64_t d = (o * taps + a) * ci + i;
        if (p != WAN_VAE_GPU_BF16)
          ((float *)dst)[d] = v;
        else
          ((uint16_t *)dst)[d] = kern_f32_to_bf16(v);
      }
}

static void *buf(wan_vae_gpu *g, plan_vae_buf kind, int index) {
  const plan_vae_buffer *b = plan_vae_layout_find(g->lay, kind, index);
  if (!b) sp_fatal("vae gpu: the layout has no %s %d", plan_vae_buf_name(kind), index);
  return g->dev + b->offset;
}

int wan_vae_gpu_create(const wan_vae_config *c, const float *packed, int64_t h, int64_t w,
                       wan_vae_gpu_precision p, wan_vae_gpu **out) {
  *out = NULL;
  wan_vae_gpu *g = calloc(1, sizeof *g);
  wan_vae_table *t = malloc(sizeof *t);
  uint64_t *off = malloc(WAN_VAE_MAX_TENSORS * sizeof *off);
  char *host = NULL;
  int rc = SP_ERR_RUNTIME;
  if (!g || !t || !off || !(g->lay = malloc(sizeof *g->lay))) {
    sp_log_error("vae gpu: out of host memory");
    goto fail;
  }
  rc = wan_vae_gpu_layout(c, h, w, p, g->lay);
  if (rc != SP_OK) goto fail;
  rc = SP_ERR_RUNTIME;
  g->cfg = *c;
  g->h = h;
  g->w = w;
  g->p = p;
  g->dt = p == WAN_VAE_GPU_BF16 ? KERN_DTYPE_BF16 : KERN_DTYPE_F32;
  g->E = wan_vae_gpu_elem_bytes(p);
  cudaError_t e = cudaMalloc((void **)&g->dev, g->lay->total);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    g->dev = NULL;
    sp_log_error("vae gpu: cannot allocate %.2f GiB of device memory for latents %lldx%lld in "
                 "%s: %s",
                 (double)g->lay->total / (1 << 30), (long long)h, (long long)w,
                 kern_dtype_name(g->dt), cudaGetErrorString(e));
    goto fail;
  }

  /* Weights: converted on the host into one staging buffer, one copy up. */
  wan_vae_table_make(c, &g->wt, t);
  const uint64_t wbytes = wan_vae_gpu_weight_offsets(t, p, off);
  const plan_vae_buffer *wb = plan_vae_layout_find(g->lay, PLAN_VAE_WEIGHTS, 0);
  if (!wb || wb->bytes != wbytes) sp_fatal("vae gpu: weights %llu bytes, layout %llu",
                                           (unsigned long long)wbytes,
                                           (unsigned long long)(wb ? wb->bytes : 0));
  host = calloc(1, wbytes ? wbytes : 1);
  if (!host) {
    sp_log_error("vae gpu: out of host memory staging %.1f MiB of weights",
                 (double)wbytes / (1 << 20));
    goto fail;
  }
  for (int i = 0; i < t->count; i++) {
    convert_tensor(&t->t[i], packed + t->t[i].offset, p, host + off[i]);
    *t->t[i].slot = (const float *)(g->dev + wb->offset + off[i]);
  }
  CUDA_CHECK(cudaMemcpy(g->dev + wb->offset, host, wbytes, cudaMemcpyHostToDevice));
  free(host);
  host = NULL;

  g->x = buf(g, PLAN_VAE_X, 0);
  g->y = buf(g, PLAN_VAE_Y, 0);
  g->s = buf(g, PLAN_VAE_S, 0);
  g->r = buf(g, PLAN_VAE_R, 0);
  g->scores = buf(g, PLAN_VAE_SCORES, 0);
  g->scores_bytes = plan_vae_layout_find(g->lay, PLAN_VAE_SCORES, 0)->bytes;
  g->latent = buf(g, PLAN_VAE_LATENT, 0);
  g->frames = buf(g, PLAN_VAE_FRAMES, 0);
  for (int i = 0; i < g->lay->n_cache; i++) g->cache[i] = buf(g, PLAN_VAE_CACHE, i);
  const plan_vae_buffer *fb = plan_vae_layout_find(g->lay, PLAN_VAE_FRAMES, 0);
  e = cudaMallocHost((void **)&g->host_frames, fb->bytes);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    g->host_frames = NULL;
    sp_log_error("vae gpu: cannot allocate %.1f MiB of pinned host memory for the frames: %s",
                 (double)fb->bytes / (1 << 20), cudaGetErrorString(e));
    goto fail;
  }
  CUDA_CHECK(cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking));
  if ((rc = kern_cuda_vae_create(g->dt, p == WAN_VAE_GPU_TF32, g->stream,
                                 buf(g, PLAN_VAE_CONV_WS, 0), g->lay->conv_ws_bytes,
                                 buf(g, PLAN_VAE_GEMM_WS, 0), PLAN_VAE_GEMM_WS_BYTES, &g->k)) !=
      SP_OK)
    goto fail;
  free(t);
  free(off);
  sp_log_info("vae gpu: %s decoder for latents %lldx%lld: %.2f GiB of device memory "
              "(weights %.1f MiB)",
              wan_vae_gpu_precision_name(p), (long long)h, (long long)w,
              (double)g->lay->total / (1 << 30), (double)wbytes / (1 << 20));
  *out = g;
  return SP_OK;

fail:
  free(host);
  free(t);
  free(off);
  wan_vae_gpu_free(g);
  return rc;
}

void wan_vae_gpu_free(wan_vae_gpu *g) {
  if (!g) return;
  if (g->prof) wan_vae_gpu_profile(g, 0);
  kern_cuda_vae_destroy(g->k);
  if (g->stream) CUDA_CHECK(cudaStreamDestroy(g->stream));
  if (g->host_frames) CUDA_CHECK(cudaFreeHost(g->host_frames));
  if (g->dev) CUDA_CHECK(cudaFree(g->dev));
  free(g->lay);
  free(g);
}

int64_t wan_vae_gpu_peak_bytes(const wan_vae_gpu *g) { return (int64_t)g->lay->total; }

/* ---------------------------------------------------------------- decode */

/* One chunk's running state: the cache cursor (the published feat_idx),
 * the frame count and spatial size of the current level. */
typedef struct vae_run {
  wan_vae_gpu *g;
  int idx;
  int64_t t, h, w;
} vae_run;

static void *at(const vae_run *r, void *p, int64_t elems) {
  return (char *)p + elems * r->g->E;
}

/* The next cache, checked against the layout's plan of it. */
static int next_cache(vae_run *r, int64_t c) {
  const plan_vae_layout *l = r->g->lay;
  if (r->idx >= l->n_cache) sp_fatal("vae gpu: more cached convs than the layout has");
  const int k = r->idx++;
  if (l->cache_c[k] != c || l->cache_hw[k] != r->h * r->w)
    sp_fatal("vae gpu: cache %d laid out for %lld x %lld, used for %lld x %lld", k,
             (long long)l->cache_c[k], (long long)l->cache_hw[k], (long long)c,
             (long long)(r->h * r->w));
  return k;
}

/* s's first 2 frames from cache k (c channels). */
static void cache_in(vae_run *r, int k, int64_t c) {
  wan_vae_gpu *g = r->g;
  const int i = prof_begin(g);
  CUDA_CHECK(cudaMemcpyAsync(g->s, g->cache[k], (size_t)(PLAN_VAE_CACHE_T * r->h * r->w * c * g->E),
                             cudaMemcpyDeviceToDevice, g->stream));
  prof_end(g, i, WAN_VAE_GPU_OP_COPY);
}

/* Cache k from the last 2 of s's 2 + t frames. */
static void cache_out(vae_run *r, int k, int64_t c) {
  wan_vae_gpu *g = r->g;
  const int64_t hw = r->h * r->w;
  const int i = prof_begin(g);
  CUDA_CHECK(cudaMemcpyAsync(g->cache[k], at(r, g->s, r->t * hw * c),
                             (size_t)(PLAN_VAE_CACHE_T * hw * c * g->E), cudaMemcpyDeviceToDevice,
                             g->stream));
  prof_end(g, i, WAN_VAE_GPU_OP_COPY);
}

/* s behind its 2 cached frames: where a cached conv's producer writes. */
static void *s_frames(const vae_run *r, int64_t c) {
  return at(r, r->g->s, PLAN_VAE_CACHE_T * r->h * r->w * c);
}

static void conv(vae_run *r, const void *x, int64_t T, int64_t ci, const float *w, int64_t co,
                 int kt, int kh, int kw, void *y, wan_vae_gpu_op op) {
  const int i = prof_begin(r->g);
  kern_cuda_vae_conv(r->g->k, x, T, r->h, r->w, ci, w, co, kt, kh, kw, y);
  prof_end(r->g, i, op);
}

/* RMS norm (+ SiLU) of the residual stream x (fp32) into y. */
static void norm_x(vae_run *r, const float *gamma, void *y, int64_t c, int silu) {
  const int i = prof_begin(r->g);
  kern_cuda_vae_norm(r->g->k, r->g->x, 1, NULL, gamma, y, r->t * r->h * r->w, c, silu);
  prof_end(r->g, i, WAN_VAE_GPU_OP_NORM);
}

/* RMS norm (+ SiLU) of a conv's raw output x (dt) plus its bias. */
static void norm(vae_run *r, const void *x, const float *bias, const float *gamma, void *y,
                 int64_t c, int silu) {
  const int i = prof_begin(r->g);
  kern_cuda_vae_norm(r->g->k, x, 0, bias, gamma, y, r->t * r->h * r->w, c, silu);
  prof_end(r->g, i, WAN_VAE_GPU_OP_NORM);
}

/* out = y + by (+ res + br); res_f32 and out_f32 when they are the
 * residual stream x. */
static void add(vae_run *r, const void *y, const float *by, const void *res, int res_f32,
                const float *br, void *out, int out_f32, int64_t c) {
  const int i = prof_begin(r->g);
  kern_cuda_vae_add(r->g->k, y, by, res, res_f32, br, out, out_f32, r->t * r->h * r->w, c);
  prof_end(r->g, i, WAN_VAE_GPU_OP_ELEM);
}

/* Causal 3x3x3 conv of s (2 cached + t frames, ci channels) into y. */
static void cached_conv3(vae_run *r, int k, const float *w, int64_t ci, int64_t co) {
  conv(r, r->g->s, PLAN_VAE_CACHE_T + r->t, ci, w, co, 3, 3, 3, r->g->y,
       WAN_VAE_GPU_OP_CONV3D);
  cache_out(r, k, ci);
}

static void resblock(vae_run *r, const wan_vae_resblock *rb) {
  wan_vae_gpu *g = r->g;
  const int64_t in = rb->in_dim, out = rb->out_dim;
  if (rb->shortcut_w) {
    /* the conv takes dt: x through s, which the cached convs refill next */
    const int i = prof_begin(g);
    kern_cuda_vae_from_f32(g->k, g->x, g->s, r->t * r->h * r->w * in);
    prof_end(g, i, WAN_VAE_GPU_OP_ELEM);
    conv(r, g->s, r->t, in, rb->shortcut_w, out, 1, 1, 1, g->r, WAN_VAE_GPU_OP_CONV1);
  }
  int k = next_cache(r, in);
  cache_in(r, k, in);
  norm_x(r, rb->norm1_gamma, s_frames(r, in), in, 1);
  cached_conv3(r, k, rb->conv1_w, in, out);
  k = next_cache(r, out);
  cache_in(r, k, out);
  norm(r, g->y, rb->conv1_b, rb->norm2_gamma, s_frames(r, out), out, 1);
  /* Dropout(0) is the identity. */
  cached_conv3(r, k, rb->conv2_w, out, out);
  if (rb->shortcut_w)
    add(r, g->y, rb->conv2_b, g->r, 0, rb->shortcut_b, g->x, 1, out);
  else
    add(r, g->y, rb->conv2_b, g->x, 1, NULL, g->x, 1, out);
}

static void attnblock(vae_run *r, const wan_vae_attn *at_) {
  wan_vae_gpu *g = r->g;
  const int64_t c = at_->dim;
  norm_x(r, at_->norm_gamma, g->s, c, 0);
  conv(r, g->s, r->t, c, at_->qkv_w, 3 * c, 1, 1, 1, g->y, WAN_VAE_GPU_OP_CONV1);
  add(r, g->y, at_->qkv_b, NULL, 0, NULL, g->y, 0, 3 * c);
  const int i = prof_begin(g);
  kern_cuda_vae_attention(g->k, g->y, g->r, r->t, r->h * r->w, c, g->scores, g->scores_bytes);
  prof_end(g, i, WAN_VAE_GPU_OP_ATTN);
  conv(r, g->r, r->t, c, at_->proj_w, c, 1, 1, 1, g->s, WAN_VAE_GPU_OP_CONV1);
  add(r, g->s, at_->proj_b, g->x, 1, NULL, g->x, 1, c);
}

/* Resample: upsample3d's time conv (skipped in the first chunk, the
 * published "Rep"), 2x nearest into s, 3x3 conv to c / 2 into x. */
static void resample(vae_run *r, const wan_vae_resample *u) {
  wan_vae_gpu *g = r->g;
  const int64_t c = u->dim, hw = r->h * r->w;
  int doubled = 0;
  if (u->temporal) {
    const int k = next_cache(r, c);
    if (g->started[k]) {
      cache_in(r, k, c);
      int i = prof_begin(g);
      kern_cuda_vae_from_f32(g->k, g->x, s_frames(r, c), r->t * hw * c);
      prof_end(g, i, WAN_VAE_GPU_OP_ELEM);
      conv(r, g->s, PLAN_VAE_CACHE_T + r->t, c, u->time_w, 2 * c, 3, 1, 1, g->y,
           WAN_VAE_GPU_OP_CONV_TIME);
      cache_out(r, k, c);
      i = prof_begin(g);
      kern_cuda_vae_unfold_upsample(g->k, g->y, u->time_b, g->s, r->t, r->h, r->w, c);
      prof_end(g, i, WAN_VAE_GPU_OP_ELEM);
      r->t *= 2;
      doubled = 1;
    }
    g->started[k] = 1;
  }
  if (!doubled) {
    const int i = prof_begin(g);
    kern_cuda_vae_upsample2x(g->k, g->x, 1, g->s, r->t, r->h, r->w, c);
    prof_end(g, i, WAN_VAE_GPU_OP_ELEM);
  }
  r->h *= 2;
  r->w *= 2;
  conv(r, g->s, r->t, c, u->conv_w, c / 2, 1, 3, 3, g->y, WAN_VAE_GPU_OP_CONV2D);
  add(r, g->y, u->conv_b, NULL, 0, NULL, g->x, 1, c / 2);
}

/* Decoder3d on latent frame f: conv2's output behind conv1's cache, the
 * middle, the levels, the head; the chunk's clamped frames (3, t, H, W)
 * end in g->frames. */
static void decoder_chunk(vae_run *r, const float *latents, int64_t F, int64_t f) {
  wan_vae_gpu *g = r->g;
  const wan_vae_weights *wt = &g->wt;
  const int64_t z = wt->z_dim, hw = r->h * r->w;
  int i = prof_begin(g);
  CUDA_CHECK(cudaMemcpy2DAsync(g->latent, (size_t)hw * sizeof(float), latents + f * hw,
                               (size_t)(F * hw) * sizeof(float), (size_t)hw * sizeof(float),
                               (size_t)z, cudaMemcpyHostToDevice, g->stream));
  prof_end(g, i, WAN_VAE_GPU_OP_COPY);
  int k = next_cache(r, z);
  cache_in(r, k, z);
  float mean[WAN_VAE_Z_DIM], inv_std[WAN_VAE_Z_DIM];
  for (int ch = 0; ch < WAN_VAE_Z_DIM; ch++) {
    mean[ch] = wan_vae_latent_mean[ch];
    inv_std[ch] = 1.0f / wan_vae_latent_std[ch]; /* as published: 1 / std stored, divided by */
  }
  i = prof_begin(g);
  kern_cuda_vae_latent_in(g->k, g->latent, wt->conv2_w, wt->conv2_b, mean, inv_std,
                          s_frames(r, z), z, hw);
  prof_end(g, i, WAN_VAE_GPU_OP_ELEM);
  cached_conv3(r, k, wt->conv1_w, z, wt->mid_dim);
  add(r, g->y, wt->conv1_b, NULL, 0, NULL, g->x, 1, wt->mid_dim);
  resblock(r, &wt->mid0);
  attnblock(r, &wt->mid_attn);
  resblock(r, &wt->mid2);
  for (int l = 0; l < wt->n_levels; l++) {
    const wan_vae_level *lv = &wt->level[l];
    for (int b = 0; b < lv->n_res; b++) resblock(r, &lv->res[b]);
    if (lv->has_up) resample(r, &lv->up);
  }
  k = next_cache(r, wt->head_dim);
  cache_in(r, k, wt->head_dim);
  norm_x(r, wt->head_gamma, s_frames(r, wt->head_dim), wt->head_dim, 1);
  conv(r, g->s, PLAN_VAE_CACHE_T + r->t, wt->head_dim, wt->head_w, PLAN_VAE_HEAD_CO, 3, 3, 3,
       g->y, WAN_VAE_GPU_OP_CONV3D);
  cache_out(r, k, wt->head_dim);
  i = prof_begin(g);
  kern_cuda_vae_frames_out(g->k, g->y, wt->head_b, g->frames, r->t, r->h * r->w,
                           PLAN_VAE_HEAD_CO);
  prof_end(g, i, WAN_VAE_GPU_OP_ELEM);
}

int wan_vae_gpu_decode(wan_vae_gpu *g, const float *latents, int64_t F, wan_vae_frames_fn fn,
                       void *user) {
  const int64_t T_out = wan_vae_out_frames(&g->cfg, F);
  const int64_t ohw = g->lay->out_h * g->lay->out_w;
  if (F < 1) sp_fatal("vae gpu: decode of %lld latent frames", (long long)F);
  /* WanVAE_.clear_cache: every decode starts with empty caches (zeros, the
   * causal padding). */
  for (int i = 0; i < g->lay->n_cache; i++) {
    const plan_vae_buffer *b = plan_vae_layout_find(g->lay, PLAN_VAE_CACHE, i);
    CUDA_CHECK(cudaMemsetAsync(g->cache[i], 0, b->bytes, g->stream));
    g->started[i] = 0;
  }
  int64_t frame0 = 0;
  for (int64_t f = 0; f < F; f++) {
    vae_run r = {.g = g, .idx = 0, .t = 1, .h = g->h, .w = g->w};
    decoder_chunk(&r, latents, F, f);
    if (r.h * r.w != ohw || r.idx != g->lay->n_cache || frame0 + r.t > T_out ||
        r.t > g->lay->frames_per_chunk)
      sp_fatal("vae gpu: chunk %lld gave %lld frames of %lldx%lld after %d of %d caches",
               (long long)f, (long long)r.t, (long long)r.h, (long long)r.w, r.idx,
               g->lay->n_cache);
    const int i = prof_begin(g);
    CUDA_CHECK(cudaMemcpyAsync(g->host_frames, g->frames, (size_t)(3 * r.t * ohw) * sizeof(float),
                               cudaMemcpyDeviceToHost, g->stream));
    prof_end(g, i, WAN_VAE_GPU_OP_COPY);
    CUDA_CHECK(cudaStreamSynchronize(g->stream));
    prof_flush(g);
    const int rc = fn(user, g->host_frames, frame0, r.t);
    if (rc != 0) return rc;
    frame0 += r.t;
  }
  if (frame0 != T_out)
    sp_fatal("vae gpu: decoded %lld frames, expected %lld", (long long)frame0, (long long)T_out);
  return 0;
}

/* ---------------------------------------------------------------- backend */

static int gpu_create(const wan_vae_make *a, void **out) {
  wan_vae_gpu *g = NULL;
  const int rc = wan_vae_gpu_create(a->config, a->packed, a->h, a->w, a->precision, &g);
  *out = g;
  return rc;
}

static void gpu_destroy(void *d) { wan_vae_gpu_free(d); }

static int gpu_decode(void *d, const float *latents, int64_t F, wan_vae_frames_fn fn,
                      void *user) {
  return wan_vae_gpu_decode(d, latents, F, fn, user);
}

static int64_t gpu_host_bytes(const void *d) { return 0; }

static int64_t gpu_device_bytes(const void *d) { return wan_vae_gpu_peak_bytes(d); }

static const wan_vae_backend cuda_ops = {.create = gpu_create,
                                         .destroy = gpu_destroy,
                                         .decode = gpu_decode,
                                         .host_bytes = gpu_host_bytes,
                                         .device_bytes = gpu_device_bytes};

const net_backend wan_vae_cuda = {wan_vae_net, RANK_DEVICE_CUDA, &cuda_ops};
