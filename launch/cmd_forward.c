/* staticpipe forward: one DiT forward on given inputs, writing pred. Its
 * shared options are the job's (job_params.h), its inputs read as a run's
 * (job_io.h), its cost counted by the planner's formula. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "comm.h"
#include "commands.h"
#include "job_io.h"
#include "job_plan.h"
#include "job_session.h"
#include "log.h"
#include "model_file.h"
#include "model_plan.h"
#include "path_check.h"
#include "stage.h"

enum { OPT_LATENT = JOB_OPT_COUNT, OPT_TIMESTEP, OPT_TIMESTEP_FIRST, OPT_COND, OPT_OUT, OPT_HELP };

/* forward takes the job options that say how to run (model, device,
 * attention, profile, verify, precision and its fp8 accumulation); its
 * inputs and output are its own. */
static void forward_table(cli_opts *t) {
  static const int ids[] = {JOB_OPT_MODEL, JOB_OPT_DEVICE, JOB_OPT_ATTN, JOB_OPT_PROFILE,
                            JOB_OPT_NO_VERIFY, JOB_OPT_PRECISION, JOB_OPT_FP8_ACCUM};
  static const job_option own[] = {
      {OPT_LATENT, "latent", 'l', "FILE", NULL, 0,
       "HDF5 file with dataset 'latent' float32 [in_dim, F, H, W],\n"
       "H and W even (required): the model's input, 16 channels for\n"
       "text to video, 48 for TI2V, 36 for image to video (the\n"
       "noisy latent's 16, then y: the mask's 4 and the image\n"
       "latents' 16)"},
      {OPT_TIMESTEP, "timestep", 't', "T", NULL, 0, "diffusion timestep in 0..1000 (required)"},
      {OPT_TIMESTEP_FIRST, "frame0-timestep", 0, "T", NULL, 0,
       "TI2V model: the timestep of the tokens of latent frame 0,\n"
       "0..1000 (0 where that frame is the image; default: --timestep)"},
      {OPT_COND, "cond", 'c', "FILE", NULL, 0,
       "HDF5 file with dataset 'context' float32 [L, 4096],\n"
       "L <= 512, zero-padded to 512 rows (required; may be the\n"
       "same file as --latent)"},
      {OPT_OUT, "out", 'o', "FILE", NULL, 0,
       "output: dataset 'pred' float32 [out_dim, F, H, W] (required);\n"
       "written atomically"},
      {OPT_HELP, "help", 'h', NULL, NULL, 0, "this text"},
  };
  cli_opts_build(t, ids, (int)(sizeof ids / sizeof ids[0]), own, (int)(sizeof own / sizeof own[0]));
}

static void usage(const cli_opts *t, FILE *f) {
  fprintf(f,
          "usage: staticpipe forward --model MODEL --latent FILE --timestep T --cond FILE -o FILE\n"
          "\n"
          "One forward of the DiT: the predicted flow velocity for a latent at timestep T.\n"
          "This is how to check a converted checkpoint against another implementation.\n"
          "\n");
  cli_opts_usage(t, f);
  fprintf(f, "Threads: OMP_NUM_THREADS (results do not depend on it).\n");
}

/* What forward's flags say. */
typedef struct forward_cli {
  job_params job; /* --model, --device, --attn, --profile, --no-verify, --precision,
                     --fp8-accum */
  rank_device dev; /* --device resolved */
  const char *latent_path, *cond_path, *out_path;
  double t, t_first;
  int have_t, have_t_first, help;
} forward_cli;

static int forward_opt(void *ctx, int id, const char *arg) {
  forward_cli *c = ctx;
  switch (id) {
  case OPT_LATENT: c->latent_path = arg; break;
  case OPT_TIMESTEP:
    if (job_parse_double("--timestep", arg, 0, 1000, &c->t)) return SP_ERR_INPUT;
    c->have_t = 1;
    break;
  case OPT_TIMESTEP_FIRST:
    if (job_parse_double("--frame0-timestep", arg, 0, 1000, &c->t_first)) return SP_ERR_INPUT;
    c->have_t_first = 1;
    break;
  case OPT_COND: c->cond_path = arg; break;
  case OPT_OUT: c->out_path = arg; break;
  case OPT_HELP: return CLI_HELP;
  }
  return SP_OK;
}

static int forward_parse(int argc, char **argv, forward_cli *c) {
  static const cli_command cmd = {"forward", forward_table, forward_opt, usage, 0};
  memset(c, 0, sizeof *c);
  cli_result res;
  int rc = cli_command_parse(&cmd, argc, argv, &c->job, c, &res);
  c->help = res.help;
  if (rc != SP_OK || c->help) return rc;
  const char *missing = !c->job.model ? "--model" : !c->latent_path ? "--latent"
                        : !c->have_t ? "--timestep" : !c->cond_path ? "--cond"
                        : !c->out_path ? "--out" : NULL;
  if ((rc = cli_require("forward", missing)) != SP_OK) return rc;
  if (job_params_check(&c->job, 0) != SP_OK || job_device_resolve(&c->job, &c->dev) != SP_OK)
    return SP_ERR_INPUT;
  const rank_path_arg in[] = {
      {"--model", rank_model_spec_is_synth(c->job.model) ? NULL : c->job.model},
      {"--latent", c->latent_path}, {"--cond", c->cond_path}};
  for (int i = 0; i < 3; i++)
    if (in[i].path && rank_path_check_input(in[i].flag, in[i].path, RANK_PATH_FILE) != SP_OK)
      return SP_ERR_INPUT;
  if (job_output_not_video("--out", c->out_path, "HDF5 (the prediction)") != SP_OK)
    return SP_ERR_INPUT;
  return rank_path_check_output("--out", c->out_path, in, 3);
}

/* The index of the first NaN or infinite value of x[0 .. n), or -1. */
static int64_t first_nonfinite(const float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if (!isfinite(x[i])) return i;
  return -1;
}

/* The times of embed (t[0]..t[1]), the blocks and the head (..t[3]), and
 * the blocks' rate in FLOPs as the planner counts them (MODEL.md "Cost";
 * the context padded to text_len rows, its k/v excluded: once per prompt)
 * for L tokens. */
static void log_times(const rank_model *m, int64_t L, const double t[4]) {
  const wan_config *c = &rank_model_get_info(m)->config;
  plan_model pm;
  uint64_t *bb = sp_xcalloc((size_t)c->layers, sizeof *bb);
  rank_model_plan_sizes(m, 4, 0, bb, &pm);
  const double flops = plan_block_flops(&pm, L, pm.text_len);
  free(bb);
  const double per_block = (t[2] - t[1]) / (double)c->layers;
  sp_log_info("forward: embed %.1f ms, %lld blocks %.1f ms (%.2f ms per block, %.1f TFLOP/s), "
              "head %.1f ms (the latent's copy to the device and the prediction's back included)",
              1e3 * (t[1] - t[0]), (long long)c->layers, 1e3 * (t[2] - t[1]), 1e3 * per_block,
              flops / per_block / 1e12, 1e3 * (t[3] - t[2]));
}

/* One forward's state: the model, its inputs, the stage and the host
 * buffers (pinned: the stage copies asynchronously). */
typedef struct forward_run {
  rank_model *m;
  const wan_config *c;
  rank_tensor lat, ctx; /* lat [in_dim, F, H, W], ctx [L, 4096] */
  rank_stage *s;
  rank_stage_cfg cfg; /* cpu until set: forward_free frees with it */
  float *ctx_emb;     /* [text_len, dim] */
  float *lat_h;       /* lat's copy, [in_dim, F, H, W] */
  float *pred;        /* [out_dim, F, H, W] = pdims */
  int64_t pdims[4], npred, L;
} forward_run;

/* The inputs read and checked against the model, the whole DiT loaded as
 * one stage, the host buffers. */
static int forward_load(const forward_cli *cl, forward_run *r) {
  const char *model = cl->job.model;
  int rc = job_precision_check(&cl->job, rank_model_get_info(r->m));
  if (rc == SP_OK) rc = rank_stage_fp8_accum_check(cl->dev, cl->job.fp8_fast_accum);
  if (rc != SP_OK) return rc;
  const wan_config *c = r->c;
  if (cl->have_t_first && wan_time_tables(c) < 2) {
    sp_log_error("--frame0-timestep: %s is a %s model, whose tokens share one timestep (only "
                 "a TI2V model gives latent frame 0 its own)",
                 model, wan_task_name(wan_config_task(c)));
    return SP_ERR_INPUT;
  }
  if ((rc = job_read_latent(cl->latent_path, "latent", c, NULL, &r->lat)) != SP_OK) return rc;
  if ((rc = job_read_context(cl->cond_path, "context", c, &r->ctx)) != SP_OK) return rc;
  const rank_tensor *lat = &r->lat;
  r->cfg = (rank_stage_cfg){.first_block = 0, .last_block = (int)c->layers - 1, .embed = 1,
                            .head = 1, .prompts = 1, .lat_f = lat->dims[1],
                            .lat_h = lat->dims[2], .lat_w = lat->dims[3], .device = cl->dev,
                            .cuda_device = 0, .attn = cl->job.attn, .profile = cl->job.profile,
                            .act_buffers = 1,
                            .precision = job_precision(&cl->job, rank_model_get_info(r->m)),
                            .fp8_fast_accum = cl->job.fp8_fast_accum};
  /* no plan: W8A8's products scratch counted wherever it may be taken */
  r->cfg.w8a8_epilogue = r->cfg.precision != WAN_PRECISION_BF16;
  uint64_t bytes = 0;
  if ((rc = rank_stage_load(r->m, &r->cfg, &r->s, &bytes)) != SP_OK) return rc;
  r->L = rank_stage_tokens(r->s);
  sp_log_info("forward: %s on %s%s, latent [%lld, %lld, %lld, %lld] = %lld tokens, t = %g, context %lld "
              "rows, %.1f MB of weights read",
              model, cl->dev == RANK_DEVICE_CUDA ? "cuda:0" : "cpu",
              r->cfg.fp8_fast_accum ? " (fp8, fast accumulation)" : "", (long long)lat->dims[0], (long long)lat->dims[1], (long long)lat->dims[2],
              (long long)lat->dims[3], (long long)r->L, cl->t, (long long)r->ctx.dims[0], (double)bytes / 1e6);
  r->ctx_emb = sp_xmalloc((size_t)(c->text_len * c->dim) * sizeof(float));
  /* The stage's host-side buffers are pinned (asynchronous copies). */
  r->lat_h = rank_stage_host_alloc(&r->cfg, (size_t)lat->numel * sizeof(float));
  memcpy(r->lat_h, lat->data, (size_t)lat->numel * sizeof(float));
  /* The prediction has the model's output channels (16 of an I2V model's 36). */
  const int64_t pdims[4] = {c->out_dim, lat->dims[1], lat->dims[2], lat->dims[3]};
  memcpy(r->pdims, pdims, sizeof pdims);
  r->npred = pdims[0] * pdims[1] * pdims[2] * pdims[3];
  r->pred = rank_stage_host_alloc(&r->cfg, (size_t)r->npred * sizeof(float));
  return SP_OK;
}

/* The forward itself at timestep t (t_first: latent frame 0's), timed
 * part by part. */
static void forward_compute(forward_run *r, double t, double t_first) {
  rank_stage *s = r->s;
  /* A two-expert model: the expert the sampler would run at timestep t
   * (the model's boundary). */
  const rank_model_experts *x = &rank_model_get_info(r->m)->experts;
  if (x->count > 1) {
    const int e = rank_model_step_expert(x->boundary, t);
    rank_stage_set_expert(s, e);
    sp_log_info("forward: the %s-noise expert (t %s %g)", rank_model_expert_name(2, e),
                e == RANK_EXPERT_HIGH ? ">=" : "<", x->boundary * 1000.0);
  }
  rank_stage_embed_text(s, r->ctx.data, r->ctx.dims[0], r->ctx_emb);
  rank_stage_set_prompt(s, 0, r->ctx_emb);
  const int slot = 0, buf = 0;
  double t0 = comm_now();
  rank_stage_embed(s, r->lat_h, t, t_first, buf);
  rank_stage_sync(s);
  double t1 = comm_now();
  rank_stage_blocks(s, 1, &slot, &buf);
  rank_stage_sync(s);
  double t2 = comm_now();
  rank_stage_head(s, buf, r->pred);
  rank_stage_sync(s);
  double t3 = comm_now();
  const double times[4] = {t0, t1, t2, t3};
  log_times(r->m, r->L, times);
}

/* The prediction into --out with its timesteps and the model's checksum,
 * refused (nothing written) when it is not finite. */
static int forward_write(const forward_cli *cl, const forward_run *r, double t_first) {
  const char *out_path = cl->out_path;
  const int64_t bad = first_nonfinite(r->pred, r->npred);
  if (bad >= 0) { /* as run refuses a non-finite step: nothing is written */
    sp_log_error("forward: the prediction holds a non-finite value (%g) at element %lld of %lld "
                 "(an input or a weight out of range?): %s not written",
                 r->pred[bad], (long long)bad, (long long)r->npred, out_path);
    return SP_ERR_RUNTIME;
  }
  rank_outfile *o = NULL;
  int rc = rank_outfile_open(out_path, &o);
  if (rc != SP_OK) return rc;
  rc = rank_outfile_put(o, "pred", 4, r->pdims, r->pred);
  if (rc == SP_OK) rc = rank_outfile_attr_f64(o, "timestep", cl->t);
  if (rc == SP_OK && cl->have_t_first) rc = rank_outfile_attr_f64(o, "frame0_timestep", t_first);
  if (rc == SP_OK)
    rc = rank_outfile_attr_str(o, "model_checksum", rank_model_get_info(r->m)->id.checksum);
  if (rc == SP_OK) {
    rc = rank_outfile_commit(o);
  } else {
    rank_outfile_abort(o);
  }
  if (rc == SP_OK) sp_log_info("forward: wrote %s", out_path);
  return rc;
}

static void forward_free(forward_run *r) {
  rank_stage_host_free(&r->cfg, r->pred);
  rank_stage_host_free(&r->cfg, r->lat_h);
  free(r->ctx_emb);
  rank_stage_free(r->s);
  rank_tensor_free(&r->lat);
  rank_tensor_free(&r->ctx);
  rank_model_close(r->m);
}

int cmd_forward(int argc, char **argv) {
  forward_cli cl;
  int rc = forward_parse(argc, argv, &cl);
  if (cl.help || rc != SP_OK) return rc;
  const double t_first = cl.have_t_first ? cl.t_first : cl.t;
  forward_run r = {0};
  rc = rank_model_open(cl.job.model, cl.job.verify, &r.m);
  if (rc != SP_OK) return rc;
  r.c = &rank_model_get_info(r.m)->config;
  rc = forward_load(&cl, &r);
  if (rc == SP_OK) {
    forward_compute(&r, cl.t, t_first);
    rc = forward_write(&cl, &r, t_first);
  }
  forward_free(&r);
  return rc;
}
