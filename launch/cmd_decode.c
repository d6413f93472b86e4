/* staticpipe decode: latents to video through the VAE decoder. */
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "job_session.h"
#include "latent_file.h"
#include "log.h"
#include "path_check.h"
#include "tensor_io.h"
#include "vae_layout.h"
#include "video_out.h"
#include "wan_vae22_run.h"
#include "wan_vae_decode.h"

enum { OPT_LATENTS = JOB_OPT_COUNT, OPT_OUT, OPT_FRAMES_DIR, OPT_TILE, OPT_TILE_OVERLAP, OPT_JSON, OPT_HELP };

#define STR_(x) #x
#define STR(x) STR_(x)
#define TILE_OVERLAP_STR STR(PLAN_VAE_TILE_OVERLAP)

/* decode takes the job options that say how to decode (--vae, --fps,
 * --vae-precision, --device, --no-verify, --quiet); its input and outputs
 * are its own. */
static void decode_table(cli_opts *t) {
  static const int ids[] = {JOB_OPT_VAE,    JOB_OPT_FPS,       JOB_OPT_VAE_PRECISION,
                            JOB_OPT_DEVICE, JOB_OPT_NO_VERIFY, JOB_OPT_QUIET};
  static const job_option own[] = {
      {OPT_LATENTS, "latents", 'L', "FILE", NULL, 0,
       "HDF5 file with dataset 'latents' float32 [16, F, H, W],\n"
       "as run writes it, or a ComfyUI .latent file (required);\n"
       "[48, F, H, W] for a Wan 2.2 VAE"},
      {OPT_OUT, "out", 'o', "FILE", NULL, 0,
       "video: .mp4/.mkv/.mov (H.264), .webm (VP9) through FFmpeg's\n"
       "libraries, or .h5 (dataset 'video' float32 [3, T, 8H, 8W]\n"
       "in [-1, 1]); T = 1 + 4 (F - 1); written atomically"},
      {OPT_FRAMES_DIR, "frames-dir", 0, "DIR", NULL, 0,
       "also (or instead) one PNG per frame in DIR (new or empty)"},
      {OPT_TILE, "tile", 0, "HxW", "auto", 0,
       "decode in overlapping tiles of HxW latent positions\n"
       "(8H x 8W pixels), each through the whole decoder,\n"
       "blended with linear ramps over the overlaps; the\n"
       "video changes near and across the seams (VAE.md\n"
       "\"Tiling\" measures how much). auto: untiled, except\n"
       "on cuda when the decoder does not fit the GPU's free\n"
       "memory: then the largest tiles that fit (fewest\n"
       "tiles), overlapping by " TILE_OVERLAP_STR "; the CPU decoder is\n"
       "untiled unless --tile is given"},
      {OPT_TILE_OVERLAP, "tile-overlap", 0, "N", TILE_OVERLAP_STR, 0,
       "with --tile: least overlap of neighbouring tiles in\n"
       "latent positions (0: hard seams, no blending); below\n"
       "every tile side that splits the latent"},
      {OPT_JSON, "json", 'j', NULL, NULL, 0,
       "one JSON object on stdout: outputs, frames, size,\n"
       "seconds, peak memory"},
      {OPT_HELP, "help", 'h', NULL, NULL, 0, "this text"},
  };
  cli_opts_build(t, ids, (int)(sizeof ids / sizeof ids[0]), own, (int)(sizeof own / sizeof own[0]));
}

static void usage(const cli_opts *t, FILE *f) {
  fprintf(f,
          "usage: staticpipe decode --vae VAE --latents L.h5 -o OUT.mp4 [options]\n"
          "\n"
          "Decodes latents into video with the Wan 2.1 VAE decoder (also the decoder of\n"
          "Wan 2.2's 14B models): F latent frames of HxW give 1 + 4 (F - 1) frames of\n"
          "8H x 8W, in [-1, 1] (clamped, as published), stored as 8-bit RGB in videos and\n"
          "PNGs. With a Wan 2.2 VAE (TI2V-5B's: a file of arch wan2.2-vae, or\n"
          "synth:wan2.2-vae[-tiny]) 48-channel latents [48, F, H, W] give 1 + 4 (F - 1)\n"
          "frames of 16H x 16W, untiled. Everything is checked before decoding starts:\n"
          "the VAE, the latents' shape and values, every output path, and FFmpeg for a\n"
          "video file.\n"
          "\n");
  cli_opts_usage(t, f);
  fprintf(f,
          "\nFFmpeg (libavformat, libavcodec, libswscale) is loaded when a video file is\n"
          "asked for; without it .h5 and --frames-dir still work. Here: %s.\n"
          "SP_FFMPEG_LIBDIR names a directory to load FFmpeg's libraries from.\n"
          "Threads (CPU): OMP_NUM_THREADS (results do not depend on it).\n"
          "Tiled decodes hold the whole video in host memory (fp32: 3 x frames x height\n"
          "x width x 4 bytes) to blend the tiles, and write it when every tile is done.\n",
          video_out_ffmpeg_status());
}

typedef struct decode_cli {
  job_params job; /* --vae, --fps, --vae-precision, --device, --no-verify, --quiet */
  decode_opts dec;
  const char *latents;
  int json, help;
  int overlap_set; /* --tile-overlap given */
} decode_cli;

static int decode_opt(void *ctx, int id, const char *arg) {
  decode_cli *c = ctx;
  switch (id) {
  case OPT_LATENTS: c->latents = arg; break;
  case OPT_OUT: c->dec.out = arg; break;
  case OPT_FRAMES_DIR: c->dec.frames_dir = arg; break;
  case OPT_TILE:
    if (strcmp(arg, "auto") == 0) c->dec.tile_h = c->dec.tile_w = 0;
    else if (job_parse_size_hw("--tile", arg, &c->dec.tile_h, &c->dec.tile_w) != SP_OK)
      return SP_ERR_INPUT;
    break;
  case OPT_TILE_OVERLAP:
    if (job_parse_int64("--tile-overlap", arg, 0, WAN_VAE_MAX_SIDE, &c->dec.tile_overlap) != SP_OK)
      return SP_ERR_INPUT;
    c->overlap_set = 1;
    break;
  case OPT_JSON: c->json = 1; break;
  case OPT_HELP: return CLI_HELP;
  }
  return SP_OK;
}

static int decode_parse(int argc, char **argv, decode_cli *c) {
  static const cli_command cmd = {"decode", decode_table, decode_opt, usage, 0};
  memset(c, 0, sizeof *c);
  cli_result res;
  int rc = cli_command_parse(&cmd, argc, argv, &c->job, c, &res);
  c->help = res.help;
  if (rc != SP_OK || c->help) return rc;
  if (!c->overlap_set) c->dec.tile_overlap = PLAN_VAE_TILE_OVERLAP;
  else if (c->dec.tile_h == 0) {
    sp_log_error("decode: --tile-overlap needs --tile HxW");
    return cli_bad_usage("decode");
  }
  const char *missing = !c->job.vae ? "--vae" : !c->latents ? "--latents" : NULL;
  if ((rc = cli_require("decode", missing)) != SP_OK) return rc;
  if (!c->dec.out && !c->dec.frames_dir) {
    sp_log_error("decode: no output: give -o FILE or --frames-dir DIR");
    return cli_bad_usage("decode");
  }
  if (job_params_check(&c->job, 0) != SP_OK || job_device_resolve(&c->job, &c->dec.dev) != SP_OK)
    return SP_ERR_INPUT;
  c->dec.vae = c->job.vae;
  c->dec.fps = c->job.job.fps;
  c->dec.precision = c->job.vae_precision;
  c->dec.verify = c->job.verify;
  c->dec.quiet = c->job.quiet;
  return SP_OK;
}

/* The paths (stat only): the inputs are regular files, the outputs none
 * of them and not each other (-o X --frames-dir X would decode, then fail
 * to write the second). */
static int decode_paths(const decode_cli *c) {
  const rank_path_arg in[] = {
      {"--vae", rank_model_spec_is_synth(c->dec.vae) ? NULL : c->dec.vae},
      {"--latents", c->latents}};
  if (job_model_path_check("--vae", c->dec.vae) != SP_OK ||
      rank_path_check_input("--latents", c->latents, RANK_PATH_FILE) != SP_OK ||
      (c->dec.out && rank_path_check_output("--out", c->dec.out, in, 2) != SP_OK))
    return SP_ERR_INPUT;
  if (!c->dec.out || !c->dec.frames_dir) return SP_OK;
  int same = 0;
  if (rank_path_same(c->dec.out, c->dec.frames_dir, &same) != SP_OK) return SP_ERR_INPUT;
  if (same) {
    sp_log_error("--frames-dir %s: is the same path as -o %s: one output each", c->dec.frames_dir,
                 c->dec.out);
    return SP_ERR_INPUT;
  }
  return SP_OK;
}

static void print_json(const decode_cli *c, const char *vae, const decode_stats *st) {
  json_object *o = json_object_new_object();
  json_object_object_add(o, "vae", json_object_new_string(vae));
  json_object_object_add(o, "latents", json_object_new_string(c->latents));
  json_object_object_add(o, "out", c->dec.out ? json_object_new_string(c->dec.out) : NULL);
  json_object_object_add(o, "frames_dir",
                         c->dec.frames_dir ? json_object_new_string(c->dec.frames_dir) : NULL);
  json_object_object_add(o, "device",
                         json_object_new_string(c->dec.dev == RANK_DEVICE_CUDA ? "cuda" : "cpu"));
  json_object_object_add(o, "precision",
                         json_object_new_string(c->dec.dev != RANK_DEVICE_CUDA
                                                    ? "fp32"
                                                    : wan_vae_gpu_precision_name(c->dec.precision)));
  json_object_object_add(o, "frames", json_object_new_int64(st->frames));
  json_object_object_add(o, "height", json_object_new_int64(st->height));
  json_object_object_add(o, "width", json_object_new_int64(st->width));
  json_object_object_add(o, "fps", json_object_new_double(c->dec.fps));
  json_object_object_add(o, "read_s", json_object_new_double(st->read_s));
  json_object_object_add(o, "decode_s", json_object_new_double(st->decode_s));
  json_object_object_add(o, "device_peak_bytes", json_object_new_int64(st->device_peak_bytes));
  json_object_object_add(o, "host_bytes", json_object_new_int64(st->host_bytes));
  json_object *tiles = json_object_new_array();
  json_object_array_add(tiles, json_object_new_int64(st->tiles_y));
  json_object_array_add(tiles, json_object_new_int64(st->tiles_x));
  json_object_object_add(o, "tiles", tiles);
  json_object *tile = json_object_new_array();
  json_object_array_add(tile, json_object_new_int64(st->tile_h));
  json_object_array_add(tile, json_object_new_int64(st->tile_w));
  json_object_object_add(o, "tile", tile);
  printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
  json_object_put(o);
}

/* The latents' shape against the VAE, from the file's metadata before its
 * data is read (ctx: the model). */
static int latents_shape_ok(const char *path, const char *name, int ndim, const int64_t *dims,
                            void *ctx) {
  char what[64 + JOB_PATH];
  (void)name;
  snprintf(what, sizeof what, "--latents %s", path);
  if (decode_check_latents(ctx, what, ndim, dims) != SP_OK) return SP_ERR_INPUT;
  /* The video it declares, before anything is allocated for it: the
   * workload rule of every command (job_workload_check). */
  return job_workload_check(what, 4 * (dims[1] - 1) + 1, 8 * dims[2], 8 * dims[3]);
}

/* latents_shape_ok for a Wan 2.2 VAE (ctx: its model). */
static int latents22_shape_ok(const char *path, const char *name, int ndim, const int64_t *dims,
                              void *ctx) {
  char what[64 + JOB_PATH];
  (void)name;
  snprintf(what, sizeof what, "--latents %s", path);
  if (wan_vae22_check_latents(ctx, what, ndim, dims) != SP_OK) return SP_ERR_INPUT;
  /* The video it declares (16x spatial), before anything is allocated. */
  return job_workload_check(what, 4 * (dims[1] - 1) + 1, 16 * dims[2], 16 * dims[3]);
}

/* decode with a Wan 2.2 VAE: the same inputs, checks and outputs through
 * its own driver (wan_vae22_run.h). */
static int decode_vae22(decode_cli *cl) {
  wan_vae22_model *m = NULL;
  rank_tensor lat = {0};
  int rc = wan_vae22_open(cl->dec.vae, cl->dec.verify, &m);
  if (rc != SP_OK) return rc;
  char what[64 + JOB_PATH];
  snprintf(what, sizeof what, "--latents %s", cl->latents);
  rc = rank_latent_path_is(cl->latents) ? rank_latent_read(cl->latents, &lat)
                                        : rank_tensor_read_checked(cl->latents, "latents", 0,
                                                                   latents22_shape_ok, m, &lat);
  decode_stats st;
  if (rc == SP_OK && (rc = wan_vae22_check_latents(m, what, lat.ndim, lat.dims)) == SP_OK &&
      (rc = wan_vae22_check_outputs(&cl->dec, m, lat.dims)) == SP_OK &&
      (rc = wan_vae22_decode_run(&cl->dec, m, lat.data, lat.dims, &st)) == SP_OK) {
    sp_log_info("decode: %lld frames of %lldx%lld in %.2f s (weights read in %.2f s)%s%s",
                (long long)st.frames, (long long)st.height, (long long)st.width, st.decode_s,
                st.read_s, cl->dec.out ? " -> " : "", cl->dec.out ? cl->dec.out : "");
    if (cl->json) print_json(cl, wan_vae22_get_info(m)->id.source, &st);
  }
  rank_tensor_free(&lat);
  wan_vae22_close(m);
  return rc;
}

int cmd_decode(int argc, char **argv) {
  decode_cli cl;
  int rc = decode_parse(argc, argv, &cl);
  if (cl.help || rc != SP_OK) return rc;
  if (cl.job.quiet) sp_log_set_level(0); /* -q: no info lines, warnings and errors stay */
  if ((rc = decode_paths(&cl)) != SP_OK) return rc;
  if (wan_vae22_spec_is(cl.dec.vae)) return decode_vae22(&cl);
  vae_model *m = NULL;
  rank_tensor lat = {0};
  if ((rc = vae_model_open(cl.dec.vae, cl.dec.verify, &m)) != SP_OK) return rc;
  /* ComfyUI's .latent (raw VAE space, read back into the DiT's) or HDF5. */
  rc = rank_latent_path_is(cl.latents) ? rank_latent_read(cl.latents, &lat)
                                       : rank_tensor_read_checked(cl.latents, "latents", 0,
                                                                  latents_shape_ok, m, &lat);
  if (rc != SP_OK ||
      (rc = latents_shape_ok(cl.latents, "latents", lat.ndim, lat.dims, m)) != SP_OK ||
      (rc = decode_check_outputs(&cl.dec, m, lat.dims)) != SP_OK)
    goto done;
  decode_stats st;
  if ((rc = decode_run(&cl.dec, m, lat.data, lat.dims, &st)) != SP_OK) goto done;
  sp_log_info("decode: %lld frames of %lldx%lld in %.2f s (weights read in %.2f s)%s%s",
              (long long)st.frames, (long long)st.height, (long long)st.width, st.decode_s,
              st.read_s, cl.dec.out ? " -> " : "", cl.dec.out ? cl.dec.out : "");
  if (cl.json) print_json(&cl, vae_model_get_info(m)->id.source, &st);
done:
  rank_tensor_free(&lat);
  vae_model_close(m);
  return rc;
}
