/* staticpipe encode --vae: an image or a video to latents through the Wan
 * 2.1 VAE encoder (ranks/nets/wan_vae/wan_vae_encode.h); with --model, an
 * image prepared and encoded exactly as run --image does for that
 * image-to-video model (job_image.h: the same functions, either VAE
 * family through job_vae.h), into the latents run --image-latents takes.
 * `encode` is one verb for both encoders: cmd_encode.c hands its
 * arguments here when they name --vae, and keeps --t5's prompts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"
#include "commands.h"
#include "image_in.h"
#include "job_image.h"
#include "job_session.h"
#include "job_vae.h"
#include "log.h"
#include "model_file.h"
#include "path_check.h"
#include "tensor_io.h"
#include "video_in.h"
#include "video_out.h"
#include "wan_vae22_file.h"
#include "wan_vae_encode.h"

#define VIDEO_MAX_BYTES ((int64_t)16 << 30) /* 8-bit RGB a decoded --video may take */

enum { OPT_IMAGE = JOB_OPT_COUNT, OPT_VIDEO, OPT_FRAMES, OPT_OUT, OPT_HELP,
       OPT_VAE = JOB_OPT_VAE, OPT_VAE_PRECISION = JOB_OPT_VAE_PRECISION,
       OPT_MODEL = JOB_OPT_MODEL, OPT_MAX_AREA = JOB_OPT_MAX_AREA, OPT_SIZE = JOB_OPT_SIZE };

/* encode --vae takes the job options that say how to run the VAE (--vae
 * and --vae-precision with the encoder's help, --device, --no-verify,
 * --quiet); its input and output are its own. */
static void encode_vae_table(cli_opts *t) {
  static const int ids[] = {JOB_OPT_DEVICE, JOB_OPT_NO_VERIFY, JOB_OPT_QUIET};
  static const job_option own[] = {
      {OPT_VAE, "vae", 0, "VAE", NULL, 0,
       "the VAE, holding the encoder: a file from convert or\n"
       "init --encoder, or synth:wan2.1-vae[:SEED],\n"
       "synth:wan2.1-vae-tiny[:SEED] (required); with a TI2V\n"
       "--model, the Wan 2.2 VAE (its file, synth:wan2.2-vae,\n"
       "synth:wan2.2-vae-tiny)"},
      {OPT_VAE_PRECISION, "vae-precision", 0, "P", "bf16", 0,
       "CUDA encoder: bf16 (weights and activations, fp32\n"
       "accumulation), fp32, or tf32: fp32 with the convolutions\n"
       "and the attention's GEMMs on the TF32 tensor cores\n"
       "(PyTorch's default for convolutions); the CPU encoder is\n"
       "fp32"},
      {OPT_IMAGE, "image", 0, "FILE", NULL, 0,
       "a PNG or JPEG image (8 bits per channel): one frame\n"
       "[3, 1, H, W] in [-1, 1] (level / 255, minus 0.5, over\n"
       "0.5, as the published pipelines read an image)"},
      {OPT_VIDEO, "video", 0, "FILE", NULL, 0,
       ".h5 with dataset 'video' float32 [3, T, H, W] in\n"
       "[-1, 1] (what decode writes), or a video file (.mp4\n"
       ".mkv .mov .webm: any FFmpeg decodes), its frames as\n"
       "8-bit RGB to [-1, 1] as an image's"},
      {OPT_FRAMES, "frames", 'f', "N", NULL, 0,
       "encode the first N frames of --video (N = 1 + 4k);\n"
       "without it, the video's frame count must be 1 + 4k;\n"
       "with an I2V --model, run's --frames (default 81): the\n"
       "image, then N - 1 zero frames"},
      {OPT_MODEL, "model", 'm', "MODEL", NULL, 0,
       "an image-to-video model (file or synth:PRESET): --image\n"
       "prepared as run --image prepares it for the model's task\n"
       "(I2V-A14B: the latent grid of --max-area, bicubic, then\n"
       "--frames - 1 zero frames; TI2V-5B: the size rule,\n"
       "LANCZOS, the centre crop, the image alone), and -o the\n"
       "latents run --image-latents (image-latents=) takes"},
      {OPT_MAX_AREA, "max-area", 0, "A", NULL, 0,
       "with --model: run's --max-area, an integer or HxW;\n"
       "default the model's (I2V-A14B 720*1280, TI2V-5B\n"
       "704*1280)"},
      {OPT_SIZE, "size", 's', "HxW", NULL, 0,
       "with --model, instead of --max-area: the video's size\n"
       "(a stream's planned --size; I2V multiples of 16, TI2V\n"
       "of 32): the image resized to it (TI2V: to cover it, the\n"
       "centre cropped)"},
      {OPT_OUT, "out", 'o', "FILE", NULL, 0,
       "HDF5 file with dataset 'latents' float32 [16, F, H/8,\n"
       "W/8], F = 1 + (T - 1) / 4, what decode and run read;\n"
       "written atomically (required)"},
      {OPT_HELP, "help", 'h', NULL, NULL, 0, "this text"},
  };
  cli_opts_build(t, ids, (int)(sizeof ids / sizeof ids[0]), own, (int)(sizeof own / sizeof own[0]));
}

static void usage(const cli_opts *t, FILE *f) {
  fprintf(f,
          "usage: staticpipe encode --vae VAE --image FILE.png|.jpg -o LATENTS.h5 [options]\n"
          "       staticpipe encode --vae VAE --video FILE.mp4|.h5 [--frames N] -o LATENTS.h5\n"
          "       staticpipe encode --vae VAE --model MODEL --image FILE [--frames N]\n"
          "                         [--max-area A | --size HxW] -o LATENTS.h5\n"
          "\n"
          "Encodes an image or a video into latents with the Wan 2.1 VAE encoder (the\n"
          "image-to-video models' encoder): T frames of HxW (T = 1 + 4k, H and W multiples\n"
          "of 8) give 1 + (T - 1) / 4 latent frames of H/8 x W/8, normalised with the\n"
          "published mean and std as WanVAE.encode does. The VAE file must hold the\n"
          "encoder (inspect says; files converted from the published checkpoints do).\n"
          "\n"
          "With --model (an I2V-A14B or TI2V-5B model), the image is prepared and encoded\n"
          "exactly as run --image prepares it for that model (the same code; I2V.md), by\n"
          "the model's VAE family (I2V: the Wan 2.1 VAE; TI2V: the Wan 2.2 VAE), and the\n"
          "latents written are the ones run --image-latents and a --jobs line's\n"
          "image-latents= take: encode once, run many seeds, or feed a stream (run --jobs\n"
          "-), which cannot encode an image. I2V: [16, 1 + (N - 1) / 4, H/8, W/8];\n"
          "TI2V: [48, 1, H/16, W/16].\n"
          "Everything is checked before encoding starts: the VAE, the input's format,\n"
          "size, frames and values, the output path.\n"
          "\n");
  cli_opts_usage(t, f);
  fprintf(f,
          "\nJPEG: %s. Video files: FFmpeg's libraries, loaded when one is read (%s).\n"
          "Threads (CPU): OMP_NUM_THREADS (results do not depend on it).\n",
          rank_image_jpeg_status(), video_out_ffmpeg_status());
}

typedef struct encode_vae_cli {
  job_params job; /* --vae, --vae-precision, --device, --no-verify, --quiet;
                   * --model, --max-area, --size */
  vae_encode_opts enc;
  const char *image, *video, *out;
  int64_t frames; /* --frames, 0: all */
  int help;
} encode_vae_cli;

static int encode_vae_opt(void *ctx, int id, const char *arg) {
  encode_vae_cli *c = ctx;
  switch (id) {
  case OPT_IMAGE: c->image = arg; break;
  case OPT_VIDEO: c->video = arg; break;
  case OPT_FRAMES:
    if (job_parse_int64("--frames", arg, 1, 1 << 20, &c->frames) != SP_OK) return SP_ERR_INPUT;
    break;
  case OPT_OUT: c->out = arg; break;
  case OPT_HELP: return CLI_HELP;
  }
  return SP_OK;
}

static int encode_vae_parse(int argc, char **argv, encode_vae_cli *c) {
  static const cli_command cmd = {"encode", encode_vae_table, encode_vae_opt, usage, 0};
  memset(c, 0, sizeof *c);
  cli_result res;
  int rc = cli_command_parse(&cmd, argc, argv, &c->job, c, &res);
  c->help = res.help;
  if (rc != SP_OK || c->help) return rc;
  const char *missing = !c->job.vae ? "--vae" : !c->out ? "--out" : NULL;
  if (!missing && !c->image == !c->video) missing = "exactly one of --image and --video";
  if ((rc = cli_require("encode", missing)) != SP_OK) return rc;
  const job_spec *j = &c->job.job;
  if (c->job.model && c->video) {
    sp_log_error("encode: --model prepares an --image as run --image does; a --video is "
                 "encoded as it is (leave --model out)");
    return cli_bad_usage("encode");
  }
  if (!c->job.model && (j->max_area || j->size_given)) {
    sp_log_error("encode: --%s sizes an image prepared for a model's task: give --model",
                 j->max_area ? "max-area" : "size");
    return cli_bad_usage("encode");
  }
  if (j->max_area && j->size_given) {
    sp_log_error("encode: --max-area and --size exclude each other (the area rule sizes the "
                 "video from the image's aspect ratio; --size gives the size)");
    return cli_bad_usage("encode");
  }
  if (c->frames && !c->video && !c->job.model) {
    sp_log_error("encode: --frames takes frames of a --video (an image is one frame), or run's "
                 "frames with --model");
    return cli_bad_usage("encode");
  }
  if (c->frames && (c->frames - 1) % 4 != 0) {
    sp_log_error("--frames %lld: the encoder takes 1 + 4k frames (1, 5, 9, ...)",
                 (long long)c->frames);
    return SP_ERR_INPUT;
  }
  if (c->job.model && c->frames) c->job.job.frames = c->frames; /* run's ranges, checked next */
  if (job_params_check(&c->job, 0) != SP_OK || job_device_resolve(&c->job, &c->enc.dev) != SP_OK)
    return SP_ERR_INPUT;
  c->enc.vae = c->job.vae;
  c->enc.precision = c->job.vae_precision;
  c->enc.verify = c->job.verify;
  c->enc.quiet = c->job.quiet;
  return SP_OK;
}

/* The paths (stat only): the VAE, the input and the model are regular
 * files; the output is latents (HDF5), not a video name, and none of the
 * inputs. */
static int encode_vae_paths(const encode_vae_cli *c) {
  const char *src = c->image ? c->image : c->video, *flag = c->image ? "--image" : "--video";
  const char *model = c->job.model && !rank_model_spec_is_synth(c->job.model) ? c->job.model
                                                                              : NULL;
  const rank_path_arg in[] = {
      {"--vae", rank_model_spec_is_synth(c->enc.vae) ? NULL : c->enc.vae}, {flag, src},
      {"--model", model}};
  if (job_model_path_check("--vae", c->enc.vae) != SP_OK ||
      (c->job.model && job_model_path_check("--model", c->job.model) != SP_OK) ||
      rank_path_check_input(flag, src, RANK_PATH_FILE) != SP_OK ||
      job_output_not_video("--out", c->out, "latents (HDF5)") != SP_OK ||
      rank_path_check_output("--out", c->out, in, 3) != SP_OK)
    return SP_ERR_INPUT;
  return SP_OK;
}

/* ---- the input ------------------------------------------------------------ */

/* An input of T frames with the frame count rules: --frames N of it (N <=
 * T), or all T when T = 1 + 4k. SP_OK with *use the frames to encode. */
static int frames_to_use(const char *what, int64_t T, int64_t asked, int64_t *use) {
  if (asked > T) {
    sp_log_error("%s: %lld frames, --frames asks for %lld", what, (long long)T, (long long)asked);
    return SP_ERR_INPUT;
  }
  if (!asked && (T - 1) % 4 != 0) {
    sp_log_error("%s: %lld frames: the encoder takes 1 + 4k frames; pass --frames %lld to encode "
                 "the first %lld", what, (long long)T, (long long)(1 + (T - 1) / 4 * 4),
                 (long long)(1 + (T - 1) / 4 * 4));
    return SP_ERR_INPUT;
  }
  *use = asked ? asked : T;
  return SP_OK;
}

/* What an .h5 video's shape is checked against before its data is read. */
typedef struct h5_video_ask {
  const char *what;
  int64_t frames; /* --frames, 0: all */
} h5_video_ask;

/* Dataset 'video' [3, T, H, W] as its metadata declares it: RGB, and the
 * frames to encode within the workload rule of every command
 * (job_workload_check), before anything is allocated for them. */
static int h5_video_shape_ok(const char *path, const char *name, int ndim, const int64_t *dims,
                             void *ctx) {
  const h5_video_ask *a = ctx;
  (void)path, (void)name, (void)ndim;
  if (dims[0] != 3) {
    sp_log_error("%s: dataset 'video' is [%lld, %lld, %lld, %lld]; the encoder takes [3, T, H, "
                 "W] (RGB)", a->what, (long long)dims[0], (long long)dims[1], (long long)dims[2],
                 (long long)dims[3]);
    return SP_ERR_INPUT;
  }
  const int64_t T = a->frames && a->frames < dims[1] ? a->frames : dims[1];
  return job_workload_check(a->what, T, dims[2], dims[3]);
}

/* An .h5 video's dataset 'video' [3, T, H, W], every value in [-1, 1];
 * its first frames kept (*dims the shape kept). */
static int read_h5_video(const char *what, const char *path, int64_t asked, float **video,
                         int64_t *dims) {
  rank_tensor t;
  h5_video_ask ask = {what, asked};
  int rc = rank_tensor_read_checked(path, "video", 4, h5_video_shape_ok, &ask, &t);
  if (rc != SP_OK) return rc;
  int64_t use = 0;
  for (int64_t i = 0; rc == SP_OK && i < t.numel; i++)
    if (!(t.data[i] >= -1.0f && t.data[i] <= 1.0f)) {
      sp_log_error("%s: dataset 'video' element %lld is %g: the encoder takes values in [-1, 1]",
                   what, (long long)i, (double)t.data[i]);
      rc = SP_ERR_INPUT;
    }
  if (rc == SP_OK) rc = frames_to_use(what, t.dims[1], asked, &use);
  if (rc != SP_OK) {
    rank_tensor_free(&t);
    return rc;
  }
  const int64_t T = t.dims[1], hw = t.dims[2] * t.dims[3];
  for (int64_t c = 1; c < 3 && use < T; c++) /* channel c's first frames, packed */
    memmove(t.data + c * use * hw, t.data + c * T * hw, (size_t)(use * hw) * sizeof(float));
  dims[0] = 3, dims[1] = use, dims[2] = t.dims[2], dims[3] = t.dims[3];
  *video = t.data;
  return SP_OK;
}

/* n pixels of 8-bit RGB (n, 3) into channel planes of (3, total) from
 * offset at, as an image is taken to [-1, 1]. */
static void rgb_to_unit(const uint8_t *rgb, int64_t n, float *out, int64_t total, int64_t at) {
  const rank_image px = {.w = n, .h = 1, .rgb = (uint8_t *)rgb};
  float *tmp = sp_xmalloc((size_t)(3 * n) * sizeof *tmp);
  rank_image_to_unit(&px, tmp);
  for (int64_t c = 0; c < 3; c++)
    memcpy(out + c * total + at, tmp + c * n, (size_t)n * sizeof *tmp);
  free(tmp);
}

/* The input of --image or --video as (3, T, H, W) in [-1, 1]. */
static int read_input(const encode_vae_cli *c, const char *what, float **video, int64_t *dims) {
  if (c->image) {
    rank_image im;
    int rc = rank_image_read("--image", c->image, &im);
    if (rc != SP_OK) return rc;
    dims[0] = 3, dims[1] = 1, dims[2] = im.h, dims[3] = im.w;
    *video = sp_xmalloc((size_t)(3 * im.h * im.w) * sizeof(float));
    rank_image_to_unit(&im, *video);
    rank_image_free(&im);
    return SP_OK;
  }
  const size_t n = strlen(c->video);
  if ((n >= 3 && strcasecmp(c->video + n - 3, ".h5") == 0) ||
      (n >= 5 && strcasecmp(c->video + n - 5, ".hdf5") == 0))
    return read_h5_video(what, c->video, c->frames, video, dims);
  rank_video v;
  int64_t use = 0;
  int rc = rank_video_read("--video", c->video, c->frames, VIDEO_MAX_BYTES, &v);
  if (rc == SP_OK) rc = frames_to_use(what, v.T, c->frames, &use);
  if (rc == SP_OK) {
    const int64_t hw = v.h * v.w, total = use * hw;
    dims[0] = 3, dims[1] = use, dims[2] = v.h, dims[3] = v.w;
    *video = sp_xmalloc((size_t)(3 * total) * sizeof(float));
    for (int64_t t = 0; t < use; t++) rgb_to_unit(v.rgb + t * hw * 3, hw, *video, total, t * hw);
  }
  rank_video_free(&v);
  return rc;
}

/* ---- the output ------------------------------------------------------------- */

/* What -o records beside the latents. */
typedef struct latents_out {
  const model_file_id *vae;  /* the VAE's identity */
  const int64_t *ld;         /* the latents' (z_dim, F, h, w) */
  const int64_t *vdims;      /* the video encoded (3, T, H, W) */
  const rank_model_info *mi; /* --model's, or NULL */
} latents_out;

static int write_latents(const encode_vae_cli *c, const float *lat, const latents_out *o) {
  rank_outfile *f = NULL;
  int rc = rank_outfile_open(c->out, &f);
  if (rc != SP_OK) return rc;
  char prec[32];
  if (c->enc.dev != RANK_DEVICE_CUDA)
    snprintf(prec, sizeof prec, "fp32 (cpu)");
  else
    snprintf(prec, sizeof prec, "%s (cuda)", wan_vae_gpu_precision_name(c->enc.precision));
  rc = rank_outfile_put(f, "latents", 4, o->ld, lat);
  if (rc == SP_OK) rc = rank_outfile_attr_str(f, "source", c->image ? c->image : c->video);
  if (rc == SP_OK) rc = rank_outfile_attr_i64(f, "source_frames", o->vdims[1]);
  if (rc == SP_OK) rc = rank_outfile_attr_i64(f, "height", o->vdims[2]);
  if (rc == SP_OK) rc = rank_outfile_attr_i64(f, "width", o->vdims[3]);
  if (rc == SP_OK) rc = rank_outfile_attr_str(f, "vae", o->vae->source);
  if (rc == SP_OK) rc = rank_outfile_attr_str(f, "vae_checksum", o->vae->checksum);
  if (rc == SP_OK) rc = rank_outfile_attr_str(f, "vae_precision", prec);
  if (rc == SP_OK && o->mi) rc = rank_outfile_attr_str(f, "model", o->mi->id.source);
  if (rc == SP_OK && o->mi)
    rc = rank_outfile_attr_str(f, "task", wan_task_name(wan_config_task(&o->mi->config)));
  if (rc == SP_OK) rc = rank_outfile_attr_str(f, "generator", "staticpipe encode --vae");
  if (rc != SP_OK) {
    rank_outfile_abort(f);
    return rc;
  }
  return rank_outfile_commit(f);
}

/* ---- --model: an image as run --image prepares it ----------------------- */

/* The model against the image options before any work: an image-to-video
 * model; TI2V encodes the image alone (no --frames) and takes sizes of
 * multiples of 32. */
static int model_check(const encode_vae_cli *c, const rank_model_info *mi) {
  const wan_task task = wan_config_task(&mi->config);
  const job_spec *j = &c->job.job;
  if (task == WAN_TASK_T2V) {
    sp_log_error("--model %s: a text-to-video model (in_dim %lld) takes no image; encode --vae "
                 "--model prepares an image for an image-to-video model (I2V-A14B, TI2V-5B)",
                 mi->id.source, (long long)mi->config.in_dim);
    return SP_ERR_INPUT;
  }
  if (task == WAN_TASK_TI2V && c->frames) {
    sp_log_error("--frames %lld: the TI2V model %s conditions on the image alone (one latent "
                 "frame) whatever the run's frames: leave --frames out",
                 (long long)c->frames, mi->id.source);
    return SP_ERR_INPUT;
  }
  if (task == WAN_TASK_TI2V && j->size_given && (j->height % 32 || j->width % 32)) {
    sp_log_error("--size %lldx%lld: a TI2V model's latent is 16 times smaller than the video and "
                 "its tokens 2x2 latent positions: height and width must be multiples of 32",
                 (long long)j->height, (long long)j->width);
    return SP_ERR_INPUT;
  }
  return SP_OK;
}

/* --image prepared for --model's task by job_image_video, encoded by
 * job_vae_encode (the VAE's family checked against the model's latents
 * by job_vae_open), into -o. */
static int encode_for_model(const encode_vae_cli *cl, const rank_model_info *mi) {
  const wan_config *c = &mi->config;
  const job_spec *j = &cl->job.job;
  job_vae *v = NULL;
  int rc = job_vae_open("--vae", cl->enc.vae, cl->enc.verify, c, mi->id.source, &v);
  if (rc != SP_OK) return rc;
  if (!job_vae_can_encode(v)) { /* refused before the image is read */
    sp_log_error("--vae %s: %s", cl->enc.vae, VAE_MODEL_NO_ENCODER);
    job_vae_close(v);
    return SP_ERR_INPUT;
  }
  char what[16 + JOB_PATH];
  snprintf(what, sizeof what, "--image %s", cl->image);
  const int i2v = wan_config_task(c) == WAN_TASK_I2V;
  const job_image_prep prep = {
      .max_area = j->max_area,
      .height = j->size_given ? j->height : 0,
      .width = j->size_given ? j->width : 0,
      .frames = !i2v ? 1 : cl->frames ? cl->frames : wan_task_defaults_of(WAN_TASK_I2V)->frames};
  rank_image im = {0};
  float *video = NULL, *lat = NULL;
  int64_t vdims[4];
  rc = rank_image_read(what, cl->image, &im);
  if (rc == SP_OK) rc = job_image_video(c, what, &im, &prep, &video, vdims);
  rank_image_free(&im);
  if (rc != SP_OK) goto done;
  const int64_t vs = wan_vae_stride(c);
  /* ld (out_dim, F, H / s, W / s) */
  const int64_t ld[4] = {c->out_dim, 1 + (vdims[1] - 1) / 4, vdims[2] / vs, vdims[3] / vs};
  lat = sp_xmalloc((size_t)(ld[0] * ld[1] * ld[2] * ld[3]) * sizeof *lat);
  int64_t bytes = 0;
  rc = job_vae_encode(v, cl->enc.dev, cl->enc.precision, cl->enc.quiet, what, video, vdims, lat,
                      &bytes);
  if (rc != SP_OK) goto done;
  const latents_out o = {job_vae_id(v), ld, vdims, mi};
  if ((rc = write_latents(cl, lat, &o)) != SP_OK) goto done;
  sp_log_info("encode: %s for the %s model %s -> latents [%lld, %lld, %lld, %lld] -> %s (run "
              "--image-latents takes them)",
              what, wan_task_name(wan_config_task(c)), mi->id.source, (long long)ld[0],
              (long long)ld[1], (long long)ld[2], (long long)ld[3], cl->out);
done:
  free(lat);
  free(video);
  job_vae_close(v);
  return rc;
}

/* --model opened (metadata only) and checked, then its image encoded. */
static int encode_model_image(const encode_vae_cli *cl) {
  rank_model *m = NULL;
  int rc = rank_model_open(cl->job.model, 0, &m);
  if (rc != SP_OK) return rc;
  const rank_model_info *mi = rank_model_get_info(m);
  rc = model_check(cl, mi);
  if (rc == SP_OK) rc = encode_for_model(cl, mi);
  rank_model_close(m);
  return rc;
}

int cmd_encode_vae(int argc, char **argv) {
  encode_vae_cli cl;
  int rc = encode_vae_parse(argc, argv, &cl);
  if (cl.help || rc != SP_OK) return rc;
  if (cl.job.quiet) sp_log_set_level(0); /* -q: no info lines, warnings and errors stay */
  if ((rc = encode_vae_paths(&cl)) != SP_OK) return rc;
  if (cl.job.model) return encode_model_image(&cl);
  if (wan_vae22_spec_is(cl.enc.vae)) {
    sp_log_error("--vae %s: a Wan 2.2 VAE; encode --vae runs the Wan 2.1 VAE's encoder on an "
                 "image or a video as given, and the Wan 2.2 VAE's (TI2V-5B's) on an --image "
                 "prepared for a TI2V --model: give --model", cl.enc.vae);
    return SP_ERR_INPUT;
  }
  char what[64 + JOB_PATH];
  snprintf(what, sizeof what, "%s %s", cl.image ? "--image" : "--video",
           cl.image ? cl.image : cl.video);
  vae_model *m = NULL;
  float *video = NULL, *lat = NULL;
  int64_t vdims[4];
  if ((rc = vae_model_open(cl.enc.vae, cl.enc.verify, &m)) != SP_OK) return rc;
  /* no encoder: refused before the input is read */
  if (!vae_model_get_info(m)->config.encoder) {
    sp_log_error("--vae %s: %s", vae_model_get_info(m)->id.source, VAE_MODEL_NO_ENCODER);
    rc = SP_ERR_INPUT;
    goto done;
  }
  if ((rc = read_input(&cl, what, &video, vdims)) != SP_OK ||
      (rc = job_workload_check(what, vdims[1], vdims[2], vdims[3])) != SP_OK ||
      (rc = vae_encode_check(m, what, vdims)) != SP_OK ||
      (rc = vae_encode_check_device(&cl.enc, m, vdims)) != SP_OK)
    goto done;
  const wan_vae_config *c = &vae_model_get_info(m)->config;
  const int64_t ld[3] = {wan_vae_enc_latent_frames(c, vdims[1]),
                         wan_vae_enc_latent_side(c, vdims[2]), wan_vae_enc_latent_side(c, vdims[3])};
  lat = sp_xmalloc((size_t)(c->z_dim * ld[0] * ld[1] * ld[2]) * sizeof *lat);
  vae_encode_stats st;
  if ((rc = vae_encode_run(&cl.enc, m, video, vdims, lat, &st)) != SP_OK) goto done;
  const int64_t ld4[4] = {c->z_dim, ld[0], ld[1], ld[2]};
  const latents_out o = {&vae_model_get_info(m)->id, ld4, vdims, NULL};
  if ((rc = write_latents(&cl, lat, &o)) != SP_OK) goto done;
  sp_log_info("encode: %lld frames of %lldx%lld -> latents [%lld, %lld, %lld, %lld] in %.2f s "
              "(weights read in %.2f s) -> %s",
              (long long)vdims[1], (long long)vdims[2], (long long)vdims[3], (long long)c->z_dim,
              (long long)ld[0], (long long)ld[1], (long long)ld[2], st.encode_s, st.read_s,
              cl.out);
done:
  free(lat);
  free(video);
  vae_model_close(m);
  return rc;
}
