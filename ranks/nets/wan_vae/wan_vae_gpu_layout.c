/* The CUDA VAE decoder's config checks, weight forms and device layout
 * (wan_vae_gpu_layout.h), in both builds. */
#include <stdlib.h>
#include <string.h>

#include "layout.h"
#include "log.h"
#include "wan_vae_enc.h"
#include "wan_vae_gpu_layout.h"

const char *wan_vae_gpu_op_name(wan_vae_gpu_op op) {
  static const char *const n[WAN_VAE_GPU_OPS] = {"conv3d", "conv_time", "conv2d", "conv1x1",
                                                 "norm",   "attn",      "elementwise", "copy"};
  return (int)op >= 0 && op < WAN_VAE_GPU_OPS ? n[op] : "?";
}

static const char *const precision_names[] = {"bf16", "fp32", "tf32"};
enum { N_PRECISIONS = (int)(sizeof precision_names / sizeof *precision_names) };

const char *wan_vae_gpu_precision_name(wan_vae_gpu_precision p) {
  return (int)p >= 0 && (int)p < N_PRECISIONS ? precision_names[p] : "?";
}

int wan_vae_gpu_precision_parse(const char *s, wan_vae_gpu_precision *out) {
  for (int i = 0; i < N_PRECISIONS; i++)
    if (s && strcmp(s, precision_names[i]) == 0) {
      *out = (wan_vae_gpu_precision)i;
      return SP_OK;
    }
  sp_log_error("--vae-precision: '%s' is not bf16, fp32 or tf32", s ? s : "(null)");
  return SP_ERR_INPUT;
}

/* tf32 stores fp32: only the arithmetic of its convolutions differs. */
int wan_vae_gpu_elem_bytes(wan_vae_gpu_precision p) { return p == WAN_VAE_GPU_BF16 ? 2 : 4; }

int wan_vae_gpu_is_conv(const wan_vae_tensor *e) {
  const char *tail = strrchr(e->name, '.');
  return tail && strcmp(tail, ".weight") == 0 && strcmp(e->name, "conv2.weight") != 0 &&
         strcmp(e->name, "conv1.weight") != 0;
}

int64_t wan_vae_gpu_cols(const wan_vae_tensor *e) {
  return strcmp(e->name, "encoder.conv1.weight") == 0 ? PLAN_VAE_ENC_IN_CH : e->shape[1];
}

static int is_head(const wan_vae_tensor *e) {
  return strncmp(e->name, "decoder.head.2.", 15) == 0;
}

int64_t wan_vae_gpu_rows(const wan_vae_tensor *e) {
  return is_head(e) ? PLAN_VAE_HEAD_CO : e->shape[0];
}

uint64_t wan_vae_gpu_tensor_bytes(const wan_vae_tensor *e, wan_vae_gpu_precision p) {
  const uint64_t per_row = (uint64_t)(e->numel / e->shape[0]);
  const uint64_t rows = (uint64_t)wan_vae_gpu_rows(e);
  if (!wan_vae_gpu_is_conv(e)) return rows * per_row * 4;
  /* taps x input channels as stored */
  const uint64_t row = per_row / (uint64_t)e->shape[1] * (uint64_t)wan_vae_gpu_cols(e);
  return rows * row * (uint64_t)wan_vae_gpu_elem_bytes(p);
}

uint64_t wan_vae_gpu_weight_offsets(const wan_vae_table *t, wan_vae_gpu_precision p,
                                    uint64_t *off) {
  uint64_t n = 0;
  for (int i = 0; i < t->count; i++) {
    off[i] = n;
    n = plan_layout_align(n + wan_vae_gpu_tensor_bytes(&t->t[i], p));
  }
  return n;
}

/* Every width a device convolution takes or gives, as Decoder3d builds
 * them: z_dim, dims[0], each level's width and its half after a resample. */
static int check_widths(const wan_vae_config *c) {
  int64_t w[2 + 2 * WAN_VAE_MAX_LEVELS];
  int n = 0;
  w[n++] = c->z_dim;
  w[n++] = wan_vae_level_dim(c, -1);
  for (int i = 0; i < c->n_mult; i++) {
    w[n++] = wan_vae_level_dim(c, i);
    if (i + 1 < c->n_mult) w[n++] = wan_vae_level_dim(c, i) / 2;
  }
  for (int i = 0; i < n; i++) {
    if (w[i] % WAN_VAE_GPU_CH_ALIGN != 0) {
      sp_log_error("vae gpu: a width of %lld channels (dim %lld): the CUDA decoder needs every "
                   "width, and its half after a resample, to be a multiple of %d",
                   (long long)w[i], (long long)c->dim, WAN_VAE_GPU_CH_ALIGN);
      return -1;
    }
  }
  return 0;
}

/* Every width the encoder's device convolutions take or give: dims[0],
 * each level's, 2 z_dim (the head), z_dim (the latents). */
static int check_enc_widths(const wan_vae_config *c) {
  int64_t w[3 + WAN_VAE_MAX_LEVELS];
  int n = 0;
  w[n++] = c->z_dim;
  w[n++] = 2 * c->z_dim;
  w[n++] = wan_vae_enc_level_dim(c, -1);
  for (int i = 0; i < c->n_mult; i++) w[n++] = wan_vae_enc_level_dim(c, i);
  for (int i = 0; i < n; i++) {
    if (w[i] % WAN_VAE_GPU_CH_ALIGN != 0) {
      sp_log_error("vae gpu: an encoder width of %lld channels (dim %lld): the CUDA encoder "
                   "needs every width to be a multiple of %d",
                   (long long)w[i], (long long)c->dim, WAN_VAE_GPU_CH_ALIGN);
      return -1;
    }
  }
  return 0;
}

/* The precision and the config (wan_vae_config_check), logged. */
static int check_config(const wan_vae_config *c, wan_vae_gpu_precision p) {
  char err[200];
  if (wan_vae_config_check(c, err, sizeof err) != 0) {
    sp_log_error("vae gpu: %s", err);
    return SP_ERR_INPUT;
  }
  if (p != WAN_VAE_GPU_BF16 && p != WAN_VAE_GPU_FP32 && p != WAN_VAE_GPU_TF32) {
    sp_log_error("vae gpu: precision %d is not bf16 (%d), fp32 (%d) or tf32 (%d)", (int)p,
                 WAN_VAE_GPU_BF16, WAN_VAE_GPU_FP32, WAN_VAE_GPU_TF32);
    return SP_ERR_INPUT;
  }
  return SP_OK;
}

/* The device bytes of the weights of table t (the decoder's or the
 * encoder's, made by make), SP_ERR_RUNTIME when the host has no memory. */
static int table_bytes(const wan_vae_config *c, wan_vae_gpu_precision p, int encoder,
                       uint64_t *bytes) {
  /* The table is large (256 entries): on the heap, not the stack. */
  wan_vae_weights *wt = malloc(sizeof *wt);
  wan_vae_enc_weights *ewt = malloc(sizeof *ewt);
  wan_vae_table *t = malloc(sizeof *t);
  uint64_t *off = malloc(WAN_VAE_MAX_TENSORS * sizeof *off);
  const int ok = wt && ewt && t && off;
  if (ok && encoder) wan_vae_enc_table_make(c, ewt, t);
  if (ok && !encoder) wan_vae_table_make(c, wt, t);
  if (ok) *bytes = wan_vae_gpu_weight_offsets(t, p, off);
  free(wt), free(ewt), free(t), free(off);
  if (!ok) sp_log_error("vae gpu: out of host memory for the tensor table");
  return ok ? SP_OK : SP_ERR_RUNTIME;
}

/* The checks of wan_vae_gpu_layout and the planner's shape of c at h x w. */
static int gpu_shape(const wan_vae_config *c, int64_t h, int64_t w, wan_vae_gpu_precision p,
                     plan_vae_shape *s) {
  int rc = check_config(c, p);
  if (rc != SP_OK) return rc;
  if (h < 1 || w < 1 || h > WAN_VAE_MAX_SIDE || w > WAN_VAE_MAX_SIDE) {
    sp_log_error("vae gpu: latent size %lldx%lld is outside 1..%d per side", (long long)h,
                 (long long)w, WAN_VAE_MAX_SIDE);
    return SP_ERR_INPUT;
  }
  if (check_widths(c) != 0) return SP_ERR_INPUT;
  memset(s, 0, sizeof *s);
  if ((rc = table_bytes(c, p, 0, &s->weight_bytes)) != SP_OK) return rc;
  s->z_dim = c->z_dim;
  s->mid_dim = wan_vae_level_dim(c, -1);
  s->n_levels = c->n_mult;
  for (int i = 0; i < c->n_mult; i++) s->level_dim[i] = wan_vae_level_dim(c, i);
  for (int i = 0; i + 1 < c->n_mult; i++) s->temporal_up[i] = c->temporal_up[i];
  s->res_per_level = c->num_res_blocks + 1;
  s->h = h;
  s->w = w;
  s->elem_bytes = wan_vae_gpu_elem_bytes(p);
  return SP_OK;
}

int wan_vae_gpu_layout(const wan_vae_config *c, int64_t h, int64_t w, wan_vae_gpu_precision p,
                       plan_vae_layout *out) {
  char err[200];
  plan_vae_shape s;
  int rc = gpu_shape(c, h, w, p, &s);
  if (rc != SP_OK) return rc;
  if (plan_vae_layout_make(&s, out, err, sizeof err) != 0) {
    sp_log_error("vae gpu: %s", err);
    return SP_ERR_INPUT;
  }
  return SP_OK;
}

int wan_vae_gpu_tiles(const wan_vae_config *c, int64_t h, int64_t w, wan_vae_gpu_precision p,
                      uint64_t budget, plan_vae_tiles *out) {
  char err[200];
  plan_vae_shape s;
  int rc = gpu_shape(c, h, w, p, &s);
  if (rc != SP_OK) return rc;
  if (plan_vae_tiles_pick(&s, PLAN_VAE_TILE_OVERLAP, budget, out, err, sizeof err) != 0) {
    sp_log_error("vae gpu: %s", err);
    return SP_ERR_INPUT;
  }
  return SP_OK;
}

int64_t wan_vae_gpu_bytes(const wan_vae_config *c, int64_t h, int64_t w,
                          wan_vae_gpu_precision p) {
  plan_vae_layout *l = malloc(sizeof *l);
  if (!l) return -1;
  const int64_t n = wan_vae_gpu_layout(c, h, w, p, l) == SP_OK ? (int64_t)l->total : -1;
  free(l);
  return n;
}

/* ---------------------------------------------------------------- the encoder */

/* The checks of wan_vae_gpu_enc_layout and the planner's shape of c's
 * encoder for videos of T frames of H x W. */
static int enc_shape(const wan_vae_config *c, int64_t T, int64_t H, int64_t W,
                     wan_vae_gpu_precision p, plan_vae_enc_shape *s) {
  char err[200];
  int rc = check_config(c, p);
  if (rc != SP_OK) return rc;
  if (!c->encoder) {
    sp_log_error("vae gpu: the config has no encoder");
    return SP_ERR_INPUT;
  }
  if (wan_vae_enc_size_check(c, T, H, W, err, sizeof err) != 0) {
    sp_log_error("vae gpu: %s", err);
    return SP_ERR_INPUT;
  }
  if (check_enc_widths(c) != 0) return SP_ERR_INPUT;
  memset(s, 0, sizeof *s);
  if ((rc = table_bytes(c, p, 1, &s->weight_bytes)) != SP_OK) return rc;
  s->z_dim = c->z_dim;
  s->in_dim = wan_vae_enc_level_dim(c, -1);
  s->n_levels = c->n_mult;
  for (int i = 0; i < c->n_mult; i++) s->level_dim[i] = wan_vae_enc_level_dim(c, i);
  for (int i = 0; i + 1 < c->n_mult; i++) s->temporal_down[i] = wan_vae_enc_temporal(c, i);
  s->res_per_level = c->num_res_blocks;
  s->chunk_t = T == 1 ? 1 : WAN_VAE_ENC_CHUNK;
  s->h = H;
  s->w = W;
  s->elem_bytes = wan_vae_gpu_elem_bytes(p);
  return SP_OK;
}

int wan_vae_gpu_enc_layout(const wan_vae_config *c, int64_t T, int64_t H, int64_t W,
                           wan_vae_gpu_precision p, plan_vae_layout *out) {
  char err[300];
  plan_vae_enc_shape s;
  int rc = enc_shape(c, T, H, W, p, &s);
  if (rc != SP_OK) return rc;
  if (plan_vae_enc_layout_make(&s, out, err, sizeof err) != 0) {
    sp_log_error("vae gpu: %s", err);
    return SP_ERR_INPUT;
  }
  return SP_OK;
}

int64_t wan_vae_gpu_enc_bytes(const wan_vae_config *c, int64_t T, int64_t H, int64_t W,
                              wan_vae_gpu_precision p) {
  plan_vae_layout *l = malloc(sizeof *l);
  if (!l) return -1;
  const int64_t n = wan_vae_gpu_enc_layout(c, T, H, W, p, l) == SP_OK ? (int64_t)l->total : -1;
  free(l);
  return n;
}
