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
#include "jobs.h"
#include "log.h"
#include "model_file.h"
#include "model_plan.h"
#include "noise.h"
#include "pipeline.h"
#include "plan.h"
#include "preview.h"
#include "sampler.h"
#include "stage.h"
#include "transport.h"

typedef struct run_opts {
  const char *model, *budget, *device, *jobs, *log_dir;
  rank_jobspec job; /* the command line's job; the defaults of --jobs lines */
  double timeout;
  comm_transport_kind transport;
  int verify, quiet, preview, json;
  rank_device dev;    /* from --device */
  rank_attn attn;     /* --attn */
  const char *devices; /* --devices LIST */
  const char *save_noise; /* --save-noise FILE */
  int cuda_device;    /* this rank's GPU (resolved after MPI start-up) */
} run_opts;

static void usage(FILE *f) {
  fprintf(f,
          "usage: staticpipe run --model MODEL --cond FILE [options] -o FILE\n"
          "       staticpipe run --model MODEL --jobs FILE [options]\n"
          "       mpirun -np N staticpipe run ...     (a pipeline of N ranks; srun works too)\n"
          "\n"
          "Samples a clip: the flow-matching loop of Wan 2.1 with classifier-free guidance.\n"
          "Under mpirun the blocks are split over the ranks by the planner; the latents are\n"
          "bit-identical for any number of ranks.\n"
          "\n"
          "  -m, --model MODEL     model file or synth:PRESET[:SEED] (required)\n"
          "  -c, --cond FILE       HDF5 with 'context' float32 [L, 4096], L <= 512, and, when\n"
          "                        --cfg is not 1, 'context_null' (the encoded negative\n"
          "                        prompt); see launch/encode_prompt.py (required without\n"
          "                        --jobs)\n"
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
          "      --save-noise FILE write the initial noise (dataset 'noise') to FILE, to start\n"
          "                        another run or another implementation from the same noise\n"
          "  -o, --out FILE        output: dataset 'latents' float32 [16, F, H/8, W/8] with the\n"
          "                        settings as attributes, and a preview FILE.png; both written\n"
          "                        atomically by the last rank (required without --jobs)\n"
          "      --jobs FILE       many jobs, one model load: one job per line of key=value\n"
          "                        fields, '#' starts a comment:\n"
          "                          cond=FILE out=FILE [seed=K | noise=FILE] [frames=N]\n"
          "                          [size=HxW] [steps=N] [cfg=G] [shift=S] [sampler=NAME]\n"
          "                        keys left out take the values of the flags above; jobs run\n"
          "                        in order; a bad line or a failed job is reported and the\n"
          "                        rest go on; a summary at the end; exit status non-zero\n"
          "                        when any job failed\n"
          "  -b, --budget STR      memory budget per rank (default auto); see 'staticpipe plan\n"
          "                        --help' for the forms (bytes, ratio, fraction, auto)\n"
          "  -d, --device DEV      auto (default: cuda when a GPU is visible), cuda or cpu\n"
          "      --devices LIST    CUDA devices to use, e.g. 0,2: a rank takes LIST[local rank\n"
          "                        mod its length] (default: local rank mod the devices\n"
          "                        visible; CUDA_VISIBLE_DEVICES is honoured)\n"
          "      --attn NAME       CUDA attention: auto (default: cudnn where cuDNN takes the\n"
          "                        shape, else flash), cudnn, flash (own kernel), simple\n"
          "      --transport T     auto (default: nccl when every rank has a GPU of its own\n"
          "                        and the stages run on GPUs, else mpi), mpi or nccl\n"
          "      --timeout S       longest any rank may go without hearing from a peer it\n"
          "                        waits on; ranks exchange heartbeats, so slow work never\n"
          "                        trips it, a dead, stopped or deadlocked rank does and the\n"
          "                        whole job ends (default 300 s)\n"
          "      --log-dir DIR     also write each rank's log to DIR/rank-N.log\n"
          "      --no-preview      do not write FILE.png\n"
          "      --no-verify       do not check the weights' checksums while loading\n"
          "  -q, --quiet           no progress lines\n"
          "  -j, --json            print a JSON summary on stdout (the plan, and per rank its\n"
          "                        blocks, bytes loaded and times)\n"
          "  -h, --help            this text\n"
          "Threads per rank: OMP_NUM_THREADS (results do not depend on it).\n");
}

static int set_path(const char *flag, const char *v, char *dst) {
  size_t len = strlen(v);
  if (len == 0 || len >= RANK_JOBS_PATH) {
    sp_log_error("%s: the path is empty or longer than %d bytes", flag, RANK_JOBS_PATH - 1);
    return SP_ERR_INPUT;
  }
  memcpy(dst, v, len + 1);
  return SP_OK;
}

static int parse(int argc, char **argv, run_opts *o, int *help) {
  enum { O_SHIFT = 1000, O_SAMPLER, O_SEED, O_NOISE, O_TIMEOUT, O_NO_PREVIEW, O_NO_VERIFY,
         O_JOBS, O_LOG_DIR, O_TRANSPORT, O_ATTN, O_DEVICES, O_SAVE_NOISE };
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
      {"json", no_argument, 0, 'j'},          {"jobs", required_argument, 0, O_JOBS},
      {"log-dir", required_argument, 0, O_LOG_DIR},
      {"transport", required_argument, 0, O_TRANSPORT},
      {"attn", required_argument, 0, O_ATTN},  {"devices", required_argument, 0, O_DEVICES},
      {"save-noise", required_argument, 0, O_SAVE_NOISE},
      {0, 0, 0, 0}};
  memset(o, 0, sizeof *o);
  o->timeout = 300;
  o->verify = o->preview = 1;
  o->device = "auto";
  o->transport = COMM_TRANSPORT_AUTO;
  rank_jobspec *j = &o->job;
  j->frames = 81;
  j->height = 480;
  j->width = 832;
  j->steps = 50;
  j->cfg = 5;
  j->shift = 5;
  j->sampler = RANK_SAMPLER_UNIPC;
  int64_t v;
  cli_getopt_reset();
  int ch;
  while ((ch = getopt_long(argc, argv, "m:c:f:s:n:g:o:b:d:qjh", opts, NULL)) != -1) {
    switch (ch) {
    case 'm': o->model = optarg; break;
    case 'c':
      if (set_path("--cond", optarg, j->cond)) return SP_ERR_INPUT;
      break;
    case 'f':
      if (cli_parse_int64("--frames", optarg, 1, 4097, &j->frames)) return SP_ERR_INPUT;
      break;
    case 's':
      if (cli_parse_size_hw("--size", optarg, &j->height, &j->width)) return SP_ERR_INPUT;
      break;
    case 'n':
      if (cli_parse_int64("--steps", optarg, 1, 10000, &v)) return SP_ERR_INPUT;
      j->steps = (int)v;
      break;
    case 'g':
      if (cli_parse_double("--cfg", optarg, 0, 100, &j->cfg)) return SP_ERR_INPUT;
      break;
    case O_SHIFT:
      if (cli_parse_double("--shift", optarg, 1e-3, 1e3, &j->shift)) return SP_ERR_INPUT;
      break;
    case O_SAMPLER:
      if (rank_sampler_kind_parse(optarg, &j->sampler)) return SP_ERR_INPUT;
      break;
    case O_SEED:
      if (cli_parse_uint64("--seed", optarg, &j->seed)) return SP_ERR_INPUT;
      break;
    case O_NOISE:
      if (set_path("--noise", optarg, j->noise)) return SP_ERR_INPUT;
      break;
    case 'o':
      if (set_path("--out", optarg, j->out)) return SP_ERR_INPUT;
      break;
    case 'b': o->budget = optarg; break;
    case 'd': o->device = optarg; break;
    case O_TIMEOUT:
      if (cli_parse_double("--timeout", optarg, 1, 1e6, &o->timeout)) return SP_ERR_INPUT;
      break;
    case O_JOBS: o->jobs = optarg; break;
    case O_LOG_DIR: o->log_dir = optarg; break;
    case O_ATTN:
      if (rank_attn_parse(optarg, &o->attn)) return SP_ERR_INPUT;
      break;
    case O_DEVICES: o->devices = optarg; break;
    case O_SAVE_NOISE: o->save_noise = optarg; break;
    case O_TRANSPORT:
      if (comm_transport_parse(optarg, &o->transport)) return SP_ERR_INPUT;
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
  if (o->jobs && o->save_noise) {
    sp_log_error("run: --save-noise is for a single run, not --jobs");
    return cli_bad_usage("run");
  }
  if (o->jobs && (j->cond[0] || j->out[0] || j->noise[0])) {
    sp_log_error("run: --jobs takes cond=, out= and noise= from each line, not --cond/--out/"
                 "--noise");
    return cli_bad_usage("run");
  }
  const char *missing = !o->model                 ? "--model"
                        : o->jobs                 ? NULL
                        : !j->cond[0]             ? "--cond"
                        : !j->out[0]              ? "--out"
                                                  : NULL;
  if (missing) {
    sp_log_error("run: %s is required", missing);
    return cli_bad_usage("run");
  }
  if ((j->frames - 1) % 4 != 0) {
    sp_log_error("--frames: %lld is not of the form 4k+1 (81, 41, 17, 5, 1, ...)",
                 (long long)j->frames);
    return SP_ERR_INPUT;
  }
  if (j->height % 16 || j->width % 16) {
    sp_log_error("--size: %lldx%lld: height and width must be multiples of 16",
                 (long long)j->height, (long long)j->width);
    return SP_ERR_INPUT;
  }
  if (rank_device_parse(o->device, &o->dev) != SP_OK) return SP_ERR_INPUT;
  return SP_OK;
}

/* This rank's GPU: --devices LIST[local rank mod its length], else the
 * local rank modulo the devices this process sees. Logged with its PCI bus
 * id, so a user can tell which card each rank took. */
static int pick_gpu(const comm_world *w, run_opts *o) {
  if (o->dev != RANK_DEVICE_CUDA) return SP_OK;
  int n = rank_cuda_device_count();
  if (n <= 0) {
    sp_log_error("--device cuda: no CUDA device is visible on host %s", w->host);
    return SP_ERR_INPUT;
  }
  int idx = w->local_rank % n;
  if (o->devices) {
    int list[64], k = 0;
    const char *p = o->devices;
    while (*p && k < 64) {
      char *end = NULL;
      long v = strtol(p, &end, 10);
      if (end == p || v < 0 || v >= n || (*end && *end != ',')) {
        sp_log_error("--devices: '%s' is not a list of device indices in 0..%d", o->devices,
                     n - 1);
        return SP_ERR_INPUT;
      }
      list[k++] = (int)v;
      p = *end ? end + 1 : end;
    }
    if (k == 0) {
      sp_log_error("--devices: '%s' is empty", o->devices);
      return SP_ERR_INPUT;
    }
    idx = list[w->local_rank % k];
  }
  plan_device d;
  if (rank_cuda_describe(idx, &d) != SP_OK) return SP_ERR_RUNTIME;
  o->cuda_device = idx;
  sp_log_info("device: cuda:%d %s, PCI bus %s, %.1f of %.1f GB free (local rank %d)", idx, d.name,
              d.pci_bus_id, (double)d.free_bytes / 1e9, (double)d.total_bytes / 1e9,
              w->local_rank);
  return SP_OK;
}

/* After each phase every rank learns the worst status; a rank that did not
 * fail says which rank did and why, so every rank ends with one line. */
static int phase(const comm_world *w, int rc, const char *what) {
  return comm_phase_end(w, rc, what, "stopping");
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

static int job_micro(const rank_jobspec *j) { return j->cfg != 1.0 ? 2 : 1; }

static void job_latent(const rank_jobspec *j, int64_t lat[4]) {
  lat[0] = 16;
  lat[1] = (j->frames - 1) / 4 + 1;
  lat[2] = j->height / 8;
  lat[3] = j->width / 8;
}

/* Rank 0 plans, every rank gets the plan and checks it applies to it. */
static int make_plan(const comm_world *w, const run_opts *o, rank_model *m,
                     const plan_workload *wl, plan *p) {
  comm_set_phase("planning");
  plan_device me;
  memset(&me, 0, sizeof me);
  int rc = SP_OK;
  if (o->dev == RANK_DEVICE_CUDA) {
    rc = rank_cuda_describe(o->cuda_device, &me);
    /* Ranks sharing a GPU share its memory. */
    int share = 0, n = rank_cuda_device_count();
    for (int r = 0; n > 0 && r < w->local_size; r++) share += (r % n) == (w->local_rank % n);
    if (share > 1) {
      me.total_bytes /= (uint64_t)share;
      me.free_bytes /= (uint64_t)share;
    }
  } else {
    snprintf(me.name, sizeof me.name, "cpu");
    /* CPU backend: a rank's "device" is its share of the node's memory. */
    me.total_bytes = me.free_bytes = host_memory() / (uint64_t)w->local_size;
    me.speed = 1.0;
  }
  me.host_bytes = host_memory();
  plan_device *devs = sp_xcalloc((size_t)w->size, sizeof *devs);
  comm_gather(w, &me, sizeof me, devs, 0);
  uint8_t wire[PLAN_WIRE_MAX];
  uint64_t len = 0;
  char err[4096] = "";
  if (w->rank == 0) {
    const wan_config *c = &rank_model_get_info(m)->config;
    uint64_t *bb = sp_xcalloc((size_t)c->layers, sizeof *bb);
    plan_model pm;
    /* Weights once placed: bf16 on the GPU, widened to fp32 on the CPU. */
    rank_model_plan_sizes(m, o->dev == RANK_DEVICE_CUDA ? 2 : 4, bb, &pm);
    plan_budget b;
    plan_options po;
    plan_options_default(&po);
    if (w->size > PLAN_MAX_RANKS) {
      sp_log_error("run: %d ranks, the planner handles at most %d", w->size, PLAN_MAX_RANKS);
      rc = SP_ERR_INPUT;
    } else if (plan_budget_parse(o->budget, w->size, &b, err, sizeof err) != PLAN_OK) {
      sp_log_error("--budget: %s", err);
      rc = SP_ERR_INPUT;
    } else if (plan_make(&pm, devs, w->size, &b, wl, &po, p, err, sizeof err) != PLAN_OK) {
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
  rc = SP_OK;
  if (w->rank != 0 && plan_decode(wire, (size_t)len, p, err, sizeof err) != PLAN_OK) {
    sp_log_error("plan from rank 0 is not valid: %s", err);
    rc = SP_ERR_RUNTIME;
  } else if (p->nranks != w->size) {
    sp_log_error("plan is for %d ranks, the job has %d", p->nranks, w->size);
    rc = SP_ERR_RUNTIME;
  } else if (rc == SP_OK && p->r[w->rank].budget_bytes > me.total_bytes) {
    sp_log_error("plan gives this rank a budget of %.2f GB, it has %.2f GB",
                 (double)p->r[w->rank].budget_bytes / 1e9, (double)me.total_bytes / 1e9);
    rc = SP_ERR_INPUT;
  }
  return phase(w, rc, "checking the plan");
}

static int write_output(const run_opts *o, const rank_jobspec *j, const rank_model_info *mi,
                        const int64_t *lat, const float *latents) {
  rank_outfile *f = NULL;
  int rc = rank_outfile_open(j->out, &f);
  if (rc != SP_OK) return rc;
  char size[64];
  snprintf(size, sizeof size, "%lldx%lld", (long long)j->height, (long long)j->width);
  rc = rank_outfile_put(f, "latents", 4, lat, latents);
  if (rc == SP_OK && j->noise[0]) rc = rank_outfile_attr_str(f, "noise_file", j->noise);
  if (rc == SP_OK && !j->noise[0]) rc = rank_outfile_attr_i64(f, "seed", (int64_t)j->seed);
  if (rc == SP_OK) rc = rank_outfile_attr_i64(f, "steps", j->steps);
  if (rc == SP_OK) rc = rank_outfile_attr_f64(f, "cfg", j->cfg);
  if (rc == SP_OK) rc = rank_outfile_attr_f64(f, "shift", j->shift);
  if (rc == SP_OK) rc = rank_outfile_attr_str(f, "sampler", rank_sampler_kind_name(j->sampler));
  if (rc == SP_OK) rc = rank_outfile_attr_i64(f, "frames", j->frames);
  if (rc == SP_OK) rc = rank_outfile_attr_str(f, "size", size);
  if (rc == SP_OK) rc = rank_outfile_attr_str(f, "model", mi->source);
  if (rc == SP_OK) rc = rank_outfile_attr_str(f, "model_checksum", mi->checksum);
  if (rc != SP_OK) {
    rank_outfile_abort(f);
    return rc;
  }
  /* The preview first: if it fails, no latents file claims success. */
  if (o->preview) {
    char png[RANK_JOBS_PATH + 8];
    snprintf(png, sizeof png, "%s.png", j->out);
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

/* What the job loop shares: the world, the model, the plan and the stage,
 * which stays loaded from job to job while the latent shape stays. */
typedef struct run_ctx {
  const comm_world *w;
  const run_opts *o;
  comm_transport *tp;
  rank_model *m;
  const plan *p;
  int prompts;        /* prompt slots the stage holds */
  rank_stage *stage;
  int64_t stage_lat[4];
  rank_summary sum;
} run_ctx;

/* One job's inputs, on rank 0: the contexts and the initial noise. */
typedef struct job_inputs {
  rank_tensor ctx[2], noise;
} job_inputs;

static void job_inputs_free(job_inputs *in) {
  rank_tensor_free(&in->ctx[0]);
  rank_tensor_free(&in->ctx[1]);
  rank_tensor_free(&in->noise);
}

/* --save-noise: the initial latent, so another implementation (or --noise)
 * can start from exactly the same noise. */
static int save_noise(const char *path, const rank_jobspec *j, const int64_t lat[4],
                      const float *noise) {
  rank_outfile *f = NULL;
  int rc = rank_outfile_open(path, &f);
  if (rc != SP_OK) return rc;
  rc = rank_outfile_put(f, "noise", 4, lat, noise);
  if (rc == SP_OK && !j->noise[0]) rc = rank_outfile_attr_i64(f, "seed", (int64_t)j->seed);
  if (rc != SP_OK) {
    rank_outfile_abort(f);
    return rc;
  }
  return rank_outfile_commit(f);
}

/* Rank 0 reads and checks a job's inputs before any of its work starts. */
static int read_inputs(const run_ctx *x, const rank_jobspec *j, job_inputs *in) {
  if (x->w->rank != 0) return SP_OK;
  const wan_config *c = &rank_model_get_info(x->m)->config;
  int64_t lat[4];
  job_latent(j, lat);
  int rc = inputs_read_context(j->cond, "context", c, &in->ctx[0]);
  if (rc == SP_OK && job_micro(j) == 2) {
    int has = 0;
    rc = rank_tensor_exists(j->cond, "context_null", &has);
    if (rc == SP_OK && !has) {
      sp_log_error("%s: dataset 'context_null' (the encoded negative prompt) is missing; it "
                   "is needed for --cfg %g (or run with --cfg 1)",
                   j->cond, j->cfg);
      rc = SP_ERR_INPUT;
    }
    if (rc == SP_OK) rc = inputs_read_context(j->cond, "context_null", c, &in->ctx[1]);
  }
  if (rc == SP_OK && j->noise[0]) rc = inputs_read_latent(j->noise, "noise", c, lat, &in->noise);
  if (rc == SP_OK && !j->noise[0]) {
    in->noise.numel = lat[0] * lat[1] * lat[2] * lat[3];
    in->noise.data = sp_xmalloc((size_t)in->noise.numel * sizeof(float));
    rank_noise_fill(j->seed, in->noise.data, (size_t)in->noise.numel);
  }
  if (rc == SP_OK && x->o->save_noise) rc = save_noise(x->o->save_noise, j, lat, in->noise.data);
  return rc;
}

static void log_job(const run_ctx *x, const rank_jobspec *j) {
  if (x->w->rank != 0) return;
  int64_t lat[4];
  job_latent(j, lat);
  char init[RANK_JOBS_PATH + 16];
  if (j->noise[0])
    snprintf(init, sizeof init, "noise %s", j->noise);
  else
    snprintf(init, sizeof init, "seed %llu", (unsigned long long)j->seed);
  sp_log_info("run: %s, %lld frames %lldx%lld -> latent [%lld, %lld, %lld, %lld] = %lld "
              "tokens, %d steps, %s, cfg %g, shift %g, %s, %d rank%s",
              x->o->model, (long long)j->frames, (long long)j->height, (long long)j->width,
              (long long)lat[0], (long long)lat[1], (long long)lat[2], (long long)lat[3],
              (long long)(lat[1] * (lat[2] / 2) * (lat[3] / 2)), j->steps,
              rank_sampler_kind_name(j->sampler), j->cfg, j->shift, init, x->w->size,
              x->w->size == 1 ? "" : "s");
}

/* Loads this rank's blocks for the job's latent shape unless they already
 * are. A failure here ends the run (the model is bad for every job). */
static int ensure_stage(run_ctx *x, const int64_t lat[4]) {
  if (x->stage && memcmp(x->stage_lat, lat, sizeof x->stage_lat) == 0) return SP_OK;
  if (x->stage && x->w->rank == 0)
    sp_log_info("run: the latent shape changes: every rank reloads its blocks");
  rank_stage_free(x->stage);
  x->stage = NULL;
  comm_set_phase("loading its weights");
  const plan_rank *pr = &x->p->r[x->w->rank];
  rank_stage_cfg scfg = {.first_block = pr->first_block, .last_block = pr->last_block,
                         .embed = x->w->rank == 0, .head = x->w->rank == x->w->size - 1,
                         .prompts = x->prompts, .lat_f = lat[1], .lat_h = lat[2],
                         .lat_w = lat[3], .device = x->o->dev,
                         .cuda_device = x->o->cuda_device, .attn = x->o->attn,
                         .streamed = &x->p->streamed[pr->first_block],
                         .prefetch_depth = pr->prefetch_depth};
  double t0 = comm_now();
  int rc = rank_stage_load(x->m, &scfg, &x->stage, &x->sum.bytes_loaded);
  x->sum.load_s += comm_now() - t0;
  if ((rc = phase(x->w, rc, "loading its weights")) != SP_OK) return rc;
  memcpy(x->stage_lat, lat, sizeof x->stage_lat);
  return SP_OK;
}

/* Samples one job whose inputs rank 0 holds in in, and writes its output.
 * Sets *fatal when the run cannot go on (the weights failed to load). */
static int run_job(run_ctx *x, const rank_jobspec *j, job_inputs *in, const char *then,
                   int *fatal) {
  const comm_world *w = x->w;
  const wan_config *c = &rank_model_get_info(x->m)->config;
  const int micro = job_micro(j);
  int64_t lat[4];
  job_latent(j, lat);
  const int64_t n = lat[0] * lat[1] * lat[2] * lat[3];
  int rc = ensure_stage(x, lat);
  if (rc != SP_OK) {
    *fatal = 1;
    return rc;
  }
  comm_set_phase("sampling");
  /* The embedded context, once per prompt, from stage 0 to every stage. */
  const size_t ctx_floats = (size_t)(c->text_len * c->dim);
  float *ctx_emb = sp_xmalloc((size_t)micro * ctx_floats * sizeof(float));
  if (w->rank == 0)
    for (int k = 0; k < micro; k++)
      rank_stage_embed_text(x->stage, in->ctx[k].data, in->ctx[k].dims[0],
                            ctx_emb + (size_t)k * ctx_floats);
  comm_bcast(w, ctx_emb, (size_t)micro * ctx_floats * sizeof(float), 0);
  for (int k = 0; k < micro; k++)
    rank_stage_set_prompt(x->stage, k, ctx_emb + (size_t)k * ctx_floats);
  free(ctx_emb);

  /* The initial latent reaches the last stage, which runs the sampler. */
  if (w->rank != 0) {
    in->noise.numel = n;
    in->noise.data = sp_xmalloc((size_t)n * sizeof(float));
  }
  comm_bcast(w, in->noise.data, (size_t)n * sizeof(float), 0);

  float *sigmas = sp_xmalloc((size_t)(j->steps + 1) * sizeof(float));
  int64_t *ts = sp_xmalloc((size_t)j->steps * sizeof(int64_t));
  float *latents = NULL;
  rc = rank_schedule_make(j->steps, j->shift, sigmas, ts);
  if (rc == SP_OK) {
    latents = sp_xmalloc((size_t)n * sizeof(float));
    rank_job job = {{lat[0], lat[1], lat[2], lat[3]}, j->steps, sigmas, ts, j->sampler,
                    (float)j->cfg, in->noise.data, latents};
    rank_pipe_stats st = {0};
    rc = rank_pipeline_sample(w, x->tp, x->stage, &job, x->o->timeout,
                              w->rank == 0 && !x->o->quiet, &st);
    x->sum.compute_s += st.compute_s;
    x->sum.wait_s += st.wait_s;
    x->sum.send_s += st.send_s;
  }
  free(sigmas);
  free(ts);
  if ((rc = comm_phase_end(w, rc, "sampling", then)) != SP_OK) goto out;

  comm_set_phase("writing the output");
  if (w->rank == w->size - 1) {
    rc = write_output(x->o, j, rank_model_get_info(x->m), lat, latents);
    if (rc == SP_OK)
      sp_log_info("run: wrote %s%s", j->out, x->o->preview ? " and its .png preview" : "");
  }
  rc = comm_phase_end(w, rc, "writing the output", then);
out:
  free(latents);
  return rc;
}

/* Rank 0 reads the jobs file; every rank gets the same list. */
static int read_jobs(const comm_world *w, const run_opts *o, rank_jobspec **jobs, int *n) {
  comm_set_phase("reading the jobs file");
  int rc = SP_OK;
  int count = 0;
  rank_jobspec *list = NULL;
  if (w->rank == 0) rc = rank_jobs_read(o->jobs, &o->job, &list, &count);
  if ((rc = phase(w, rc, "reading the jobs file")) != SP_OK) {
    free(list);
    return rc;
  }
  comm_bcast(w, &count, sizeof count, 0);
  if (w->rank != 0) list = sp_xcalloc((size_t)count, sizeof *list);
  comm_bcast(w, list, (size_t)count * sizeof *list, 0);
  *jobs = list;
  *n = count;
  return SP_OK;
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

  run_ctx x = {.w = &w, .o = &o};
  rank_jobspec *jobs = NULL;
  int njobs = 0, single = o.jobs == NULL;
  job_inputs in0;
  memset(&in0, 0, sizeof in0);
  plan p;
  memset(&p, 0, sizeof p);

  rc = o.log_dir ? comm_log_open_dir(&w, o.log_dir) : SP_OK;
  if ((rc = phase(&w, rc, "opening its log file")) != SP_OK) goto done;
  /* From here on a silent or stuck peer ends the job after --timeout. */
  rc = comm_watchdog_start(&w, o.timeout);
  if ((rc = phase(&w, rc, "starting the watchdog")) != SP_OK) goto done;

  comm_set_phase("choosing the device");
  rc = pick_gpu(&w, &o);
  if ((rc = phase(&w, rc, "choosing its device")) != SP_OK) goto done;

  /* The stages exchange host-staged activation messages today (the CUDA
   * stage copies them to and from pinned host buffers), so the transport
   * is MPI; NCCL takes over once the stages hand it device buffers. */
  comm_transport_kind tk = COMM_TRANSPORT_MPI;
  comm_set_phase("choosing the transport");
  rc = comm_transport_choose(&w, o.transport, 0, rank_cuda_device_count(), &tk);
  if (rc == SP_OK) rc = comm_transport_open(&w, tk, w.local_rank, &x.tp);
  if ((rc = phase(&w, rc, "opening the transport")) != SP_OK) goto done;

  comm_set_phase("opening the model");
  rc = rank_model_open(o.model, o.verify, &x.m);
  if ((rc = phase(&w, rc, "opening the model")) != SP_OK) goto done;
  const wan_config *c = &rank_model_get_info(x.m)->config;

  if (single) {
    jobs = sp_xcalloc(1, sizeof *jobs);
    jobs[0] = o.job;
    njobs = 1;
  } else if ((rc = read_jobs(&w, &o, &jobs, &njobs)) != SP_OK) {
    goto done;
  }

  /* One plan for every job: the largest latent and, with CFG anywhere, two
   * micro-batches (the split does not change the latents, so a job gives
   * the same result as when it runs alone). */
  plan_workload wl = {0, 0, 0, 1, c->text_len};
  int64_t best_tokens = -1;
  for (int i = 0; i < njobs; i++) {
    if (jobs[i].bad) continue;
    int64_t lat[4];
    job_latent(&jobs[i], lat);
    int64_t tokens = lat[1] * (lat[2] / 2) * (lat[3] / 2);
    if (tokens > best_tokens) {
      best_tokens = tokens;
      wl.frames = jobs[i].frames;
      wl.height = jobs[i].height;
      wl.width = jobs[i].width;
    }
    if (job_micro(&jobs[i]) == 2) wl.micro_batches = 2;
  }
  x.prompts = wl.micro_batches;

  /* One job: its inputs are read and checked before planning, and the plan
   * is for its exact context length. */
  if (single) {
    comm_set_phase("reading the inputs");
    rc = read_inputs(&x, &jobs[0], &in0);
    if (w.rank == 0 && rc == SP_OK) wl.context_len = in0.ctx[0].dims[0];
    if ((rc = phase(&w, rc, "reading the inputs")) != SP_OK) goto done;
    comm_bcast(&w, &wl.context_len, sizeof wl.context_len, 0);
    log_job(&x, &jobs[0]);
  }

  int failed = 0, done_ok = 0, worst = SP_OK;
  int *job_rc = sp_xcalloc((size_t)njobs, sizeof *job_rc);
  if (best_tokens < 0) {
    rc = SP_ERR_INPUT; /* every line was bad (each already reported) */
    for (int i = 0; i < njobs; i++) job_rc[i] = SP_ERR_INPUT;
    failed = njobs;
    worst = rc;
    goto summary;
  }
  if ((rc = make_plan(&w, &o, x.m, &wl, &p)) != SP_OK) {
    free(job_rc);
    goto done;
  }
  x.p = &p;
  if (w.rank == 0 && !o.quiet) {
    char table[16384];
    plan_format_table(&p, table, sizeof table);
    fprintf(stderr, "%s", table);
  }

  for (int i = 0; i < njobs; i++) {
    const rank_jobspec *j = &jobs[i];
    int fatal = 0;
    if (j->bad) {
      job_rc[i] = SP_ERR_INPUT;
    } else if (single) {
      job_rc[i] = run_job(&x, j, &in0, "stopping", &fatal);
    } else {
      char what[96];
      snprintf(what, sizeof what, "reading the inputs of job %d (line %d)", i + 1, j->line);
      comm_set_phase(what);
      job_inputs in;
      memset(&in, 0, sizeof in);
      int r = read_inputs(&x, j, &in);
      r = comm_phase_end(&w, r, what, "job failed");
      if (r == SP_OK) {
        log_job(&x, j);
        r = run_job(&x, j, &in, "job failed", &fatal);
      }
      job_inputs_free(&in);
      job_rc[i] = r;
    }
    if (job_rc[i] == SP_OK) {
      done_ok++;
    } else {
      failed++;
      if (job_rc[i] > worst) worst = job_rc[i];
    }
    if (fatal) {
      rc = job_rc[i];
      free(job_rc);
      goto done;
    }
  }
  rc = worst;

summary:
  if (!single && w.rank == 0) {
    for (int i = 0; i < njobs; i++)
      if (job_rc[i] != SP_OK)
        sp_log_warn("jobs: %s:%d (out=%s) failed", o.jobs, jobs[i].line,
                    jobs[i].out[0] ? jobs[i].out : "?");
    /* A warning when any failed, so that -q still shows it. */
    if (failed)
      sp_log_warn("jobs: %d of %d done, %d failed (%s)", done_ok, njobs, failed, o.jobs);
    else
      sp_log_info("jobs: %d of %d done, %d failed (%s)", done_ok, njobs, failed, o.jobs);
  }
  free(job_rc);
  if (best_tokens < 0) goto done;

  const plan_rank *pr = &p.r[w.rank];
  x.sum.first = pr->first_block;
  x.sum.last = pr->last_block;
  rank_summary *all = sp_xcalloc((size_t)w.size, sizeof *all);
  comm_gather(&w, &x.sum, sizeof x.sum, all, 0);
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
  free(jobs);
  job_inputs_free(&in0);
  rank_stage_free(x.stage);
  rank_model_close(x.m);
  comm_transport_close(x.tp);
  comm_set_phase("finishing");
  comm_finalize(&w);
  comm_log_close();
  return rc;
}
