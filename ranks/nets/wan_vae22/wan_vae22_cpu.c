/* The Wan 2.2 VAE on the CPU, fp32 (wan_vae22.h, VAE22.md): the state of
 * either part (its caches and activation buffers, sized by a plan walk of
 * the part's own chunk code), the causal cache rule, the residual and
 * attention blocks both parts share, and the CPU backend
 * (wan_vae22_backend.h). The chunk loops are wan_vae22_cpu_dec.c and
 * wan_vae22_cpu_enc.c. */
#include <stdlib.h>
#include <string.h>

#include "kern_cpu.h"
#include "kern_cpu_vae.h"
#include "log.h"
#include "wan_vae22.h"
#include "wan_vae22_backend.h"
#include "wan_vae22_cpu_impl.h"

/* ---------------------------------------------------------------- state */

void v22_swap(float **p, float **q) {
  float *t = *p;
  *p = *q;
  *q = t;
}

void v22_need(v22_run *r, int64_t floats) {
  if (r->plan && floats > r->s->act) r->s->act = floats;
}

v22_cache *v22_next_cache(v22_run *r, int64_t c, int keep) {
  wan_vae22_state *s = r->s;
  const int64_t hw = r->h * r->w;
  if (r->plan) {
    if (s->n_cache >= WAN_VAE22_MAX_CACHES) sp_fatal("vae: more than %d caches",
                                                     WAN_VAE22_MAX_CACHES);
    s->cache[s->n_cache++] = (v22_cache){NULL, c, hw, keep, 0, 0};
    r->idx++;
    return NULL;
  }
  if (r->idx >= s->n_cache) sp_fatal("vae: more cached ops than planned");
  v22_cache *k = &s->cache[r->idx++];
  if (k->c != c || k->hw != hw || k->keep != keep)
    sp_fatal("vae: cache %d planned for %lld x %lld (%d frames), used for %lld x %lld (%d)",
             r->idx - 1, (long long)k->c, (long long)k->hw, k->keep, (long long)c,
             (long long)hw, keep);
  return k;
}

void v22_cache_push(v22_cache *k, const float *x, int64_t T) {
  const int64_t hw = k->hw, K = k->keep;
  for (int64_t ch = 0; ch < k->c; ch++) {
    float *f = k->frames + ch * K * hw; /* (K, hw) */
    const float *xc = x + ch * T * hw;  /* (T, hw) */
    if (T >= K) {
      memcpy(f, xc + (T - K) * hw, (size_t)(K * hw) * sizeof *f);
    } else { /* T = 1 < K = 2: the older frame moves up, the new one behind it */
      memmove(f, f + hw, (size_t)((K - 1) * hw) * sizeof *f);
      memcpy(f + (K - 1) * hw, xc, (size_t)hw * sizeof *f);
    }
  }
  k->n = k->n + T < K ? k->n + (int)T : (int)K;
}

void v22_cached_conv(v22_run *r, const float *x, const float *w, const float *b, float *y,
                     int64_t ci, int64_t co) {
  v22_cache *k = v22_next_cache(r, ci, WAN_VAE22_CACHE_T);
  v22_need(r, co * r->t * r->h * r->w);
  if (r->plan) return;
  kern_cpu_causal_conv3d(x, k->frames, k->n, w, b, y, ci, co, r->t, r->h, r->w, 3, 3, 3);
  v22_cache_push(k, x, r->t);
}

void v22_norm_silu(v22_run *r, const float *x, const float *gamma, float *y, int64_t c) {
  const int64_t n = r->t * r->h * r->w;
  v22_need(r, c * n);
  if (r->plan) return;
  kern_cpu_channel_rmsnorm(x, gamma, y, c, n);
  kern_cpu_silu(y, c * n);
}

void v22_resblock(v22_run *r, const wan_vae_resblock *rb, v22_bufs *B) {
  const int64_t n = r->t * r->h * r->w;
  const float *h = B->x; /* the shortcut */
  if (rb->shortcut_w) {
    v22_need(r, rb->out_dim * n);
    if (!r->plan)
      kern_cpu_causal_conv3d(B->x, NULL, 0, rb->shortcut_w, rb->shortcut_b, B->c, rb->in_dim,
                             rb->out_dim, r->t, r->h, r->w, 1, 1, 1);
    h = B->c;
  }
  v22_norm_silu(r, B->x, rb->norm1_gamma, B->a, rb->in_dim);
  v22_cached_conv(r, B->a, rb->conv1_w, rb->conv1_b, B->b, rb->in_dim, rb->out_dim);
  v22_norm_silu(r, B->b, rb->norm2_gamma, B->b, rb->out_dim);
  /* Dropout(0) is the identity. */
  v22_cached_conv(r, B->b, rb->conv2_w, rb->conv2_b, B->a, rb->out_dim, rb->out_dim);
  if (!r->plan) kern_cpu_gated_add(B->a, h, NULL, rb->out_dim, n);
  v22_swap(&B->x, &B->a);
}

void v22_attnblock(v22_run *r, const wan_vae_attn *at, v22_bufs *B) {
  const int64_t hw = r->h * r->w, c = at->dim;
  v22_need(r, 3 * c * r->t * hw);
  if (r->plan) {
    const int64_t a = kern_cpu_frame_attention_scratch(c, r->t, hw);
    if (a > r->s->attn) r->s->attn = a;
    v22_swap(&B->x, &B->a);
    return;
  }
  kern_cpu_channel_rmsnorm(B->x, at->norm_gamma, B->a, c, r->t * hw);
  kern_cpu_conv2d_frames(B->a, at->qkv_w, at->qkv_b, B->b, c, 3 * c, r->t, r->h, r->w, 1, 1);
  kern_cpu_frame_attention(B->b, r->s->attn_scratch, B->c, c, r->t, hw);
  kern_cpu_conv2d_frames(B->c, at->proj_w, at->proj_b, B->a, c, c, r->t, r->h, r->w, 1, 1);
  kern_cpu_gated_add(B->a, B->x, NULL, c, r->t * hw);
  v22_swap(&B->x, &B->a);
}

void wan_vae22_state_free(wan_vae22_state *s) {
  if (!s) return;
  for (int i = 0; i < V22_BUFS; i++) free(s->buf[i]);
  free(s->attn_scratch);
  free(s->cache_mem);
  free(s);
}

static int64_t cache_floats(const wan_vae22_state *s) {
  int64_t n = 0;
  for (int i = 0; i < s->n_cache; i++) n += s->cache[i].c * s->cache[i].keep * s->cache[i].hw;
  return n;
}

int64_t wan_vae22_state_floats(const wan_vae22_state *s) {
  return V22_BUFS * s->act + s->attn + cache_floats(s);
}

int v22_state_create(const wan_vae22_config *c, int encoder, int64_t h, int64_t w,
                     v22_plan_fn plan_fn, wan_vae22_state **out) {
  wan_vae22_state *s = calloc(1, sizeof *s);
  wan_vae22_weights *wt = malloc(sizeof *wt);
  wan_vae_table *tab = malloc(sizeof *tab);
  if (!s || !wt || !tab) {
    free(s), free(wt), free(tab);
    sp_log_error("vae: out of host memory for the %s's state", encoder ? "encoder" : "decoder");
    return SP_ERR_RUNTIME;
  }
  s->cfg = *c;
  s->encoder = encoder;
  s->h = h;
  s->w = w;
  wan_vae22_table_make(c, encoder ? WAN_VAE22_ENCODER : WAN_VAE22_DECODER, wt, tab);
  v22_run r = {.s = s, .plan = 1, .first = 0, .idx = 0, .t = 1, .h = h, .w = w};
  plan_fn(&r, wt);
  free(wt);
  free(tab);
  s->cache_mem = malloc((size_t)cache_floats(s) * sizeof(float));
  s->attn_scratch = malloc((size_t)(s->attn > 0 ? s->attn : 1) * sizeof(float));
  int ok = s->cache_mem && s->attn_scratch;
  for (int i = 0; ok && i < V22_BUFS; i++) ok = (s->buf[i] = malloc((size_t)s->act * 4)) != NULL;
  if (!ok) {
    sp_log_error("vae: out of host memory for the %s at %lldx%lld (%.1f GiB)",
                 encoder ? "encoder" : "decoder", (long long)h, (long long)w,
                 (double)wan_vae22_state_floats(s) * 4.0 / (1 << 30));
    wan_vae22_state_free(s);
    return SP_ERR_RUNTIME;
  }
  float *m = s->cache_mem;
  for (int i = 0; i < s->n_cache; i++) {
    s->cache[i].frames = m;
    m += s->cache[i].c * s->cache[i].keep * s->cache[i].hw;
  }
  *out = s;
  return SP_OK;
}

void v22_state_reset(wan_vae22_state *s) {
  for (int i = 0; i < s->n_cache; i++) s->cache[i].n = s->cache[i].started = 0;
}

v22_bufs v22_state_bufs(const wan_vae22_state *s) {
  return (v22_bufs){s->buf[0], s->buf[1], s->buf[2], s->buf[3], s->buf[4]};
}

/* ---------------------------------------------------------------- backend */

/* The CPU backend (wan_vae22_backend.h): the fp32 coder and its weights. */
typedef struct cpu_coder {
  wan_vae22_state *s;
  const wan_vae22_weights *wt;
} cpu_coder;

static int cpu_create(const wan_vae22_make *a, void **out) {
  cpu_coder *c = calloc(1, sizeof *c);
  if (!c) {
    sp_log_error("vae: out of host memory");
    return SP_ERR_RUNTIME;
  }
  const int rc = a->part == WAN_VAE22_ENCODER
                     ? wan_vae22_encoder_create(a->config, a->h, a->w, &c->s)
                     : wan_vae22_decoder_create(a->config, a->h, a->w, &c->s);
  if (rc != SP_OK) {
    free(c);
    return rc;
  }
  c->wt = a->weights;
  *out = c;
  return SP_OK;
}

static void cpu_destroy(void *p) {
  cpu_coder *c = p;
  if (!c) return;
  wan_vae22_state_free(c->s);
  free(c);
}

static int cpu_decode(void *p, const float *latents, int64_t F, wan_vae_frames_fn fn,
                      void *user) {
  cpu_coder *c = p;
  return wan_vae22_decode_stream(c->s, &c->wt->dec, latents, F, fn, user);
}

static int cpu_encode(void *p, const float *video, int64_t T, float *latents) {
  cpu_coder *c = p;
  return wan_vae22_encode(c->s, &c->wt->enc, video, T, latents);
}

static int64_t cpu_host_bytes(const void *p) {
  return wan_vae22_state_floats(((const cpu_coder *)p)->s) * (int64_t)sizeof(float);
}

static int64_t cpu_device_bytes(const void *p) {
  (void)p;
  return 0;
}

static const wan_vae22_backend cpu_ops = {.create = cpu_create,
                                          .destroy = cpu_destroy,
                                          .decode = cpu_decode,
                                          .encode = cpu_encode,
                                          .host_bytes = cpu_host_bytes,
                                          .device_bytes = cpu_device_bytes};

const net_backend wan_vae22_cpu = {wan_vae22_net, RANK_DEVICE_CPU, &cpu_ops};
