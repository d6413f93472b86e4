/* Variants of the Hopper attention kernel (kern_attn.h, fa3), for the
 * benchmark and the tests (tests/gpu/test_attention_bench --fa3-variants,
 * tests/gpu/test_attention), kept apart from the kernel that ships as
 * flash_variants.h keeps the flash ones. They are instances of the template
 * in kernels/cuda/sm90a/fa3_kernel.cuh that take the shipped features away
 * one at a time (one consumer warpgroup, no overlap, no ping-pong, one CTA
 * per tile) or change the tile (keys per tile, ring slots, consumers), so
 * that when the shipped kernel fails the first variant that fails says
 * which stage broke. The shipped kernel of each head dim is a row of its
 * own, run through kern_attn_fa3 (kern_attn_fa3_int8_run for the int8
 * rows, kern_attn_fa3_fp8_run for the fp8 ones). Variants with the same
 * head dim, keys per tile and precision compute bit-identical results; so
 * do 8-bit variants that also share the query rows per tile (the Q
 * scales' blocks). A build without sm_90a code
 * (nosm90a/fa3_variants_none.c) has no variants. */
#ifndef DEV_FA3_VARIANTS_H
#define DEV_FA3_VARIANTS_H

#include <cuda_runtime_api.h>

#include "kern_attn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dev_fa3_variant {
  const char *name; /* e.g. "hd128-2wg-ovl" */
  int hd;           /* head dim it runs (64 or 128) */
  int bn;           /* keys per K/V tile: the order of the softmax updates */
  int ncwg;         /* consumer warpgroups (64 query rows each) */
  int stages;       /* K/V ring slots */
  int overlap;      /* 1: softmax of tile j overlapped with P V of tile j - 1 */
  int pingpong;     /* 1: the two consumers take turns issuing their GEMMs */
  int persist;      /* 1: at most one CTA per SM, each over several tiles */
  int int8;         /* the precision: 0 bf16; 1 Q K^T in int8 (the fa3-int8 scheme,
                       kern_attn_fa3_int8_run); 2 that and P V in e4m3 (fa3-fp8,
                       kern_attn_fa3_fp8_run) */
  int ship;         /* 1: the shipped kernel of its head dim and precision (kern_attn_fa3,
                       kern_attn_fa3_int8_run, kern_attn_fa3_fp8_run) */
} dev_fa3_variant;

/* 0 in a build without sm_90a code. */
int dev_fa3_variant_count(void);
/* Variant i (0 .. count - 1) into *out: SP_OK, or SP_ERR_INPUT past the
 * table (not logged; *out untouched). */
int dev_fa3_variant_get(int i, dev_fa3_variant *out);

/* Runs variant i on p on `stream` after the checks of kern_attn_fa3 (a
 * shape it cannot run, a head dim other than the variant's, or an i past
 * the table is fatal). */
void dev_fa3_run(int i, kern_attn_params p, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
