/* The fa3, fa3-int8 and fa3-fp8 backends (kern_attn.h) in a build without sm_90a code (90 is not
 * among its CUDA architectures, or STATICPIPE_SM90A is off): the kernel is
 * not in the binary, so it is never available and the attention context
 * runs what auto runs (cuda/sm90a/fa3_attn.cu is the real one). */
#include <stdio.h>

#include "kern_attn.h"
#include "log.h"

static const char FA3_NOT_BUILT[] =
    "this build has no fa3 kernel (its CUDA architectures do not include 90, so no sm_90a "
    "code was compiled)";

int kern_attn_fa3_available(char *why, size_t why_len) {
  if (why && why_len) snprintf(why, why_len, "%s", FA3_NOT_BUILT);
  return 0;
}

int kern_attn_fa3_supported(const kern_attn_params *p, char *why, size_t why_len) {
  (void)p;
  return kern_attn_fa3_available(why, why_len);
}

void kern_attn_fa3(kern_attn_params p, cudaStream_t stream) {
  (void)p, (void)stream;
  sp_fatal("attention (fa3): %s", FA3_NOT_BUILT);
}

int kern_attn_fa3_int8_create(kern_attn_fa3_int8 **out) {
  (void)out;
  sp_log_error("attention: the 8-bit attention (--attn fa3-int8, fa3-fp8) is not available: %s",
               FA3_NOT_BUILT);
  return SP_ERR_RUNTIME;
}

void kern_attn_fa3_int8_destroy(kern_attn_fa3_int8 *c) { (void)c; }

void kern_attn_fa3_int8_run(kern_attn_fa3_int8 *c, kern_attn_params p, cudaStream_t stream) {
  (void)c, (void)p, (void)stream;
  sp_fatal("attention (fa3-int8): %s", FA3_NOT_BUILT);
}

void kern_attn_fa3_fp8_run(kern_attn_fa3_int8 *c, kern_attn_params p, cudaStream_t stream) {
  (void)c, (void)p, (void)stream;
  sp_fatal("attention (fa3-fp8): %s", FA3_NOT_BUILT);
}

void kern_attn_fa3_int8_blocks(int64_t hd, int *bm, int *bn) {
  (void)hd;
  *bm = *bn = 0; /* no such configuration in this build */
}

int kern_attn_fa3_fp8_l_e4m3(int64_t hd) {
  (void)hd;
  return 0;
}
