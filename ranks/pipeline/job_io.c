/* A job's inputs (read and checked on rank 0 against the model) and its
 * outputs: latents written, video outputs checked before any work (see
 * job_io.h and job_session_impl.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job_session_impl.h"
#include "latent_file.h"
#include "log.h"
#include "noise.h"
#include "preview.h"

void job_inputs_free(job_inputs *in) {
  rank_tensor_free(&in->ctx[0]);
  rank_tensor_free(&in->ctx[1]);
  rank_tensor_free(&in->noise);
  rank_tensor_free(&in->cond);
}

/* The context's shape against the model: [L, text_dim], L <= text_len. */
static int context_shape_ok(const char *path, const char *name, int ndim, const int64_t *d,
                            void *ctx) {
  const wan_config *c = ctx;
  (void)ndim; /* the reader asked for 2 */
  if (d[1] != c->text_dim || d[0] > c->text_len) {
    sp_log_error("%s: dataset '%s' is [%lld, %lld]; the model needs [L, %lld] with L <= %lld",
                 path, name, (long long)d[0], (long long)d[1], (long long)c->text_dim,
                 (long long)c->text_len);
    return SP_ERR_INPUT;
  }
  return SP_OK;
}

int job_read_context(const char *path, const char *name, const wan_config *c, rank_tensor *out) {
  return rank_tensor_read_checked(path, name, 2, context_shape_ok, (void *)c, out);
}

/* What a latent must be: the run's shape when one is given, the model's
 * channels and patch multiples always. */
typedef struct latent_want {
  const wan_config *c;
  const int64_t *want; /* [4] or NULL */
} latent_want;

static int latent_shape_ok(const char *path, const char *name, int ndim, const int64_t *d,
                           void *ctx) {
  const latent_want *lw = ctx;
  const int64_t *want = lw->want;
  const wan_config *c = lw->c;
  (void)ndim; /* the readers ask for 4 */
  if (want && (d[0] != want[0] || d[1] != want[1] || d[2] != want[2] || d[3] != want[3])) {
    sp_log_error("%s: dataset '%s' is [%lld, %lld, %lld, %lld]; this run needs [%lld, %lld, "
                 "%lld, %lld]",
                 path, name, (long long)d[0], (long long)d[1], (long long)d[2], (long long)d[3],
                 (long long)want[0], (long long)want[1], (long long)want[2], (long long)want[3]);
    return SP_ERR_INPUT;
  }
  /* The model's input (forward: in_dim channels), or the run's latent. */
  const int64_t ch = want ? want[0] : c->in_dim;
  if (d[0] != ch || d[2] % c->patch[1] || d[3] % c->patch[2] || d[1] % c->patch[0]) {
    sp_log_error("%s: dataset '%s' is [%lld, %lld, %lld, %lld]; the model needs [%lld, F, H, W] "
                 "with H and W even",
                 path, name, (long long)d[0], (long long)d[1], (long long)d[2], (long long)d[3],
                 (long long)ch);
    return SP_ERR_INPUT;
  }
  /* The video it stands for, before anything is allocated for it: the
   * workload rule of every command (job_workload_check). */
  char what[JOB_PATH + 32];
  const int64_t vs = wan_vae_stride(c);
  snprintf(what, sizeof what, "%s: dataset '%s'", path, name);
  return job_workload_check(what, 4 * (d[1] - 1) + 1, vs * d[2], vs * d[3]);
}

int job_read_latent(const char *path, const char *name, const wan_config *c,
                    const int64_t *want, rank_tensor *out) {
  latent_want lw = {c, want};
  /* A ComfyUI .latent holds one tensor under its own name, whatever name is
   * asked for; its data must lie inside the file, so its size is bounded by
   * the file's and the shape is checked after reading. */
  if (!rank_latent_path_is(path))
    return rank_tensor_read_checked(path, name, 4, latent_shape_ok, &lw, out);
  int rc = rank_latent_read(path, out);
  if (rc != SP_OK) return rc;
  if (latent_shape_ok(path, "latent_tensor", 4, out->dims, &lw) != SP_OK) {
    rank_tensor_free(out);
    return SP_ERR_INPUT;
  }
  return SP_OK;
}

/* The settings that produced a job's latents, written once here: as typed
 * attributes of an HDF5 output, as text metadata of a .latent one. */
enum { SETTING_STR, SETTING_I64, SETTING_F64, SETTINGS_MAX = 20 + RANK_LORA_MAX };
typedef struct job_setting {
  const char *key;
  int kind;
  const char *s;
  int64_t i;
  double d;
  char text[64]; /* the number as text (SETTING_I64, SETTING_F64) */
} job_setting;

/* The text the settings point into. */
typedef struct job_settings_text {
  char size[64];
  char schedule[RANK_SCHEDULE_MAX_LIST * 26];
  char lora_key[RANK_LORA_MAX][16];
  char lora[RANK_LORA_MAX][sizeof(((rank_lora_spec *)0)->path) + 64];
  char cache[64];
} job_settings_text;

static int job_settings(const job_session *s, const job_spec *j, job_settings_text *t,
                        job_setting *out) {
  const rank_model_info *mi = rank_model_get_info(s->m);
  snprintf(t->size, sizeof t->size, "%lldx%lld", (long long)j->height, (long long)j->width);
  char *size = t->size;
  int n = 0;
  if (j->noise[0])
    out[n++] = (job_setting){.key = "noise_file", .kind = SETTING_STR, .s = j->noise};
  else
    out[n++] = (job_setting){.key = "seed", .kind = SETTING_I64, .i = (int64_t)j->seed};
  out[n++] = (job_setting){.key = "steps", .kind = SETTING_I64, .i = j->steps};
  out[n++] = (job_setting){.key = "cfg", .kind = SETTING_F64, .d = j->cfg};
  if (mi->experts.count > 1) { /* cfg is then the high-noise expert's */
    out[n++] = (job_setting){.key = "cfg_low", .kind = SETTING_F64, .d = j->cfg_low};
    out[n++] = (job_setting){.key = "boundary", .kind = SETTING_F64, .d = j->boundary};
  }
  out[n++] = (job_setting){.key = "shift", .kind = SETTING_F64, .d = j->shift};
  out[n++] = (job_setting){.key = "sampler", .kind = SETTING_STR,
                           .s = rank_sampler_kind_name(j->sampler)};
  out[n++] = (job_setting){.key = "frames", .kind = SETTING_I64, .i = j->frames};
  if (j->image[0] || j->image_latents[0]) /* the size is the image's */
    out[n++] = (job_setting){.key = j->image[0] ? "image" : "image_latents",
                             .kind = SETTING_STR, .s = j->image[0] ? j->image : j->image_latents};
  if (j->image[0])
    out[n++] = (job_setting){.key = "max_area", .kind = SETTING_I64,
                             .i = j->max_area ? j->max_area
                                              : wan_task_defaults_of(wan_config_task(
                                                    &mi->config))->max_area};
  out[n++] = (job_setting){.key = "size", .kind = SETTING_STR, .s = size};
  out[n++] = (job_setting){.key = "model", .kind = SETTING_STR, .s = mi->id.source};
  out[n++] = (job_setting){.key = "model_checksum", .kind = SETTING_STR, .s = mi->id.checksum};
  const wan_precision prec = job_precision(&s->params, mi);
  if (prec != WAN_PRECISION_BF16) /* MODEL.md "fp8 weights", "int8 weights" (bf16: none) */
    out[n++] = (job_setting){.key = "precision", .kind = SETTING_STR,
                             .s = wan_precision_name(prec)};
  if (s->params.fp8_fast_accum) /* --fp8-accum fast changes the latents (full: none) */
    out[n++] = (job_setting){.key = "fp8_accum", .kind = SETTING_STR, .s = "fast"};
  if (j->sched != RANK_SCHEDULE_SHIFTED) {
    job_schedule_format(j, t->schedule, sizeof t->schedule);
    out[n++] = (job_setting){.key = job_schedule_key(j), .kind = SETTING_STR, .s = t->schedule};
  }
  rank_lora_spec lora[RANK_LORA_MAX];
  const int nlora = job_spec_loras(&s->params, j, lora);
  for (int i = 0; i < nlora; i++) {
    snprintf(t->lora_key[i], sizeof t->lora_key[i], "lora%d", i);
    rank_lora_spec_format(&lora[i], t->lora[i], sizeof t->lora[i]);
    out[n++] = (job_setting){.key = t->lora_key[i], .kind = SETTING_STR, .s = t->lora[i]};
  }
  if (nlora)
    out[n++] = (job_setting){.key = "lora_mode", .kind = SETTING_STR,
                             .s = rank_lora_mode_name(s->lora_mode)};
  if (j->cache.method != RANK_CACHE_OFF) { /* step caching changes the latents */
    rank_cache_format(&j->cache, t->cache, sizeof t->cache);
    out[n++] = (job_setting){.key = "cache", .kind = SETTING_STR, .s = t->cache};
  }
  for (int k = 0; k < n; k++) {
    if (out[k].kind == SETTING_I64)
      snprintf(out[k].text, sizeof out[k].text, "%lld", (long long)out[k].i);
    else if (out[k].kind == SETTING_F64)
      snprintf(out[k].text, sizeof out[k].text, "%.17g", out[k].d);
    if (out[k].kind != SETTING_STR) out[k].s = out[k].text;
  }
  return n;
}

/* The latents as HDF5: dataset 'latents' with the settings as attributes. */
static int write_latents_h5(const char *path, const job_setting *set, int n, const int64_t *lat,
                            const float *latents) {
  rank_outfile *f = NULL;
  int rc = rank_outfile_open(path, &f);
  if (rc != SP_OK) return rc;
  rc = rank_outfile_put(f, "latents", 4, lat, latents);
  for (int k = 0; k < n && rc == SP_OK; k++) {
    if (set[k].kind == SETTING_I64)
      rc = rank_outfile_attr_i64(f, set[k].key, set[k].i);
    else if (set[k].kind == SETTING_F64)
      rc = rank_outfile_attr_f64(f, set[k].key, set[k].d);
    else
      rc = rank_outfile_attr_str(f, set[k].key, set[k].s);
  }
  if (rc != SP_OK) {
    rank_outfile_abort(f);
    return rc;
  }
  return rank_outfile_commit(f);
}

/* The latents (HDF5, or a ComfyUI .latent file by the extension), then
 * the preview: the latents are what the run is for, so they are committed
 * first, and a failed preview (reported) leaves them in place. */
int job_write_output(const job_session *s, const job_spec *j, const int64_t *lat,
                     const float *latents) {
  job_setting set[SETTINGS_MAX];
  job_settings_text text;
  const int n = job_settings(s, j, &text, set);
  int rc;
  if (!j->out[0]) return SP_OK; /* -o named the video: no latents file (job_spec_video_out) */
  if (rank_latent_path_is(j->out)) {
    rank_latent_meta meta[SETTINGS_MAX + 1];
    meta[0] = (rank_latent_meta){"format", "staticpipe"};
    for (int k = 0; k < n; k++) meta[k + 1] = (rank_latent_meta){set[k].key, set[k].s};
    rc = rank_latent_write(j->out, lat, latents, meta, n + 1);
  } else {
    rc = write_latents_h5(j->out, set, n, lat, latents);
  }
  if (rc != SP_OK || !s->params.preview) return rc;
  char png[JOB_PATH + 8];
  snprintf(png, sizeof png, "%s.png", j->out);
  if (lat[0] != RANK_PREVIEW_CHANNELS) { /* the colours are the Wan 2.1 latents' */
    sp_log_info("run: no preview of %lld-channel latents (the preview's colours are the Wan 2.1 "
                "VAE's 16 channels'): %s not written",
                (long long)lat[0], png);
    return SP_OK;
  }
  return rank_preview_write_png(png, latents, lat[0], lat[1], lat[2], lat[3]);
}

/* --save-noise: the initial latent, so another implementation (or --noise)
 * can start from exactly the same noise (HDF5, or a .latent by the
 * extension). */
static int save_noise(const char *path, const job_spec *j, const int64_t lat[4],
                      const float *noise) {
  if (rank_latent_path_is(path)) {
    /* As --noise reads it back: the same noise within float32 rounding. */
    char seed[32];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)j->seed);
    const rank_latent_meta meta[] = {{"format", "staticpipe"}, {"seed", seed}};
    return rank_latent_write(path, lat, noise, meta, j->noise[0] ? 1 : 2);
  }
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
  /* A prompt's contexts were encoded in the run (job_prompt.c). */
  int rc = j->prompt[0] ? job_prompt_inputs(s, j, in)
                        : job_read_context(j->cond, "context", c, &in->ctx[0]);
  if (rc == SP_OK && !j->prompt[0] && job_micro_batches(j) == 2) {
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
  if (rc == SP_OK && s->params.save_noise)
    rc = save_noise(s->params.save_noise, j, lat, in->noise.data);
  if (rc == SP_OK && (j->image[0] || j->image_latents[0])) rc = job_image_inputs(s, j, in);
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
  char cfg[96];
  if (rank_model_get_info(s->m)->experts.count > 1)
    snprintf(cfg, sizeof cfg, "cfg %g,%g (high,low), boundary %g", j->cfg, j->cfg_low,
             j->boundary);
  else
    snprintf(cfg, sizeof cfg, "cfg %g", j->cfg);
  char image[JOB_PATH + 32] = "";
  if (j->image[0] || j->image_latents[0])
    snprintf(image, sizeof image, ", %s %s", j->image[0] ? "image" : "image latents",
             j->image[0] ? j->image : j->image_latents);
  char cache[80] = "";
  if (j->cache.method != RANK_CACHE_OFF) {
    char spec[64];
    rank_cache_format(&j->cache, spec, sizeof spec);
    snprintf(cache, sizeof cache, ", cache %s", spec);
  }
  const wan_precision prec = job_precision(&s->params, rank_model_get_info(s->m));
  sp_log_info("run: %s%s%s%s, %lld frames %lldx%lld -> latent [%lld, %lld, %lld, %lld] = %lld "
              "tokens, %d steps%s, %s, %s, shift %g, %s%s%s, %d rank%s",
              s->params.model, prec != WAN_PRECISION_BF16 ? " in " : "",
              prec != WAN_PRECISION_BF16 ? wan_precision_name(prec) : "",
              s->params.fp8_fast_accum ? " (fast accumulation)" : "",
              (long long)j->frames, (long long)j->height, (long long)j->width,
              (long long)lat[0], (long long)lat[1], (long long)lat[2], (long long)lat[3],
              (long long)job_tokens(j, c), j->steps, sched, rank_sampler_kind_name(j->sampler),
              cfg, j->shift, init, image, cache, s->w->size, s->w->size == 1 ? "" : "s");
}

decode_opts job_decode_opts(const job_session *s, const job_spec *j) {
  return (decode_opts){.vae = s->params.vae, .verify = s->params.verify, .dev = s->dev,
                       .precision = s->params.vae_precision,
                       .out = j->video, .fps = j->fps, .quiet = s->params.quiet};
}

int job_check_videos(job_session *s) {
  const comm_world *w = s->w;
  const int last = w->size - 1;
  int any = 0;
  uint8_t *bad = sp_xcalloc((size_t)s->njobs, 1);
  for (int i = 0; i < s->njobs; i++) {
    job_spec *j = &s->jobs[i];
    any |= !j->bad && j->image[0]; /* --vae encodes it */
    if (j->bad || !j->video[0]) continue;
    any = 1;
    if (!s->vae) {
      if (w->rank == 0)
        sp_log_error("%s:%d: video=%s needs --vae (the VAE decoder)", s->params.jobs, j->line,
                     j->video);
      bad[i] = 1;
    } else if (w->rank == last) {
      int64_t lat[4];
      job_latent_shape(j, &rank_model_get_info(s->m)->config, lat);
      decode_opts d = job_decode_opts(s, j);
      bad[i] = job_vae_check_outputs(s->vae, &d, lat) != SP_OK;
    }
  }
  comm_bcast(w, bad, (size_t)s->njobs, last);
  int nbad = 0;
  for (int i = 0; i < s->njobs; i++) {
    if (bad[i]) s->jobs[i].bad = 1;
    nbad += bad[i];
  }
  free(bad);
  if (s->vae && !any && !s->stream && w->rank == 0)
    sp_log_warn("run: --vae is given but no job has video= or image=: nothing to decode or "
                "encode");
  return s->single && nbad ? SP_ERR_INPUT : SP_OK;
}
