/* staticpipe bench: a sweep over configurations (model, precision, ranks,
 * GPUs, budget, streamed fraction, order, frames, size), each one `run --json` in a child
 * process (under the MPI launcher when it has more than one rank), repeated
 * --repeat times, collected into DIR/bench.json, bench.csv and bench.md
 * with the planner's prediction and the link between the ranks' GPUs
 * beside each measurement, and a PNG plot when gnuplot is installed.
 *
 * Every configuration is a job's parameters (ranks/pipeline/job_params.h):
 * bench's flags and the --extra words are set through the job's table and
 * setters, each configuration is checked by the job's validator before the
 * first run, and a run's command line is written from the job options it
 * was given. This file: the options, the checks, the sweep; the result
 * files are bench_report.c, the plot bench_plot.c, the children bench_child.c, the
 * machine bench_topo.c and bench_env.c. */
#include <errno.h>
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
#include "log.h"
#include "model_file.h"
#include "path_check.h"
#include "plan.h"

#define MAX_LIST 16     /* values per list flag */
#define MAX_WORDS 32    /* words of --launcher and of --extra */
#define MAX_CONFIGS 256 /* configurations per sweep */
#define MAX_REPEAT 100  /* runs per configuration */

enum { O_RANKS = JOB_OPT_COUNT, O_DEVICES, O_BUDGET, O_STREAM_FRAC, O_ORDER, O_FRAMES, O_SIZE,
       O_REPEAT, O_EXTRA, O_LAUNCHER, O_DRY_RUN, O_OUT, O_PRECISION, O_HELP };

/* A comma list split into items (in place in its own buffer). */
typedef struct bench_list {
  char buf[1024];
  char *item[MAX_LIST];
  int n; /* 0: not given */
} bench_list;

typedef struct bench_opts {
  job_params job;      /* --model, --cond, --steps, --cfg, --device, --extra's */
  cli_result given;    /* bench's flags as given (the job options' texts) */
  const char *dir;     /* --out */
  bench_list ranks, fracs, orders, frames, sizes, precisions;
  const char *models[MAX_LIST]; /* each --model (repeatable), from given */
  char formats[MAX_LIST][16];   /* each model's stored format (its root dtype) */
  int nmodels;
  const char *budgets[MAX_LIST], *devices[MAX_LIST]; /* repeatable: one per flag */
  int nbudgets, ndevices;
  int64_t repeat;
  char launch_buf[1024], extra_buf[1024];
  char *launch[MAX_WORDS], *extra[MAX_WORDS + 1]; /* words of --launcher and --extra */
  int nlaunch, nextra;
  int dry_run; /* --dry-run: print the command lines, run nothing */
} bench_opts;

static void bench_table(cli_opts *t) {
  static const int ids[] = {JOB_OPT_DEVICE};
  static const job_option own[] = {
      {JOB_OPT_MODEL, "model", 'm', "MODEL", NULL, 0,
       "model file or synth:PRESET[:SEED] (required); repeat the\n"
       "flag for several (the same weights in other stored\n"
       "formats: bf16, fp8, int8, a GGUF file's; each row names\n"
       "the model and its format)"},
      {JOB_OPT_COND, "cond", 'c', "FILE", NULL, 0, "conditioning file, as for run (required)"},
      {O_PRECISION, "precision", 0, "LIST", NULL, 0,
       "bf16, fp8 or int8, comma separated, passed to run as\n"
       "--precision (default: not passed, the model file's)"},
      {JOB_OPT_STEPS, "steps", 'n', "N", "2", 0, "sampling steps per run, as for run"},
      {JOB_OPT_CFG, "cfg", 'g', "G", "5", 0, "guidance, as for run (5: two micro-batches)"},
      {O_RANKS, "ranks", 0, "LIST", "1", 0, "pipeline ranks, comma separated, each 1..64"},
      {O_DEVICES, "devices", 0, "LIST", NULL, 0,
       "the GPUs the ranks take, as for run (rank r: LIST[r mod\n"
       "its length]); repeat the flag for several, for example\n"
       "--devices 0,1 --devices 0,2 (default: not passed, rank r\n"
       "takes GPU r mod the GPUs visible)"},
      {O_BUDGET, "budget", 'b', "STR", "auto", 0,
       "a budget, as for run; repeat the flag for\nseveral"},
      {O_STREAM_FRAC, "stream-frac", 0, "LIST", NULL, 0,
       "fractions 0..1 of each rank's blocks to stream, comma\n"
       "separated, passed to run as --stream-frac (default: not\n"
       "passed, the plan decides)"},
      {O_ORDER, "order", 0, "LIST", NULL, 0,
       "orders of work, auto, micro or block, comma separated,\n"
       "passed to run as --order (default: not passed, auto)"},
      {O_FRAMES, "frames", 'f', "LIST", "81", 0, "frames, comma separated"},
      {O_SIZE, "size", 's', "LIST", "480x832", 0, "sizes HxW, comma separated"},
      {O_REPEAT, "repeat", 'r', "N", "1", 0, "runs of each configuration, 1..100"},
      {O_EXTRA, "extra", 0, "\"ARGS\"", NULL, 0,
       "more run options (words split on blanks) for every run,\n"
       "for example \"--attn cudnn\" or \"--mem-trace\"; checked as\n"
       "run checks them, and none of those bench sets itself"},
      {O_LAUNCHER, "launcher", 0, "CMD", "mpirun", 0,
       "MPI launcher command line (for example 'mpirun\n"
       "--oversubscribe' or 'srun --mpi=pmix'); the rank count\n"
       "follows it as srun spells it (--ntasks=N) when the first\n"
       "word is srun, else as mpirun does (-np N)"},
      {O_DRY_RUN, "dry-run", 0, NULL, NULL, 0,
       "check every configuration, print each one's command\n"
       "line, one a line, and run nothing (nothing is written)"},
      {O_OUT, "out", 'o', "DIR", NULL, 0,
       "output directory, created if missing (required; not a\n"
       "file)"},
      {O_HELP, "help", 'h', NULL, NULL, 0, "this text"},
  };
  cli_opts_build(t, ids, (int)(sizeof ids / sizeof ids[0]), own,
                 (int)(sizeof own / sizeof own[0]));
  cli_opts_allow_repeat(t, O_BUDGET);
  cli_opts_allow_repeat(t, O_DEVICES);
  cli_opts_allow_repeat(t, JOB_OPT_MODEL);
}

static void usage(const cli_opts *t, FILE *f) {
  fprintf(f,
          "usage: staticpipe bench --model MODEL --cond FILE [options] -o DIR\n"
          "\n"
          "Runs every combination of the lists below (model x precision x ranks x devices x\n"
          "budget x stream-frac x order x frames x size, at most %d) as 'staticpipe run\n"
          "--json' (more than one rank: under the launcher), --repeat times each, and\n"
          "writes DIR/bench.json,\n"
          "bench.csv, bench.md and, when gnuplot is installed, bench-step.png (measured\n"
          "steady and predicted step time against the first of stream-frac, ranks,\n"
          "frames, size, budget and devices that varies, one panel per value of the\n"
          "others that vary, one series per order). Each file holds the environment\n"
          "(the CSV's is bench-env.csv): GPUs, driver, CUDA, cuDNN, NCCL and MPI\n"
          "versions, the commit built. A row gives the mean and, over\n"
          "two runs or more, the standard deviation of the step time, of the seconds per\n"
          "clip (the sampling loop at --steps steps) and of the steps per second; the link\n"
          "between consecutive ranks' GPUs (NVLink or PCIe, generation, width, path; from\n"
          "NVML) and the rate measured for one activation message across it (the slowest\n"
          "hop, GB/s). vs_base is a row's steady step time over that of the same\n"
          "configuration at --stream-frac 0. Every configuration is checked as run checks\n"
          "it before the first run (exit 2 for a bad one); a configuration that fails\n"
          "while running is reported in its row (its log: DIR/run-K-J.log, run J of\n"
          "configuration K) and the sweep goes on.\n"
          "\n",
          MAX_CONFIGS);
  cli_opts_usage(t, f);
}

/* ---- options ---- */

static int set_list(const char *flag, const char *v, bench_list *l) {
  return job_parse_list(flag, v, ',', l->buf, sizeof l->buf, l->item, MAX_LIST, &l->n);
}

static int add_value(const char *flag, const char *v, const char **list, int *n) {
  if (*n == MAX_LIST) {
    sp_log_error("%s: given more than %d times", flag, MAX_LIST);
    return SP_ERR_INPUT;
  }
  list[(*n)++] = v;
  return SP_OK;
}

/* Splits s on blanks into words (at most max), copied into buf. */
static int split_words(const char *flag, const char *s, char *buf, size_t cap, char **words,
                       int max, int *n) {
  if (strlen(s) >= cap) {
    sp_log_error("%s: longer than %zu characters", flag, cap - 1);
    return SP_ERR_INPUT;
  }
  snprintf(buf, cap, "%s", s);
  *n = 0;
  for (char *tok = strtok(buf, " \t\n"); tok; tok = strtok(NULL, " \t\n")) {
    if (*n == max) {
      sp_log_error("%s: more than %d words", flag, max);
      return SP_ERR_INPUT;
    }
    words[(*n)++] = tok;
  }
  return SP_OK;
}

static int bench_opt(void *ctx, int id, const char *v) {
  bench_opts *o = ctx;
  switch (id) {
  case O_RANKS: return set_list("--ranks", v, &o->ranks);
  case O_DEVICES: return add_value("--devices", v, o->devices, &o->ndevices);
  case O_BUDGET: return add_value("--budget", v, o->budgets, &o->nbudgets);
  case O_STREAM_FRAC: return set_list("--stream-frac", v, &o->fracs);
  case O_ORDER: return set_list("--order", v, &o->orders);
  case O_FRAMES: return set_list("--frames", v, &o->frames);
  case O_SIZE: return set_list("--size", v, &o->sizes);
  case O_PRECISION: return set_list("--precision", v, &o->precisions);
  case O_REPEAT: return job_parse_int64("--repeat", v, 1, MAX_REPEAT, &o->repeat);
  case O_EXTRA:
    return split_words("--extra", v, o->extra_buf, sizeof o->extra_buf, o->extra + 1, MAX_WORDS,
                       &o->nextra);
  case O_LAUNCHER:
    return split_words("--launcher", v, o->launch_buf, sizeof o->launch_buf, o->launch,
                       MAX_WORDS, &o->nlaunch);
  case O_DRY_RUN: o->dry_run = 1; return SP_OK;
  case O_OUT: o->dir = v; return SP_OK;
  default: return CLI_HELP;
  }
}

/* The job options bench gives every run, in this order: its own flags'
 * values and those it sets for measuring. An --extra word may set none of
 * them (the rows would say one configuration and hold another). */
static const int bench_sets[] = {
    JOB_OPT_MODEL, JOB_OPT_COND, JOB_OPT_BUDGET, JOB_OPT_FRAMES, JOB_OPT_SIZE, JOB_OPT_STEPS,
    JOB_OPT_CFG, JOB_OPT_DEVICE, JOB_OPT_NO_PREVIEW, JOB_OPT_PROBE_LINKS, JOB_OPT_QUIET,
    JOB_OPT_JSON, JOB_OPT_OUT, JOB_OPT_DEVICES, JOB_OPT_PRECISION, JOB_OPT_STREAM_FRAC,
    JOB_OPT_ORDER};
enum { BENCH_SETS = (int)(sizeof bench_sets / sizeof bench_sets[0]) };

/* --extra's words: run's options, set into o->job through run's table. */
static int extra_table_opt(void *ctx, int id, const char *v) {
  (void)ctx;
  (void)v;
  (void)id;
  sp_log_error("--extra: --help is not an option of a run");
  return SP_ERR_INPUT;
}
static void extra_table(cli_opts *t) {
  static const job_option own[] = {{O_HELP, "help", 'h', NULL, NULL, 0, "this text"}};
  cli_opts_build_job(t, own, 1);
}

/* The --extra word that gave option opt (its long name, an abbreviation of
 * it, or its letter), for the message. */
static const char *extra_word(const bench_opts *o, const job_option *opt) {
  for (int i = 1; i <= o->nextra; i++) {
    const char *w = o->extra[i];
    const size_t n = strcspn(w + 2, "=");
    if ((w[0] == '-' && w[1] == '-' && n && strncmp(w + 2, opt->name, n) == 0) ||
        (w[0] == '-' && w[1] != '-' && opt->short_name && w[1] == opt->short_name))
      return w;
  }
  return opt->name;
}

static int parse_extra(bench_opts *o) {
  static const cli_command cmd = {"bench --extra", extra_table, extra_table_opt, NULL, 0};
  cli_result res;
  o->extra[0] = "--extra";
  if (cli_command_parse_into(&cmd, o->nextra + 1, o->extra, &o->job, NULL, &res) != SP_OK)
    return SP_ERR_INPUT;
  for (int i = 0; i < res.given.n; i++)
    for (int k = 0; k < BENCH_SETS; k++)
      if (res.given.opt[i]->id == bench_sets[k]) {
        sp_log_error("--extra: '%s' is --%s, an option bench sets on every run itself (use "
                     "bench's own flag for it)",
                     extra_word(o, res.given.opt[i]), res.given.opt[i]->name);
        return SP_ERR_INPUT;
      }
  return SP_OK;
}

/* The text a job option was given with (its last), else def. */
static const char *given_text(const bench_opts *o, int id, const char *def) {
  const char *v = def;
  for (int i = 0; i < o->given.given.n; i++)
    if (o->given.given.opt[i]->id == id) v = o->given.given.value[i];
  return v;
}

static int parse_args(int argc, char **argv, bench_opts *o) {
  static const cli_command cmd = {"bench", bench_table, bench_opt, usage, 0};
  memset(o, 0, sizeof *o);
  o->repeat = 1;
  int rc = cli_command_parse(&cmd, argc, argv, &o->job, o, &o->given);
  if (rc != SP_OK || o->given.help) return rc;
  /* The lists' defaults, as their table entries say. */
  if (!o->ranks.n) set_list("--ranks", "1", &o->ranks);
  if (!o->frames.n) set_list("--frames", "81", &o->frames);
  if (!o->sizes.n) set_list("--size", "480x832", &o->sizes);
  if (!o->nbudgets) o->budgets[o->nbudgets++] = "auto";
  if (!o->nlaunch) split_words("--launcher", "mpirun", o->launch_buf, sizeof o->launch_buf,
                               o->launch, MAX_WORDS, &o->nlaunch);
  if (o->nlaunch == 0) {
    sp_log_error("--launcher: empty command line");
    return SP_ERR_INPUT;
  }
  for (int i = 0; i < o->given.given.n; i++)
    if (o->given.given.opt[i]->id == JOB_OPT_MODEL &&
        add_value("--model", o->given.given.value[i], o->models, &o->nmodels) != SP_OK)
      return SP_ERR_INPUT;
  const char *missing = !o->nmodels ? "--model" : !o->job.job.cond[0] ? "--cond"
                        : !o->dir ? "--out" : NULL;
  if ((rc = cli_require("bench", missing)) != SP_OK) return rc;
  return parse_extra(o);
}

/* ---- the configurations ---- */

/* The parsed values of the sweep's lists. */
typedef struct bench_values {
  int ranks[MAX_LIST];
  int gpus[MAX_LIST][BENCH_MAX_HOPS + 1], ngpus[MAX_LIST]; /* each --devices */
} bench_values;

/* The value of job option id that bench gives row r's runs: NULL when not
 * passed, "" for a switch. */
static const char *value_of(const bench_opts *o, const bench_row *r, const char *out, int id) {
  switch (id) {
  case JOB_OPT_MODEL: return r->model;
  case JOB_OPT_COND: return o->job.job.cond;
  case JOB_OPT_BUDGET: return r->budget;
  case JOB_OPT_FRAMES: return r->frames;
  case JOB_OPT_SIZE: return r->size;
  case JOB_OPT_STEPS: return given_text(o, JOB_OPT_STEPS, "2");
  case JOB_OPT_CFG: return given_text(o, JOB_OPT_CFG, "5");
  case JOB_OPT_DEVICE: return o->job.device;
  case JOB_OPT_NO_PREVIEW:
  case JOB_OPT_PROBE_LINKS:
  case JOB_OPT_QUIET:
  case JOB_OPT_JSON: return "";
  case JOB_OPT_OUT: return out;
  case JOB_OPT_DEVICES: return r->devices;
  case JOB_OPT_PRECISION: return r->precision;
  case JOB_OPT_STREAM_FRAC: return r->frac_arg;
  case JOB_OPT_ORDER: return r->order_arg;
  default: return NULL;
  }
}

/* Row r as run's parameters: bench's, the --extra words, the row's
 * values; checked by run's validator (SP_ERR_INPUT: every row with the
 * value is bad, the sweep is refused). A budget that only this row's rank
 * count refuses (a 2-rank budget in a --ranks 1,2 sweep) marks the row
 * refused (status SP_ERR_INPUT, not run) and the others go on. The row's
 * numbers are taken from the parameters. */
static int config_check(const bench_opts *o, bench_row *r, const char *out, int k) {
  job_params p = o->job;
  for (int k = 0; k < BENCH_SETS; k++) {
    const char *v = value_of(o, r, out, bench_sets[k]);
    if (v && job_params_set(&p, bench_sets[k], v[0] || job_option_get(bench_sets[k])->arg
                                                  ? v : NULL) != SP_OK)
      return SP_ERR_INPUT;
  }
  if (job_params_check(&p, JOB_CHECK_RUN) != SP_OK) return SP_ERR_INPUT;
  char err[1024];
  plan_budget b;
  if (p.layout_mode != PLAN_GRID_GIVEN && p.layout_mode != PLAN_GRID_AUTO &&
      plan_budget_parse(r->budget, r->ranks, &b, err, sizeof err) != PLAN_OK) {
    sp_log_warn("bench: configuration %d refused, not run: --budget %s with --ranks %d: %s",
                k + 1, r->budget, r->ranks, err);
    r->status = SP_ERR_INPUT;
  }
  r->nframes = (int)p.job.frames;
  r->height = (int)p.job.height;
  r->width = (int)p.job.width;
  r->frac = r->frac_arg ? p.stream_frac : 0;
  return SP_OK;
}

/* The command line of row r's runs into av (NULL-terminated): the
 * launcher's words for more than one rank, then run with every option
 * bench sets, then the --extra words. */
static void config_argv(const bench_opts *o, const bench_row *r, const char *self,
                        const char *out, char *np, size_t npn, char **av) {
  int c = 0;
  if (r->ranks > 1) c = bench_launcher_words(o->launch, o->nlaunch, r->ranks, np, npn, av);
  static char names[BENCH_SETS][48];
  av[c++] = (char *)self;
  av[c++] = "run";
  for (int k = 0; k < BENCH_SETS; k++) {
    const char *v = value_of(o, r, out, bench_sets[k]);
    if (!v) continue;
    snprintf(names[k], sizeof names[k], "--%s", job_option_get(bench_sets[k])->name);
    av[c++] = names[k];
    if (job_option_get(bench_sets[k])->arg) av[c++] = (char *)v;
  }
  for (int i = 0; i < o->nextra; i++) av[c++] = o->extra[i + 1];
  av[c] = NULL;
}

/* The GPU indices of a --devices list ("0,2"), each 0..1023, into gpus
 * (at most BENCH_MAX_HOPS + 1). */
static int parse_devices(const char *s, int *gpus, int *n) {
  char buf[1024], *items[BENCH_MAX_HOPS + 1];
  if (job_parse_list("--devices", s, ',', buf, sizeof buf, items, BENCH_MAX_HOPS + 1, n) != SP_OK)
    return SP_ERR_INPUT;
  for (int i = 0; i < *n; i++) {
    int64_t v;
    if (job_parse_int64("--devices", items[i], 0, 1023, &v)) return SP_ERR_INPUT;
    gpus[i] = (int)v;
  }
  return SP_OK;
}

/* The lists' own values (ranks, GPUs), and the paths: the inputs, and
 * -o a directory or a new path, not a file. */
static int check_values(const bench_opts *o, bench_values *v) {
  int64_t x;
  for (int i = 0; i < o->ranks.n; i++) {
    if (job_parse_int64("--ranks", o->ranks.item[i], 1, 64, &x)) return SP_ERR_INPUT;
    v->ranks[i] = (int)x;
  }
  for (int i = 0; i < o->ndevices; i++)
    if (parse_devices(o->devices[i], v->gpus[i], &v->ngpus[i])) return SP_ERR_INPUT;
  job_params p = o->job;
  p.job.out[0] = '\0'; /* each run checks its own output */
  for (int i = 0; i < o->nmodels; i++) {
    p.model = o->models[i];
    if (job_params_check_paths(&p) != SP_OK) return SP_ERR_INPUT;
  }
  if (rank_path_check_input("--cond", o->job.job.cond, RANK_PATH_FILE) != SP_OK)
    return SP_ERR_INPUT;
  struct stat st;
  if (stat(o->dir, &st) == 0 && !S_ISDIR(st.st_mode)) {
    sp_log_error("--out %s: is a file: bench writes a directory of results (bench.json, ...)",
                 o->dir);
    return SP_ERR_INPUT;
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

/* The sweep's configurations into *total, at most MAX_CONFIGS. */
static int count_configs(const bench_opts *o, int *total) {
  const int nq = o->fracs.n ? o->fracs.n : 1, np = o->orders.n ? o->orders.n : 1;
  const int nd = o->ndevices ? o->ndevices : 1, npr = o->precisions.n ? o->precisions.n : 1;
  const long long total_ll = (long long)o->nmodels * npr * o->ranks.n * nd * o->nbudgets * nq *
                             np * o->frames.n * o->sizes.n;
  if (total_ll > MAX_CONFIGS) {
    sp_log_error("bench: the lists make %lld configurations (--model x --precision x --ranks x "
                 "--devices x --budget x --stream-frac x --order x --frames x --size), more than "
                 "%d: shorten one", total_ll, MAX_CONFIGS);
    return SP_ERR_INPUT;
  }
  *total = (int)total_ll;
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

/* The indices of configuration k in each list, the sweep's order: model,
 * precision, ranks, devices, budget, stream-frac, order, frames, size (the
 * last fastest). A list not passed has one entry. */
typedef struct sweep_at {
  int m, pr, a, d, b, q, p, f, s;
} sweep_at;

static sweep_at sweep_index(const bench_opts *o, int k) {
  const int n[9] = {o->nmodels,   o->precisions.n ? o->precisions.n : 1,
                    o->ranks.n,   o->ndevices ? o->ndevices : 1,
                    o->nbudgets,  o->fracs.n ? o->fracs.n : 1,
                    o->orders.n ? o->orders.n : 1, o->frames.n, o->sizes.n};
  int at[9];
  for (int i = 8; i >= 0; i--) {
    at[i] = k % n[i];
    k /= n[i];
  }
  return (sweep_at){at[0], at[1], at[2], at[3], at[4], at[5], at[6], at[7], at[8]};
}

/* Every row of the sweep (total of them, sweep_index's order), each
 * checked (config_check) before any runs; each row's base is the row
 * alike at the first --stream-frac 0 (-1: none). */
static int make_rows(const bench_opts *o, const bench_values *v, const bench_topo *t,
                     bench_row *rows, bench_meas *meas, int total) {
  const int inner = (o->orders.n ? o->orders.n : 1) * o->frames.n * o->sizes.n;
  int q0 = -1;
  for (int i = 0; i < o->fracs.n && q0 < 0; i++) {
    double f;
    if (job_parse_double("--stream-frac", o->fracs.item[i], 0, 1, &f) != SP_OK)
      return SP_ERR_INPUT;
    if (f == 0) q0 = i;
  }
  char out[4200];
  for (int k = 0; k < total; k++) {
    const sweep_at x = sweep_index(o, k);
    bench_row *r = &rows[k];
    *r = (bench_row){.model = o->models[x.m],
                     .format = o->formats[x.m],
                     .precision = o->precisions.n ? o->precisions.item[x.pr] : NULL,
                     .ranks = v->ranks[x.a],
                     .devices = o->ndevices ? o->devices[x.d] : NULL,
                     .budget = o->budgets[x.b],
                     .frames = o->frames.item[x.f],
                     .size = o->sizes.item[x.s],
                     .frac_arg = o->fracs.n ? o->fracs.item[x.q] : NULL,
                     .order_arg = o->orders.n ? o->orders.item[x.p] : NULL,
                     /* k with q in place of q0: this row's base */
                     .base = q0 < 0 ? -1 : k + (q0 - x.q) * inner,
                     .repeat = (int)o->repeat,
                     .meas = meas + (size_t)k * (size_t)o->repeat};
    snprintf(out, sizeof out, "%s/run-%d.h5", o->dir, k);
    if (config_check(o, r, out, k) != SP_OK) {
      sp_log_error("bench: configuration %d refused (above): nothing was run", k + 1);
      return SP_ERR_INPUT;
    }
    row_links(t, o->ndevices ? v->gpus[x.d] : NULL, v->ngpus[x.d], r);
  }
  return SP_OK;
}

/* ---- running ---- */

/* Runs configuration k (row r) r->repeat times, or prints its command line
 * with --dry-run; returns 1 when a run failed (the configuration's later
 * runs are skipped: what fails once fails again). */
static int bench_one(const bench_opts *o, const char *self, int k, int total, bench_row *r) {
  char np[32], outp[4200], jsonp[4200], logp[4200];
  if (r->status != 0) return 1; /* refused when checked (config_check) */
  snprintf(outp, sizeof outp, "%s/run-%d.h5", o->dir, k);
  char *av[2 * MAX_WORDS + 2 * BENCH_SETS + 8];
  config_argv(o, r, self, outp, np, sizeof np, av);
  if (o->dry_run) {
    bench_print_command(av);
    return 0;
  }
  sp_log_info("bench: %d/%d: %s (%s)%s%s, %d rank%s%s%s, budget %s, stream-frac %s, order %s, "
              "%s frames, %s, %d run%s",
              k + 1, total, r->model, r->format, r->precision ? " in " : "",
              r->precision ? r->precision : "", r->ranks, r->ranks > 1 ? "s" : "",
              r->devices ? " on GPUs " : "", r->devices ? r->devices : "", r->budget,
              r->frac_arg ? r->frac_arg : "(plan's)", r->order_arg ? r->order_arg : "(plan's)",
              r->frames, r->size, r->repeat, r->repeat > 1 ? "s" : "");
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

/* Runs (or prints) every row and writes the result files. */
static int run_sweep(const bench_opts *o, const bench_topo *t, bench_row *rows, int total) {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) {
    sp_log_error("bench: cannot find its own executable (/proc/self/exe)");
    return SP_ERR_RUNTIME;
  }
  self[n] = '\0';
  int failed = 0;
  for (int k = 0; k < total; k++) failed += bench_one(o, self, k, total, &rows[k]);
  if (o->dry_run) return SP_OK;
  bench_env_item env[BENCH_ENV_ITEMS];
  bench_env_collect(t, env);
  int rc = bench_write_outputs(o->dir, env, rows, total);
  if (rc == SP_OK) rc = bench_plot(o->dir, env, rows, total);
  if (rc == SP_OK && failed) sp_log_warn("bench: %d of %d configurations failed", failed, total);
  return rc != SP_OK ? rc : failed ? SP_ERR_RUNTIME : SP_OK;
}

int cmd_bench(int argc, char **argv) {
  static bench_opts o;
  int total = 0;
  int rc = parse_args(argc, argv, &o);
  if (rc != SP_OK || o.given.help) return rc;
  /* Every value and configuration is checked before the first run, so a
   * typo in the last one does not cost the whole sweep. */
  static bench_values v;
  memset(&v, 0, sizeof v);
  if ((rc = check_values(&o, &v)) != SP_OK) return rc;
  if ((rc = count_configs(&o, &total)) != SP_OK) return rc;
  if ((rc = model_formats(&o)) != SP_OK) return rc;
  bench_topo *t = NULL;
  if ((rc = bench_topo_open(&t)) != SP_OK) return rc;
  bench_row *rows = sp_xcalloc((size_t)total, sizeof *rows);
  bench_meas *meas = sp_xcalloc((size_t)total * (size_t)o.repeat, sizeof *meas);
  if ((rc = check_devices(&o, &v, t)) == SP_OK) rc = make_rows(&o, &v, t, rows, meas, total);
  if (rc == SP_OK && !o.dry_run && mkdir(o.dir, 0755) != 0 && errno != EEXIST) {
    sp_log_error("--out: cannot create %s: %s", o.dir, strerror(errno));
    rc = SP_ERR_INPUT;
  }
  if (rc == SP_OK) rc = run_sweep(&o, t, rows, total);
  free(meas);
  free(rows);
  bench_topo_close(t);
  return rc;
}
