/* staticpipe forward: one DiT forward on given inputs, writing pred. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "comm.h"
#include "commands.h"
#include "inputs.h"
#include "log.h"
#include "model_file.h"
#include "stage.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: staticpipe forward --model MODEL --latent FILE --timestep T --cond FILE -o FILE\n"
          "\n"
          "One forward of the DiT: the predicted flow velocity for a latent at timestep T.\n"
          "This is how to check a converted checkpoint against another implementation.\n"
          "\n"
          "  -m, --model MODEL     model file or synth:PRESET[:SEED] (required)\n"
          "  -l, --latent FILE     HDF5 file with dataset 'latent' float32 [16, F, H, W],\n"
          "                        H and W even (required)\n"
          "  -t, --timestep T      diffusion timestep in 0..1000 (required)\n"
          "  -c, --cond FILE       HDF5 file with dataset 'context' float32 [L, 4096],\n"
          "                        L <= 512, zero-padded to 512 rows (required; may be the\n"
          "                        same file as --latent)\n"
          "  -o, --out FILE        output: dataset 'pred' float32 [16, F, H, W] (required);\n"
          "                        written atomically\n"
          "  -d, --device DEV      auto (default: cuda when a GPU is visible), cuda or cpu\n"
          "      --attn NAME       CUDA attention: auto (default: the faster of cudnn and flash\n"
          "                        for the shape, measured once), cudnn (cuDNN fused attention,\n"
          "                        falls back to flash when refused), flash (own kernel, sm_80+),\n"
          "                        simple (the reference: cuBLASLt GEMMs, exact softmax)\n"
          "      --profile         CUDA: time every op of every block and print each op's\n"
          "                        mean time against its floor (FLOPs or bytes over the\n"
          "                        measured ceilings)\n"
          "      --no-verify       do not check the weights' checksums while loading\n"
          "  -h, --help            this text\n"
          "Threads: OMP_NUM_THREADS (results do not depend on it).\n");
}

int cmd_forward(int argc, char **argv) {
  enum { OPT_NO_VERIFY = 1000, OPT_ATTN, OPT_PROFILE };
  static const struct option opts[] = {
      {"model", required_argument, 0, 'm'},    {"latent", required_argument, 0, 'l'},
      {"timestep", required_argument, 0, 't'}, {"cond", required_argument, 0, 'c'},
      {"out", required_argument, 0, 'o'},      {"device", required_argument, 0, 'd'},
      {"no-verify", no_argument, 0, OPT_NO_VERIFY}, {"help", no_argument, 0, 'h'},
      {"attn", required_argument, 0, OPT_ATTN},  {"profile", no_argument, 0, OPT_PROFILE},
      {0, 0, 0, 0}};
  const char *model = NULL, *latent_path = NULL, *cond_path = NULL, *out_path = NULL;
  const char *device = "auto";
  double t = -1;
  int have_t = 0, verify = 1;
  rank_attn attn = RANK_ATTN_AUTO;
  int profile = 0;
  cli_getopt_reset();
  int ch;
  while ((ch = getopt_long(argc, argv, "m:l:t:c:o:d:h", opts, NULL)) != -1) {
    switch (ch) {
    case 'm': model = optarg; break;
    case 'l': latent_path = optarg; break;
    case 't':
      if (cli_parse_double("--timestep", optarg, 0, 1000, &t)) return SP_ERR_INPUT;
      have_t = 1;
      break;
    case 'c': cond_path = optarg; break;
    case 'o': out_path = optarg; break;
    case 'd': device = optarg; break;
    case OPT_NO_VERIFY: verify = 0; break;
    case OPT_PROFILE: profile = 1; break;
    case OPT_ATTN:
      if (rank_attn_parse(optarg, &attn)) return SP_ERR_INPUT;
      break;
    case 'h': usage(stdout); return SP_OK;
    default: return cli_bad_usage("forward");
    }
  }
  if (optind < argc) {
    sp_log_error("forward: unexpected argument '%s'", argv[optind]);
    return cli_bad_usage("forward");
  }
  const char *missing = !model ? "--model" : !latent_path ? "--latent" : !have_t ? "--timestep"
                        : !cond_path ? "--cond" : !out_path ? "--out" : NULL;
  if (missing) {
    sp_log_error("forward: %s is required", missing);
    return cli_bad_usage("forward");
  }
  rank_device dev;
  if (rank_device_parse(device, &dev) != SP_OK) return SP_ERR_INPUT;

  rank_model *m = NULL;
  rank_tensor lat = {0}, ctx = {0};
  rank_stage *s = NULL;
  rank_stage_cfg cfg = {0}; /* cpu until set: done: frees with it */
  float *ctx_emb = NULL, *lat_h = NULL, *pred = NULL;
  int rc = rank_model_open(model, verify, &m);
  if (rc != SP_OK) return rc;
  const wan_config *c = &rank_model_get_info(m)->config;
  if ((rc = inputs_read_latent(latent_path, "latent", c, NULL, &lat)) != SP_OK) goto done;
  if ((rc = inputs_read_context(cond_path, "context", c, &ctx)) != SP_OK) goto done;

  cfg = (rank_stage_cfg){.first_block = 0, .last_block = (int)c->layers - 1, .embed = 1,
                        .head = 1, .prompts = 1, .lat_f = lat.dims[1], .lat_h = lat.dims[2],
                        .lat_w = lat.dims[3], .device = dev, .cuda_device = 0,
                        .attn = attn, .profile = profile, .act_buffers = 1};
  uint64_t bytes = 0;
  if ((rc = rank_stage_load(m, &cfg, &s, &bytes)) != SP_OK) goto done;
  int64_t L = rank_stage_tokens(s);
  sp_log_info("forward: %s on %s, latent [%lld, %lld, %lld, %lld] = %lld tokens, t = %g, context %lld "
              "rows, %.1f MB of weights read",
              model, dev == RANK_DEVICE_CUDA ? "cuda:0" : "cpu", (long long)lat.dims[0], (long long)lat.dims[1], (long long)lat.dims[2],
              (long long)lat.dims[3], (long long)L, t, (long long)ctx.dims[0], (double)bytes / 1e6);
  ctx_emb = sp_xmalloc((size_t)(c->text_len * c->dim) * sizeof(float));
  /* The stage's host-side buffers are pinned (asynchronous copies). */
  lat_h = rank_stage_host_alloc(&cfg, (size_t)lat.numel * sizeof(float));
  memcpy(lat_h, lat.data, (size_t)lat.numel * sizeof(float));
  pred = rank_stage_host_alloc(&cfg, (size_t)lat.numel * sizeof(float));
  rank_stage_embed_text(s, ctx.data, ctx.dims[0], ctx_emb);
  rank_stage_set_prompt(s, 0, ctx_emb);
  const int slot = 0, buf = 0;
  double t0 = comm_now();
  rank_stage_embed(s, lat_h, t, buf);
  rank_stage_sync(s);
  double t1 = comm_now();
  rank_stage_blocks(s, 1, &slot, &buf);
  rank_stage_sync(s);
  double t2 = comm_now();
  rank_stage_head(s, buf, pred);
  rank_stage_sync(s);
  double t3 = comm_now();
  /* FLOPs of a block, MODEL.md "Cost" (context k/v excluded: once
   * per prompt). */
  const double D = (double)c->dim, Fd = (double)c->ffn_dim, Ld = (double)L;
  const double flops = 12 * Ld * D * D + 4 * Ld * D * Fd + 4 * Ld * Ld * D + 4 * Ld * 512 * D;
  const double per_block = (t2 - t1) / (double)c->layers;
  sp_log_info("forward: embed %.1f ms, %lld blocks %.1f ms (%.2f ms per block, %.1f TFLOP/s), "
              "head %.1f ms (the latent's copy to the device and the prediction's back included)",
              1e3 * (t1 - t0), (long long)c->layers, 1e3 * (t2 - t1), 1e3 * per_block,
              flops / per_block / 1e12, 1e3 * (t3 - t2));

  rank_outfile *o = NULL;
  if ((rc = rank_outfile_open(out_path, &o)) != SP_OK) goto done;
  rc = rank_outfile_put(o, "pred", 4, lat.dims, pred);
  if (rc == SP_OK) rc = rank_outfile_attr_f64(o, "timestep", t);
  if (rc == SP_OK) rc = rank_outfile_attr_str(o, "model_checksum", rank_model_get_info(m)->checksum);
  if (rc == SP_OK) {
    rc = rank_outfile_commit(o);
  } else {
    rank_outfile_abort(o);
  }
  if (rc == SP_OK) sp_log_info("forward: wrote %s", out_path);
done:
  rank_stage_host_free(&cfg, pred);
  rank_stage_host_free(&cfg, lat_h);
  free(ctx_emb);
  rank_stage_free(s);
  rank_tensor_free(&lat);
  rank_tensor_free(&ctx);
  rank_model_close(m);
  return rc;
}
