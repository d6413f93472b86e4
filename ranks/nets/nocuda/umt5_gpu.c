/* The CUDA text encoder in a build without CUDA (umt5_gpu.h): it is not
 * available and create says so. */
#include "log.h"
#include "umt5_gpu.h"

int umt5_gpu_available(void) { return 0; }

uint64_t umt5_gpu_bytes(const umt5_config *c, int64_t max_len) {
  (void)c, (void)max_len;
  return 0;
}

int umt5_gpu_create(const umt5_config *c, int cuda_device, int64_t max_len, umt5_gpu **out) {
  (void)c, (void)cuda_device, (void)max_len;
  *out = NULL;
  sp_log_error("text encoder: this staticpipe was built without CUDA (STATICPIPE_CUDA=OFF): "
               "use --device cpu");
  return SP_ERR_INPUT;
}

void umt5_gpu_set_layer(umt5_gpu *g, int layer, const float *buf) {
  (void)g, (void)layer, (void)buf;
  sp_fatal("umt5 gpu: called in a build without CUDA");
}

void umt5_gpu_set_norm(umt5_gpu *g, const float *w) {
  (void)g, (void)w;
  sp_fatal("umt5 gpu: called in a build without CUDA");
}

void umt5_gpu_forward(umt5_gpu *g, float *x, int64_t L) {
  (void)g, (void)x, (void)L;
  sp_fatal("umt5 gpu: called in a build without CUDA");
}

void umt5_gpu_free(umt5_gpu *g) { (void)g; }
