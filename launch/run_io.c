/* staticpipe run: a job's inputs (read and checked on rank 0) and outputs. */
#include <getopt.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "inputs.h"
#include "log.h"
#include "model_plan.h"
#include "noise.h"
#include "pipeline.h"
#include "preview.h"
#include "run.h"
#include "sampler.h"

void run_inputs_free(job_inputs *in) {
  rank_tensor_free(&in->ctx[0]);
  rank_tensor_free(&in->ctx[1]);
  rank_tensor_free(&in->noise);
}

int run_write_output(const run_opts *o, const rank_jobspec *j, const rank_model_info *mi,
                        const int64_t *lat, const float *latents) {
  rank_outfile *f = NULL;
  int rc = rank_outfile_open(j->out, &f);
  if (rc != SP_OK) return rc;
  char size[64];
  snprintf(size, sizeof size, "%lldx%lld", (long long)j->height, (long long)j->width);
  rc = rank_outfile_put(f, "latents", 4, lat, latents);
  if (rc == SP_OK && j->noise[0]) rc = rank_outfile_attr_str(f, "noise_file", j->noise);
  if (rc == SP_OK && !j->noise[0]) rc = rank_outfile_attr_i64(f, "seed", (int64_t)j->seed);
  if (rc == SP_OK) rc = rank_outfile_attr_i64(f, "steps", j->steps);
  if (rc == SP_OK) rc = rank_outfile_attr_f64(f, "cfg", j->cfg);
  if (rc == SP_OK) rc = rank_outfile_attr_f64(f, "shift", j->shift);
  if (rc == SP_OK) rc = rank_outfile_attr_str(f, "sampler", rank_sampler_kind_name(j->sampler));
  if (rc == SP_OK) rc = rank_outfile_attr_i64(f, "frames", j->frames);
  if (rc == SP_OK) rc = rank_outfile_attr_str(f, "size", size);
  if (rc == SP_OK) rc = rank_outfile_attr_str(f, "model", mi->source);
  if (rc == SP_OK) rc = rank_outfile_attr_str(f, "model_checksum", mi->checksum);
  if (rc != SP_OK) {
    rank_outfile_abort(f);
    return rc;
  }
  /* The preview first: if it fails, no latents file claims success. */
  if (o->preview) {
    char png[RANK_JOBS_PATH + 8];
    snprintf(png, sizeof png, "%s.png", j->out);
    rc = rank_preview_write_png(png, latents, lat[0], lat[1], lat[2], lat[3]);
    if (rc != SP_OK) {
      rank_outfile_abort(f);
      return rc;
    }
  }
  return rank_outfile_commit(f);
}

/* --save-noise: the initial latent, so another implementation (or --noise)
 * can start from exactly the same noise. */
static int run_save_noise(const char *path, const rank_jobspec *j, const int64_t lat[4],
                      const float *noise) {
  rank_outfile *f = NULL;
  int rc = rank_outfile_open(path, &f);
  if (rc != SP_OK) return rc;
  rc = rank_outfile_put(f, "noise", 4, lat, noise);
  if (rc == SP_OK && !j->noise[0]) rc = rank_outfile_attr_i64(f, "seed", (int64_t)j->seed);
  if (rc != SP_OK) {
    rank_outfile_abort(f);
    return rc;
  }
  return rank_outfile_commit(f);
}

/* Rank 0 reads and checks a job's inputs before any of its work starts. */
int run_read_inputs(const run_ctx *x, const rank_jobspec *j, job_inputs *in) {
  if (x->w->rank != 0) return SP_OK;
  const wan_config *c = &rank_model_get_info(x->m)->config;
  int64_t lat[4];
  run_job_latent(j, lat);
  int rc = inputs_read_context(j->cond, "context", c, &in->ctx[0]);
  if (rc == SP_OK && run_job_micro(j) == 2) {
    int has = 0;
    rc = rank_tensor_exists(j->cond, "context_null", &has);
    if (rc == SP_OK && !has) {
      sp_log_error("%s: dataset 'context_null' (the encoded negative prompt) is missing; it "
                   "is needed for --cfg %g (or run with --cfg 1)",
                   j->cond, j->cfg);
      rc = SP_ERR_INPUT;
    }
    if (rc == SP_OK) rc = inputs_read_context(j->cond, "context_null", c, &in->ctx[1]);
  }
  if (rc == SP_OK && j->noise[0]) rc = inputs_read_latent(j->noise, "noise", c, lat, &in->noise);
  if (rc == SP_OK && !j->noise[0]) {
    in->noise.numel = lat[0] * lat[1] * lat[2] * lat[3];
    in->noise.data = sp_xmalloc((size_t)in->noise.numel * sizeof(float));
    rank_noise_fill(j->seed, in->noise.data, (size_t)in->noise.numel);
  }
  if (rc == SP_OK && x->o->save_noise) rc = run_save_noise(x->o->save_noise, j, lat, in->noise.data);
  return rc;
}

void run_log_job(const run_ctx *x, const rank_jobspec *j) {
  if (x->w->rank != 0) return;
  int64_t lat[4];
  run_job_latent(j, lat);
  char init[RANK_JOBS_PATH + 16];
  if (j->noise[0])
    snprintf(init, sizeof init, "noise %s", j->noise);
  else
    snprintf(init, sizeof init, "seed %llu", (unsigned long long)j->seed);
  sp_log_info("run: %s, %lld frames %lldx%lld -> latent [%lld, %lld, %lld, %lld] = %lld "
              "tokens, %d steps, %s, cfg %g, shift %g, %s, %d rank%s",
              x->o->model, (long long)j->frames, (long long)j->height, (long long)j->width,
              (long long)lat[0], (long long)lat[1], (long long)lat[2], (long long)lat[3],
              (long long)(lat[1] * (lat[2] / 2) * (lat[3] / 2)), j->steps,
              rank_sampler_kind_name(j->sampler), j->cfg, j->shift, init, x->w->size,
              x->w->size == 1 ? "" : "s");
}
