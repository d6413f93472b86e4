/* The CUDA Wan 2.2 VAE's device layout (wan_vae22_gpu.h), in both builds:
 * the planner's layout (planner/vae22_layout.h) of a part, whose total is
 * the device bytes a coder takes and whose offsets the CUDA coder carves.
 * Its weights' device form is every Wan VAE's (wan_vae_gpu.h) with
 * WAN_VAE22_GPU_FORM's pads. */
#include <stdlib.h>
#include <string.h>

#include "layout.h"
#include "log.h"
#include "wan_vae22_gpu.h"

const char *wan_vae22_gpu_op_name(wan_vae22_gpu_op op) {
  static const char *const n[WAN_VAE22_GPU_OPS] = {
      "conv3d", "conv_time", "conv2d", "conv1x1", "norm", "attn", "shortcut", "elementwise",
      "copy"};
  return (int)op >= 0 && op < WAN_VAE22_GPU_OPS ? n[op] : "?";
}

/* Every width a device op takes or gives: the part's widths, z_dim and
 * 2 z_dim. */
static int check_widths(const wan_vae22_config *c) {
  for (int i = 0; i <= c->n_mult; i++) {
    const int64_t w[2] = {wan_vae22_enc_dim(c, i), wan_vae22_dec_dim(c, i)};
    for (int k = 0; k < 2; k++)
      if (w[k] % WAN_VAE22_GPU_CH_ALIGN != 0) {
        sp_log_error("vae gpu: %s width %d is %lld channels: the CUDA coders need every width "
                     "to be a multiple of %d", k ? "decoder" : "encoder", i, (long long)w[k],
                     WAN_VAE22_GPU_CH_ALIGN);
        return -1;
      }
  }
  return 0;
}

/* The size checks of a part: the decoder's latent, the encoder's video. */
static int check_size(const wan_vae22_config *c, wan_vae22_part part, int64_t h, int64_t w) {
  const int64_t f = part == WAN_VAE22_ENCODER ? wan_vae22_space_factor(c) : 1;
  if (h < f || w < f || h % f || w % f || h / f > WAN_VAE22_MAX_SIDE ||
      w / f > WAN_VAE22_MAX_SIDE) {
    if (part == WAN_VAE22_ENCODER)
      sp_log_error("vae gpu: video size %lldx%lld: height and width must be multiples of %lld, "
                   "at most %lld", (long long)h, (long long)w, (long long)f,
                   (long long)(f * WAN_VAE22_MAX_SIDE));
    else
      sp_log_error("vae gpu: latent size %lldx%lld is outside 1..%d per side", (long long)h,
                   (long long)w, WAN_VAE22_MAX_SIDE);
    return -1;
  }
  return 0;
}

/* The checks of wan_vae22_gpu_layout and the planner's shape of the part. */
static int gpu_shape(const wan_vae22_config *c, wan_vae22_part part, int64_t h, int64_t w,
                     wan_vae_gpu_precision p, plan_vae22_shape *s) {
  char err[200];
  if (wan_vae22_config_check(c, err, sizeof err) != 0) {
    sp_log_error("vae gpu: %s", err);
    return SP_ERR_INPUT;
  }
  if (p != WAN_VAE_GPU_BF16 && p != WAN_VAE_GPU_FP32) {
    sp_log_error("--vae-precision %s: the Wan 2.2 VAE runs in bf16 or fp32 (tf32 is the Wan 2.1 "
                 "VAE's)", wan_vae_gpu_precision_name(p));
    return SP_ERR_INPUT;
  }
  if (check_size(c, part, h, w) != 0 || check_widths(c) != 0) return SP_ERR_INPUT;
  wan_vae22_weights *wt = malloc(sizeof *wt);
  wan_vae_table *t = malloc(sizeof *t);
  uint64_t *off = malloc(WAN_VAE_MAX_TENSORS * sizeof *off);
  if (!wt || !t || !off) {
    free(wt), free(t), free(off);
    sp_log_error("vae gpu: out of host memory for the tensor table");
    return SP_ERR_RUNTIME;
  }
  const int enc = part == WAN_VAE22_ENCODER;
  wan_vae22_table_make(c, part, wt, t);
  memset(s, 0, sizeof *s);
  s->encoder = enc;
  s->z_dim = c->z_dim;
  s->n_levels = c->n_mult;
  for (int i = 0; i <= c->n_mult; i++)
    s->dim[i] = enc ? wan_vae22_enc_dim(c, i) : wan_vae22_dec_dim(c, i);
  for (int i = 0; i + 1 < c->n_mult; i++)
    s->temporal[i] = enc ? c->temporal_down[i] : wan_vae22_dec_temporal(c, i);
  s->res_per_level = c->num_res_blocks + (enc ? 0 : 1);
  s->h = enc ? h / WAN_VAE22_PATCH : h;
  s->w = enc ? w / WAN_VAE22_PATCH : w;
  s->elem_bytes = wan_vae_gpu_elem_bytes(p);
  s->weight_bytes = wan_vae_gpu_form_offsets(t, p, WAN_VAE22_GPU_FORM, off);
  free(wt), free(t), free(off);
  return SP_OK;
}

int wan_vae22_gpu_layout(const wan_vae22_config *c, wan_vae22_part part, int64_t h, int64_t w,
                         wan_vae_gpu_precision p, plan_vae22_layout *out) {
  char err[240];
  plan_vae22_shape s;
  const int rc = gpu_shape(c, part, h, w, p, &s);
  if (rc != SP_OK) return rc;
  if (plan_vae22_layout_make(&s, out, err, sizeof err) != 0) {
    sp_log_error("vae gpu: %s", err);
    return SP_ERR_INPUT;
  }
  return SP_OK;
}

int64_t wan_vae22_gpu_bytes(const wan_vae22_config *c, wan_vae22_part part, int64_t h,
                            int64_t w, wan_vae_gpu_precision p) {
  plan_vae22_layout *l = malloc(sizeof *l);
  if (!l) return -1;
  const int64_t n = wan_vae22_gpu_layout(c, part, h, w, p, l) == SP_OK ? (int64_t)l->total : -1;
  free(l);
  return n;
}
