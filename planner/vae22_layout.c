/* The CUDA Wan 2.2 VAE's device layout (vae22_layout.h): the decoder or
 * the encoder walked once, as ranks/nets/wan_vae22/cuda/ runs it, taking
 * the largest size of each buffer role and one cache per cached op; then a
 * bump allocation, every buffer at the next multiple of PLAN_LAYOUT_ALIGN.
 * Notation: t frames of the current level in a later chunk, hw positions
 * per frame, E bytes per element. */
#include <stdlib.h>
#include <string.h>

#include "layout.h"
#include "plan.h"
#include "plan_strbuf.h"
#include "vae22_layout.h"
#include "vae_layout.h"

static const char *const names[PLAN_VAE22_KINDS] = {
    [PLAN_VAE22_WEIGHTS] = "weights",
    [PLAN_VAE22_IO] = "latents",
    [PLAN_VAE22_X] = "activation",
    [PLAN_VAE22_Y] = "conv output",
    [PLAN_VAE22_S] = "conv input with cached frames / upsampled / padded",
    [PLAN_VAE22_R] = "shortcut / attention output",
    [PLAN_VAE22_K] = "level input for its shortcut",
    [PLAN_VAE22_SCORES] = "attention scores",
    [PLAN_VAE22_FRAMES] = "video frames",
    [PLAN_VAE22_CONV_WS] = "cudnn workspace",
    [PLAN_VAE22_GEMM_WS] = "cublaslt workspace",
    [PLAN_VAE22_CACHE] = "cache",
};

const char *plan_vae22_buf_name(plan_vae22_buf k) {
  return (int)k >= 0 && k < PLAN_VAE22_KINDS ? names[k] : "?";
}

/* The walk's state: role maxima in elements, the caches, overflow. */
typedef struct walker {
  plan_vae22_layout *l;
  int over;
  int64_t t, h, w;
  int64_t attn_hw; /* positions per frame of the middle attention */
} walker;

static uint64_t mul3(walker *k, uint64_t a, uint64_t b, uint64_t c) {
  return plan_vae_mul3(&k->over, a, b, c);
}

/* Elements of t frames of the current level with c channels. */
static uint64_t act(walker *k, int64_t t, int64_t c) {
  return mul3(k, (uint64_t)t, (uint64_t)(k->h * k->w), (uint64_t)c);
}

static void need(walker *k, plan_vae22_buf role, uint64_t elems) {
  if (elems > k->l->elems[role]) k->l->elems[role] = elems;
}

/* A cache of `frames` frames of c channels at the current level. */
static void cache(walker *k, int64_t c, int frames) {
  plan_vae22_layout *l = k->l;
  if (l->n_cache >= PLAN_VAE22_MAX_CACHES) {
    k->over = 1;
    return;
  }
  l->cache_c[l->n_cache] = c;
  l->cache_hw[l->n_cache] = k->h * k->w;
  l->cache_t[l->n_cache] = frames;
  l->n_cache++;
}

/* A causal conv over c input channels: its cache, its input (2 cached
 * frames + t) in s, its output of co channels in y. */
static void cached(walker *k, int64_t c, int64_t co) {
  cache(k, c, PLAN_VAE22_CACHE_T);
  need(k, PLAN_VAE22_S, act(k, PLAN_VAE22_CACHE_T + k->t, c));
  need(k, PLAN_VAE22_Y, act(k, k->t, co));
}

/* Residual block in -> out: the shortcut into r (its input through s), two
 * causal convs, the result in x. */
static void resblock(walker *k, int64_t in, int64_t out) {
  if (in != out) need(k, PLAN_VAE22_R, act(k, k->t, out));
  cached(k, in, out);
  cached(k, out, out);
  need(k, PLAN_VAE22_X, act(k, k->t, in > out ? in : out));
}

/* Attention block of c channels: normed input and projection in s, qkv in
 * y, output in r, scores for chunks of query rows (vae_layout.h's). */
static void attn(walker *k, int64_t c, int e) {
  const int64_t hw = k->h * k->w;
  k->attn_hw = hw;
  need(k, PLAN_VAE22_S, act(k, k->t, c));
  need(k, PLAN_VAE22_Y, act(k, k->t, 3 * c));
  need(k, PLAN_VAE22_R, act(k, k->t, c));
  k->l->score_rows = plan_vae_score_rows(hw, e);
}

static void middle(walker *k, int64_t c, int e) {
  resblock(k, c, c);
  attn(k, c, e);
  resblock(k, c, c);
}

/* The decoder: a latent frame into conv1 and the middle, the levels (each
 * keeps its input for DupUp3D, upsamples: time conv, 2x, 3x3 conv), the
 * head to the padded patchified channels, the clamped frames. */
static void walk_decoder(walker *k, const plan_vae22_shape *s) {
  need(k, PLAN_VAE22_IO, mul3(k, (uint64_t)s->z_dim, (uint64_t)(s->h * s->w), 1));
  cached(k, s->z_dim, s->dim[0]);
  need(k, PLAN_VAE22_X, act(k, k->t, s->dim[0]));
  middle(k, s->dim[0], s->elem_bytes);
  for (int i = 0; i < s->n_levels; i++) {
    const int up = i + 1 < s->n_levels;
    int64_t in = s->dim[i];
    const int64_t c = s->dim[i + 1];
    if (up) need(k, PLAN_VAE22_K, act(k, k->t, in));
    for (int64_t r = 0; r < s->res_per_level; r++) {
      resblock(k, in, c);
      in = c;
    }
    if (!up) break;
    if (s->temporal[i]) {
      /* x behind the cache into s, 2c channels into y */
      cached(k, c, 2 * c);
      k->t *= 2;
    }
    k->h *= 2;
    k->w *= 2;
    /* upsampled into s, the 3x3 conv into y, plus bias and DupUp3D into x */
    need(k, PLAN_VAE22_S, act(k, k->t, c));
    need(k, PLAN_VAE22_Y, act(k, k->t, c));
    need(k, PLAN_VAE22_X, act(k, k->t, c));
  }
  cached(k, s->dim[s->n_levels], PLAN_VAE22_IMG_CH);
  need(k, PLAN_VAE22_FRAMES, mul3(k, 3 * (uint64_t)k->t, (uint64_t)(4 * k->h * k->w), 1));
}

/* The encoder: a video chunk, patchified behind conv1's cache, the levels
 * (each keeps its input for AvgDown3D; downsamples: the padded stride-2
 * conv, downsample3d's time conv behind its one-frame cache), the middle,
 * the head, mu normalised into io. */
static void walk_encoder(walker *k, const plan_vae22_shape *s) {
  need(k, PLAN_VAE22_FRAMES, mul3(k, 3 * (uint64_t)k->t, (uint64_t)(4 * k->h * k->w), 1));
  cached(k, PLAN_VAE22_IMG_CH, s->dim[0]);
  need(k, PLAN_VAE22_X, act(k, k->t, s->dim[0]));
  for (int i = 0; i < s->n_levels; i++) {
    const int down = i + 1 < s->n_levels;
    int64_t in = s->dim[i];
    const int64_t c = s->dim[i + 1];
    need(k, PLAN_VAE22_K, act(k, k->t, in));
    for (int64_t r = 0; r < s->res_per_level; r++) {
      resblock(k, in, c);
      in = c;
    }
    if (!down) break;
    if (k->h % 2 || k->w % 2) {
      k->over = 1;
      return;
    }
    need(k, PLAN_VAE22_S, mul3(k, (uint64_t)k->t, (uint64_t)((k->h + 1) * (k->w + 1)),
                               (uint64_t)c));
    k->h /= 2;
    k->w /= 2;
    need(k, PLAN_VAE22_Y, act(k, k->t, c));
    if (s->temporal[i]) {
      cache(k, c, 1);
      need(k, PLAN_VAE22_S, act(k, 1 + k->t, c));
      k->t /= 2;
      need(k, PLAN_VAE22_Y, act(k, k->t, c));
    }
    need(k, PLAN_VAE22_X, act(k, k->t, c));
  }
  middle(k, s->dim[s->n_levels], s->elem_bytes);
  cached(k, s->dim[s->n_levels], 2 * s->z_dim);
  need(k, PLAN_VAE22_IO, act(k, k->t, s->z_dim));
}

static void take(walker *k, plan_vae22_buf kind, int index, uint64_t bytes) {
  plan_vae22_layout *l = k->l;
  if (l->count >= (int)(sizeof l->b / sizeof l->b[0])) {
    k->over = 1;
    return;
  }
  int over = 0;
  const uint64_t off = plan_vae_bump(&l->total, bytes, &over);
  k->over |= over;
  if (!over)
    l->b[l->count++] =
        (plan_vae22_buffer){.kind = kind, .index = index, .offset = off, .bytes = bytes};
}

static int check_shape(const plan_vae22_shape *s, char *err, size_t errlen) {
  if (s->z_dim < 1 || s->h < 1 || s->w < 1 || s->res_per_level < 1 || s->n_levels < 1 ||
      s->n_levels > PLAN_VAE22_MAX_LEVELS || (s->elem_bytes != 2 && s->elem_bytes != 4))
    return plan_fail(err, errlen,
                     "vae22 layout: z_dim %lld, size %lldx%lld, %lld blocks per level, %d "
                     "levels (1..%d), %d-byte elements (2 or 4)",
                     (long long)s->z_dim, (long long)s->h, (long long)s->w,
                     (long long)s->res_per_level, s->n_levels, PLAN_VAE22_MAX_LEVELS,
                     s->elem_bytes);
  for (int i = 0; i <= s->n_levels; i++)
    if (s->dim[i] < 1)
      return plan_fail(err, errlen, "vae22 layout: width %d is %lld", i, (long long)s->dim[i]);
  return PLAN_OK;
}

int plan_vae22_layout_make(const plan_vae22_shape *s, plan_vae22_layout *out, char *err,
                           size_t errlen) {
  if (check_shape(s, err, errlen) != PLAN_OK) return PLAN_EINVAL;
  memset(out, 0, sizeof *out);
  walker k = {out, 0, s->encoder ? PLAN_VAE22_CHUNK : 1, s->h, s->w, 0};
  if (s->encoder)
    walk_encoder(&k, s);
  else
    walk_decoder(&k, s);
  if (k.over)
    return plan_fail(err, errlen,
                     "vae22 layout: %s of size %lldx%lld: a downsample of an odd size, more "
                     "than %d caches, or sizes that overflow",
                     s->encoder ? "encoder" : "decoder", (long long)s->h, (long long)s->w,
                     PLAN_VAE22_MAX_CACHES);
  out->chunk_frames = s->encoder ? PLAN_VAE22_CHUNK : k.t;
  out->out_h = s->encoder ? k.h : k.h * 2;
  out->out_w = s->encoder ? k.w : k.w * 2;

  const uint64_t E = (uint64_t)s->elem_bytes, *n = out->elems;
  take(&k, PLAN_VAE22_WEIGHTS, 0, s->weight_bytes);
  take(&k, PLAN_VAE22_IO, 0, mul3(&k, n[PLAN_VAE22_IO], 4, 1));
  take(&k, PLAN_VAE22_X, 0, mul3(&k, n[PLAN_VAE22_X], 4, 1));
  take(&k, PLAN_VAE22_Y, 0, mul3(&k, n[PLAN_VAE22_Y], E, 1));
  take(&k, PLAN_VAE22_S, 0, mul3(&k, n[PLAN_VAE22_S], E, 1));
  take(&k, PLAN_VAE22_R, 0, mul3(&k, n[PLAN_VAE22_R], E, 1));
  take(&k, PLAN_VAE22_K, 0, mul3(&k, n[PLAN_VAE22_K], 4, 1));
  take(&k, PLAN_VAE22_SCORES, 0,
       plan_vae_scores_bytes(out->score_rows, k.attn_hw, s->elem_bytes));
  take(&k, PLAN_VAE22_FRAMES, 0, mul3(&k, n[PLAN_VAE22_FRAMES], 4, 1));
  /* cuDNN's workspace as the Wan 2.1 decoder sizes it (vae_layout.h) */
  const uint64_t xb = mul3(&k, n[PLAN_VAE22_X], E, 1), sb = mul3(&k, n[PLAN_VAE22_S], E, 1);
  out->conv_ws_bytes = plan_vae_conv_ws_bytes(xb, sb, s->elem_bytes);
  take(&k, PLAN_VAE22_CONV_WS, 0, out->conv_ws_bytes);
  take(&k, PLAN_VAE22_GEMM_WS, 0, PLAN_VAE_GEMM_WS_BYTES);
  for (int i = 0; i < out->n_cache; i++)
    take(&k, PLAN_VAE22_CACHE, i,
         mul3(&k, (uint64_t)out->cache_t[i] * (uint64_t)out->cache_hw[i],
              (uint64_t)out->cache_c[i], E));
  if (k.over)
    return plan_fail(err, errlen, "vae22 layout: size %lldx%lld overflows the layout",
                     (long long)s->h, (long long)s->w);
  return PLAN_OK;
}

const plan_vae22_buffer *plan_vae22_layout_find(const plan_vae22_layout *l, plan_vae22_buf kind,
                                                int index) {
  for (int i = 0; i < l->count; i++)
    if (l->b[i].kind == kind && l->b[i].index == index) return &l->b[i];
  return NULL;
}
