/* The CUDA VAE decoder in a build without CUDA (wan_vae_gpu.h): it is not
 * available and create says so. wan_vae_gpu_bytes, computed from the
 * layout, is in ../wan_vae_gpu_layout.c for both builds. */
#include <string.h>

#include "log.h"
#include "wan_vae_gpu.h"

struct wan_vae_gpu {
  int unused;
};

int wan_vae_gpu_available(void) { return 0; }

int64_t wan_vae_gpu_free_bytes(void) { return 0; }

int wan_vae_gpu_create(const wan_vae_config *c, const float *packed, int64_t h, int64_t w,
                       wan_vae_gpu_precision p, wan_vae_gpu **out) {
  (void)c, (void)packed, (void)h, (void)w, (void)p;
  *out = NULL;
  sp_log_error("vae gpu: this staticpipe was built without CUDA (STATICPIPE_CUDA=OFF): use "
               "the CPU decoder");
  return SP_ERR_INPUT;
}

void wan_vae_gpu_free(wan_vae_gpu *g) { (void)g; }

int wan_vae_gpu_decode(wan_vae_gpu *g, const float *latents, int64_t F, wan_vae_frames_fn fn,
                       void *user) {
  (void)g, (void)latents, (void)F, (void)fn, (void)user;
  sp_fatal("vae gpu: decode called in a build without CUDA");
}

int64_t wan_vae_gpu_peak_bytes(const wan_vae_gpu *g) {
  (void)g;
  return 0;
}

void wan_vae_gpu_profile(wan_vae_gpu *g, int on) { (void)g, (void)on; }

void wan_vae_gpu_profile_ms(const wan_vae_gpu *g, double ms[WAN_VAE_GPU_OPS]) {
  (void)g;
  memset(ms, 0, WAN_VAE_GPU_OPS * sizeof *ms);
}
