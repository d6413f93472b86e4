/* The fa3 kernel's variants (fa3_variants.h): instances of the template in
 * kernels/cuda/sm90a/fa3_kernel.cuh. Compiled for sm_90a alone. Registers
 * and spills from ptxas -v (CUDA 13.0) are in fa3_sass_check.sh's output;
 * that script also checks every instance for spills and serialised
 * wgmma. */
#include "fa3_variants.h"

#include "cuda_check.h"
#include "fa3_kernel.cuh"

typedef void (*dev_fa3_launch_fn)(const kern_attn_params *p, int persistent, cudaStream_t stream,
                                  const fa3_qk8_inputs *q8);

typedef struct dev_fa3_row {
  dev_fa3_variant info;
  dev_fa3_launch_fn launch; /* NULL: the shipped kernel */
} dev_fa3_row;

#define DEV_FA3_ROW(name, hd, bn, ncwg, stages, ovl, pp, persist, i8)                           \
  {                                                                                             \
    {name, hd, bn, ncwg, stages, ovl, pp, persist, i8, 0},                                      \
        fa3_launch<fa3_cfg<hd, bn, ncwg, stages, ovl != 0, pp != 0, i8 != 0, false, i8 == 2>>    \
  }
#define DEV_FA3(name, hd, bn, ncwg, stages, ovl, pp, persist)                                   \
  DEV_FA3_ROW(name, hd, bn, ncwg, stages, ovl, pp, persist, 0)
#define DEV_FA3_INT8(name, hd, bn, ncwg, stages, ovl, pp, persist)                              \
  DEV_FA3_ROW(name, hd, bn, ncwg, stages, ovl, pp, persist, 1)
#define DEV_FA3_FP8(name, hd, bn, ncwg, stages, ovl, pp, persist)                               \
  DEV_FA3_ROW(name, hd, bn, ncwg, stages, ovl, pp, persist, 2)

/* In the order a failure is read: the simplest first. The shipped rows
 * name what kern_attn_fa3 runs (kernels/cuda/sm90a/fa3_attn.cu). */
static const dev_fa3_row dev_fa3_rows[] = {
    DEV_FA3("hd128-1wg", 128, 128, 1, 2, 0, 0, 0),
    DEV_FA3("hd128-2wg", 128, 128, 2, 2, 0, 0, 0),
    DEV_FA3("hd128-2wg-ovl", 128, 128, 2, 2, 1, 0, 0),
    DEV_FA3("hd128-2wg-ovl-pp", 128, 128, 2, 2, 1, 1, 0),
    DEV_FA3("hd128-2wg-ovl-pp-persist", 128, 128, 2, 2, 1, 1, 1),
    {{"hd128-ship", 128, 128, 2, 2, 1, 0, 1, 0, 1}, NULL},
    /* the shipped configuration with the output staged in shared memory
     * and written by one TMA store per warpgroup (fa3_store_o_tma) */
    {{"hd128-tma-store", 128, 128, 2, 2, 1, 0, 1, 0, 0},
     fa3_launch<fa3_cfg<128, 128, 2, 2, true, false, false, true>>},
    DEV_FA3("hd128-3stage", 128, 128, 2, 3, 1, 1, 1),
    DEV_FA3("hd128-bn176-pp", 128, 176, 2, 2, 1, 1, 1),
    DEV_FA3("hd128-bn176-ovl", 128, 176, 2, 2, 1, 0, 0),
    DEV_FA3("hd128-bn176-ovl-persist", 128, 176, 2, 2, 1, 0, 1),
    DEV_FA3("hd128-bn192-pp", 128, 192, 2, 2, 1, 1, 1),
    DEV_FA3("hd128-3wg-bn64", 128, 64, 3, 2, 1, 0, 1),
    DEV_FA3("hd64-1wg", 64, 128, 1, 2, 0, 0, 0),
    DEV_FA3("hd64-2wg-ovl-pp", 64, 128, 2, 2, 1, 1, 0),
    DEV_FA3("hd64-2wg-ovl-pp-persist", 64, 128, 2, 2, 1, 1, 1),
    DEV_FA3("hd64-3wg-ovl", 64, 128, 3, 2, 1, 0, 1),
    {{"hd64-ship", 64, 128, 3, 2, 1, 0, 1, 0, 1}, NULL},
    {{"hd64-tma-store", 64, 128, 3, 2, 1, 0, 1, 0, 0},
     fa3_launch<fa3_cfg<64, 128, 3, 2, true, false, false, true>>},
    DEV_FA3("hd64-3wg-ovl-3stage", 64, 128, 3, 3, 1, 0, 1),
    DEV_FA3("hd64-bn192-pp", 64, 192, 2, 2, 1, 1, 1),
    DEV_FA3_INT8("int8-hd128-1wg", 128, 128, 1, 2, 0, 0, 0),
    DEV_FA3_INT8("int8-hd128-2wg-ovl", 128, 128, 2, 2, 1, 0, 0),
    DEV_FA3_INT8("int8-hd128-2stage", 128, 128, 2, 2, 1, 1, 1),
    {{"int8-hd128-ship", 128, 128, 2, 3, 1, 1, 1, 1, 1}, NULL},
    {{"int8-hd128-tma-store", 128, 128, 2, 3, 1, 0, 1, 1, 0},
     fa3_launch<fa3_cfg<128, 128, 2, 3, true, false, true, true>>},
    DEV_FA3_INT8("int8-hd128-nopp", 128, 128, 2, 3, 1, 0, 1),
    DEV_FA3_INT8("int8-hd128-bn176", 128, 176, 2, 3, 1, 0, 1),
    DEV_FA3_INT8("int8-hd128-bn176-pp", 128, 176, 2, 3, 1, 1, 1),
    DEV_FA3_INT8("int8-hd64-1wg", 64, 128, 1, 2, 0, 0, 0),
    DEV_FA3_INT8("int8-hd64-2stage", 64, 128, 3, 2, 1, 0, 1),
    {{"int8-hd64-ship", 64, 128, 3, 3, 1, 0, 1, 1, 1}, NULL},
    /* fa3-fp8 (P V in e4m3 too: BN 128 only, direct stores only) */
    DEV_FA3_FP8("fp8-hd128-1wg", 128, 128, 1, 2, 0, 0, 0),
    DEV_FA3_FP8("fp8-hd128-2wg-ovl", 128, 128, 2, 2, 1, 0, 0),
    DEV_FA3_FP8("fp8-hd128-2stage", 128, 128, 2, 2, 1, 1, 1),
    {{"fp8-hd128-ship", 128, 128, 2, 3, 1, 1, 1, 2, 1}, NULL},
    DEV_FA3_FP8("fp8-hd128-4stage", 128, 128, 2, 4, 1, 1, 1),
    DEV_FA3_FP8("fp8-hd128-nopp", 128, 128, 2, 3, 1, 0, 1),
    DEV_FA3_FP8("fp8-hd64-1wg", 64, 128, 1, 2, 0, 0, 0),
    {{"fp8-hd64-ship", 64, 128, 3, 3, 1, 0, 1, 2, 1}, NULL},
    DEV_FA3_FP8("fp8-hd64-4stage", 64, 128, 3, 4, 1, 0, 1),
};
#define DEV_FA3_COUNT ((int)(sizeof dev_fa3_rows / sizeof dev_fa3_rows[0]))

/* The 8-bit variants' buffers (created at their first run, kept for the
 * process: benchmark code). */
static kern_attn_fa3_int8 *dev_fa3_int8;

extern "C" int dev_fa3_variant_count(void) { return DEV_FA3_COUNT; }

extern "C" int dev_fa3_variant_get(int i, dev_fa3_variant *out) {
  if (i < 0 || i >= DEV_FA3_COUNT) return SP_ERR_INPUT;
  *out = dev_fa3_rows[i].info;
  return SP_OK;
}

extern "C" void dev_fa3_run(int i, kern_attn_params p, cudaStream_t stream) {
  if (i < 0 || i >= DEV_FA3_COUNT)
    sp_fatal("attention (fa3 variants): variant %d is not in 0..%d", i, DEV_FA3_COUNT - 1);
  const dev_fa3_row *r = &dev_fa3_rows[i];
  if (p.hd != r->info.hd)
    sp_fatal("attention (fa3 %s): head dim %lld, the variant runs %d", r->info.name,
             (long long)p.hd, r->info.hd);
  char why[192];
  if (!kern_attn_fa3_supported(&p, why, sizeof why))
    sp_fatal("attention (fa3 %s): %s", r->info.name, why);
  if (r->info.int8 && !dev_fa3_int8) {
    if (kern_attn_fa3_int8_create(&dev_fa3_int8) != SP_OK)
      sp_fatal("attention (fa3 %s): no 8-bit context (the cause is logged above)",
               r->info.name);
  }
  if (!r->launch) {
    if (r->info.int8 == 2)
      kern_attn_fa3_fp8_run(dev_fa3_int8, p, stream);
    else if (r->info.int8)
      kern_attn_fa3_int8_run(dev_fa3_int8, p, stream);
    else
      kern_attn_fa3(p, stream);
    return;
  }
  fa3_qk8_inputs in;
  const int bm = 64 * r->info.ncwg, bn = r->info.bn;
  if (r->info.int8) fa3_int8_quantize(dev_fa3_int8, &p, bm, bn, &in, stream);
  if (r->info.int8 == 2) fa3_fp8_quantize_v(dev_fa3_int8, &p, &in, stream);
  r->launch(&p, r->info.persist, stream, r->info.int8 ? &in : NULL);
}
