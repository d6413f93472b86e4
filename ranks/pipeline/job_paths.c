/* Every path of a job's parameters, checked before any work (see
 * job_params.h): the inputs are regular files (or synth: models), the
 * outputs writable, and no output is an input or another output, by
 * identity (io/path_check.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "job_params.h"
#include "jobs.h"
#include "log.h"
#include "model_file.h"
#include "path_check.h"

/* Paths claimed so far: the inputs, then each output as it is checked. */
enum { PATHS_MAX = 16 + 2 * RANK_LORA_MAX };
typedef struct path_set {
  rank_path_arg a[PATHS_MAX];
  char flag[PATHS_MAX][JOB_PATH + 48];
  int n;
} path_set;

static void add(path_set *s, const char *flag, const char *path) {
  if (!path || !path[0] || s->n == PATHS_MAX) return;
  snprintf(s->flag[s->n], sizeof s->flag[s->n], "%s", flag);
  s->a[s->n] = (rank_path_arg){s->flag[s->n], path};
  s->n++;
}

/* An output: checked against every path claimed so far, then claimed. */
static int output(path_set *s, const char *flag, const char *path) {
  if (!path || !path[0]) return SP_OK;
  if (rank_path_check_output(flag, path, s->a, s->n) != SP_OK) return SP_ERR_INPUT;
  add(s, flag, path);
  return SP_OK;
}

static const char *file_of(const char *spec) {
  return spec && !rank_model_spec_is_synth(spec) ? spec : NULL;
}

/* What the run reads whatever the job: the models, the jobs file, --lora. */
static void run_inputs(const job_params *p, path_set *s) {
  add(s, "--model", file_of(p->model));
  add(s, "--vae", file_of(p->vae));
  add(s, "--t5", file_of(p->t5));
  add(s, "--jobs", job_jobs_is_stream(p->jobs) ? NULL : p->jobs);
  for (int i = 0; i < p->nlora; i++) add(s, "--lora", p->lora[i].path);
}

/* How a message names a job's field: "--cond" on the command line,
 * "jobs.txt:3: cond" on a --jobs line. */
static void job_flag(char *buf, size_t n, const char *where, const char *key) {
  if (where)
    snprintf(buf, n, "%s: %s", where, key);
  else
    snprintf(buf, n, "--%s", key);
}

/* Job j's inputs (its cond, noise and lora= files), then its outputs. */
static int job_outputs(const job_params *p, const job_spec *j, const char *where, path_set *s) {
  char f[JOB_PATH + 48], png[JOB_PATH + 8];
  job_flag(f, sizeof f, where, "cond");
  add(s, f, j->cond);
  job_flag(f, sizeof f, where, "noise");
  add(s, f, j->noise);
  job_flag(f, sizeof f, where, "image");
  add(s, f, j->image);
  job_flag(f, sizeof f, where, "image-latents");
  add(s, f, j->image_latents);
  rank_lora_spec lora[RANK_LORA_MAX];
  const int nl = j->lora_given ? job_spec_loras(p, j, lora) : 0;
  job_flag(f, sizeof f, where, "lora");
  for (int i = 0; i < nl; i++) add(s, f, lora[i].path);
  job_flag(f, sizeof f, where, "out");
  if (output(s, f, j->out) != SP_OK) return SP_ERR_INPUT;
  snprintf(png, sizeof png, "%s.png", j->out);
  job_flag(f, sizeof f, where, "out (its preview)");
  if (p->preview && j->out[0] && output(s, f, png) != SP_OK) return SP_ERR_INPUT;
  /* The video (a file; its encoder and directory are video_out_check's). */
  job_flag(f, sizeof f, where, "video");
  return output(s, f, j->video);
}

int job_spec_check_paths(const job_params *p, const job_spec *j, const char *where) {
  path_set *s = sp_xcalloc(1, sizeof *s);
  run_inputs(p, s);
  add(s, "--trace", p->trace); /* an output of the run that a line must not take */
  const int rc = job_outputs(p, j, where, s);
  free(s);
  return rc;
}

int job_output_not_video(const char *flag, const char *path, const char *what) {
  if (!job_path_is_video(path)) return SP_OK;
  sp_log_error("%s %s: a video file name, but %s writes %s", flag, path, flag, what);
  return SP_ERR_INPUT;
}

int job_model_path_check(const char *flag, const char *spec) {
  return rank_model_spec_is_synth(spec) ? SP_OK
                                        : rank_path_check_input(flag, spec, RANK_PATH_FILE);
}

/* --log-dir: a directory, or a new one whose parent takes it. */
static int log_dir_check(const char *dir) {
  struct stat st;
  if (stat(dir, &st) == 0) {
    if (S_ISDIR(st.st_mode)) return SP_OK;
    sp_log_error("--log-dir %s: not a directory", dir);
    return SP_ERR_INPUT;
  }
  if (errno == ENOENT) return SP_OK; /* made when the run opens its logs */
  sp_log_error("--log-dir %s: cannot look it up: %s", dir, strerror(errno));
  return SP_ERR_INPUT;
}

/* The inputs of the parameters, each a regular file (or synth:). */
static int inputs_check(const job_params *p) {
  const job_spec *j = &p->job;
  if (p->model && job_model_path_check("--model", p->model) != SP_OK) return SP_ERR_INPUT;
  if (p->vae && job_model_path_check("--vae", p->vae) != SP_OK) return SP_ERR_INPUT;
  if (p->t5 && job_model_path_check("--t5", p->t5) != SP_OK) return SP_ERR_INPUT;
  if (p->jobs && strcmp(p->jobs, "-") != 0 &&
      rank_path_check_input("--jobs", p->jobs, RANK_PATH_FILE_OR_FIFO) != SP_OK)
    return SP_ERR_INPUT;
  for (int i = 0; i < p->nlora; i++)
    if (rank_path_check_input("--lora", p->lora[i].path, RANK_PATH_FILE) != SP_OK)
      return SP_ERR_INPUT;
  /* The command line's job; a --jobs line's inputs are checked when the
   * job reads them (tensor_io.h, latent_file.h), so a bad one fails that
   * job alone, at its turn. */
  if (p->jobs) return SP_OK;
  if (j->cond[0] && rank_path_check_input("--cond", j->cond, RANK_PATH_FILE) != SP_OK)
    return SP_ERR_INPUT;
  if (j->noise[0] && rank_path_check_input("--noise", j->noise, RANK_PATH_FILE) != SP_OK)
    return SP_ERR_INPUT;
  if (j->image[0] && rank_path_check_input("--image", j->image, RANK_PATH_FILE) != SP_OK)
    return SP_ERR_INPUT;
  if (j->image_latents[0] &&
      rank_path_check_input("--image-latents", j->image_latents, RANK_PATH_FILE) != SP_OK)
    return SP_ERR_INPUT;
  return SP_OK;
}

int job_params_check_paths(const job_params *p) {
  if (inputs_check(p) != SP_OK) return SP_ERR_INPUT;
  if (p->log_dir && log_dir_check(p->log_dir) != SP_OK) return SP_ERR_INPUT;
  path_set *s = sp_xcalloc(1, sizeof *s);
  run_inputs(p, s);
  /* The command line's job's outputs (a --jobs file's lines are checked
   * as it is read, jobs.c), then the run's own. */
  int rc = p->jobs ? SP_OK : job_outputs(p, &p->job, NULL, s);
  if (rc == SP_OK) rc = job_output_not_video("--save-noise", p->save_noise, "the noise (HDF5 or a .latent)");
  if (rc == SP_OK) rc = job_output_not_video("--trace", p->trace, "a JSON trace");
  if (rc == SP_OK) rc = output(s, "--save-noise", p->save_noise);
  if (rc == SP_OK) rc = output(s, "--trace", p->trace);
  free(s);
  return rc;
}
