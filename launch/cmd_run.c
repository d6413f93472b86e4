/* staticpipe run: sample a clip, on one process or as a pipeline of MPI
 * ranks (mpirun -np N staticpipe run ...). Parses the flags into the job's
 * parameters (ranks/pipeline/job_params.h), checked before anything runs,
 * runs them in a session (job_session.h) and prints the plan and the
 * summary. */
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "job_session.h"
#include "jobs.h"
#include "json_out.h"
#include "log.h"

enum { O_HELP = JOB_OPT_COUNT };

/* run takes every job option, in the table's order, then its own. */
static void run_table(cli_opts *t) {
  static const job_option own[] = {
      {O_HELP, "help", 'h', NULL, NULL, 0, "this text"},
  };
  cli_opts_build_job(t, own, (int)(sizeof own / sizeof own[0]));
}

static void run_usage(const cli_opts *t, FILE *f) {
  fprintf(f,
          "usage: staticpipe run --model MODEL --cond FILE [options] -o FILE\n"
          "       staticpipe run --model MODEL --t5 T5 --prompt TEXT [--negative TEXT] [options] -o FILE\n"
          "       staticpipe run --model MODEL --jobs FILE [options]\n"
          "       PRODUCER | staticpipe run --model MODEL --jobs - [options]   (a queue)\n"
          "       mpirun -np N staticpipe run ...     (a pipeline of N ranks; srun works too)\n"
          "\n"
          "Samples a clip: the flow-matching loop of Wan 2.1 with classifier-free guidance.\n"
          "Under mpirun the blocks are split over the ranks by the planner; --layout RxSxU\n"
          "adds replicas (R) and sequence-parallel ranks per stage (U) beside the S\n"
          "pipeline stages. The latents are bit-identical for any number of ranks and layout.\n"
          "With --t5 and --prompt (or prompt= lines), rank 0 first encodes the prompts with\n"
          "the UMT5 text encoder (on its GPU in bf16 when the run is on CUDA, as 'staticpipe\n"
          "encode --device cuda' does, else on the CPU in fp32, as 'staticpipe encode' does;\n"
          "every --jobs prompt's context stays in rank 0's host memory until its job runs),\n"
          "frees the encoder, then the model's blocks load.\n"
          "\n");
  cli_opts_usage(t, f);
  fprintf(f, "Threads per rank: OMP_NUM_THREADS (results do not depend on it).\n");
}

static int run_opt(void *ctx, int id, const char *value) {
  (void)ctx;
  (void)id;
  (void)value;
  return CLI_HELP; /* O_HELP, its one own option */
}

/* Every rank parses the same arguments and reaches the same verdict: the
 * options, their rules and the device (a CUDA one must be here). The
 * caller prints --help (on rank 0 only). */
static int run_parse(int argc, char **argv, job_params *p, int *help) {
  static const cli_command cmd = {"run", run_table, run_opt, NULL, 0};
  cli_result res;
  int rc = cli_command_parse(&cmd, argc, argv, p, NULL, &res);
  *help = res.help;
  if (rc != SP_OK || *help) return rc;
  rank_device dev;
  if (job_params_check(p, JOB_CHECK_RUN) != SP_OK || job_device_resolve(p, &dev) != SP_OK)
    return cli_bad_usage("run");
  return SP_OK;
}

static void print_rank_table(const comm_world *w, const job_rank_stats *all) {
  fprintf(stderr, "# rank  blocks     order  streamed  loaded_MB  load_s  compute_s  wait_s  "
                  "send_s  host\n");
  for (int r = 0; r < w->size; r++)
    fprintf(stderr, "  %4d  %3d..%-3d  %-5s  %8d  %9.1f  %6.2f  %9.2f  %6.2f  %6.2f  %s\n", r,
            all[r].first, all[r].last, plan_order_name(all[r].order), all[r].streamed,
            (double)all[r].bytes_loaded / 1e6, all[r].load_s, all[r].compute_s, all[r].wait_s,
            all[r].send_s, w->hosts[r]);
}

static void json_num(json_object *o, const char *key, double v) {
  json_object_object_add(o, key, json_object_new_double(v));
}
static void json_int(json_object *o, const char *key, uint64_t v) {
  json_object_object_add(o, key, json_object_new_int64((int64_t)v));
}

static json_object *rank_json(const comm_world *w, int r, const job_rank_stats *a) {
  json_object *o = json_object_new_object();
  json_object_object_add(o, "rank", json_object_new_int(r));
  json_object_object_add(o, "host", io_json_string(w->hosts[r]));
  json_object_object_add(o, "first_block", json_object_new_int(a->first));
  json_object_object_add(o, "last_block", json_object_new_int(a->last));
  json_int(o, "bytes_loaded", a->bytes_loaded);
  json_num(o, "load_s", a->load_s);
  json_num(o, "weights_s", a->weights_s);
  json_num(o, "compute_s", a->compute_s);
  json_num(o, "wait_s", a->wait_s);
  json_num(o, "send_s", a->send_s);
  json_num(o, "queue_s", a->queue_s);
  json_object_object_add(o, "order", json_object_new_string(plan_order_name(a->order)));
  json_object_object_add(o, "streamed_blocks", json_object_new_int(a->streamed));
  json_int(o, "h2d_bytes_per_step", a->steps ? a->h2d_bytes / (uint64_t)a->steps : 0);
  json_int(o, "arena_bytes", a->arena_bytes);
  json_int(o, "device_in_use_bytes", a->device_in_use);
  json_int(o, "device_peak_bytes", a->device_peak);
  json_int(o, "plan_peak_bytes", a->plan_peak_bytes);
  json_int(o, "act_bytes", a->act_bytes);
  if (r < w->size - 1) json_num(o, "link_gbs", a->link_gbs);
  return o;
}

/* Step caching (rank 0's record): the spec, micro-batch steps skipped and
 * in all over every job, and per branch the steps the last cached job
 * skipped (0-based). */
static void cache_json(json_object *root, const job_session *s) {
  rank_cache_spec spec;
  const uint8_t *act;
  int steps, micro;
  int64_t skipped, total;
  if (!job_session_cache(s, &spec, &act, &steps, &micro, &skipped, &total)) return;
  char text[64];
  rank_cache_format(&spec, text, sizeof text);
  json_object *c = json_object_new_object();
  json_object_object_add(c, "method", json_object_new_string(text));
  json_int(c, "skipped_micro_batch_steps", (uint64_t)skipped);
  json_int(c, "micro_batch_steps", (uint64_t)total);
  json_object *br = json_object_new_array();
  for (int b = 0; b < micro; b++) {
    json_object *l = json_object_new_array();
    for (int i = 0; i < steps; i++)
      if (act[i * micro + b] == RANK_CACHE_SKIP) json_object_array_add(l, json_object_new_int(i));
    json_object_array_add(br, l);
  }
  json_object_object_add(c, "skipped_steps", br);
  json_object_object_add(root, "cache", c);
  json_int(root, "cache_skipped_steps", (uint64_t)skipped);
}

static void print_json(const comm_world *w, const plan *p, const job_rank_stats *all,
                       const job_session *s, const job_spec *j) {
  json_object *root = json_object_new_object();
  if (j->prompt[0]) { /* the texts the run encoded ("" negative: Wan's own) */
    json_object_object_add(root, "prompt", io_json_string(j->prompt));
    json_object_object_add(root, "negative", io_json_string(j->negative));
  }
  size_t cap = 1 << 16;
  char *pj = sp_xmalloc(cap);
  plan_format_json(p, pj, cap);
  json_object_object_add(root, "plan", json_tokener_parse(pj));
  free(pj);
  json_object *ranks = json_object_new_array();
  for (int r = 0; r < w->size; r++) json_object_array_add(ranks, rank_json(w, r, &all[r]));
  json_object_object_add(root, "ranks", ranks);
  /* Rank 0 sees every step start and end (it receives the latents). */
  const job_rank_stats *a0 = &all[0];
  json_object_object_add(root, "steps", json_object_new_int(a0->steps));
  json_num(root, "sample_s", a0->sample_s);
  json_num(root, "step_ms", a0->steps ? 1e3 * a0->sample_s / a0->steps : 0.0);
  /* Without each loop's first step: the steady state (one-time costs such
   * as first-call GEMM heuristics land in the first step). */
  const int later = a0->steps - a0->groups;
  json_num(root, "steady_step_ms",
           later > 0 ? 1e3 * (a0->sample_s - a0->first_step_s) / later
           : a0->steps ? 1e3 * a0->sample_s / a0->steps : 0.0);
  /* Two experts: the steps that switch (blocks swapped in, where the plan
   * says swap) against the mean of the others but each loop's first. */
  if (a0->switch_steps) {
    const double sw = 1e3 * a0->switch_s / a0->switch_steps,
                 other = a0->other_steps ? 1e3 * a0->other_s / a0->other_steps : 0.0;
    json_num(root, "switch_step_ms", sw);
    json_num(root, "other_step_ms", other);
    json_num(root, "switch_ratio", other > 0 ? sw / other : 0.0);
  }
  cache_json(root, s);
  printf("%s\n", json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN));
  fflush(stdout);
  json_object_put(root);
}

int cmd_run(int argc, char **argv) {
  comm_world w;
  job_params o;
  int help = 0;
  /* --timeout also bounds MPI start-up, so the options (the budget among
   * them) are read and checked before MPI starts: silently, since the parse
   * below reports any error once, on rank 0. */
  sp_log_set_level(-1);
  if (run_parse(argc, argv, &o, &help) != SP_OK) job_params_default(&o);
  sp_log_set_level(1);
  comm_init(&argc, &argv, 0, o.timeout, &w);
  help = 0;
  /* Every rank parses the same arguments and reaches the same verdict; only
   * rank 0 speaks. Then rank 0 checks every path (its file system is the
   * one the inputs and outputs are named on) and every rank learns it. */
  if (w.rank != 0) sp_log_set_level(-1);
  int rc = run_parse(argc, argv, &o, &help);
  sp_log_set_level(1);
  if (help && w.rank == 0) {
    cli_opts t;
    run_table(&t);
    run_usage(&t, stdout);
  }
  if (!help && rc == SP_OK)
    rc = comm_phase_end(&w, w.rank == 0 ? job_params_check_paths(&o) : SP_OK,
                        "checking the paths", "stopping");
  if (help || rc != SP_OK) {
    comm_finalize(&w);
    return rc;
  }
  if (o.quiet) sp_log_set_level(0);

  job_session *s = NULL;
  job_rank_stats *all = NULL;
  rc = job_session_open(&w, &o, &s);
  if (rc == SP_OK) rc = job_session_plan(s);
  const plan *p = job_session_get_plan(s);
  if (rc == SP_OK && p && w.rank == 0 && !o.quiet) {
    char table[16384];
    plan_format_table(p, table, sizeof table);
    fprintf(stderr, "%s", table);
  }
  if (rc == SP_OK) rc = job_session_run(s);
  rc = job_session_finish(s, rc, &all);
  if (all && !o.quiet) print_rank_table(&w, all);
  if (all && o.json) print_json(&w, p, all, s, &o.job);
  free(all);
  job_session_close(s);
  comm_set_phase("finishing");
  comm_finalize(&w);
  comm_log_close();
  return rc;
}
