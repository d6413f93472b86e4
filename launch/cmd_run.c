/* staticpipe run: sample a clip, on one process or as a pipeline of MPI
 * ranks (mpirun -np N staticpipe run ...). */
#include <getopt.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "comm.h"
#include "commands.h"
#include "inputs.h"
#include "log.h"
#include "model_file.h"
#include "model_plan.h"
#include "noise.h"
#include "pipeline.h"
#include "plan.h"
#include "preview.h"
#include "sampler.h"
#include "stage.h"

typedef struct run_opts {
  const char *model, *cond, *noise, *out, *budget, *device;
  int64_t frames, height, width;
  int steps;
  double cfg, shift, timeout;
  uint64_t seed;
  rank_sampler_kind sampler;
  int verify, quiet, preview, json;
} run_opts;

static void usage(FILE *f) {
  fprintf(f,
          "usage: staticpipe run --model MODEL --cond FILE [options] -o FILE\n"
          "       mpirun -np N staticpipe run ...     (a pipeline of N ranks)\n"
          "\n"
          "Samples a clip: the flow-matching loop of Wan 2.1 with classifier-free guidance.\n"
          "Under mpirun the blocks are split over the ranks by the planner; the latents are\n"
          "bit-identical for any number of ranks.\n"
          "\n"
          "  -m, --model MODEL     model file or synth:PRESET[:SEED] (required)\n"
          "  -c, --cond FILE       HDF5 with 'context' float32 [L, 4096], L <= 512, and, when\n"
          "                        --cfg is not 1, 'context_null' (the encoded negative\n"
          "                        prompt); see launch/encode_prompt.py (required)\n"
          "  -f, --frames N        frames, 4k+1 (default 81)\n"
          "  -s, --size HxW        height x width in pixels, multiples of 16 (default 480x832)\n"
          "  -n, --steps N         sampling steps (default 50)\n"
          "  -g, --cfg G           guidance scale; 1 runs the conditional branch only\n"
          "                        (default 5)\n"
          "      --shift S         schedule shift (default 5)\n"
          "      --sampler NAME    unipc (default; the published UniPC, order 2, bh2) or euler\n"
          "      --seed K          noise seed (default 0): Philox keyed by element index,\n"
          "                        identical on every machine and rank count\n"
          "      --noise FILE      initial noise: dataset 'noise' float32 [16, F, H/8, W/8];\n"
          "                        overrides --seed\n"
          "  -o, --out FILE        output: dataset 'latents' float32 [16, F, H/8, W/8] with the\n"
          "                        settings as attributes, and a preview FILE.png; both written\n"
          "                        atomically by the last rank (required)\n"
          "  -b, --budget STR      memory budget per rank (default auto); see 'staticpipe plan\n"
          "                        --help' for the forms (bytes, ratio, fraction, auto)\n"
          "  -d, --device DEV      cpu (default; the CUDA backend is not implemented yet)\n"
          "      --timeout S       longest wait on a peer rank before the job is ended\n"
          "                        (default 300 s)\n"
          "      --no-preview      do not write FILE.png\n"
          "      --no-verify       do not check the weights' checksums while loading\n"
          "  -q, --quiet           no progress lines\n"
          "  -j, --json            print a JSON summary on stdout (the plan, and per rank its\n"
          "                        blocks, bytes loaded and times)\n"
          "  -h, --help            this text\n"
          "Threads per rank: OMP_NUM_THREADS (results do not depend on it).\n");
}

static int parse(int argc, char **argv, run_opts *o, int *help) {
  enum { O_SHIFT = 1000, O_SAMPLER, O_SEED, O_NOISE, O_TIMEOUT, O_NO_PREVIEW, O_NO_VERIFY };
  static const struct option opts[] = {
      {"model", required_argument, 0, 'm'},   {"cond", required_argument, 0, 'c'},
      {"frames", required_argument, 0, 'f'},  {"size", required_argument, 0, 's'},
      {"steps", required_argument, 0, 'n'},   {"cfg", required_argument, 0, 'g'},
      {"shift", required_argument, 0, O_SHIFT}, {"sampler", required_argument, 0, O_SAMPLER},
      {"seed", required_argument, 0, O_SEED}, {"noise", required_argument, 0, O_NOISE},
      {"out", required_argument, 0, 'o'},     {"budget", required_argument, 0, 'b'},
      {"device", required_argument, 0, 'd'},  {"timeout", required_argument, 0, O_TIMEOUT},
      {"no-preview", no_argument, 0, O_NO_PREVIEW}, {"no-verify", no_argument, 0, O_NO_VERIFY},
      {"quiet", no_argument, 0, 'q'},         {"help", no_argument, 0, 'h'},
      {"json", no_argument, 0, 'j'},
      {0, 0, 0, 0}};
  *o = (run_opts){.frames = 81, .height = 480, .width = 832, .steps = 50, .cfg = 5, .shift = 5,
                  .timeout = 300, .sampler = RANK_SAMPLER_UNIPC, .verify = 1, .preview = 1,
                  .device = "cpu"};
  int64_t v;
  cli_getopt_reset();
  int ch;
  while ((ch = getopt_long(argc, argv, "m:c:f:s:n:g:o:b:d:qjh", opts, NULL)) != -1) {
    switch (ch) {
    case 'm': o->model = optarg; break;
    case 'c': o->cond = optarg; break;
    case 'f':
      if (cli_parse_int64("--frames", optarg, 1, 4097, &o->frames)) return SP_ERR_INPUT;
      break;
    case 's':
      if (cli_parse_size_hw("--size", optarg, &o->height, &o->width)) return SP_ERR_INPUT;
      break;
    case 'n':
      if (cli_parse_int64("--steps", optarg, 1, 10000, &v)) return SP_ERR_INPUT;
      o->steps = (int)v;
      break;
    case 'g':
      if (cli_parse_double("--cfg", optarg, 0, 100, &o->cfg)) return SP_ERR_INPUT;
      break;
    case O_SHIFT:
      if (cli_parse_double("--shift", optarg, 1e-3, 1e3, &o->shift)) return SP_ERR_INPUT;
      break;
    case O_SAMPLER:
      if (rank_sampler_kind_parse(optarg, &o->sampler)) return SP_ERR_INPUT;
      break;
    case O_SEED:
      if (cli_parse_uint64("--seed", optarg, &o->seed)) return SP_ERR_INPUT;
      break;
    case O_NOISE: o->noise = optarg; break;
    case 'o': o->out = optarg; break;
    case 'b': o->budget = optarg; break;
    case 'd': o->device = optarg; break;
    case O_TIMEOUT:
      if (cli_parse_double("--timeout", optarg, 1, 1e6, &o->timeout)) return SP_ERR_INPUT;
      break;
    case O_NO_PREVIEW: o->preview = 0; break;
    case O_NO_VERIFY: o->verify = 0; break;
    case 'q': o->quiet = 1; break;
    case 'j': o->json = 1; break;
    case 'h': *help = 1; return SP_OK;
    default: return cli_bad_usage("run");
    }
  }
  if (optind < argc) {
    sp_log_error("run: unexpected argument '%s'", argv[optind]);
    return cli_bad_usage("run");
  }
  const char *missing = !o->model ? "--model" : !o->cond ? "--cond" : !o->out ? "--out" : NULL;
  if (missing) {
    sp_log_error("run: %s is required", missing);
    return cli_bad_usage("run");
  }
  if ((o->frames - 1) % 4 != 0) {
    sp_log_error("--frames: %lld is not of the form 4k+1 (81, 41, 17, 5, 1, ...)",
                 (long long)o->frames);
    return SP_ERR_INPUT;
  }
  if (o->height % 16 || o->width % 16) {
    sp_log_error("--size: %lldx%lld: height and width must be multiples of 16",
                 (long long)o->height, (long long)o->width);
    return SP_ERR_INPUT;
  }
  if (strcmp(o->device, "cpu") != 0) {
    sp_log_error("--device: '%s' is not available: this version has the cpu backend only",
                 o->device);
    return SP_ERR_INPUT;
  }
  return SP_OK;
}

/* After each phase every rank learns the worst status; a rank that did not
 * fail itself says which rank did, so every rank ends with one line. */
static int phase(const comm_world *w, int rc, const char *what) {
  int who = 0;
  int all = comm_agree_who(w, rc, &who);
  if (all != SP_OK && rc == SP_OK)
    sp_log_error("stopping: rank %d (host %s) failed while %s", who, w->hosts[who], what);
  return all;
}

static uint64_t host_memory(void) {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
}

typedef struct rank_summary {
  int first, last;
  uint64_t bytes_loaded;
  double load_s, compute_s, wait_s, send_s;
} rank_summary;

/* Rank 0 plans, every rank gets the plan and checks it applies to it. */
static int make_plan(const comm_world *w, const run_opts *o, rank_model *m, int micro,
                     int64_t ctx_len, plan *p) {
  plan_device me;
  memset(&me, 0, sizeof me);
  snprintf(me.name, sizeof me.name, "cpu");
  /* CPU backend: a rank's "device" is its share of the node's memory. */
  me.host_bytes = host_memory();
  me.total_bytes = me.free_bytes = me.host_bytes / (uint64_t)w->local_size;
  me.speed = 1.0;
  plan_device *devs = sp_xcalloc((size_t)w->size, sizeof *devs);
  comm_gather(w, &me, sizeof me, devs, 0);
  uint8_t wire[PLAN_WIRE_MAX];
  uint64_t len = 0;
  int rc = SP_OK;
  char err[4096] = "";
  if (w->rank == 0) {
    const wan_config *c = &rank_model_get_info(m)->config;
    uint64_t *bb = sp_xcalloc((size_t)c->layers, sizeof *bb);
    plan_model pm;
    rank_model_plan_sizes(m, 4, bb, &pm);
    plan_budget b;
    plan_options po;
    plan_options_default(&po);
    plan_workload wl = {o->frames, o->height, o->width, micro, ctx_len};
    if (w->size > PLAN_MAX_RANKS) {
      sp_log_error("run: %d ranks, the planner handles at most %d", w->size, PLAN_MAX_RANKS);
      rc = SP_ERR_INPUT;
    } else if (plan_budget_parse(o->budget, w->size, &b, err, sizeof err) != PLAN_OK) {
      sp_log_error("--budget: %s", err);
      rc = SP_ERR_INPUT;
    } else if (plan_make(&pm, devs, w->size, &b, &wl, &po, p, err, sizeof err) != PLAN_OK) {
      sp_log_error("plan: %s", err);
      rc = SP_ERR_INPUT;
    } else {
      size_t n = 0;
      if (plan_encode(p, wire, sizeof wire, &n, err, sizeof err) != PLAN_OK) {
        sp_log_error("plan: %s", err);
        rc = SP_ERR_RUNTIME;
      }
      len = n;
    }
    free(bb);
  }
  free(devs);
  if ((rc = phase(w, rc, "planning")) != SP_OK) return rc;
  comm_bcast(w, &len, sizeof len, 0);
  comm_bcast(w, wire, (size_t)len, 0);
  if (w->rank != 0 && plan_decode(wire, (size_t)len, p, err, sizeof err) != PLAN_OK) {
    sp_log_error("plan from rank 0 is not valid: %s", err);
    rc = SP_ERR_RUNTIME;
  } else if (p->nranks != w->size) {
    sp_log_error("plan is for %d ranks, the job has %d", p->nranks, w->size);
    rc = SP_ERR_RUNTIME;
  } else if (p->r[w->rank].budget_bytes > me.total_bytes) {
    sp_log_error("plan gives this rank a budget of %.2f GB, it has %.2f GB",
                 (double)p->r[w->rank].budget_bytes / 1e9, (double)me.total_bytes / 1e9);
    rc = SP_ERR_INPUT;
  }
  return phase(w, rc, "checking the plan");
}

static int write_output(const run_opts *o, const rank_model_info *mi, const int64_t *lat,
                        const float *latents) {
  rank_outfile *f = NULL;
  int rc = rank_outfile_open(o->out, &f);
  if (rc != SP_OK) return rc;
  char size[64];
  snprintf(size, sizeof size, "%lldx%lld", (long long)o->height, (long long)o->width);
  rc = rank_outfile_put(f, "latents", 4, lat, latents);
  if (rc == SP_OK && o->noise) rc = rank_outfile_attr_str(f, "noise_file", o->noise);
  if (rc == SP_OK && !o->noise) rc = rank_outfile_attr_i64(f, "seed", (int64_t)o->seed);
  if (rc == SP_OK) rc = rank_outfile_attr_i64(f, "steps", o->steps);
  if (rc == SP_OK) rc = rank_outfile_attr_f64(f, "cfg", o->cfg);
  if (rc == SP_OK) rc = rank_outfile_attr_f64(f, "shift", o->shift);
  if (rc == SP_OK) rc = rank_outfile_attr_str(f, "sampler", rank_sampler_kind_name(o->sampler));
  if (rc == SP_OK) rc = rank_outfile_attr_i64(f, "frames", o->frames);
  if (rc == SP_OK) rc = rank_outfile_attr_str(f, "size", size);
  if (rc == SP_OK) rc = rank_outfile_attr_str(f, "model", mi->source);
  if (rc == SP_OK) rc = rank_outfile_attr_str(f, "model_checksum", mi->checksum);
  if (rc != SP_OK) {
    rank_outfile_abort(f);
    return rc;
  }
  /* The preview first: if it fails, no latents file claims success. */
  if (o->preview) {
    char png[4200];
    snprintf(png, sizeof png, "%s.png", o->out);
    rc = rank_preview_write_png(png, latents, lat[0], lat[1], lat[2], lat[3]);
    if (rc != SP_OK) {
      rank_outfile_abort(f);
      return rc;
    }
  }
  return rank_outfile_commit(f);
}

static void print_json(const comm_world *w, const plan *p, const rank_summary *all) {
  json_object *root = json_object_new_object();
  size_t cap = 1 << 16;
  char *pj = sp_xmalloc(cap);
  plan_format_json(p, pj, cap);
  json_object *plan_obj = json_tokener_parse(pj);
  free(pj);
  json_object_object_add(root, "plan", plan_obj);
  json_object *ranks = json_object_new_array();
  for (int r = 0; r < w->size; r++) {
    json_object *o = json_object_new_object();
    json_object_object_add(o, "rank", json_object_new_int(r));
    json_object_object_add(o, "host", json_object_new_string(w->hosts[r]));
    json_object_object_add(o, "first_block", json_object_new_int(all[r].first));
    json_object_object_add(o, "last_block", json_object_new_int(all[r].last));
    json_object_object_add(o, "bytes_loaded", json_object_new_int64((int64_t)all[r].bytes_loaded));
    json_object_object_add(o, "load_s", json_object_new_double(all[r].load_s));
    json_object_object_add(o, "compute_s", json_object_new_double(all[r].compute_s));
    json_object_object_add(o, "wait_s", json_object_new_double(all[r].wait_s));
    json_object_object_add(o, "send_s", json_object_new_double(all[r].send_s));
    json_object_array_add(ranks, o);
  }
  json_object_object_add(root, "ranks", ranks);
  printf("%s\n", json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN));
  fflush(stdout);
  json_object_put(root);
}

int cmd_run(int argc, char **argv) {
  comm_world w;
  comm_init(&argc, &argv, 0, &w);
  run_opts o;
  int help = 0;
  /* Every rank parses the same arguments and reaches the same verdict; only
   * rank 0 speaks. */
  if (w.rank != 0) sp_log_set_level(-1);
  int rc = parse(argc, argv, &o, &help);
  sp_log_set_level(1);
  if (help && w.rank == 0) usage(stdout);
  if (help || rc != SP_OK) {
    comm_finalize(&w);
    return rc;
  }
  if (o.quiet) sp_log_set_level(0);

  rank_model *m = NULL;
  rank_tensor ctx[2] = {{0}, {0}}, noise = {0};
  rank_stage *stage = NULL;
  float *latents = NULL, *ctx_emb = NULL;
  const int micro = o.cfg != 1.0 ? 2 : 1;
  int64_t lat[4] = {16, (o.frames - 1) / 4 + 1, o.height / 8, o.width / 8};
  const int64_t n = lat[0] * lat[1] * lat[2] * lat[3];
  rank_summary sum = {0};
  plan p;
  memset(&p, 0, sizeof p);

  rc = rank_model_open(o.model, o.verify, &m);
  if ((rc = phase(&w, rc, "opening the model")) != SP_OK) goto done;
  const rank_model_info *mi = rank_model_get_info(m);
  const wan_config *c = &mi->config;

  /* Inputs are read and checked on rank 0 before any weight is read. */
  int64_t ctx_len = 0;
  if (w.rank == 0) {
    rc = inputs_read_context(o.cond, "context", c, &ctx[0]);
    if (rc == SP_OK && micro == 2) {
      int has = 0;
      rc = rank_tensor_exists(o.cond, "context_null", &has);
      if (rc == SP_OK && !has) {
        sp_log_error("%s: dataset 'context_null' (the encoded negative prompt) is missing; it "
                     "is needed for --cfg %g (or run with --cfg 1)",
                     o.cond, o.cfg);
        rc = SP_ERR_INPUT;
      }
      if (rc == SP_OK) rc = inputs_read_context(o.cond, "context_null", c, &ctx[1]);
    }
    if (rc == SP_OK) ctx_len = ctx[0].dims[0];
    if (rc == SP_OK && o.noise) rc = inputs_read_latent(o.noise, "noise", c, lat, &noise);
    if (rc == SP_OK && !o.noise) {
      noise.numel = n;
      noise.data = sp_xmalloc((size_t)n * sizeof(float));
      rank_noise_fill(o.seed, noise.data, (size_t)n);
    }
  }
  if ((rc = phase(&w, rc, "reading the inputs")) != SP_OK) goto done;
  if (w.rank == 0) {
    char init[1100];
    if (o.noise)
      snprintf(init, sizeof init, "noise %s", o.noise);
    else
      snprintf(init, sizeof init, "seed %llu", (unsigned long long)o.seed);
    sp_log_info("run: %s, %lld frames %lldx%lld -> latent [%lld, %lld, %lld, %lld] = %lld "
                "tokens, %d steps, %s, cfg %g, shift %g, %s, %d rank%s",
                o.model, (long long)o.frames, (long long)o.height, (long long)o.width,
                (long long)lat[0], (long long)lat[1], (long long)lat[2], (long long)lat[3],
                (long long)(lat[1] * (lat[2] / 2) * (lat[3] / 2)), o.steps,
                rank_sampler_kind_name(o.sampler), o.cfg, o.shift, init, w.size,
                w.size == 1 ? "" : "s");
  }

  if ((rc = make_plan(&w, &o, m, micro, ctx_len, &p)) != SP_OK) goto done;
  if (w.rank == 0 && !o.quiet) {
    char table[16384];
    plan_format_table(&p, table, sizeof table);
    fprintf(stderr, "%s", table);
  }

  /* Each rank reads only its own blocks. */
  const plan_rank *pr = &p.r[w.rank];
  rank_stage_cfg scfg = {pr->first_block, pr->last_block, w.rank == 0, w.rank == w.size - 1,
                         micro, lat[1], lat[2], lat[3]};
  double t0 = comm_now();
  rc = rank_stage_load(m, &scfg, &stage, &sum.bytes_loaded);
  sum.load_s = comm_now() - t0;
  if ((rc = phase(&w, rc, "loading its weights")) != SP_OK) goto done;

  /* The embedded context, once per prompt, from stage 0 to every stage. */
  ctx_emb = sp_xmalloc((size_t)(micro * c->text_len * c->dim) * sizeof(float));
  const size_t ctx_floats = (size_t)(c->text_len * c->dim);
  if (w.rank == 0)
    for (int k = 0; k < micro; k++)
      rank_stage_embed_text(stage, ctx[k].data, ctx[k].dims[0], ctx_emb + (size_t)k * ctx_floats);
  comm_bcast(&w, ctx_emb, (size_t)micro * ctx_floats * sizeof(float), 0);
  for (int k = 0; k < micro; k++) rank_stage_set_prompt(stage, k, ctx_emb + (size_t)k * ctx_floats);

  /* The initial latent reaches the last stage, which runs the sampler. */
  if (w.rank != 0) noise.data = sp_xmalloc((size_t)n * sizeof(float));
  comm_bcast(&w, noise.data, (size_t)n * sizeof(float), 0);

  float *sigmas = sp_xmalloc((size_t)(o.steps + 1) * sizeof(float));
  int64_t *ts = sp_xmalloc((size_t)o.steps * sizeof(int64_t));
  rc = rank_schedule_make(o.steps, o.shift, sigmas, ts);
  if (rc == SP_OK) {
    latents = sp_xmalloc((size_t)n * sizeof(float));
    rank_job job = {{lat[0], lat[1], lat[2], lat[3]}, o.steps, sigmas, ts, o.sampler,
                    (float)o.cfg, noise.data, latents};
    rank_pipe_stats st = {0};
    rc = rank_pipeline_sample(&w, stage, &job, o.timeout, w.rank == 0 && !o.quiet, &st);
    sum.compute_s = st.compute_s;
    sum.wait_s = st.wait_s;
    sum.send_s = st.send_s;
  }
  free(sigmas);
  free(ts);
  if ((rc = phase(&w, rc, "sampling")) != SP_OK) goto done;

  if (w.rank == w.size - 1) {
    rc = write_output(&o, mi, lat, latents);
    if (rc == SP_OK) sp_log_info("run: wrote %s%s", o.out, o.preview ? " and its .png preview" : "");
  }
  if ((rc = phase(&w, rc, "writing the output")) != SP_OK) goto done;

  sum.first = pr->first_block;
  sum.last = pr->last_block;
  rank_summary *all = sp_xcalloc((size_t)w.size, sizeof *all);
  comm_gather(&w, &sum, sizeof sum, all, 0);
  if (w.rank == 0 && !o.quiet) {
    fprintf(stderr, "# rank  blocks     loaded_MB  load_s  compute_s  wait_s  send_s  host\n");
    for (int r = 0; r < w.size; r++)
      fprintf(stderr, "  %4d  %3d..%-3d  %9.1f  %6.2f  %9.2f  %6.2f  %6.2f  %s\n", r,
              all[r].first, all[r].last, (double)all[r].bytes_loaded / 1e6, all[r].load_s,
              all[r].compute_s, all[r].wait_s, all[r].send_s, w.hosts[r]);
  }
  if (w.rank == 0 && o.json) print_json(&w, &p, all);
  free(all);
done:
  free(latents);
  free(ctx_emb);
  rank_stage_free(stage);
  rank_tensor_free(&ctx[0]);
  rank_tensor_free(&ctx[1]);
  rank_tensor_free(&noise);
  rank_model_close(m);
  comm_finalize(&w);
  return rc;
}
