/* A job's inputs (read and checked on rank 0 against the model) and its
 * outputs (see job.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job.h"
#include "job_session.h"
#include "log.h"
#include "noise.h"
#include "preview.h"

void job_inputs_free(job_inputs *in) {
  rank_tensor_free(&in->ctx[0]);
  rank_tensor_free(&in->ctx[1]);
  rank_tensor_free(&in->noise);
}

int job_read_context(const char *path, const char *name, const wan_config *c, rank_tensor *out) {
  int rc = rank_tensor_read(path, name, 2, out);
  if (rc != SP_OK) return rc;
  if (out->dims[1] != c->text_dim || out->dims[0] > c->text_len) {
    sp_log_error("%s: dataset '%s' is [%lld, %lld]; the model needs [L, %lld] with L <= %lld",
                 path, name, (long long)out->dims[0], (long long)out->dims[1],
                 (long long)c->text_dim, (long long)c->text_len);
    rank_tensor_free(out);
    return SP_ERR_INPUT;
  }
  return SP_OK;
}

int job_read_latent(const char *path, const char *name, const wan_config *c,
                    const int64_t *want, rank_tensor *out) {
  int rc = rank_tensor_read(path, name, 4, out);
  if (rc != SP_OK) return rc;
  const int64_t *d = out->dims;
  if (want && (d[0] != want[0] || d[1] != want[1] || d[2] != want[2] || d[3] != want[3])) {
    sp_log_error("%s: dataset '%s' is [%lld, %lld, %lld, %lld]; this run needs [%lld, %lld, "
                 "%lld, %lld]",
                 path, name, (long long)d[0], (long long)d[1], (long long)d[2], (long long)d[3],
                 (long long)want[0], (long long)want[1], (long long)want[2], (long long)want[3]);
    rank_tensor_free(out);
    return SP_ERR_INPUT;
  }
  if (d[0] != c->in_dim || d[2] % c->patch[1] || d[3] % c->patch[2] || d[1] % c->patch[0]) {
    sp_log_error("%s: dataset '%s' is [%lld, %lld, %lld, %lld]; the model needs [%lld, F, H, W] "
                 "with H and W even",
                 path, name, (long long)d[0], (long long)d[1], (long long)d[2], (long long)d[3],
                 (long long)c->in_dim);
    rank_tensor_free(out);
    return SP_ERR_INPUT;
  }
  return SP_OK;
}

/* The latents with the job's settings as attributes, and the preview. */
int job_write_output(const job_session *s, const job_spec *j, const int64_t *lat,
                     const float *latents) {
  const rank_model_info *mi = rank_model_get_info(s->m);
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
  if (rc == SP_OK && j->sched != RANK_SCHEDULE_SHIFTED) {
    char list[RANK_SCHEDULE_MAX_LIST * 26];
    job_schedule_format(j, list, sizeof list);
    rc = rank_outfile_attr_str(f, job_schedule_key(j), list);
  }
  for (int i = 0; rc == SP_OK && i < s->o->nlora; i++) {
    char key[32], spec[sizeof s->o->lora[i].path + 64];
    snprintf(key, sizeof key, "lora%d", i);
    rank_lora_spec_format(&s->o->lora[i], spec, sizeof spec);
    rc = rank_outfile_attr_str(f, key, spec);
  }
  if (rc == SP_OK && s->o->nlora)
    rc = rank_outfile_attr_str(f, "lora_mode", rank_lora_mode_name(s->o->lora_mode));
  if (rc != SP_OK) {
    rank_outfile_abort(f);
    return rc;
  }
  /* The preview first: if it fails, no latents file claims success. */
  if (s->o->preview) {
    char png[JOB_PATH + 8];
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
static int save_noise(const char *path, const job_spec *j, const int64_t lat[4],
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

int job_read_inputs(const job_session *s, const job_spec *j, job_inputs *in) {
  if (s->w->rank != 0) return SP_OK;
  const wan_config *c = &rank_model_get_info(s->m)->config;
  int64_t lat[4];
  job_latent_shape(j, c, lat);
  int rc = job_read_context(j->cond, "context", c, &in->ctx[0]);
  if (rc == SP_OK && job_micro_batches(j->cfg) == 2) {
    int has = 0;
    rc = rank_tensor_exists(j->cond, "context_null", &has);
    if (rc == SP_OK && !has) {
      sp_log_error("%s: dataset 'context_null' (the encoded negative prompt) is missing; it "
                   "is needed for --cfg %g (or run with --cfg 1)",
                   j->cond, j->cfg);
      rc = SP_ERR_INPUT;
    }
    if (rc == SP_OK) rc = job_read_context(j->cond, "context_null", c, &in->ctx[1]);
  }
  if (rc == SP_OK && j->noise[0]) rc = job_read_latent(j->noise, "noise", c, lat, &in->noise);
  if (rc == SP_OK && !j->noise[0]) {
    in->noise.numel = lat[0] * lat[1] * lat[2] * lat[3];
    in->noise.data = sp_xmalloc((size_t)in->noise.numel * sizeof(float));
    noise_fill(j->seed, in->noise.data, (size_t)in->noise.numel);
  }
  if (rc == SP_OK && s->o->save_noise) rc = save_noise(s->o->save_noise, j, lat, in->noise.data);
  return rc;
}

void job_log(const job_session *s, const job_spec *j) {
  if (s->w->rank != 0) return;
  const wan_config *c = &rank_model_get_info(s->m)->config;
  int64_t lat[4];
  job_latent_shape(j, c, lat);
  char init[JOB_PATH + 16];
  if (j->noise[0])
    snprintf(init, sizeof init, "noise %s", j->noise);
  else
    snprintf(init, sizeof init, "seed %llu", (unsigned long long)j->seed);
  char sched[512] = "";
  if (j->sched != RANK_SCHEDULE_SHIFTED) {
    char list[480];
    job_schedule_format(j, list, sizeof list);
    snprintf(sched, sizeof sched, " (%s %s)", job_schedule_key(j), list);
  }
  sp_log_info("run: %s, %lld frames %lldx%lld -> latent [%lld, %lld, %lld, %lld] = %lld "
              "tokens, %d steps%s, %s, cfg %g, shift %g, %s, %d rank%s",
              s->o->model, (long long)j->frames, (long long)j->height, (long long)j->width,
              (long long)lat[0], (long long)lat[1], (long long)lat[2], (long long)lat[3],
              (long long)job_tokens(j, c), j->steps, sched, rank_sampler_kind_name(j->sampler),
              j->cfg, j->shift, init, s->w->size, s->w->size == 1 ? "" : "s");
}
