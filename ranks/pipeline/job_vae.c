/* The run's VAE, either family (see job_vae.h). */
#include "job_vae.h"

#include <stdio.h>
#include <stdlib.h>

#include "log.h"
#include "vae_file.h"
#include "wan_vae22_file.h"
#include "wan_vae22_gpu.h"
#include "wan_vae22_run.h"
#include "wan_vae_encode.h"
#include "wan_vae_gpu.h"

struct job_vae {
  vae_model *v21;          /* the Wan 2.1 VAE, or NULL */
  decode_weights *weights; /* its decoder's weights, read at the first video */
  wan_vae22_model *v22;    /* the Wan 2.2 VAE, or NULL */
  const char *spec;
  int verify;
};

int job_vae_open(const char *what, const char *spec, int verify, const wan_config *c,
                 const char *model, job_vae **out) {
  *out = NULL;
  job_vae *v = sp_xcalloc(1, sizeof *v);
  v->spec = spec;
  v->verify = verify;
  int64_t z = 0;
  int rc;
  if (wan_vae22_spec_is(spec)) {
    rc = wan_vae22_open(spec, verify, &v->v22);
    if (rc == SP_OK) z = wan_vae22_get_info(v->v22)->config.z_dim;
  } else {
    rc = vae_model_open(spec, verify, &v->v21);
    if (rc == SP_OK) z = vae_model_get_info(v->v21)->config.z_dim;
  }
  if (rc == SP_OK && z != c->out_dim) {
    sp_log_error("%s %s: the %s (arch %s) makes %lld latent channels; the model %s (%s) "
                 "samples %lld%s",
                 what, spec, job_vae_name(v), v->v22 ? WAN_VAE22_ARCH : WAN_VAE_ARCH,
                 (long long)z, model,
                 wan_task_name(wan_config_task(c)), (long long)c->out_dim,
                 c->out_dim == WAN_TI2V_CHANNELS ? ": a TI2V model takes the Wan 2.2 VAE "
                                                   "(synth:wan2.2-vae, or convert its file)"
                 : v->v22 ? ": the Wan 2.2 VAE is TI2V-5B's; this model takes the Wan 2.1 VAE"
                          : "");
    rc = SP_ERR_INPUT;
  }
  if (rc != SP_OK) {
    job_vae_close(v);
    return rc;
  }
  *out = v;
  return SP_OK;
}

void job_vae_close(job_vae *v) {
  if (!v) return;
  decode_weights_free(v->weights);
  vae_model_close(v->v21);
  wan_vae22_close(v->v22);
  free(v);
}

int job_vae_check_outputs(const job_vae *v, const decode_opts *d, const int64_t lat[4]) {
  return v->v22 ? wan_vae22_check_outputs(d, v->v22, lat) : decode_check_outputs(d, v->v21, lat);
}

int job_vae_decode(job_vae *v, const decode_opts *d, const float *latents, const int64_t lat[4],
                   decode_stats *st) {
  if (v->v22) return wan_vae22_decode_run(d, v->v22, latents, lat, st);
  int rc = v->weights ? SP_OK : decode_weights_read(v->v21, &v->weights);
  return rc == SP_OK ? decode_run_with(d, v->v21, v->weights, latents, lat, st) : rc;
}

uint64_t job_vae_decoder_bytes(const job_vae *v, wan_vae_gpu_precision p,
                               const plan_workload *wl) {
  int64_t fhw[3];
  plan_latent_grid(wl, fhw);
  const int64_t b =
      v->v22 ? wan_vae22_gpu_bytes(&wan_vae22_get_info(v->v22)->config, WAN_VAE22_DECODER,
                                   fhw[1], fhw[2], p)
             : wan_vae_gpu_bytes(&vae_model_get_info(v->v21)->config, fhw[1], fhw[2], p);
  return b > 0 ? (uint64_t)b : 0;
}

uint64_t job_vae_encoder_bytes(const job_vae *v, int64_t T, int64_t H, int64_t W,
                               wan_vae_gpu_precision p) {
  if (!job_vae_can_encode(v)) return 0;
  /* the Wan 2.2 encoder's layout holds one chunk (a 4-frame chunk or the
   * image alone) whatever T; the Wan 2.1 encoder's is laid for T */
  const int64_t b =
      v->v22 ? wan_vae22_gpu_bytes(&wan_vae22_get_info(v->v22)->config, WAN_VAE22_ENCODER, H, W, p)
             : wan_vae_gpu_enc_bytes(&vae_model_get_info(v->v21)->config, T, H, W, p);
  return b > 0 ? (uint64_t)b : 0;
}

const char *job_vae_name(const job_vae *v) { return v->v22 ? "Wan 2.2 VAE" : "Wan 2.1 VAE"; }

const model_file_id *job_vae_id(const job_vae *v) {
  return v->v22 ? &wan_vae22_get_info(v->v22)->id : &vae_model_get_info(v->v21)->id;
}

/* A Wan 2.2 VAE file holds both parts; a Wan 2.1 VAE file may hold the
 * decoder alone (vae_file.h). */
int job_vae_can_encode(const job_vae *v) {
  return v->v22 != NULL || vae_model_get_info(v->v21)->config.encoder;
}

int job_vae_encoder_check(const job_vae *v, const char *what) {
  if (job_vae_can_encode(v)) return SP_OK;
  sp_log_error("%s: --vae %s: " VAE_MODEL_NO_ENCODER "; or give the image encoded beforehand "
               "with --image-latents (image-latents=)",
               what, v->spec);
  return SP_ERR_INPUT;
}

/* The Wan 2.1 VAE's encode (wan_vae_encode.h): its checks of the video
 * and the device, then the encoder. */
static int encode21(job_vae *v, const vae_encode_opts *o, const char *what, const float *video,
                    const int64_t dims[4], float *latents, int64_t *bytes) {
  int rc = vae_encode_check(v->v21, what, dims);
  if (rc == SP_OK) rc = vae_encode_check_device(o, v->v21, dims);
  if (rc != SP_OK) return rc;
  vae_encode_stats st;
  rc = vae_encode_run(o, v->v21, video, dims, latents, &st);
  if (rc == SP_OK) {
    const int cuda = o->dev == RANK_DEVICE_CUDA;
    *bytes = cuda ? st.device_bytes : st.host_bytes;
    sp_log_info("%s: encoded by the Wan 2.1 VAE (%s) in %.2f s (weights %.2f s) to [%lld, %lld, "
                "%lld, %lld]",
                what, cuda ? "cuda" : "cpu", st.encode_s, st.read_s,
                (long long)vae_model_get_info(v->v21)->config.z_dim, (long long)st.frames,
                (long long)st.height, (long long)st.width);
  }
  return rc;
}

int job_vae_encode(job_vae *v, rank_device dev, wan_vae_gpu_precision prec, int quiet,
                   const char *what, const float *video, const int64_t dims[4], float *latents,
                   int64_t *bytes) {
  if (job_vae_encoder_check(v, what) != SP_OK) return SP_ERR_INPUT;
  if (v->v21) {
    const vae_encode_opts o = {.vae = v->spec, .verify = v->verify, .dev = dev,
                               .precision = prec, .quiet = quiet};
    return encode21(v, &o, what, video, dims, latents, bytes);
  }
  int rc = wan_vae22_check_video(v->v22, what, 4, dims, NULL);
  if (rc != SP_OK) return rc;
  const wan_vae22_encode_opts o = {.dev = dev, .precision = prec, .quiet = quiet};
  wan_vae22_encode_stats st;
  rc = wan_vae22_encode_run(&o, v->v22, video, dims, latents, &st);
  if (rc == SP_OK) {
    *bytes = dev == RANK_DEVICE_CUDA ? st.device_peak_bytes : st.host_bytes;
    sp_log_info("%s: encoded by the Wan 2.2 VAE (%s) in %.2f s (weights %.2f s) to [%lld, %lld, "
                "%lld, %lld]",
                what, dev == RANK_DEVICE_CUDA ? "cuda" : "cpu", st.encode_s, st.read_s,
                (long long)st.dims[0], (long long)st.dims[1], (long long)st.dims[2],
                (long long)st.dims[3]);
  }
  return rc;
}
