/* The flash kernel's benchmark variants (flash_variants.h): instances of
 * the production template (kernels/cuda/flash_attn_kernel.cuh) with other
 * tile shapes and softmax options. Timings on the H200 are in
 * launch/bench/RESULTS.md ("Attention", the --variants table). */
#include "flash_variants.h"

#include "cuda_check.h"
#include "flash_attn_kernel.cuh"

typedef void (*dev_flash_launch_fn)(const kern_attn_params *p, cudaStream_t stream);

typedef struct dev_flash_row {
  dev_flash_variant info;
  dev_flash_launch_fn launch; /* NULL: the production kernel, kern_attn_flash */
} dev_flash_row;

#define DEV_FLASH(name, warps, bc, sub, lazy) \
  { {name, 32 * (warps), bc, sub, lazy}, fa_launch<warps, bc, sub, lazy> }

/* Registers per thread and spills from ptxas -v (sm_90, CUDA 13.0) in the
 * comments; CTAs per SM by registers and shared memory. "bc64" is the loop
 * of the kernel before the variants (which used 255 registers with a
 * 48-byte spill) plus P packed early. */
static const dev_flash_row dev_flash_rows[] = {
    {{"bc64-lazy", 128, 64, 64, 1}, NULL},             /* production: 254, no spill; 2 CTAs/SM */
    DEV_FLASH("bc64", 4, 64, 64, 0),                   /* 255, 60 B spill; 2 */
    DEV_FLASH("bc32", 4, 32, 32, 0),                   /* 233, no spill; 2 */
    DEV_FLASH("bc32-lazy", 4, 32, 32, 1),              /* 230, no spill; 2 */
    DEV_FLASH("bc64s32-lazy", 4, 64, 32, 1),           /* 239, no spill; 2 */
    DEV_FLASH("br256-bc64-lazy", 8, 64, 64, 1),        /* 254, no spill; 1 (8 warps) */
    DEV_FLASH("br256-bc64s32-lazy", 8, 64, 32, 1),     /* 239, no spill; 1 (8 warps) */
    DEV_FLASH("br64-bc32-lazy", 2, 32, 32, 1),         /* 230, no spill; 4 (2 warps) */
};
#define DEV_FLASH_COUNT ((int)(sizeof dev_flash_rows / sizeof dev_flash_rows[0]))

extern "C" int dev_flash_variant_count(void) { return DEV_FLASH_COUNT; }

extern "C" int dev_flash_variant_get(int i, dev_flash_variant *out) {
  if (i < 0 || i >= DEV_FLASH_COUNT) return SP_ERR_INPUT;
  *out = dev_flash_rows[i].info;
  return SP_OK;
}

extern "C" void dev_flash_run(int i, kern_attn_params p, cudaStream_t stream) {
  if (i < 0 || i >= DEV_FLASH_COUNT)
    sp_fatal("attention (flash variants): variant %d is not in 0..%d", i, DEV_FLASH_COUNT - 1);
  if (!dev_flash_rows[i].launch) {
    kern_attn_flash(p, stream);
    return;
  }
  char why[160];
  if (!kern_attn_flash_supported(&p, why, sizeof why))
    sp_fatal("attention (flash %s): %s", dev_flash_rows[i].info.name, why);
  dev_flash_rows[i].launch(&p, stream);
}
