/* One block of the CPU stage in fp8 (MODEL.md "fp8 weights": e4m3 weights
 * per output channel, the linear layers' inputs quantised per token)
 * against the same block in fp32, from the same synthetic weights, random
 * residual stream, modulation and context, on the wan2.1-tiny and
 * wan2.1-1.3b shapes. Reported: the relative L2 of the block's output and
 * of its update (output minus input, the part fp8 changes); bound: the
 * output within 3e-2 (the fp8 target of the block), and the fp8 block not
 * equal to the fp32 one (the quantisation took place). Also where fp8 may
 * run (rank_stage_precision_check). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "model_file.h"
#include "sp_test.h"
#include "stage.h"

/* Runs block 0 of model m once in the given precision on act (the
 * activation message, in place) with context ctx (text_len, dim). */
static void run_block(rank_model *m, int fp8, int64_t lat_f, int64_t lat_h, int64_t lat_w,
                      const float *ctx, float *act, size_t act_bytes) {
  rank_stage_cfg cfg = {.first_block = 0, .last_block = 0, .prompts = 1, .lat_f = lat_f,
                        .lat_h = lat_h, .lat_w = lat_w, .device = RANK_DEVICE_CPU,
                        .act_buffers = 1, .fp8 = fp8};
  rank_stage *s = NULL;
  uint64_t bytes = 0;
  CHECK(rank_stage_load(m, &cfg, &s, &bytes) == SP_OK, "stage load (fp8 %d)", fp8);
  if (!s) return;
  CHECK(rank_stage_act_bytes(s) == act_bytes, "activation message size");
  rank_stage_set_prompt(s, 0, ctx);
  memcpy(rank_stage_act(s, 0), act, act_bytes);
  const int slot = 0, buf = 0;
  rank_stage_blocks(s, 1, &slot, &buf);
  rank_stage_sync(s);
  memcpy(act, rank_stage_act(s, 0), act_bytes);
  rank_stage_free(s);
}

static void check_preset(const char *preset) {
  char spec[64];
  snprintf(spec, sizeof spec, "synth:%s:%llu", preset, (unsigned long long)sp_rand_int(0, 999));
  rank_model *m = NULL;
  CHECK(rank_model_open(spec, 1, &m) == SP_OK, "open %s", spec);
  if (!m) return;
  const wan_config *c = &rank_model_get_info(m)->config;
  const int64_t lat_f = 2, lat_h = 8, lat_w = 10; /* 2 x 4 x 5 = 40 tokens */
  const int64_t L = lat_f * (lat_h / 2) * (lat_w / 2), D = c->dim;
  const int64_t nact = rank_act_floats(c, L), nctx = c->text_len * D;
  float *in = sp_test_malloc((size_t)nact * sizeof(float));
  float *ctx = sp_test_malloc((size_t)nctx * sizeof(float));
  for (int64_t i = 0; i < L * D; i++) in[i] = (float)sp_rand_normal();
  for (int64_t i = L * D; i < nact; i++) in[i] = (float)(0.1 * sp_rand_normal()); /* e, e0 */
  for (int64_t i = 0; i < nctx; i++) ctx[i] = (float)sp_rand_normal();
  float *y32 = sp_test_malloc((size_t)nact * sizeof(float));
  float *y8 = sp_test_malloc((size_t)nact * sizeof(float));
  memcpy(y32, in, (size_t)nact * sizeof(float));
  memcpy(y8, in, (size_t)nact * sizeof(float));
  run_block(m, 0, lat_f, lat_h, lat_w, ctx, y32, (size_t)nact * sizeof(float));
  run_block(m, 1, lat_f, lat_h, lat_w, ctx, y8, (size_t)nact * sizeof(float));
  const double out_rel = sp_test_rel_l2_f32(y8, y32, L * D);
  float *d32 = sp_test_malloc((size_t)(L * D) * sizeof(float));
  float *d8 = sp_test_malloc((size_t)(L * D) * sizeof(float));
  for (int64_t i = 0; i < L * D; i++) {
    d32[i] = y32[i] - in[i];
    d8[i] = y8[i] - in[i];
  }
  const double upd_rel = sp_test_rel_l2_f32(d8, d32, L * D);
  printf("%s block 0, %lld tokens: fp8 against fp32: output relative L2 %.3e, update (output - "
         "input) relative L2 %.3e\n",
         preset, (long long)L, out_rel, upd_rel);
  CHECK(out_rel <= 3e-2, "%s: fp8 block output relative L2 %.3e above 3e-2", preset, out_rel);
  CHECK(upd_rel > 0, "%s: the fp8 block equals the fp32 one: nothing was quantised", preset);
  free(d8);
  free(d32);
  free(y8);
  free(y32);
  free(ctx);
  free(in);
  rank_model_close(m);
}

/* Where fp8 runs: an fp8 file only in fp8, fp8 only on the CPU stage (each
 * refusal one line, logged by the check). */
static void check_precision_rules(void) {
  rank_model_info mi = {.fp8 = 1};
  snprintf(mi.id.source, sizeof mi.id.source, "f.h5");
  CHECK(rank_stage_precision_check(&mi, RANK_DEVICE_CPU, 1) == SP_OK, "fp8 file, cpu, fp8");
  CHECK(rank_stage_precision_check(&mi, RANK_DEVICE_CPU, 0) == SP_ERR_INPUT,
        "an fp8 file in bf16 is refused");
  CHECK(rank_stage_precision_check(&mi, RANK_DEVICE_CUDA, 1) == SP_ERR_INPUT,
        "fp8 on the CUDA stage is refused");
  mi.fp8 = 0;
  CHECK(rank_stage_precision_check(&mi, RANK_DEVICE_CUDA, 1) == SP_ERR_INPUT,
        "a bf16 file in fp8 on the CUDA stage is refused");
  CHECK(rank_stage_precision_check(&mi, RANK_DEVICE_CUDA, 0) == SP_OK, "bf16 on cuda");
  CHECK(rank_stage_precision_check(&mi, RANK_DEVICE_CPU, 1) == SP_OK, "bf16 file, cpu, fp8");
}

int main(void) {
  sp_test_begin("nets_test_fp8_block");
  check_precision_rules();
  check_preset("wan2.1-tiny");
  check_preset("wan2.1-1.3b");
  return sp_test_end();
}
