/* One block of the CPU stage in fp8 and in int8 (MODEL.md "fp8 weights",
 * "int8 weights": weights per output channel, the linear layers' inputs
 * quantised per token) against the same block in fp32, from the same
 * synthetic weights, random residual stream, modulation and context, on
 * the wan2.1-tiny and wan2.1-1.3b shapes. Reported: the relative L2 of the
 * block's output and of its update (output minus input, the part the
 * quantisation changes); bound: the output within 3e-2 (the fp8 target of
 * the block, STYLE.md 9), and the block not equal to the fp32 one (the
 * quantisation took place). Also which precision a file may run in
 * (rank_stage_precision_check, with --fp8-accum fast: rank_stage_fp8_accum_check)
 * and the --precision words. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "model_file.h"
#include "sp_test.h"
#include "stage.h"

/* Runs block 0 of model m once in the given precision on act (the
 * activation message, in place) with context ctx (text_len, dim). */
static void run_block(rank_model *m, wan_precision p, int64_t lat_f, int64_t lat_h,
                      int64_t lat_w, const float *ctx, float *act, size_t act_bytes) {
  rank_stage_cfg cfg = {.first_block = 0, .last_block = 0, .prompts = 1, .lat_f = lat_f,
                        .lat_h = lat_h, .lat_w = lat_w, .device = RANK_DEVICE_CPU,
                        .act_buffers = 1, .precision = p};
  rank_stage *s = NULL;
  uint64_t bytes = 0;
  CHECK(rank_stage_load(m, &cfg, &s, &bytes) == SP_OK, "stage load (%s)",
        wan_precision_name(p));
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
  float *yq = sp_test_malloc((size_t)nact * sizeof(float));
  float *d32 = sp_test_malloc((size_t)(L * D) * sizeof(float));
  float *dq = sp_test_malloc((size_t)(L * D) * sizeof(float));
  memcpy(y32, in, (size_t)nact * sizeof(float));
  run_block(m, WAN_PRECISION_BF16, lat_f, lat_h, lat_w, ctx, y32, (size_t)nact * sizeof(float));
  for (int64_t i = 0; i < L * D; i++) d32[i] = y32[i] - in[i];
  const wan_precision ps[2] = {WAN_PRECISION_FP8, WAN_PRECISION_INT8};
  for (int k = 0; k < 2; k++) {
    const char *pn = wan_precision_name(ps[k]);
    memcpy(yq, in, (size_t)nact * sizeof(float));
    run_block(m, ps[k], lat_f, lat_h, lat_w, ctx, yq, (size_t)nact * sizeof(float));
    const double out_rel = sp_test_rel_l2_f32(yq, y32, L * D);
    for (int64_t i = 0; i < L * D; i++) dq[i] = yq[i] - in[i];
    const double upd_rel = sp_test_rel_l2_f32(dq, d32, L * D);
    printf("%s block 0, %lld tokens: %s against fp32: output relative L2 %.3e, update (output "
           "- input) relative L2 %.3e\n",
           preset, (long long)L, pn, out_rel, upd_rel);
    CHECK(out_rel <= 3e-2, "%s: %s block output relative L2 %.3e above 3e-2", preset, pn,
          out_rel);
    CHECK(upd_rel > 0, "%s: the %s block equals the fp32 one: nothing was quantised", preset,
          pn);
  }
  free(dq);
  free(d32);
  free(yq);
  free(y32);
  free(ctx);
  free(in);
  rank_model_close(m);
}

/* Which precision a file runs in (each refusal one line, logged by the
 * check): an fp8 file in fp8 or bf16, an int8 file in int8 or bf16, a
 * GGUF-converted (quant) file in bf16 only, a bf16 file in any; fast fp8
 * accumulation (--fp8-accum fast) in fp8 only and never on the CPU. */
static void check_precision_rules(void) {
  rank_model_info mi = {.precision = WAN_PRECISION_FP8, .fp8 = 1, .quant = 1};
  snprintf(mi.id.source, sizeof mi.id.source, "f.h5");
  CHECK(rank_stage_precision_check(&mi, WAN_PRECISION_FP8, 0) == SP_OK, "fp8 file, fp8");
  CHECK(rank_stage_precision_check(&mi, WAN_PRECISION_BF16, 0) == SP_OK, "fp8 file, bf16");
  CHECK(rank_stage_precision_check(&mi, WAN_PRECISION_INT8, 0) == SP_ERR_INPUT,
        "an fp8 file in int8 is refused");
  mi = (rank_model_info){.precision = WAN_PRECISION_INT8, .quant = 1};
  CHECK(rank_stage_precision_check(&mi, WAN_PRECISION_INT8, 0) == SP_OK, "int8 file, int8");
  CHECK(rank_stage_precision_check(&mi, WAN_PRECISION_BF16, 0) == SP_OK, "int8 file, bf16");
  CHECK(rank_stage_precision_check(&mi, WAN_PRECISION_FP8, 0) == SP_ERR_INPUT,
        "an int8 file in fp8 is refused");
  mi = (rank_model_info){.precision = WAN_PRECISION_BF16, .quant = 1};
  CHECK(rank_stage_precision_check(&mi, WAN_PRECISION_BF16, 0) == SP_OK, "quant file, bf16");
  CHECK(rank_stage_precision_check(&mi, WAN_PRECISION_FP8, 0) == SP_ERR_INPUT &&
            rank_stage_precision_check(&mi, WAN_PRECISION_INT8, 0) == SP_ERR_INPUT,
        "a GGUF-converted file in fp8 or int8 is refused");
  mi.quant = 0;
  for (int p = 0; p < 3; p++)
    CHECK(rank_stage_precision_check(&mi, (wan_precision)p, 0) == SP_OK, "bf16 file, %s",
          wan_precision_name((wan_precision)p));
  /* fast fp8 accumulation: at precision fp8 only, and not on the CPU */
  for (int p = 0; p < 3; p++)
    CHECK(rank_stage_precision_check(&mi, (wan_precision)p, 1) ==
              (p == WAN_PRECISION_FP8 ? SP_OK : SP_ERR_INPUT),
          "bf16 file at %s with fast fp8 accumulation: %s", wan_precision_name((wan_precision)p),
          p == WAN_PRECISION_FP8 ? "taken" : "refused");
  mi = (rank_model_info){.precision = WAN_PRECISION_FP8, .fp8 = 1, .quant = 1};
  snprintf(mi.id.source, sizeof mi.id.source, "f.h5");
  CHECK(rank_stage_precision_check(&mi, WAN_PRECISION_FP8, 1) == SP_OK &&
            rank_stage_precision_check(&mi, WAN_PRECISION_BF16, 1) == SP_ERR_INPUT,
        "fp8 file: fast accumulation in fp8, refused in bf16 (the weight-only path)");
  CHECK(rank_stage_fp8_accum_check(RANK_DEVICE_CPU, 1) == SP_ERR_INPUT &&
            rank_stage_fp8_accum_check(RANK_DEVICE_CUDA, 1) == SP_OK &&
            rank_stage_fp8_accum_check(RANK_DEVICE_CPU, 0) == SP_OK,
        "fast fp8 accumulation refused on the CPU backend only");
}

/* The --precision words: each name parses back to its precision, the
 * names are "bf16", "fp8", "int8" (MODEL.md's), anything else is refused. */
static void check_precision_words(void) {
  static const char *const want[] = {"bf16", "fp8", "int8"};
  for (int p = 0; p < 3; p++) {
    wan_precision got = WAN_PRECISION_BF16;
    CHECK(strcmp(wan_precision_name((wan_precision)p), want[p]) == 0, "precision %d is '%s'", p,
          want[p]);
    CHECK(wan_precision_parse(want[p], &got) == SP_OK && got == (wan_precision)p,
          "'%s' parses to precision %d", want[p], p);
  }
  wan_precision got = WAN_PRECISION_BF16;
  CHECK(wan_precision_parse("fp16", &got) == SP_ERR_INPUT &&
            wan_precision_parse("FP8", &got) == SP_ERR_INPUT &&
            wan_precision_parse("", &got) == SP_ERR_INPUT,
        "fp16, FP8 and '' are refused");
}

int main(void) {
  sp_test_begin("nets_test_fp8_block");
  check_precision_words();
  check_precision_rules();
  check_preset("wan2.1-tiny");
  check_preset("wan2.1-1.3b");
  return sp_test_end();
}
