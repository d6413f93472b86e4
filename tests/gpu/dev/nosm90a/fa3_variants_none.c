/* fa3_variants.h in a build without sm_90a code: no variants (the kernel
 * itself is not in the build either, kernels/cuda/nosm90a/). */
#include "fa3_variants.h"

#include "log.h"

int dev_fa3_variant_count(void) { return 0; }

int dev_fa3_variant_get(int i, dev_fa3_variant *out) {
  (void)i, (void)out;
  return SP_ERR_INPUT;
}

void dev_fa3_run(int i, kern_attn_params p, cudaStream_t stream) {
  (void)p, (void)stream;
  sp_fatal("attention (fa3 variants): variant %d: this build has no sm_90a code", i);
}
