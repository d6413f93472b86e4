/* The steps every Wan VAE's decode driver takes (wan_vae_decode.h): the
 * first checks of the latents, the checks of the outputs, and the outputs
 * as a frame sink. */
#include <string.h>

#include "comm.h"
#include "log.h"
#include "wan_vae_decode.h"

int decode_check_latent_shape(const char *what, int ndim, const int64_t *dims, int64_t z_dim,
                              const char *noun, const char *source, const char *note) {
  if (ndim != 4) {
    sp_log_error("%s: latents have %d dimensions; the VAE takes 4 (channels, frames, height, "
                 "width)", what, ndim);
    return SP_ERR_INPUT;
  }
  if (dims[0] != z_dim) {
    sp_log_error("%s: latents have %lld channels; the %s %s takes %lld%s", what,
                 (long long)dims[0], noun, source, (long long)z_dim, note);
    return SP_ERR_INPUT;
  }
  return SP_OK;
}

/* Each output the options name: the video file, the frames directory. */
typedef struct decode_target {
  const char *path;
  int frames_dir;
} decode_target;

static int decode_targets(const decode_opts *o, decode_target t[2]) {
  int n = 0;
  if (o->out) t[n++] = (decode_target){o->out, 0};
  if (o->frames_dir) t[n++] = (decode_target){o->frames_dir, 1};
  return n;
}

int decode_check_video_outputs(const decode_opts *o, int64_t width, int64_t height) {
  decode_target t[2];
  const int n = decode_targets(o, t);
  if (n == 0) {
    sp_log_error("decode: no output: give -o FILE (.mp4 .mkv .mov .webm .h5) or --frames-dir "
                 "DIR");
    return SP_ERR_INPUT;
  }
  for (int i = 0; i < n; i++) {
    const int rc = video_out_check(t[i].path, t[i].frames_dir, width, height, o->fps);
    if (rc != SP_OK) return rc;
  }
  return SP_OK;
}

int decode_out_open(const decode_opts *o, const decode_stats *st, int64_t chunks,
                    decode_out *out) {
  decode_target tg[2];
  memset(out, 0, sizeof *out);
  out->chunks = chunks;
  out->frames = st->frames;
  out->quiet = o->quiet;
  out->n = decode_targets(o, tg);
  for (int i = 0; i < out->n; i++) {
    const int rc = video_out_open(tg[i].path, tg[i].frames_dir, st->frames, st->width,
                                  st->height, o->fps, &out->v[i]);
    if (rc != SP_OK) return decode_out_close(out, rc);
  }
  return SP_OK;
}

int decode_out_put(void *user, const float *frames, int64_t t0, int64_t n) {
  decode_out *k = user;
  for (int i = 0; i < k->n; i++) {
    const int rc = video_out_put(k->v[i], frames, n);
    if (rc != SP_OK) return rc;
  }
  k->chunk++;
  if (!k->quiet)
    sp_log_info("decode: latent frame %lld/%lld -> video frames %lld..%lld of %lld (%.1f s)",
                (long long)k->chunk, (long long)k->chunks, (long long)t0,
                (long long)(t0 + n - 1), (long long)k->frames, comm_now() - k->t0);
  return SP_OK;
}

int decode_out_close(decode_out *k, int rc) {
  for (int i = 0; i < k->n && rc == SP_OK; i++) {
    video_out *v = k->v[i];
    k->v[i] = NULL;
    rc = video_out_commit(v);
  }
  for (int i = 0; i < k->n; i++)
    if (k->v[i]) {
      video_out_abort(k->v[i]);
      k->v[i] = NULL;
    }
  k->n = 0;
  return rc;
}
