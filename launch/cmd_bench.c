/* staticpipe bench: a sweep over configurations (ranks, budget, frames,
 * size), each one `run --json` in a child process (under the MPI launcher
 * when it has more than one rank), collected into DIR/bench.json,
 * bench.csv and bench.md, with the planner's prediction beside each
 * measurement, and PNG plots when gnuplot is installed. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <json-c/json.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "atomic_file.h"
#include "cli.h"
#include "commands.h"
#include "log.h"

extern char **environ;

#define MAX_LIST 16

typedef struct bench_opts {
  const char *model, *cond, *device, *launcher, *dir;
  const char *ranks[MAX_LIST], *budgets[MAX_LIST], *frames[MAX_LIST], *sizes[MAX_LIST];
  int nranks, nbudgets, nframes, nsizes;
  const char *steps, *cfg;
} bench_opts;

typedef struct bench_row {
  int ranks;
  const char *budget, *frames, *size;
  int status;           /* exit status of the run */
  double step_ms;       /* measured on rank 0 */
  double predicted_ms;  /* the planner's */
  double streamed;      /* share of the blocks streamed */
  double load_s;        /* slowest rank's load */
} bench_row;

static void usage(FILE *f) {
  fprintf(f,
          "usage: staticpipe bench --model MODEL --cond FILE [options] -o DIR\n"
          "\n"
          "Runs every combination of the lists below as 'staticpipe run --json' (more than\n"
          "one rank: under the launcher) and writes DIR/bench.json, bench.csv, bench.md and,\n"
          "when gnuplot is installed, bench-step.png (measured and predicted step time\n"
          "against the streamed share of the blocks). A configuration that fails is\n"
          "reported in its row (its log: DIR/run-K.log) and the sweep goes on.\n"
          "\n"
          "  -m, --model MODEL     model file or synth:PRESET[:SEED] (required)\n"
          "  -c, --cond FILE       conditioning file, as for run (required)\n"
          "  -r, --ranks LIST      pipeline ranks, comma separated (default 1)\n"
          "  -b, --budget STR      a budget, as for run; repeat the flag for several\n"
          "                        (default auto)\n"
          "  -f, --frames LIST     frames, comma separated (default 81)\n"
          "  -s, --size LIST       sizes HxW, comma separated (default 480x832)\n"
          "  -n, --steps N         sampling steps per run (default 2)\n"
          "  -g, --cfg G           guidance (default 5: two micro-batches)\n"
          "  -d, --device DEV      as for run (default auto)\n"
          "      --launcher CMD    MPI launcher command line (default 'mpirun'; for example\n"
          "                        'mpirun --oversubscribe' or 'srun')\n"
          "  -o, --out DIR         output directory, created if missing (required)\n"
          "  -h, --help            this text\n");
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

/* Runs argv with stdout to out_path and stderr to log_path; returns the
 * exit status (or 128 + signal). */
static int run_child(char *const *argv, const char *out_path, const char *log_path) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid;
  int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return 127; /* not found or not runnable: the caller says what it means */
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void parse_result(const char *path, bench_row *r) {
  json_object *j = json_object_from_file(path), *v, *plan, *ranks;
  if (!j) return;
  if (json_object_object_get_ex(j, "step_ms", &v)) r->step_ms = json_object_get_double(v);
  if (json_object_object_get_ex(j, "plan", &plan)) {
    if (json_object_object_get_ex(plan, "predicted_step_ms", &v))
      r->predicted_ms = json_object_get_double(v);
    int nb = 0, ns = 0;
    if (json_object_object_get_ex(plan, "num_blocks", &v)) nb = json_object_get_int(v);
    if (json_object_object_get_ex(plan, "ranks", &ranks))
      for (size_t i = 0; i < json_object_array_length(ranks); i++) {
        json_object *rk = json_object_array_get_idx(ranks, i), *s;
        if (json_object_object_get_ex(rk, "streamed", &s)) ns += (int)json_object_array_length(s);
      }
    r->streamed = nb ? (double)ns / nb : 0;
  }
  if (json_object_object_get_ex(j, "ranks", &ranks))
    for (size_t i = 0; i < json_object_array_length(ranks); i++) {
      json_object *rk = json_object_array_get_idx(ranks, i), *s;
      if (json_object_object_get_ex(rk, "load_s", &s) && json_object_get_double(s) > r->load_s)
        r->load_s = json_object_get_double(s);
    }
  json_object_put(j);
}

/* Writes text to DIR/name atomically. */
static int write_file(const char *dir, const char *name, const char *text) {
  char path[4200], tmp[4300];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  int rc = rank_atomic_begin(path, tmp, sizeof tmp);
  if (rc != SP_OK) return rc;
  FILE *f = fopen(tmp, "w");
  if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
    sp_log_error("%s: cannot write", path);
    rank_atomic_abort(tmp);
    return SP_ERR_RUNTIME;
  }
  return rank_atomic_commit(tmp, path);
}

static int write_outputs(const bench_opts *o, const bench_row *rows, int n) {
  json_object *arr = json_object_new_array();
  size_t cap = 4096 + (size_t)n * 256;
  char *csv = sp_xcalloc(cap, 1), *md = sp_xcalloc(cap, 1), *dat = sp_xcalloc(cap, 1);
  size_t lc = 0, lm = 0, ld = 0;
  lc += (size_t)snprintf(csv + lc, cap - lc,
                         "ranks,budget,frames,size,status,step_ms,predicted_ms,streamed,load_s\n");
  lm += (size_t)snprintf(md + lm, cap - lm,
                         "| ranks | budget | frames | size | status | step ms | predicted ms | "
                         "streamed | load s |\n|---|---|---|---|---|---|---|---|---|\n");
  for (int i = 0; i < n; i++) {
    const bench_row *r = &rows[i];
    json_object *j = json_object_new_object();
    json_object_object_add(j, "ranks", json_object_new_int(r->ranks));
    json_object_object_add(j, "budget", json_object_new_string(r->budget));
    json_object_object_add(j, "frames", json_object_new_string(r->frames));
    json_object_object_add(j, "size", json_object_new_string(r->size));
    json_object_object_add(j, "status", json_object_new_int(r->status));
    json_object_object_add(j, "step_ms", json_object_new_double(r->step_ms));
    json_object_object_add(j, "predicted_step_ms", json_object_new_double(r->predicted_ms));
    json_object_object_add(j, "streamed_fraction", json_object_new_double(r->streamed));
    json_object_object_add(j, "load_s", json_object_new_double(r->load_s));
    json_object_array_add(arr, j);
    lc += (size_t)snprintf(csv + lc, cap - lc, "%d,\"%s\",%s,%s,%d,%.3f,%.3f,%.4f,%.3f\n",
                           r->ranks, r->budget, r->frames, r->size, r->status, r->step_ms,
                           r->predicted_ms, r->streamed, r->load_s);
    lm += (size_t)snprintf(md + lm, cap - lm, "| %d | `%s` | %s | %s | %s | %.1f | %.1f | %.2f | %.2f |\n",
                           r->ranks, r->budget, r->frames, r->size,
                           r->status ? "failed" : "ok", r->step_ms, r->predicted_ms, r->streamed,
                           r->load_s);
    if (!r->status)
      ld += (size_t)snprintf(dat + ld, cap - ld, "%.4f %.3f %.3f\n", r->streamed, r->step_ms,
                             r->predicted_ms);
  }
  int rc = write_file(o->dir, "bench.json",
                      json_object_to_json_string_ext(arr, JSON_C_TO_STRING_PRETTY));
  if (rc == SP_OK) rc = write_file(o->dir, "bench.csv", csv);
  if (rc == SP_OK) rc = write_file(o->dir, "bench.md", md);
  if (rc == SP_OK) rc = write_file(o->dir, "bench-step.dat", dat);
  fputs(md, stderr);
  json_object_put(arr);
  free(csv);
  free(md);
  free(dat);
  return rc;
}

/* PNG plot of the step time against the streamed share, when gnuplot is
 * there; its absence is said, not an error. */
static void plot(const char *dir) {
  char script[4200];
  snprintf(script, sizeof script, "%s/bench-step.gp", dir);
  FILE *f = fopen(script, "w");
  if (!f) return;
  fprintf(f,
          "set terminal png size 900,600\nset output '%s/bench-step.png'\n"
          "set xlabel 'streamed share of the blocks'\nset ylabel 'step time (ms)'\n"
          "set key left top\nplot '%s/bench-step.dat' using 1:2 with points pt 7 title "
          "'measured', '' using 1:3 with points pt 6 title 'planner prediction'\n",
          dir, dir);
  fclose(f);
  char *argv[] = {"gnuplot", script, NULL};
  char out[4300], log[4300];
  snprintf(out, sizeof out, "%s/gnuplot.out", dir);
  snprintf(log, sizeof log, "%s/gnuplot.log", dir);
  int rc = run_child(argv, out, log);
  if (rc == 0)
    sp_log_info("bench: wrote %s/bench-step.png", dir);
  else
    sp_log_warn("bench: no plot (gnuplot %s; apt-get install gnuplot-nox draws it); the data "
                "is in %s/bench-step.dat with %s",
                rc == 127 ? "not found" : "failed", dir, script);
}

int cmd_bench(int argc, char **argv) {
  enum { O_LAUNCHER = 1000 };
  static const struct option opts[] = {
      {"model", required_argument, 0, 'm'}, {"cond", required_argument, 0, 'c'},
      {"ranks", required_argument, 0, 'r'}, {"budget", required_argument, 0, 'b'},
      {"frames", required_argument, 0, 'f'}, {"size", required_argument, 0, 's'},
      {"steps", required_argument, 0, 'n'}, {"cfg", required_argument, 0, 'g'},
      {"device", required_argument, 0, 'd'}, {"launcher", required_argument, 0, O_LAUNCHER},
      {"out", required_argument, 0, 'o'},   {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  bench_opts o = {.device = "auto", .launcher = "mpirun", .steps = "2", .cfg = "5"};
  char rbuf[256] = "1", fbuf[256] = "81", sbuf[256] = "480x832";
  cli_getopt_reset();
  int ch, rc = SP_OK;
  while ((ch = getopt_long(argc, argv, "m:c:r:b:f:s:n:g:d:o:h", opts, NULL)) != -1) {
    switch (ch) {
    case 'm': o.model = optarg; break;
    case 'c': o.cond = optarg; break;
    case 'r': snprintf(rbuf, sizeof rbuf, "%s", optarg); break;
    case 'b':
      if (o.nbudgets == MAX_LIST) {
        sp_log_error("--budget: more than %d budgets", MAX_LIST);
        return SP_ERR_INPUT;
      }
      o.budgets[o.nbudgets++] = optarg;
      break;
    case 'f': snprintf(fbuf, sizeof fbuf, "%s", optarg); break;
    case 's': snprintf(sbuf, sizeof sbuf, "%s", optarg); break;
    case 'n': o.steps = optarg; break;
    case 'g': o.cfg = optarg; break;
    case 'd': o.device = optarg; break;
    case O_LAUNCHER: o.launcher = optarg; break;
    case 'o': o.dir = optarg; break;
    case 'h': usage(stdout); return SP_OK;
    default: return cli_bad_usage("bench");
    }
  }
  if (optind < argc || !o.model || !o.cond || !o.dir) {
    if (optind < argc) sp_log_error("bench: unexpected argument '%s'", argv[optind]);
    else sp_log_error("bench: %s is required", !o.model ? "--model" : !o.cond ? "--cond" : "--out");
    return cli_bad_usage("bench");
  }
  if (o.nbudgets == 0) o.budgets[o.nbudgets++] = "auto";
  if ((rc = split_list("--ranks", rbuf, o.ranks, &o.nranks)) ||
      (rc = split_list("--frames", fbuf, o.frames, &o.nframes)) ||
      (rc = split_list("--size", sbuf, o.sizes, &o.nsizes)))
    return rc;
  int ranks[MAX_LIST];
  for (int i = 0; i < o.nranks; i++) {
    int64_t v;
    if (cli_parse_int64("--ranks", o.ranks[i], 1, 64, &v)) return SP_ERR_INPUT;
    ranks[i] = (int)v;
  }
  if (mkdir(o.dir, 0755) != 0 && errno != EEXIST) {
    sp_log_error("--out: cannot create %s: %s", o.dir, strerror(errno));
    return SP_ERR_INPUT;
  }
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) {
    sp_log_error("bench: cannot find its own executable (/proc/self/exe)");
    return SP_ERR_RUNTIME;
  }
  self[n] = '\0';
  /* The launcher's words (split on blanks). */
  char launch[1024];
  snprintf(launch, sizeof launch, "%s", o.launcher);
  char *lw[16];
  int nl = 0;
  for (char *t = strtok(launch, " \t"); t && nl < 12; t = strtok(NULL, " \t")) lw[nl++] = t;

  int total = o.nranks * o.nbudgets * o.nframes * o.nsizes;
  bench_row *rows = sp_xcalloc((size_t)total, sizeof *rows);
  int k = 0, failed = 0;
  for (int a = 0; a < o.nranks; a++)
    for (int b = 0; b < o.nbudgets; b++)
      for (int f = 0; f < o.nframes; f++)
        for (int s = 0; s < o.nsizes; s++, k++) {
          bench_row *r = &rows[k];
          *r = (bench_row){ranks[a], o.budgets[b], o.frames[f], o.sizes[s], 0, 0, 0, 0, 0};
          char np[16], outp[4200], jsonp[4200], logp[4200];
          snprintf(np, sizeof np, "%d", r->ranks);
          snprintf(outp, sizeof outp, "%s/run-%d.h5", o.dir, k);
          snprintf(jsonp, sizeof jsonp, "%s/run-%d.json", o.dir, k);
          snprintf(logp, sizeof logp, "%s/run-%d.log", o.dir, k);
          char *av[64];
          int c = 0;
          if (r->ranks > 1) {
            for (int i = 0; i < nl; i++) av[c++] = lw[i];
            av[c++] = "-np";
            av[c++] = np;
          }
          char *args[] = {self, "run", "--model", (char *)o.model, "--cond", (char *)o.cond,
                          "--budget", (char *)r->budget, "--frames", (char *)r->frames,
                          "--size", (char *)r->size, "--steps", (char *)o.steps, "--cfg",
                          (char *)o.cfg, "--device", (char *)o.device, "--no-preview", "-q",
                          "--json", "-o", outp, NULL};
          for (int i = 0; args[i]; i++) av[c++] = args[i];
          av[c] = NULL;
          sp_log_info("bench: %d/%d: %d rank%s, budget %s, %s frames, %s", k + 1, total,
                      r->ranks, r->ranks > 1 ? "s" : "", r->budget, r->frames, r->size);
          r->status = run_child(av, jsonp, logp);
          if (r->status == 127) sp_log_error("bench: cannot start %s", av[0]);
          if (r->status == 0)
            parse_result(jsonp, r);
          else {
            failed++;
            sp_log_warn("bench: configuration %d failed (exit %d): see %s", k + 1, r->status,
                        logp);
          }
          unlink(outp);
        }
  rc = write_outputs(&o, rows, total);
  if (rc == SP_OK) plot(o.dir);
  free(rows);
  if (rc == SP_OK && failed)
    sp_log_warn("bench: %d of %d configurations failed", failed, total);
  return rc != SP_OK ? rc : failed ? SP_ERR_RUNTIME : SP_OK;
}
