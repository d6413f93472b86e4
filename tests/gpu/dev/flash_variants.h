/* Variants of the own flash attention kernel, for benchmarks and their
 * checks (tests/gpu/test_attention_bench --variants, tests/gpu/test_attention),
 * kept apart from the production kernels as llm.c keeps dev/cuda/: the
 * kernel that ships is one instance (kernels/cuda/cuda_flash_attn.cu); the
 * others are instances of the same template with other tile shapes and
 * softmax options (kernels/cuda/flash_attn_kernel.cuh says what each
 * parameter changes). Variant 0 is the production kernel itself, called
 * through kern_attn_flash. */
#ifndef DEV_FLASH_VARIANTS_H
#define DEV_FLASH_VARIANTS_H

#include <cuda_runtime_api.h>

#include "kern_attn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dev_flash_variant {
  const char *name; /* e.g. "bc64-lazy" */
  int br;           /* query rows per CTA */
  int bc;           /* keys per shared-memory tile */
  int sub;          /* keys per register tile (the order of the softmax updates) */
  int lazy;         /* 1: O rescaled only when a row max grew */
} dev_flash_variant;

int dev_flash_variant_count(void);
/* Variant i (0 .. count - 1) into *out: SP_OK, or SP_ERR_INPUT past the
 * table (not logged; *out untouched). Variants with the same `sub` compute
 * bit-identical results. */
int dev_flash_variant_get(int i, dev_flash_variant *out);

/* Runs variant i on p on `stream`, after the checks of kern_attn_flash
 * (a shape it cannot run, or an i past the table, is fatal). */
void dev_flash_run(int i, kern_attn_params p, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
