/* The image of an image-to-video job (see job_image.h): rank 0 reads it,
 * prepares it as the model's task publishes, encodes it (or reads its
 * latents) before the model is placed, and sets the job's size from it. */
#include "job_image.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image_prep.h"
#include "job_session_impl.h"
#include "log.h"

struct job_images {
  int njobs;
  rank_tensor *cond; /* (njobs): I2V y, TI2V z; numel 0: none */
};

void job_images_free(job_images *im) {
  if (!im) return;
  for (int i = 0; i < im->njobs; i++) rank_tensor_free(&im->cond[i]);
  free(im->cond);
  free(im);
}

void job_i2v_mask(int64_t frames, int64_t h, int64_t w, float *mask) {
  const int64_t F = 1 + (frames - 1) / 4, hw = h * w, rows = frames + 3;
  /* the per-frame mask with row 0 repeated: rows 0..3 are frame 0, row r
   * >= 4 is frame r - 3 */
  uint8_t *row = sp_xmalloc((size_t)rows);
  for (int64_t r = 0; r < rows; r++) row[r] = (r < 4 ? 0 : r - 3) == 0;
  for (int64_t c = 0; c < WAN_I2V_MASK_CHANNELS; c++)
    for (int64_t f = 0; f < F; f++) {
      const float v = row[4 * f + c] ? 1.0f : 0.0f;
      for (int64_t i = 0; i < hw; i++) mask[(c * F + f) * hw + i] = v;
    }
  free(row);
}

void job_i2v_condition(int64_t frames, int64_t channels, const float *latents, int64_t h,
                       int64_t w, float *y) {
  const int64_t n4 = WAN_I2V_MASK_CHANNELS * (1 + (frames - 1) / 4) * h * w;
  job_i2v_mask(frames, h, w, y);
  memcpy(y + n4, latents, (size_t)(n4 / WAN_I2V_MASK_CHANNELS * channels) * sizeof *y);
}

/* y of an I2V job of frames frames on a model of config c: latents
 * (out_dim, F, h, w) into out (4 + out_dim, F, h, w), allocated. */
static void i2v_condition(const wan_config *c, int64_t frames, const float *latents, int64_t h,
                          int64_t w, rank_tensor *out) {
  const int64_t F = 1 + (frames - 1) / 4;
  memset(out, 0, sizeof *out);
  out->ndim = 4;
  out->dims[0] = wan_cond_channels(c);
  out->dims[1] = F;
  out->dims[2] = h;
  out->dims[3] = w;
  out->numel = out->dims[0] * F * h * w;
  out->data = sp_xmalloc((size_t)out->numel * sizeof(float));
  job_i2v_condition(frames, c->out_dim, latents, h, w, out->data);
}

/* The latents --image-latents holds, against the model's task: I2V (out_dim,
 * F, h, w), TI2V (48, 1, h, w), h and w even (tokens of 2 x 2); on a
 * streamed line, the latent grid the stream was planned for (plan: the
 * command line's job; NULL elsewhere). */
typedef struct latents_want {
  const wan_config *c;
  const job_spec *j;
  const job_spec *plan;
} latents_want;

/* The image latents a stream planned for plan takes: I2V its latent,
 * TI2V its first latent frame. */
static void stream_grid(const wan_config *c, const job_spec *plan, int64_t want[4]) {
  job_latent_shape(plan, c, want);
  if (wan_config_task(c) == WAN_TASK_TI2V) want[1] = 1;
}

static int latents_shape_ok(const char *path, const char *name, int ndim, const int64_t *d,
                            void *ctx) {
  const latents_want *lw = ctx;
  const int ti2v = wan_config_task(lw->c) == WAN_TASK_TI2V;
  (void)ndim; /* the reader asked for 4 */
  if (d[0] != lw->c->out_dim || (ti2v && d[1] != 1) || d[1] < 1 || d[2] < 2 || d[3] < 2 ||
      d[2] % 2 || d[3] % 2) {
    sp_log_error("%s: dataset '%s' is [%lld, %lld, %lld, %lld]; the %s model needs [%lld, %s, "
                 "h, w] with h and w even",
                 path, name, (long long)d[0], (long long)d[1], (long long)d[2], (long long)d[3],
                 wan_task_name(wan_config_task(lw->c)), (long long)lw->c->out_dim,
                 ti2v ? "1" : "F");
    return SP_ERR_INPUT;
  }
  int64_t g[4];
  if (lw->plan) stream_grid(lw->c, lw->plan, g);
  if (lw->plan && (d[1] != g[1] || d[2] != g[2] || d[3] != g[3])) {
    sp_log_error("%s: dataset '%s' is [%lld, %lld, %lld, %lld]; the stream was planned for "
                 "--frames %lld --size %lldx%lld (the command line's) before its first line: a "
                 "streamed line's image latents must be [%lld, %lld, %lld, %lld]%s",
                 path, name, (long long)d[0], (long long)d[1], (long long)d[2], (long long)d[3],
                 (long long)lw->plan->frames, (long long)lw->plan->height,
                 (long long)lw->plan->width, (long long)g[0], (long long)g[1], (long long)g[2],
                 (long long)g[3], ti2v ? " (the first latent frame)" : "");
    return SP_ERR_INPUT;
  }
  if (!ti2v && lw->j->frames_given && 4 * (d[1] - 1) + 1 != lw->j->frames) {
    sp_log_error("%s: dataset '%s' holds %lld latent frames, %lld video frames; the job asks "
                 "for %lld frames (leave --frames out: the image latents give them)",
                 path, name, (long long)d[1], (long long)(4 * (d[1] - 1) + 1),
                 (long long)lw->j->frames);
    return SP_ERR_INPUT;
  }
  const int64_t vs = wan_vae_stride(lw->c);
  char what[JOB_PATH + 32];
  snprintf(what, sizeof what, "%s: dataset '%s'", path, name);
  return job_workload_check(what, ti2v ? lw->j->frames : 4 * (d[1] - 1) + 1, vs * d[2],
                            vs * d[3]);
}

/* An image encoded beforehand (--image-latents; what names it in
 * messages): its latents, the job's size and (I2V) frames from their
 * shape. */
static int read_latents(const job_session *s, job_spec *j, const char *what, rank_tensor *out) {
  const wan_config *c = &rank_model_get_info(s->m)->config;
  latents_want lw = {c, j, s->stream ? &s->params.job : NULL};
  rank_tensor t = {0};
  int rc = rank_tensor_read_as(what, j->image_latents, "latents", 4, latents_shape_ok, &lw, &t);
  if (rc != SP_OK) return rc;
  const int64_t vs = wan_vae_stride(c);
  j->height = vs * t.dims[2];
  j->width = vs * t.dims[3];
  if (wan_config_task(c) == WAN_TASK_TI2V) {
    *out = t;
    return SP_OK;
  }
  j->frames = 4 * (t.dims[1] - 1) + 1;
  i2v_condition(c, j->frames, t.data, t.dims[2], t.dims[3], out);
  rank_tensor_free(&t);
  return SP_OK;
}

/* I2V-A14B's video of image im on a latent grid of lat_h x lat_w (how it
 * was chosen: how, for the log line); see job_i2v_video. */
static int i2v_video_on(const char *what, const rank_image *im, int64_t lat_h, int64_t lat_w,
                        const char *how, int64_t frames, float **video, int64_t dims[4]) {
  const int64_t h = 8 * lat_h, w = 8 * lat_w, N = frames;
  if (job_workload_check(what, N, h, w) != SP_OK) return SP_ERR_INPUT;
  float *unit = sp_xmalloc((size_t)(3 * im->w * im->h) * sizeof *unit);
  rank_image_to_unit(im, unit);
  float *v = sp_xcalloc((size_t)(3 * N * h * w), sizeof *v); /* zeros: mid-grey */
  float *first = sp_xmalloc((size_t)(3 * h * w) * sizeof *first);
  rank_image_bicubic(unit, 3, im->h, im->w, first, h, w);
  for (int64_t ch = 0; ch < 3; ch++)
    memcpy(v + ch * N * h * w, first + ch * h * w, (size_t)(h * w) * sizeof *v);
  free(first);
  free(unit);
  sp_log_info("%s: %lldx%lld pixels, %s: the latent grid %lldx%lld, resized (bicubic) to "
              "%lldx%lld, then %lld zero frames",
              what, (long long)im->h, (long long)im->w, how, (long long)lat_h, (long long)lat_w,
              (long long)h, (long long)w, (long long)(N - 1));
  *video = v;
  dims[0] = 3;
  dims[1] = N;
  dims[2] = h;
  dims[3] = w;
  return SP_OK;
}

int job_i2v_video(const char *what, const rank_image *im, int64_t max_area, int64_t frames,
                  float **video, int64_t dims[4]) {
  int64_t lat_h, lat_w;
  if (rank_image_i2v_grid(what, im->h, im->w, max_area, &lat_h, &lat_w) != SP_OK)
    return SP_ERR_INPUT;
  char how[64];
  snprintf(how, sizeof how, "within max-area %lld", (long long)max_area);
  return i2v_video_on(what, im, lat_h, lat_w, how, frames, video, dims);
}

/* TI2V-5B's video (3, 1, oh, ow): the size rule of p (or p's size), LANCZOS
 * and the crop, then [-1, 1] (I2V.md "TI2V-5B" step 1), checked against
 * p's frames. */
static int ti2v_video(const char *what, const rank_image *im, const job_image_prep *p,
                      float **video, int64_t dims[4]) {
  rank_image r;
  int rc = p->height ? rank_image_ti2v_cover(what, im, p->width, p->height, &r)
                     : rank_image_ti2v_prepare(what, im, p->max_area, &r);
  if (rc != SP_OK) return rc;
  if (job_workload_check(what, p->frames, r.h, r.w) != SP_OK) {
    rank_image_free(&r);
    return SP_ERR_INPUT;
  }
  *video = sp_xmalloc((size_t)(3 * r.w * r.h) * sizeof **video);
  rank_image_to_unit(&r, *video);
  char how[64];
  if (p->height)
    snprintf(how, sizeof how, "to the size given");
  else
    snprintf(how, sizeof how, "within max-area %lld", (long long)p->max_area);
  sp_log_info("%s: %lldx%lld pixels, %s: resized (LANCZOS) and cropped to %lldx%lld", what,
              (long long)im->h, (long long)im->w, how, (long long)r.h, (long long)r.w);
  dims[0] = 3;
  dims[1] = 1;
  dims[2] = r.h;
  dims[3] = r.w;
  rank_image_free(&r);
  return SP_OK;
}

int job_image_video(const wan_config *c, const char *what, const rank_image *im,
                    const job_image_prep *p, float **video, int64_t dims[4]) {
  job_image_prep q = *p;
  if (!q.height && !q.max_area) q.max_area = wan_task_defaults_of(wan_config_task(c))->max_area;
  if (wan_config_task(c) == WAN_TASK_TI2V) return ti2v_video(what, im, &q, video, dims);
  if (!q.height) return job_i2v_video(what, im, q.max_area, q.frames, video, dims);
  return i2v_video_on(what, im, q.height / 8, q.width / 8, "to the size given", q.frames, video,
                      dims);
}

/* The image's size rule of the model's task: into (a, b) the I2V latent
 * grid (rows, columns), or the TI2V video's (width, height). */
static int size_rule(const wan_config *c, const char *what, const rank_image *im,
                     int64_t area, int64_t *a, int64_t *b) {
  return wan_config_task(c) == WAN_TASK_I2V ? rank_image_i2v_grid(what, im->h, im->w, area, a, b)
                                            : rank_image_ti2v_size(what, im->w, im->h, area, a, b);
}

static int64_t area_of(const wan_config *c, const job_spec *j) {
  return j->max_area ? j->max_area : wan_task_defaults_of(wan_config_task(c))->max_area;
}

int job_image_size(const wan_config *c, const char *what, job_spec *j) {
  if (wan_config_task(c) == WAN_TASK_T2V) {
    sp_log_error("%s: a text-to-video model takes no image", what);
    return SP_ERR_INPUT;
  }
  rank_image im = {0};
  int rc = rank_image_read(what, j->image, &im);
  int64_t a = 0, b = 0;
  if (rc == SP_OK) rc = size_rule(c, what, &im, area_of(c, j), &a, &b);
  rank_image_free(&im);
  if (rc != SP_OK) return rc;
  const int i2v = wan_config_task(c) == WAN_TASK_I2V;
  j->height = i2v ? 8 * a : b;
  j->width = i2v ? 8 * b : a;
  return job_workload_check(what, j->frames, j->height, j->width);
}

int job_image_cost_of(const char *vae, const wan_config *c, const char *model,
                      const job_spec *j, wan_vae_gpu_precision p, job_image_cost *out) {
  job_vae *v = NULL;
  memset(out, 0, sizeof *out);
  int rc = job_vae_open("--vae", vae, 0, c, model, &v);
  if (rc != SP_OK) return rc;
  const int64_t T = wan_config_task(c) == WAN_TASK_I2V ? j->frames : 1;
  const int64_t vs = wan_vae_stride(c), F = 1 + (T - 1) / 4;
  out->vae = job_vae_name(v);
  out->can_encode = job_vae_can_encode(v);
  out->frames = T;
  out->height = j->height;
  out->width = j->width;
  out->device_bytes = job_vae_encoder_bytes(v, T, j->height, j->width, p);
  out->host_bytes = (uint64_t)(3 * T * j->height * j->width) * 4 +
                    (uint64_t)(c->out_dim * F * (j->height / vs) * (j->width / vs)) * 4;
  job_vae_close(v);
  return SP_OK;
}

/* An image (--image): read, sized, prepared, encoded; the job's size set.
 * The image's own checks (its file, its size within the area) come before
 * the encoder's. */
static int encode_image(const job_session *s, job_spec *j, const char *what, rank_tensor *out) {
  const wan_config *c = &rank_model_get_info(s->m)->config;
  const wan_task task = wan_config_task(c);
  rank_image im = {0};
  int rc = rank_image_read(what, j->image, &im);
  if (rc != SP_OK) return rc;
  const int64_t area = area_of(c, j);
  int64_t a, b;
  rc = size_rule(c, what, &im, area, &a, &b);
  if (rc == SP_OK) rc = job_vae_encoder_check(s->vae, what);
  if (rc != SP_OK) {
    rank_image_free(&im);
    return rc;
  }
  float *video = NULL;
  int64_t dims[4];
  const job_image_prep prep = {.max_area = area, .frames = j->frames};
  rc = job_image_video(c, what, &im, &prep, &video, dims);
  rank_image_free(&im);
  if (rc != SP_OK) return rc;
  j->height = dims[2];
  j->width = dims[3];
  const int64_t vs = wan_vae_stride(c), F = 1 + (dims[1] - 1) / 4;
  const int64_t h = dims[2] / vs, w = dims[3] / vs;
  float *lat = sp_xmalloc((size_t)(c->out_dim * F * h * w) * sizeof *lat);
  int64_t bytes = 0;
  rc = job_vae_encode(s->vae, s->dev, s->params.vae_precision, s->params.quiet, what, video, dims,
                      lat, &bytes);
  free(video);
  if (rc == SP_OK && task == WAN_TASK_I2V) {
    i2v_condition(c, dims[1], lat, h, w, out);
  } else if (rc == SP_OK) {
    *out = (rank_tensor){.ndim = 4, .dims = {c->out_dim, 1, h, w}, .numel = c->out_dim * h * w,
                         .data = lat};
    lat = NULL;
  }
  free(lat);
  return rc;
}

/* How a message names job j's image: "--image x.png", "jobs.txt:3:
 * image=x.png", "stdin:3: image-latents=x.h5". */
static void image_what(const job_session *s, const job_spec *j, char *buf, size_t n) {
  const int latents = !j->image[0];
  if (s->single)
    snprintf(buf, n, "--%s %s", latents ? "image-latents" : "image",
             latents ? j->image_latents : j->image);
  else
    snprintf(buf, n, "%s:%d: %s=%s", s->stream ? job_reader_name(s->reader) : s->params.jobs,
             j->line, latents ? "image-latents" : "image", latents ? j->image_latents : j->image);
}

/* What every rank learns of a job after its image: its size, and whether
 * it was refused. */
typedef struct image_fact {
  int64_t frames, height, width;
  int32_t bad;
} image_fact;

int job_images_prepare(job_session *s) {
  int any = 0;
  for (int i = 0; i < s->njobs; i++)
    any |= !s->jobs[i].bad && (s->jobs[i].image[0] || s->jobs[i].image_latents[0]);
  if (!any) return SP_OK; /* the same list on every rank: the same verdict */
  const comm_world *w = s->w;
  comm_set_phase("preparing the images");
  image_fact *f = sp_xcalloc((size_t)s->njobs, sizeof *f);
  int rc = SP_OK;
  if (w->rank == 0) {
    job_images *im = sp_xcalloc(1, sizeof *im);
    im->njobs = s->njobs;
    im->cond = sp_xcalloc((size_t)s->njobs, sizeof *im->cond);
    s->images = im;
    for (int i = 0; i < s->njobs && rc == SP_OK; i++) {
      job_spec *j = &s->jobs[i];
      if (j->bad || (!j->image[0] && !j->image_latents[0])) continue;
      char what[JOB_PATH + 64];
      image_what(s, j, what, sizeof what);
      const int r = j->image[0] ? encode_image(s, j, what, &im->cond[i])
                                : read_latents(s, j, what, &im->cond[i]);
      f[i].bad = r != SP_OK;
      if (r != SP_OK && (s->single || r == SP_ERR_RUNTIME)) rc = r;
    }
    for (int i = 0; i < s->njobs; i++)
      f[i] = (image_fact){s->jobs[i].frames, s->jobs[i].height, s->jobs[i].width, f[i].bad};
  }
  rc = job_phase(w, rc, "preparing the images");
  if (rc == SP_OK) comm_bcast(w, f, (size_t)s->njobs * sizeof *f, 0);
  for (int i = 0; rc == SP_OK && i < s->njobs; i++) {
    job_spec *j = &s->jobs[i];
    j->frames = f[i].frames;
    j->height = f[i].height;
    j->width = f[i].width;
    if (f[i].bad) job_spec_mark_bad(j);
  }
  free(f);
  return rc;
}

/* image= on a streamed line, refused: why, and the one command that makes
 * the latents to give instead (image-latents=) for the stream's plan:
 * encode --vae --model prepares the image as run --image does, resized to
 * the planned size. */
static void refuse_streamed_image(const job_session *s, const job_spec *j, const char *what) {
  const wan_config *c = &rank_model_get_info(s->m)->config;
  const job_spec *p = &s->params.job;
  const int ti2v = wan_config_task(c) == WAN_TASK_TI2V;
  int64_t g[4];
  stream_grid(c, p, g);
  char frames[48] = "";
  if (!ti2v) snprintf(frames, sizeof frames, " --frames %lld", (long long)p->frames);
  sp_log_error("%s: refused on a streamed line (the VAE encoder runs on rank 0 before the model "
               "is placed, and a streamed line comes after): encode it beforehand with "
               "'staticpipe encode --vae %s --model %s --image %s%s --size %lldx%lld -o L.h5' "
               "(%s; the image prepared as run --image prepares it, resized to the stream's "
               "planned size: latents [%lld, %lld, %lld, %lld]) and give image-latents=L.h5",
               what, s->params.vae ? s->params.vae : "VAE", s->params.model, j->image, frames,
               (long long)p->height, (long long)p->width,
               ti2v ? "VAE: the Wan 2.2 VAE" : "VAE: the Wan 2.1 VAE with its encoder",
               (long long)g[0], (long long)g[1], (long long)g[2], (long long)g[3]);
}

int job_image_stream(job_session *s, job_spec *j) {
  if (!j->image[0] && !j->image_latents[0]) return SP_OK;
  char what[JOB_PATH + 64];
  image_what(s, j, what, sizeof what);
  if (j->image[0]) {
    refuse_streamed_image(s, j, what);
    return SP_ERR_INPUT;
  }
  job_images *im = sp_xcalloc(1, sizeof *im);
  im->njobs = 1;
  im->cond = sp_xcalloc(1, sizeof *im->cond);
  job_images_free(s->images);
  s->images = im;
  return read_latents(s, j, what, &im->cond[0]);
}

int job_image_inputs(const job_session *s, const job_spec *j, job_inputs *in) {
  const job_images *im = s->images;
  const long i = j - s->jobs;
  if (!im || i < 0 || i >= im->njobs || im->cond[i].numel == 0) {
    sp_log_error("internal: job %ld's image was not prepared", i + 1);
    return SP_ERR_RUNTIME;
  }
  const rank_tensor *t = &im->cond[i];
  in->cond = *t;
  in->cond.data = sp_xmalloc((size_t)t->numel * sizeof(float));
  memcpy(in->cond.data, t->data, (size_t)t->numel * sizeof(float));
  return SP_OK;
}
