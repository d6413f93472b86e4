/* The CUDA VAE decoder's device layout (vae_layout.h): the decoder walked
 * once, as ranks/nets/cuda/wan_vae_gpu.c runs it, taking the largest size of
 * each buffer role and one cache per cached convolution; then a bump
 * allocation, every buffer at the next multiple of PLAN_LAYOUT_ALIGN.
 * Notation: t frames of the current level in a later chunk, hw positions
 * per frame, E bytes per element. */
#include <stdlib.h>
#include <string.h>

#include "layout.h"
#include "plan.h"
#include "plan_strbuf.h"
#include "vae_layout.h"

static const char *const names[PLAN_VAE_KINDS] = {
    [PLAN_VAE_WEIGHTS] = "weights",
    [PLAN_VAE_LATENT] = "latent frame",
    [PLAN_VAE_X] = "activation",
    [PLAN_VAE_Y] = "conv output",
    [PLAN_VAE_S] = "conv input with cached frames / upsampled",
    [PLAN_VAE_R] = "shortcut / attention output",
    [PLAN_VAE_SCORES] = "attention scores",
    [PLAN_VAE_FRAMES] = "output frames",
    [PLAN_VAE_CONV_WS] = "cudnn workspace",
    [PLAN_VAE_GEMM_WS] = "cublaslt workspace",
    [PLAN_VAE_CACHE] = "conv cache",
};

const char *plan_vae_buf_name(plan_vae_buf k) {
  return (int)k >= 0 && k < PLAN_VAE_KINDS ? names[k] : "?";
}

int64_t plan_vae_scores_ld(int64_t hw) { return (hw + 7) / 8 * 8; }

uint64_t plan_vae_scores_p_offset(int64_t rows, int64_t hw) {
  if (rows < 1 || hw < 1) return 0;
  return plan_layout_align((uint64_t)rows * (uint64_t)plan_vae_scores_ld(hw) * 4);
}

uint64_t plan_vae_scores_bytes(int64_t rows, int64_t hw, int elem_bytes) {
  if (rows < 1 || hw < 1 || elem_bytes < 1) return 0;
  const uint64_t n = (uint64_t)rows * (uint64_t)plan_vae_scores_ld(hw);
  return plan_vae_scores_p_offset(rows, hw) + plan_layout_align(n * (uint64_t)elem_bytes);
}

/* The walk's state: role maxima in elements, the caches, overflow. */
typedef struct walker {
  plan_vae_layout *l;
  int over;
  int64_t t, hw;
} walker;

static uint64_t mul3(walker *k, uint64_t a, uint64_t b, uint64_t c) {
  if (a && b > UINT64_MAX / a) {
    k->over = 1;
    return 0;
  }
  const uint64_t ab = a * b;
  if (ab && c > UINT64_MAX / ab) {
    k->over = 1;
    return 0;
  }
  return ab * c;
}

static void need(walker *k, plan_vae_buf role, uint64_t elems) {
  if (elems > k->l->elems[role]) k->l->elems[role] = elems;
}

/* A cached conv over c input channels at the current level: its cache and
 * its input (2 cached frames + t) in s. */
static void cached(walker *k, int64_t c) {
  plan_vae_layout *l = k->l;
  if (l->n_cache >= PLAN_VAE_MAX_CACHES) {
    k->over = 1;
    return;
  }
  l->cache_c[l->n_cache] = c;
  l->cache_hw[l->n_cache] = k->hw;
  l->cache_t[l->n_cache] = PLAN_VAE_CACHE_T;
  l->n_cache++;
  need(k, PLAN_VAE_S, mul3(k, (uint64_t)(PLAN_VAE_CACHE_T + k->t), (uint64_t)k->hw, (uint64_t)c));
}

/* Residual block in -> out: shortcut into r, two cached convs into y, the
 * result in place in x. */
static void resblock(walker *k, int64_t in, int64_t out) {
  const uint64_t n = (uint64_t)k->t * (uint64_t)k->hw;
  if (in != out) need(k, PLAN_VAE_R, mul3(k, n, (uint64_t)out, 1));
  cached(k, in);
  cached(k, out);
  need(k, PLAN_VAE_Y, mul3(k, n, (uint64_t)out, 1));
  need(k, PLAN_VAE_X, mul3(k, n, (uint64_t)(in > out ? in : out), 1));
}

/* Attention block of c channels: normed input and projection in s, qkv in
 * y, attention output in r, scores for chunks of query rows. */
static void attn(walker *k, int64_t c, int e) {
  const uint64_t n = (uint64_t)k->t * (uint64_t)k->hw;
  need(k, PLAN_VAE_S, mul3(k, n, (uint64_t)c, 1));
  need(k, PLAN_VAE_Y, mul3(k, n, 3, (uint64_t)c));
  need(k, PLAN_VAE_R, mul3(k, n, (uint64_t)c, 1));
  /* as many rows as the cap holds (the alignment makes the exact count
   * a little below cap / bytes per row), at least one, at most hw */
  const uint64_t per_row = (uint64_t)plan_vae_scores_ld(k->hw) * (uint64_t)(4 + e);
  int64_t rows = (int64_t)(PLAN_VAE_SCORES_CAP / per_row);
  if (rows > k->hw) rows = k->hw;
  while (rows > 1 && plan_vae_scores_bytes(rows, k->hw, e) > PLAN_VAE_SCORES_CAP) rows--;
  k->l->score_rows = rows < 1 ? 1 : rows;
}

static void take(walker *k, plan_vae_buf kind, int index, uint64_t bytes) {
  plan_vae_layout *l = k->l;
  uint64_t off = plan_layout_align(l->total);
  if (off < l->total || bytes > UINT64_MAX - off ||
      l->count >= (int)(sizeof l->b / sizeof l->b[0])) {
    k->over = 1;
    return;
  }
  l->b[l->count++] = (plan_vae_buffer){.kind = kind, .index = index, .offset = off, .bytes = bytes};
  l->total = off + bytes;
}

/* Every buffer of a walked layout, in one order for the decoder and the
 * encoder: the weights, the latent (frame in or latents out), the roles,
 * the attention scores of attn_hw keys, the frames (out or in), the
 * workspaces, the caches. */
static void place(walker *k, uint64_t weight_bytes, uint64_t latent_bytes, uint64_t frame_bytes,
                  int e, int64_t attn_hw) {
  plan_vae_layout *out = k->l;
  const uint64_t E = (uint64_t)e;
  take(k, PLAN_VAE_WEIGHTS, 0, weight_bytes);
  take(k, PLAN_VAE_LATENT, 0, latent_bytes);
  /* the residual stream in fp32 in both precisions (VAE.md "Where bf16's
   * error comes from") */
  take(k, PLAN_VAE_X, 0, mul3(k, out->elems[PLAN_VAE_X], 4, 1));
  take(k, PLAN_VAE_Y, 0, mul3(k, out->elems[PLAN_VAE_Y], E, 1));
  take(k, PLAN_VAE_S, 0, mul3(k, out->elems[PLAN_VAE_S], E, 1));
  take(k, PLAN_VAE_R, 0, mul3(k, out->elems[PLAN_VAE_R], E, 1));
  take(k, PLAN_VAE_SCORES, 0, plan_vae_scores_bytes(out->score_rows, attn_hw, e));
  take(k, PLAN_VAE_FRAMES, 0, frame_bytes);
  const uint64_t xb = mul3(k, out->elems[PLAN_VAE_X], E, 1);
  const uint64_t sb = mul3(k, out->elems[PLAN_VAE_S], E, 1);
  const uint64_t ws = e == 4 ? 2 * (sb > xb ? sb : xb) : xb + xb / 8;
  out->conv_ws_bytes = ws > PLAN_VAE_CONV_WS_MIN ? ws : PLAN_VAE_CONV_WS_MIN;
  take(k, PLAN_VAE_CONV_WS, 0, out->conv_ws_bytes);
  take(k, PLAN_VAE_GEMM_WS, 0, PLAN_VAE_GEMM_WS_BYTES);
  for (int i = 0; i < out->n_cache; i++)
    take(k, PLAN_VAE_CACHE, i,
         mul3(k, (uint64_t)out->cache_t[i] * (uint64_t)out->cache_hw[i],
              (uint64_t)out->cache_c[i], E));
}

int plan_vae_layout_make(const plan_vae_shape *s, plan_vae_layout *out, char *err,
                         size_t errlen) {
  if (s->z_dim < 1 || s->mid_dim < 1 || s->h < 1 || s->w < 1 || s->res_per_level < 1 ||
      s->n_levels < 1 || s->n_levels > PLAN_VAE_MAX_LEVELS ||
      (s->elem_bytes != 2 && s->elem_bytes != 4))
    return plan_fail(err, errlen,
                     "vae layout: z_dim %lld, mid_dim %lld, latent %lldx%lld, %lld blocks per "
                     "level, %d levels (1..%d), %d-byte elements (2 or 4)",
                     (long long)s->z_dim, (long long)s->mid_dim, (long long)s->h,
                     (long long)s->w, (long long)s->res_per_level, s->n_levels,
                     PLAN_VAE_MAX_LEVELS, s->elem_bytes);
  for (int i = 0; i < s->n_levels; i++)
    if (s->level_dim[i] < 1 || (i + 1 < s->n_levels && s->level_dim[i] < 2))
      return plan_fail(err, errlen, "vae layout: level %d has width %lld", i,
                       (long long)s->level_dim[i]);
  memset(out, 0, sizeof *out);
  walker k = {out, 0, 1, s->h * s->w};
  const int e = s->elem_bytes;

  /* Latent frame in, conv2 into conv1's input, conv1, the middle. */
  cached(&k, s->z_dim);
  need(&k, PLAN_VAE_Y, mul3(&k, (uint64_t)k.hw, (uint64_t)s->mid_dim, 1));
  need(&k, PLAN_VAE_X, mul3(&k, (uint64_t)k.hw, (uint64_t)s->mid_dim, 1));
  resblock(&k, s->mid_dim, s->mid_dim);
  attn(&k, s->mid_dim, e);
  resblock(&k, s->mid_dim, s->mid_dim);
  for (int i = 0; i < s->n_levels; i++) {
    int64_t in = i == 0 ? s->mid_dim : s->level_dim[i - 1] / 2;
    const int64_t c = s->level_dim[i];
    for (int64_t r = 0; r < s->res_per_level; r++) {
      resblock(&k, in, c);
      in = c;
    }
    if (i + 1 == s->n_levels) break;
    if (s->temporal_up[i]) {
      /* time conv: x copied behind the cache into s, 2c channels into y */
      cached(&k, c);
      need(&k, PLAN_VAE_Y, mul3(&k, (uint64_t)k.t * (uint64_t)k.hw, 2, (uint64_t)c));
      k.t *= 2;
    }
    k.hw *= 4;
    /* upsampled into s, the 2-D conv's output into y, plus its bias into x */
    need(&k, PLAN_VAE_S, mul3(&k, (uint64_t)k.t * (uint64_t)k.hw, (uint64_t)c, 1));
    need(&k, PLAN_VAE_X, mul3(&k, (uint64_t)k.t * (uint64_t)k.hw, (uint64_t)(c / 2), 1));
    need(&k, PLAN_VAE_Y, mul3(&k, (uint64_t)k.t * (uint64_t)k.hw, (uint64_t)(c / 2), 1));
  }
  /* head: norm + SiLU into s behind the cache, conv to PLAN_VAE_HEAD_CO
   * channels into y, clamped fp32 frames */
  cached(&k, s->level_dim[s->n_levels - 1]);
  need(&k, PLAN_VAE_Y, mul3(&k, (uint64_t)k.t * (uint64_t)k.hw, PLAN_VAE_HEAD_CO, 1));
  const int64_t scale = (int64_t)1 << (s->n_levels - 1);
  out->frames_per_chunk = k.t;
  out->out_h = s->h * scale;
  out->out_w = s->w * scale;

  const uint64_t frames = mul3(&k, 3 * (uint64_t)k.t, (uint64_t)k.hw, 4);
  place(&k, s->weight_bytes, mul3(&k, (uint64_t)s->z_dim, (uint64_t)(s->h * s->w), 4), frames,
        e, s->h * s->w);
  if (k.over)
    return plan_fail(err, errlen,
                     "vae layout: latent %lldx%lld overflows the layout (sizes or %d caches)",
                     (long long)s->h, (long long)s->w, PLAN_VAE_MAX_CACHES);
  return PLAN_OK;
}

/* ---------------------------------------------------------------- the encoder */

/* downsample3d's cache: the last frame of its spatial output (c channels
 * at the current size). */
static void cached1(walker *k, int64_t c) {
  plan_vae_layout *l = k->l;
  if (l->n_cache >= PLAN_VAE_MAX_CACHES) {
    k->over = 1;
    return;
  }
  l->cache_c[l->n_cache] = c;
  l->cache_hw[l->n_cache] = k->hw;
  l->cache_t[l->n_cache] = 1;
  l->n_cache++;
}

/* Resample downsample2d / 3d of c channels at h x w: the padded input in
 * s, the stride-2 conv into y, the bias added into x; downsample3d's time
 * conv reads its cached frame and the spatial output (with bias) from s
 * and writes t / 2 frames into y. */
static void enc_down(walker *k, int64_t *h, int64_t *w, int64_t c, int temporal) {
  const uint64_t t = (uint64_t)k->t;
  need(k, PLAN_VAE_S, mul3(k, t * (uint64_t)(*h + 1), (uint64_t)(*w + 1), (uint64_t)c));
  *h /= 2;
  *w /= 2;
  k->hw = *h * *w;
  need(k, PLAN_VAE_Y, mul3(k, t, (uint64_t)k->hw, (uint64_t)c));
  need(k, PLAN_VAE_X, mul3(k, t, (uint64_t)k->hw, (uint64_t)c));
  if (!temporal) return;
  cached1(k, c);
  need(k, PLAN_VAE_S, mul3(k, 1 + t, (uint64_t)k->hw, (uint64_t)c));
  if (k->t > 1) k->t /= 2;
}

/* The checks of plan_vae_enc_layout_make. */
static int enc_shape_bad(const plan_vae_enc_shape *s, char *err, size_t errlen) {
  const int64_t least = (int64_t)1 << (s->n_levels > 0 ? s->n_levels - 1 : 0);
  int down = 0;
  for (int i = 0; i + 1 < s->n_levels && i + 1 < PLAN_VAE_MAX_LEVELS; i++)
    down += s->temporal_down[i] != 0;
  if (s->z_dim < 1 || s->in_dim < 1 || s->res_per_level < 1 || s->n_levels < 1 ||
      s->n_levels > PLAN_VAE_MAX_LEVELS || s->h < least || s->w < least ||
      (s->chunk_t != 1 && s->chunk_t != PLAN_VAE_ENC_CHUNK) || down > 2 ||
      (s->elem_bytes != 2 && s->elem_bytes != 4))
    return plan_fail(err, errlen,
                     "vae encoder layout: z_dim %lld, in_dim %lld, video %lldx%lld (at least "
                     "%lld), chunks of %lld frames (1 or %d), %lld blocks per level (>= 1), %d "
                     "levels (1..%d), %d temporal downsamples (<= 2), %d-byte elements (2 or 4)",
                     (long long)s->z_dim, (long long)s->in_dim, (long long)s->h,
                     (long long)s->w, (long long)least, (long long)s->chunk_t,
                     PLAN_VAE_ENC_CHUNK, (long long)s->res_per_level, s->n_levels,
                     PLAN_VAE_MAX_LEVELS, down, s->elem_bytes);
  for (int i = 0; i < s->n_levels; i++)
    if (s->level_dim[i] < 1)
      return plan_fail(err, errlen, "vae encoder layout: level %d has width %lld", i,
                       (long long)s->level_dim[i]);
  return PLAN_OK;
}

int plan_vae_enc_layout_make(const plan_vae_enc_shape *s, plan_vae_layout *out, char *err,
                             size_t errlen) {
  if (enc_shape_bad(s, err, errlen) != PLAN_OK) return PLAN_EINVAL;
  memset(out, 0, sizeof *out);
  walker k = {out, 0, s->chunk_t, s->h * s->w};
  const int e = s->elem_bytes;
  const uint64_t frames = mul3(&k, 3 * (uint64_t)s->chunk_t, (uint64_t)(s->h * s->w), 4);
  int64_t h = s->h, w = s->w, in = s->in_dim;
  /* conv1 over the padded RGB frames behind its cache, into x */
  cached(&k, PLAN_VAE_ENC_IN_CH);
  need(&k, PLAN_VAE_Y, mul3(&k, (uint64_t)k.t * (uint64_t)k.hw, (uint64_t)in, 1));
  need(&k, PLAN_VAE_X, mul3(&k, (uint64_t)k.t * (uint64_t)k.hw, (uint64_t)in, 1));
  for (int i = 0; i < s->n_levels; i++) {
    const int64_t c = s->level_dim[i];
    for (int64_t r = 0; r < s->res_per_level; r++) {
      resblock(&k, in, c);
      in = c;
    }
    if (i + 1 < s->n_levels) enc_down(&k, &h, &w, c, s->temporal_down[i]);
  }
  resblock(&k, in, in);
  attn(&k, in, e);
  resblock(&k, in, in);
  /* head: norm + SiLU into s behind the cache, the conv to 2 z_dim into y */
  cached(&k, in);
  need(&k, PLAN_VAE_Y, mul3(&k, (uint64_t)k.t * (uint64_t)k.hw, 2 * (uint64_t)s->z_dim, 1));
  out->frames_per_chunk = k.t;
  out->out_h = h;
  out->out_w = w;
  place(&k, s->weight_bytes, mul3(&k, (uint64_t)(s->z_dim * k.t), (uint64_t)k.hw, 4), frames, e,
        k.hw);
  if (k.over)
    return plan_fail(err, errlen,
                     "vae encoder layout: video %lldx%lld overflows the layout (sizes or %d "
                     "caches)", (long long)s->h, (long long)s->w, PLAN_VAE_MAX_CACHES);
  return PLAN_OK;
}

const plan_vae_buffer *plan_vae_layout_find(const plan_vae_layout *l, plan_vae_buf kind,
                                            int index) {
  for (int i = 0; i < l->count; i++)
    if (l->b[i].kind == kind && l->b[i].index == index) return &l->b[i];
  return NULL;
}

/* ---------------------------------------------------------------- tiling */

int64_t plan_vae_tile_count(int64_t n, int64_t t, int64_t o) {
  if (n < 1 || t < 1 || o < 0) return 0;
  if (t >= n) return 1;
  if (o >= t) return 0;
  return 1 + (n - t + (t - o) - 1) / (t - o);
}

int64_t plan_vae_tile_start(int64_t n, int64_t t, int64_t count, int64_t i) {
  if (count <= 1 || t >= n) return 0;
  return i * (n - t) / (count - 1);
}

/* The least tile that covers n with k tiles overlapping by o:
 * k t - (k - 1) o >= n. */
static int64_t tile_for(int64_t n, int64_t k, int64_t o) {
  const int64_t t = (n + (k - 1) * o + k - 1) / k;
  return t < n ? t : n;
}

/* Layout bytes of s at a tile of th x tw; UINT64_MAX when refused. */
static uint64_t tile_bytes(const plan_vae_shape *s, int64_t th, int64_t tw) {
  plan_vae_shape t = *s;
  t.h = th;
  t.w = tw;
  plan_vae_layout *l = malloc(sizeof *l);
  char err[8];
  uint64_t n = UINT64_MAX;
  if (l && plan_vae_layout_make(&t, l, err, sizeof err) == PLAN_OK) n = l->total;
  free(l);
  return n;
}

int plan_vae_tiles_pick(const plan_vae_shape *s, int64_t overlap, uint64_t budget,
                        plan_vae_tiles *out, char *err, size_t errlen) {
  if (s->h < 1 || s->w < 1 || overlap < 0)
    return plan_fail(err, errlen, "vae tiles: latent %lldx%lld, overlap %lld", (long long)s->h,
                     (long long)s->w, (long long)overlap);
  plan_vae_tiles best = {0};
  /* For each count of tiles down, the fewest across that fit (bytes fall
   * as the tile shrinks, so the scan stops at the first that fits). */
  for (int64_t ky = 1; ky <= s->h; ky++) {
    if (best.ny && ky > best.ny * best.nx) break;
    const int64_t th = tile_for(s->h, ky, overlap);
    if (ky > 1 && th <= overlap) break;
    if (plan_vae_tile_count(s->h, th, overlap) < ky) continue; /* same tile as fewer rows */
    for (int64_t kx = 1; kx <= s->w; kx++) {
      if (best.ny && ky * kx > best.ny * best.nx) break;
      const int64_t tw = tile_for(s->w, kx, overlap);
      if (kx > 1 && tw <= overlap) break;
      if (plan_vae_tile_count(s->w, tw, overlap) < kx) continue;
      const uint64_t b = tile_bytes(s, th, tw);
      if (b > budget) continue;
      if (!best.ny || ky * kx < best.ny * best.nx ||
          (ky * kx == best.ny * best.nx && th * tw > best.th * best.tw))
        best = (plan_vae_tiles){th, tw, ky, kx, overlap, b};
      break;
    }
  }
  if (!best.ny)
    return plan_fail(err, errlen,
                     "vae tiles: latent %lldx%lld: no tile of more than %lld positions a side "
                     "fits %.2f GiB (the least needs %.2f GiB)",
                     (long long)s->h, (long long)s->w, (long long)overlap,
                     (double)budget / (1 << 30),
                     (double)tile_bytes(s, overlap + 1 < s->h ? overlap + 1 : s->h,
                                        overlap + 1 < s->w ? overlap + 1 : s->w) /
                         (1 << 30));
  *out = best;
  return PLAN_OK;
}
