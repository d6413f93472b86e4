/* staticpipe bench: a sweep over configurations (model, precision, ranks,
 * GPUs, budget, streamed fraction, order, frames, size), each one `run --json` in a child
 * process (under the MPI launcher when it has more than one rank), repeated
 * --repeat times, collected into DIR/bench.json, bench.csv and bench.md
 * with the planner's prediction and the link between the ranks' GPUs
 * beside each measurement, and a PNG plot when gnuplot is installed.
 * This file: the options, the sweep and running the children; the result
 * files and the plot are bench_report.c, the children's command lines and
 * results bench_child.c, the machine bench_topo.c and bench_env.c. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench_child.h"
#include "bench_report.h"
#include "bench_topo.h"
#include "cli.h"
#include "commands.h"
#include "job.h"
#include "log.h"
#include "model_file.h"
#include "plan.h"

#define MAX_LIST 16     /* values per list flag */
#define MAX_WORDS 32    /* words of --launcher and of --extra */
#define MAX_CONFIGS 256 /* configurations per sweep */
#define MAX_REPEAT 100  /* runs per configuration */

typedef struct bench_opts {
  const char *cond, *device, *dir;
  const char *models[MAX_LIST], *precisions[MAX_LIST]; /* --model (repeatable), --precision */
  const char *ranks[MAX_LIST], *budgets[MAX_LIST], *fracs[MAX_LIST], *orders[MAX_LIST];
  const char *frames[MAX_LIST], *sizes[MAX_LIST], *devices[MAX_LIST];
  /* nprecisions, nfracs, norders, ndevices: 0 = not passed */
  int nmodels, nprecisions, nranks, nbudgets, nfracs, norders, nframes, nsizes, ndevices;
  char formats[MAX_LIST][16]; /* each model's stored format (its root dtype) */
  const char *steps, *cfg, *repeat;
  char *launch[MAX_WORDS], *extra[MAX_WORDS]; /* words of --launcher and --extra */
  int nlaunch, nextra;
  int dry_run; /* --dry-run: print the command lines, run nothing */
} bench_opts;

static void usage(FILE *f) {
  fprintf(f,
          "usage: staticpipe bench --model MODEL --cond FILE [options] -o DIR\n"
          "\n"
          "Runs every combination of the lists below (model x precision x ranks x devices x\n"
          "budget x stream-frac x order x frames x size, at most %d) as 'staticpipe run\n"
          "--json' (more than one\n"
          "rank: under the launcher), --repeat times each, and writes DIR/bench.json,\n"
          "bench.csv, bench.md and, when gnuplot is installed, bench-step.png (measured\n"
          "steady and predicted step time against the streamed share of the blocks, one\n"
          "series per order). Each file starts with the environment: GPUs, driver, CUDA,\n"
          "cuDNN, NCCL and MPI versions, the commit built. A row gives the mean and, over\n"
          "two runs or more, the standard deviation of the step time, of the seconds per\n"
          "clip (the sampling loop at --steps steps) and of the steps per second; the link\n"
          "between consecutive ranks' GPUs (NVLink or PCIe, generation, width, path; from\n"
          "NVML) and the rate measured for one activation message across it (the slowest\n"
          "hop, GB/s). vs_base is a row's steady step time over that of the same\n"
          "configuration at --stream-frac 0. A configuration that fails is reported in its\n"
          "row (its log: DIR/run-K-J.log, run J of configuration K) and the sweep goes on.\n"
          "\n"
          "  -m, --model MODEL     model file or synth:PRESET[:SEED] (required); repeat the\n"
          "                        flag for several (the same weights in other stored\n"
          "                        formats: bf16, fp8, int8, a GGUF file's; each row names\n"
          "                        the model and its format)\n"
          "  -c, --cond FILE       conditioning file, as for run (required)\n"
          "      --ranks LIST      pipeline ranks, comma separated, each 1..64 (default 1)\n"
          "      --devices LIST    the GPUs the ranks take, as for run (rank r: LIST[r mod\n"
          "                        its length]); repeat the flag for several, for example\n"
          "                        --devices 0,1 --devices 0,2 (default: not passed, rank r\n"
          "                        takes GPU r mod the GPUs visible)\n"
          "  -b, --budget STR      a budget, as for run; repeat the flag for several\n"
          "                        (default auto)\n"
          "      --stream-frac LIST  fractions 0..1 of each rank's blocks to stream, comma\n"
          "                        separated, passed to run as --stream-frac (default: not\n"
          "                        passed, the plan decides)\n"
          "      --order LIST      orders of work, auto, micro or block, comma separated,\n"
          "                        passed to run as --order (default: not passed, auto)\n"
          "  -f, --frames LIST     frames, comma separated (default 81)\n"
          "  -s, --size LIST       sizes HxW, comma separated (default 480x832)\n"
          "  -n, --steps N         sampling steps per run (default 2)\n"
          "  -g, --cfg G           guidance (default 5: two micro-batches)\n"
          "  -r, --repeat N        runs of each configuration, 1..%d (default 1)\n"
          "  -d, --device DEV      as for run (default auto)\n"
          "      --precision LIST  bf16, fp8 or int8, comma separated, passed to run as\n"
          "                        --precision (default: not passed, the model file's)\n"
          "      --extra \"ARGS\"    more words (split on blanks) for every run command line,\n"
          "                        for example \"--attn cudnn\" or \"--mem-trace\" (default\n"
          "                        none; not the flags bench sets itself)\n"
          "      --launcher CMD    MPI launcher command line (default 'mpirun'; for example\n"
          "                        'mpirun --oversubscribe' or 'srun --mpi=pmix'); the rank\n"
          "                        count follows it as srun spells it (--ntasks=N) when the\n"
          "                        first word is srun, else as mpirun does (-np N)\n"
          "      --dry-run         print each configuration's command line, one a line,\n"
          "                        and run nothing (nothing is written)\n"
          "  -o, --out DIR         output directory, created if missing (required)\n"
          "  -h, --help            this text\n",
          MAX_CONFIGS, MAX_REPEAT);
}

/* Copies a flag's value into buf (its list is split in place later). */
static int copy_arg(const char *flag, const char *s, char *buf, size_t size) {
  if (strlen(s) >= size) {
    sp_log_error("%s: longer than %zu characters", flag, size - 1);
    return SP_ERR_INPUT;
  }
  memcpy(buf, s, strlen(s) + 1);
  return SP_OK;
}

/* Splits a comma list in place into items (at most MAX_LIST). */
static int split_list(const char *flag, char *s, const char **items, int *n) {
  *n = 0;
  for (char *tok = strtok(s, ","); tok; tok = strtok(NULL, ",")) {
    if (*n == MAX_LIST) {
      sp_log_error("%s: more than %d values", flag, MAX_LIST);
      return SP_ERR_INPUT;
    }
    items[(*n)++] = tok;
  }
  if (*n == 0) {
    sp_log_error("%s: empty list", flag);
    return SP_ERR_INPUT;
  }
  return SP_OK;
}

/* Splits s in place on blanks into words (at most MAX_WORDS). */
static int split_words(const char *flag, char *s, char **words, int *n) {
  *n = 0;
  for (char *tok = strtok(s, " \t\n"); tok; tok = strtok(NULL, " \t\n")) {
    if (*n == MAX_WORDS) {
      sp_log_error("%s: more than %d words", flag, MAX_WORDS);
      return SP_ERR_INPUT;
    }
    words[(*n)++] = tok;
  }
  return SP_OK;
}

/* An --extra word must not reset what bench sets for every run (its rows
 * would then say one configuration and hold another): the long forms, any
 * prefix getopt_long would take for them, and the short ones. */
static int check_extra(char *const *words, int n) {
  static const char *set_long[] = {"model", "cond", "budget", "frames", "size", "steps", "cfg",
                                   "device", "devices", "out", "json", "order", "stream-frac",
                                   "precision", "help"};
  static const char set_short[] = "mcbfsngdojh";
  for (int i = 0; i < n; i++) {
    const char *w = words[i];
    int bad = 0;
    if (w[0] == '-' && w[1] == '-' && w[2]) {
      size_t len = strcspn(w + 2, "=");
      for (size_t k = 0; k < sizeof set_long / sizeof *set_long; k++)
        if (strncmp(set_long[k], w + 2, len) == 0) bad = 1;
    } else if (w[0] == '-' && w[1] && w[1] != '-') {
      bad = strchr(set_short, w[1]) != NULL;
    }
    if (bad) {
      sp_log_error("--extra: '%s' is a flag bench sets on every run itself (use bench's own "
                   "flag for it)", w);
      return SP_ERR_INPUT;
    }
  }
  return SP_OK;
}

/* Runs configuration k (row r) r->repeat times, or prints its command line
 * with --dry-run; returns 1 when a run failed (the configuration's later
 * runs are skipped: what fails once fails again). */
static int bench_one(const bench_opts *o, const char *self, int k, int total, bench_row *r) {
  char np[32], outp[4200], jsonp[4200], logp[4200];
  snprintf(outp, sizeof outp, "%s/run-%d.h5", o->dir, k);
  char *av[2 * MAX_WORDS + 40];
  int c = 0;
  if (r->ranks > 1) c = bench_launcher_words(o->launch, o->nlaunch, r->ranks, np, sizeof np, av);
  char *args[] = {(char *)self, "run", "--model", (char *)r->model, "--cond", (char *)o->cond,
                  "--budget", (char *)r->budget, "--frames", (char *)r->frames, "--size",
                  (char *)r->size, "--steps", (char *)o->steps, "--cfg", (char *)o->cfg,
                  "--device", (char *)o->device, "--no-preview", "--probe-links", "-q", "--json",
                  "-o", outp, NULL};
  for (int i = 0; args[i]; i++) av[c++] = args[i];
  /* The flags a configuration sets only when it has a value for them. */
  const char *const given[][2] = {{"--devices", r->devices},
                                  {"--precision", r->precision},
                                  {"--stream-frac", r->frac_arg},
                                  {"--order", r->order_arg}};
  for (size_t i = 0; i < sizeof given / sizeof given[0]; i++) {
    if (!given[i][1]) continue;
    av[c++] = (char *)given[i][0];
    av[c++] = (char *)given[i][1];
  }
  for (int i = 0; i < o->nextra; i++) av[c++] = o->extra[i];
  av[c] = NULL;
  if (o->dry_run) {
    bench_print_command(av);
    return 0;
  }
  sp_log_info("bench: %d/%d: %s (%s)%s%s, %d rank%s%s%s, budget %s, stream-frac %s, order %s, "
              "%s frames, %s, %d run%s",
              k + 1, total, r->model, r->format, r->precision ? " in " : "",
              r->precision ? r->precision : "", r->ranks, r->ranks > 1 ? "s" : "",
              r->devices ? " on GPUs " : "",
              r->devices ? r->devices : "", r->budget, r->frac_arg ? r->frac_arg : "(plan's)",
              r->order_arg ? r->order_arg : "(plan's)", r->frames, r->size, r->repeat,
              r->repeat > 1 ? "s" : "");
  for (int j = 0; j < r->repeat; j++) {
    snprintf(jsonp, sizeof jsonp, "%s/run-%d-%d.json", o->dir, k, j + 1);
    snprintf(logp, sizeof logp, "%s/run-%d-%d.log", o->dir, k, j + 1);
    r->status = bench_run_child(av, jsonp, logp);
    unlink(outp);
    if (r->status == 127) sp_log_error("bench: cannot start %s", av[0]);
    if (r->status == 0 && bench_parse_result(jsonp, r, &r->meas[j]) != SP_OK) {
      sp_log_warn("bench: configuration %d exited 0 but wrote no JSON result to %s", k + 1,
                  jsonp);
      r->status = SP_ERR_RUNTIME;
      return 1;
    }
    if (r->status != 0) {
      sp_log_warn("bench: configuration %d failed (exit %d): see %s", k + 1, r->status, logp);
      return 1;
    }
    r->runs++;
  }
  return 0;
}

/* The GPU indices of a --devices list ("0,2"), each 0..1023, into gpus
 * (at most BENCH_MAX_HOPS + 1). */
static int parse_devices(const char *s, int *gpus, int *n) {
  *n = 0;
  const char *p = s;
  do {
    char item[32];
    size_t len = strcspn(p, ",");
    int64_t v;
    if (*n == BENCH_MAX_HOPS + 1 || len >= sizeof item) {
      sp_log_error("--devices: '%s': at most %d indices of 0..1023", s, BENCH_MAX_HOPS + 1);
      return SP_ERR_INPUT;
    }
    memcpy(item, p, len);
    item[len] = '\0';
    if (job_parse_int64("--devices", item, 0, 1023, &v)) return SP_ERR_INPUT;
    gpus[(*n)++] = (int)v;
    p += len;
  } while (*p++ == ',');
  return SP_OK;
}

/* The parsed values of the sweep's lists. */
typedef struct bench_values {
  int ranks[MAX_LIST];
  double fracs[MAX_LIST];
  int frames[MAX_LIST], height[MAX_LIST], width[MAX_LIST];
  int gpus[MAX_LIST][BENCH_MAX_HOPS + 1], ngpus[MAX_LIST]; /* each --devices */
  int repeat;
} bench_values;

/* Checks every value of the sweep with the job's setters and validator,
 * as each child run will, and parses them into v. */
static int check_values(const bench_opts *o, bench_values *v) {
  job_opts jo;
  job_opts_default(&jo);
  if (job_opts_set(&jo, JOB_OPT_STEPS, o->steps) || job_opts_set(&jo, JOB_OPT_CFG, o->cfg) ||
      job_opts_check(&jo, 0))
    return SP_ERR_INPUT;
  int64_t x;
  if (job_parse_int64("--repeat", o->repeat, 1, MAX_REPEAT, &x)) return SP_ERR_INPUT;
  v->repeat = (int)x;
  for (int i = 0; i < o->nranks; i++) {
    if (job_parse_int64("--ranks", o->ranks[i], 1, 64, &x)) return SP_ERR_INPUT;
    v->ranks[i] = (int)x;
  }
  for (int i = 0; i < o->ndevices; i++)
    if (parse_devices(o->devices[i], v->gpus[i], &v->ngpus[i])) return SP_ERR_INPUT;
  /* Each list's values one at a time, the others at their defaults. */
  const struct { int id, n; const char *const *items; } lists[] = {
      {JOB_OPT_STREAM_FRAC, o->nfracs, o->fracs}, {JOB_OPT_ORDER, o->norders, o->orders},
      {JOB_OPT_FRAMES, o->nframes, o->frames},    {JOB_OPT_SIZE, o->nsizes, o->sizes},
      {JOB_OPT_PRECISION, o->nprecisions, o->precisions}};
  for (size_t l = 0; l < sizeof lists / sizeof lists[0]; l++)
    for (int i = 0; i < lists[l].n; i++) {
      job_opts one = jo;
      if (job_opts_set(&one, lists[l].id, lists[l].items[i]) || job_opts_check(&one, 0))
        return SP_ERR_INPUT;
      if (lists[l].id == JOB_OPT_STREAM_FRAC) v->fracs[i] = one.stream_frac;
      if (lists[l].id == JOB_OPT_FRAMES) v->frames[i] = (int)one.job.frames;
      if (lists[l].id == JOB_OPT_SIZE) {
        v->height[i] = (int)one.job.height;
        v->width[i] = (int)one.job.width;
      }
    }
  return SP_OK;
}

/* Every --devices index must be a GPU the ranks will see; without GPUs
 * here (a CPU build or none visible) the runs do not use them. */
static int check_devices(const bench_opts *o, const bench_values *v, const bench_topo *t) {
  const int n = bench_topo_count(t);
  for (int i = 0; i < o->ndevices && n > 0; i++)
    for (int k = 0; k < v->ngpus[i]; k++)
      if (v->gpus[i][k] >= n) {
        sp_log_error("--devices: '%s': GPU %d, but %d GPU%s visible (0..%d)", o->devices[i],
                     v->gpus[i][k], n, n > 1 ? "s are" : " is", n - 1);
        return SP_ERR_INPUT;
      }
  return SP_OK;
}

/* The links between the ranks' GPUs: rank r on gpus[r mod ngpus], as run
 * picks it (or on r mod the GPUs visible without --devices). */
static void row_links(const bench_topo *t, const int *gpus, int ngpus, bench_row *r) {
  const int n = bench_topo_count(t);
  r->hops = 0;
  if (n == 0) return;
  for (int q = 0; q < r->ranks; q++) r->hop_gpu[q] = gpus ? gpus[q % ngpus] : q % n;
  r->on_gpus = 1;
  r->hops = r->ranks - 1;
  for (int q = 0; q < r->hops; q++)
    bench_topo_link(t, r->hop_gpu[q], r->hop_gpu[q + 1], &r->link[q]);
}

/* The indices of configuration k in each list, the sweep's order: model,
 * precision, ranks, devices, budget, stream-frac, order, frames, size (the
 * last fastest). A list not passed has one entry. */
typedef struct sweep_at {
  int m, pr, a, d, b, q, p, f, s;
} sweep_at;

static sweep_at sweep_index(const bench_opts *o, int k) {
  const int n[9] = {o->nmodels,   o->nprecisions ? o->nprecisions : 1,
                    o->nranks,    o->ndevices ? o->ndevices : 1,
                    o->nbudgets,  o->nfracs ? o->nfracs : 1,
                    o->norders ? o->norders : 1, o->nframes, o->nsizes};
  int at[9];
  for (int i = 8; i >= 0; i--) {
    at[i] = k % n[i];
    k /= n[i];
  }
  return (sweep_at){at[0], at[1], at[2], at[3], at[4], at[5], at[6], at[7], at[8]};
}

/* Row k of the sweep; q0 is the first --stream-frac 0 (-1: none), each
 * row's base: the row alike at it. */
static void sweep_row(const bench_opts *o, const bench_values *v, int k, int q0, bench_meas *meas,
                      bench_row *r) {
  const sweep_at x = sweep_index(o, k);
  const int inner = (o->norders ? o->norders : 1) * o->nframes * o->nsizes;
  *r = (bench_row){.model = o->models[x.m],
                   .format = o->formats[x.m],
                   .precision = o->nprecisions ? o->precisions[x.pr] : NULL,
                   .ranks = v->ranks[x.a],
                   .devices = o->ndevices ? o->devices[x.d] : NULL,
                   .budget = o->budgets[x.b],
                   .frames = o->frames[x.f],
                   .nframes = v->frames[x.f],
                   .size = o->sizes[x.s],
                   .height = v->height[x.s],
                   .width = v->width[x.s],
                   .frac_arg = o->nfracs ? o->fracs[x.q] : NULL,
                   .frac = o->nfracs ? v->fracs[x.q] : 0,
                   .order_arg = o->norders ? o->orders[x.p] : NULL,
                   .base = q0 < 0 ? -1 : k + (q0 - x.q) * inner,
                   .repeat = v->repeat,
                   .meas = meas + (size_t)k * (size_t)v->repeat};
}

/* Runs every configuration of the sweep (total of them, sweep_index's
 * order) and writes the result files; q0 as sweep_row takes it. */
static int run_sweep(const bench_opts *o, const bench_values *v, const bench_topo *t, int total,
                     int q0) {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) {
    sp_log_error("bench: cannot find its own executable (/proc/self/exe)");
    return SP_ERR_RUNTIME;
  }
  self[n] = '\0';

  bench_row *rows = sp_xcalloc((size_t)total, sizeof *rows);
  bench_meas *meas = sp_xcalloc((size_t)total * (size_t)v->repeat, sizeof *meas);
  int failed = 0, rc;
  for (int k = 0; k < total; k++) {
    bench_row *r = &rows[k];
    sweep_row(o, v, k, q0, meas, r);
    const int d = sweep_index(o, k).d;
    row_links(t, o->ndevices ? v->gpus[d] : NULL, v->ngpus[d], r);
    failed += bench_one(o, self, k, total, r);
  }
  if (o->dry_run) {
    free(meas);
    free(rows);
    return SP_OK;
  }
  bench_env_item env[BENCH_ENV_ITEMS];
  bench_env_collect(t, env);
  rc = bench_write_outputs(o->dir, env, rows, total);
  if (rc == SP_OK) bench_plot(o->dir, env, rows, total);
  free(meas);
  free(rows);
  if (rc == SP_OK && failed)
    sp_log_warn("bench: %d of %d configurations failed", failed, total);
  return rc != SP_OK ? rc : failed ? SP_ERR_RUNTIME : SP_OK;
}

enum { O_LAUNCHER = 1000, O_ORDER, O_STREAM_FRAC, O_EXTRA, O_DRY_RUN, O_RANKS, O_DEVICES,
       O_PRECISION };

/* The text of the flags whose values are split in place (the lists of
 * bench_opts point into it), with their defaults. */
typedef struct bench_text {
  char ranks[256], frames[256], sizes[256], fracs[256], orders[256], precisions[256];
  char launcher[1024], extra[1024];
} bench_text;

/* Adds a value of a repeatable flag (--budget, --devices) to its list. */
static int add_value(const char *flag, const char *what, const char *v, const char **list,
                     int *n) {
  if (*n == MAX_LIST) {
    sp_log_error("%s: more than %d %s", flag, MAX_LIST, what);
    return SP_ERR_INPUT;
  }
  list[(*n)++] = v;
  return SP_OK;
}

/* One flag's value (getopt's ch, optarg) into o or t. SP_OK, SP_ERR_INPUT
 * (logged), or -1 for a ch that is not one of bench's value flags. */
static int parse_flag(int ch, bench_opts *o, bench_text *t) {
  switch (ch) {
  case 'm': return add_value("--model", "models", optarg, o->models, &o->nmodels);
  case 'c': o->cond = optarg; return SP_OK;
  case O_RANKS: return copy_arg("--ranks", optarg, t->ranks, sizeof t->ranks);
  case 'r': o->repeat = optarg; return SP_OK;
  case 'b': return add_value("--budget", "budgets", optarg, o->budgets, &o->nbudgets);
  case O_DEVICES: return add_value("--devices", "lists", optarg, o->devices, &o->ndevices);
  case 'f': return copy_arg("--frames", optarg, t->frames, sizeof t->frames);
  case 's': return copy_arg("--size", optarg, t->sizes, sizeof t->sizes);
  case 'n': o->steps = optarg; return SP_OK;
  case 'g': o->cfg = optarg; return SP_OK;
  case 'd': o->device = optarg; return SP_OK;
  case O_LAUNCHER: return copy_arg("--launcher", optarg, t->launcher, sizeof t->launcher);
  /* -1 until split: passed, so split and pass to run. */
  case O_ORDER:
    o->norders = -1;
    return copy_arg("--order", optarg, t->orders, sizeof t->orders);
  case O_STREAM_FRAC:
    o->nfracs = -1;
    return copy_arg("--stream-frac", optarg, t->fracs, sizeof t->fracs);
  case O_EXTRA: return copy_arg("--extra", optarg, t->extra, sizeof t->extra);
  case O_DRY_RUN: o->dry_run = 1; return SP_OK;
  case O_PRECISION:
    o->nprecisions = -1;
    return copy_arg("--precision", optarg, t->precisions, sizeof t->precisions);
  case 'o': o->dir = optarg; return SP_OK;
  default: return -1;
  }
}

/* The command line into o and t. Returns the status to end with, *help set
 * when --help was printed, or SP_OK with *help 0 to go on. */
static int parse_args(int argc, char **argv, bench_opts *o, bench_text *t, int *help) {
  static const struct option opts[] = {
      {"model", required_argument, 0, 'm'}, {"cond", required_argument, 0, 'c'},
      {"ranks", required_argument, 0, O_RANKS}, {"budget", required_argument, 0, 'b'},
      {"devices", required_argument, 0, O_DEVICES}, {"repeat", required_argument, 0, 'r'},
      {"frames", required_argument, 0, 'f'}, {"size", required_argument, 0, 's'},
      {"steps", required_argument, 0, 'n'}, {"cfg", required_argument, 0, 'g'},
      {"device", required_argument, 0, 'd'}, {"launcher", required_argument, 0, O_LAUNCHER},
      {"order", required_argument, 0, O_ORDER},
      {"stream-frac", required_argument, 0, O_STREAM_FRAC},
      {"extra", required_argument, 0, O_EXTRA},
      {"dry-run", no_argument, 0, O_DRY_RUN},
      {"precision", required_argument, 0, O_PRECISION},
      {"out", required_argument, 0, 'o'},   {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  *help = 0;
  cli_getopt_reset();
  int ch;
  while ((ch = getopt_long(argc, argv, "m:c:b:f:s:n:g:r:d:o:h", opts, NULL)) != -1) {
    if (ch == 'h') {
      usage(stdout);
      *help = 1;
      return SP_OK;
    }
    const int rc = parse_flag(ch, o, t);
    if (rc < 0) return cli_bad_usage("bench");
    if (rc != SP_OK) return rc;
  }
  if (optind < argc || !o->nmodels || !o->cond || !o->dir) {
    if (optind < argc) sp_log_error("bench: unexpected argument '%s'", argv[optind]);
    else
      sp_log_error("bench: %s is required",
                   !o->nmodels ? "--model" : !o->cond ? "--cond" : "--out");
    return cli_bad_usage("bench");
  }
  return SP_OK;
}

/* The lists split out of t into o (--budget auto when none was given). */
static int split_args(bench_opts *o, bench_text *t) {
  int rc;
  if (o->nbudgets == 0) o->budgets[o->nbudgets++] = "auto";
  if ((rc = split_list("--ranks", t->ranks, o->ranks, &o->nranks)) ||
      (rc = split_list("--frames", t->frames, o->frames, &o->nframes)) ||
      (rc = split_list("--size", t->sizes, o->sizes, &o->nsizes)) ||
      (o->nfracs && (rc = split_list("--stream-frac", t->fracs, o->fracs, &o->nfracs))) ||
      (o->norders && (rc = split_list("--order", t->orders, o->orders, &o->norders))) ||
      (o->nprecisions &&
       (rc = split_list("--precision", t->precisions, o->precisions, &o->nprecisions))) ||
      (rc = split_words("--launcher", t->launcher, o->launch, &o->nlaunch)) ||
      (rc = split_words("--extra", t->extra, o->extra, &o->nextra)) ||
      (rc = check_extra(o->extra, o->nextra)))
    return rc;
  if (o->nlaunch == 0) {
    sp_log_error("--launcher: empty command line");
    return SP_ERR_INPUT;
  }
  return SP_OK;
}

/* Each --model's stored format (its root dtype: bf16, fp8, int8, quant,
 * ...), from its metadata; a model that does not open is refused here. */
static int model_formats(bench_opts *o) {
  for (int i = 0; i < o->nmodels; i++) {
    rank_model *m = NULL;
    const int rc = rank_model_open(o->models[i], 0, &m);
    if (rc != SP_OK) return rc;
    snprintf(o->formats[i], sizeof o->formats[i], "%s",
             rank_model_dtype_name(rank_model_get_info(m)));
    rank_model_close(m);
  }
  return SP_OK;
}

/* The sweep's configurations into *total, at most MAX_CONFIGS. */
static int count_configs(const bench_opts *o, int *total) {
  const int nq = o->nfracs ? o->nfracs : 1, np = o->norders ? o->norders : 1;
  const int nd = o->ndevices ? o->ndevices : 1, npr = o->nprecisions ? o->nprecisions : 1;
  const long long total_ll = (long long)o->nmodels * npr * o->nranks * nd * o->nbudgets * nq *
                             np * o->nframes * o->nsizes;
  if (total_ll > MAX_CONFIGS) {
    sp_log_error("bench: the lists make %lld configurations (--model x --precision x --ranks x "
                 "--devices x --budget x --stream-frac x --order x --frames x --size), more than "
                 "%d: shorten one", total_ll, MAX_CONFIGS);
    return SP_ERR_INPUT;
  }
  *total = (int)total_ll;
  return SP_OK;
}

int cmd_bench(int argc, char **argv) {
  static bench_opts o; /* large: its lists */
  o = (bench_opts){.device = "auto", .steps = "2", .cfg = "5", .repeat = "1"};
  bench_text txt = {.ranks = "1", .frames = "81", .sizes = "480x832", .launcher = "mpirun"};
  int help = 0, total = 0;
  int rc = parse_args(argc, argv, &o, &txt, &help);
  if (rc != SP_OK || help) return rc;
  if ((rc = split_args(&o, &txt)) != SP_OK) return rc;
  /* Every value is checked before the first run, so a typo in the last
   * one does not cost the whole sweep. */
  bench_values v;
  memset(&v, 0, sizeof v);
  if ((rc = check_values(&o, &v)) != SP_OK) return rc;
  if ((rc = count_configs(&o, &total)) != SP_OK) return rc;
  if ((rc = model_formats(&o)) != SP_OK) return rc;
  /* The first --stream-frac 0, if any: each row's base is the row alike at it. */
  int q0 = -1;
  for (int i = 0; i < o.nfracs && q0 < 0; i++)
    if (v.fracs[i] == 0) q0 = i;

  bench_topo *t = NULL;
  if ((rc = bench_topo_open(&t)) != SP_OK) return rc;
  if ((rc = check_devices(&o, &v, t)) != SP_OK) {
    bench_topo_close(t);
    return rc;
  }
  if (!o.dry_run && mkdir(o.dir, 0755) != 0 && errno != EEXIST) {
    sp_log_error("--out: cannot create %s: %s", o.dir, strerror(errno));
    bench_topo_close(t);
    return SP_ERR_INPUT;
  }
  rc = run_sweep(&o, &v, t, total, q0);
  bench_topo_close(t);
  return rc;
}
