/* staticpipe plan: the planner as a dry run, for hardware that need not be
 * here. Reads the model's metadata only (no weights), builds the device
 * inventory from flags or a JSON file, prints the plan as a table or JSON. */
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "log.h"
#include "model_file.h"
#include "model_plan.h"
#include "path_check.h"
#include "plan.h"
#include "umt5_gpu.h"
#include "vae_file.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

/* plan's own options (ids from JOB_OPT_COUNT on); the job options it
 * takes come from the job table. */
enum {
  OPT_RANKS = JOB_OPT_COUNT,
  OPT_GPU_MEM,
  OPT_INVENTORY,
  OPT_SPEED,
  OPT_BATCH,
  OPT_DTYPE,
  OPT_TFLOPS,
  OPT_HOST,
  OPT_PEER,
  OPT_PREFETCH,
  OPT_RESERVE,
  OPT_JSON,
  OPT_HELP
};

/* The planner's defaults as text, for plan's own --help. */
typedef struct plan_defaults {
  char tflops[32], host[32], peer[32], prefetch[32], reserve[32];
} plan_defaults;

static void plan_table(cli_opts *t, plan_defaults *d) {
  static const int ids[] = {JOB_OPT_MODEL,       JOB_OPT_FRAMES,     JOB_OPT_SIZE,
                            JOB_OPT_BUDGET,      JOB_OPT_CFG,        JOB_OPT_ORDER,
                            JOB_OPT_STREAM_FRAC, JOB_OPT_CHUNK_ROWS, JOB_OPT_VAE,
                            JOB_OPT_VAE_PRECISION, JOB_OPT_T5};
  plan_options po;
  plan_options_default(&po);
  snprintf(d->tflops, sizeof d->tflops, "%.0f", po.gpu_tflops);
  snprintf(d->host, sizeof d->host, "%.0f", po.host_link_gbs);
  snprintf(d->peer, sizeof d->peer, "%.0f", po.peer_link_gbs);
  snprintf(d->prefetch, sizeof d->prefetch, "%d", po.prefetch_depth);
  snprintf(d->reserve, sizeof d->reserve, "%.0f MiB", (double)po.reserve_bytes / (1024.0 * 1024.0));
  static job_option own[] = {
      {OPT_RANKS, "ranks", 0, "N", NULL, 0,
       "pipeline ranks (default: one per --gpu-mem or inventory entry)"},
      {OPT_GPU_MEM, "gpu-mem", 'G', "LIST", NULL, 0,
       "GPU memory, one size for every rank or one per rank\n"
       "(24gb or 24gb,20gb; powers of 1024: 24gb = 24 GiB, as GPU\n"
       "memory is reported)"},
      {OPT_INVENTORY, "inventory", 'i', "FILE", NULL, 0,
       "devices from JSON instead: [{\"name\", \"total_bytes\",\n"
       "\"free_bytes\", \"sm_count\", \"cc\" (\"9.0\"), \"pci_bus_id\",\n"
       "\"host_bytes\", \"speed\"}, ...] or {\"devices\": [...]};\n"
       "sizes as numbers of bytes or strings like \"24gb\""},
      {OPT_SPEED, "speed", 'S', "LIST", "1", 0,
       "relative speed per rank, one for all or one per rank\n"
       "(the rate is --tflops x speed)"},
      {OPT_BATCH, "batch", 0, "B", "1", 0, "batch items; micro-batches = branches x B"},
      {OPT_DTYPE, "dtype", 0, "T", "bf16", 0, "weight width on the GPU: bf16 or fp32"},
      {OPT_TFLOPS, "tflops", 0, "X", NULL, 0, "dense rate of a speed-1 GPU, TFLOP/s"},
      {OPT_HOST, "host-gbs", 0, "X", NULL, 0, "pinned host -> GPU copy rate, GB/s"},
      {OPT_PEER, "peer-gbs", 0, "X", NULL, 0, "rank -> rank activation rate, GB/s"},
      {OPT_PREFETCH, "prefetch", 0, "N", NULL, 0, "streaming slots per rank, 1..16"},
      {OPT_RESERVE, "reserve", 0, "SIZE", NULL, 0,
       "runtime reserve per GPU: CUDA context, library\nworkspaces"},
      {OPT_JSON, "json", 'j', NULL, NULL, 0,
       "the plan as JSON on stdout (keys ranks[{rank, device,\n"
       "first_block, last_block, resident, streamed, order,\n"
       "weight_bytes, peak_bytes, budget_bytes, predicted_step_ms,\n"
       "...}], order, predicted_step_ms); logs go to stderr"},
      {OPT_HELP, "help", 'h', NULL, NULL, 0, "this text"},
  };
  own[6].def = d->tflops;
  own[7].def = d->host;
  own[8].def = d->peer;
  own[9].def = d->prefetch;
  own[10].def = d->reserve;
  cli_opts_build(t, ids, (int)(sizeof ids / sizeof ids[0]), own, (int)(sizeof own / sizeof own[0]));
}

static void usage(FILE *f) {
  cli_opts t;
  plan_defaults d;
  plan_table(&t, &d);
  fprintf(f,
          "usage: staticpipe plan --model MODEL --gpu-mem SIZE[,SIZE...] [options]\n"
          "       staticpipe plan --model MODEL --inventory FILE.json [options]\n"
          "\n"
          "Plans the split of MODEL's transformer blocks over a pipeline of GPUs and prints\n"
          "it: per rank its blocks, which are resident and which are streamed from pinned\n"
          "host memory, weight, peak and budget bytes and the predicted step time. Needs no\n"
          "GPU and no MPI; reads the model's metadata only (synth:PRESET works without a\n"
          "file). Exits 2 with needed vs available bytes per rank when nothing fits.\n"
          "\n");
  cli_opts_usage(&t, f);
  fprintf(f,
          "\n"
          "Budgets (--budget; auto = free memory minus max(5%%, 256 MiB)); the syntax of\n"
          "ComfyUI-MultiGPU's expert allocation strings:\n"
          "  0.8                          fraction of each GPU's memory\n"
          "  cuda:0,20gb;cuda:1,18gb;cpu,*  GPU memory per rank in all (weights, activations,\n"
          "                               workspaces); cpu,* streams what does not fit from\n"
          "                               pinned host memory; cpu,16gb caps that memory\n"
          "  cuda:0,0.5;cuda:1,0.9;cpu,0.25 fractions of each device's memory (cpu: of the\n"
          "                               host's); may be mixed with sizes\n"
          "  cuda:0,20gb;cpu,5gb*          SIZE* is SIZE; several '*' entries are allowed\n"
          "  cuda:0,40%%;cuda:1,60%%         shares of the block bytes; cpu,25%% streams that\n"
          "                               share; '*' entries share the rest of 100%%; without\n"
          "                               one, shares are parts of their sum (8%%;8%%;4%% is\n"
          "                               40%%, 40%%, 20%%)\n"
          "units b, kb, mb, gb, tb (any case, powers of 1024); cuda:K is pipeline rank K;\n"
          "ranks not named get auto. Different in meaning from MultiGPU: a size or fraction\n"
          "here is all the memory a rank may use (weights, activations, workspaces), there\n"
          "the bytes of the model put on that device; and without a cpu entry nothing is\n"
          "streamed.\n"
          "\n"
          "example: staticpipe plan --model synth:wan2.1-14b --ranks 2 --gpu-mem 12gb --budget 'cpu,*'\n");
}

/* Splits a comma list into at most max tokens (in place). Returns the
 * count, or -1 for an empty item or too many. */
static int split_list(char *s, char **items, int max) {
  int n = 0;
  for (char *p = s;;) {
    char *c = strchr(p, ',');
    if (c) *c = '\0';
    if (!*p || n == max) return -1;
    items[n++] = p;
    if (!c) return n;
    p = c + 1;
  }
}

/* A size field of the inventory: a number of bytes or a string with a unit. */
static int inv_bytes(const char *file, int i, const char *key, json_object *v, uint64_t *out) {
  char err[256];
  if (json_object_is_type(v, json_type_int)) {
    int64_t x = json_object_get_int64(v);
    if (x < 0) {
      sp_log_error("%s: device %d: \"%s\" is negative", file, i, key);
      return SP_ERR_INPUT;
    }
    *out = (uint64_t)x;
    return SP_OK;
  }
  if (json_object_is_type(v, json_type_string)) {
    if (plan_parse_bytes(json_object_get_string(v), out, err, sizeof err) != PLAN_OK) {
      sp_log_error("%s: device %d: \"%s\": %s", file, i, key, err);
      return SP_ERR_INPUT;
    }
    return SP_OK;
  }
  sp_log_error("%s: device %d: \"%s\" must be a number of bytes or a string like \"24gb\"", file,
               i, key);
  return SP_ERR_INPUT;
}

static int load_inventory(const char *file, plan_device *devs, int *ndev) {
  int rc = SP_ERR_INPUT;
  json_object *root = json_object_from_file(file);
  if (!root) {
    sp_log_error("--inventory %s: cannot read it as JSON (%s)", file, json_util_get_last_err());
    return SP_ERR_INPUT;
  }
  json_object *arr = root;
  if (json_object_is_type(root, json_type_object) &&
      !json_object_object_get_ex(root, "devices", &arr)) {
    sp_log_error("--inventory %s: expected an array of devices or {\"devices\": [...]}", file);
    goto out;
  }
  if (!json_object_is_type(arr, json_type_array)) {
    sp_log_error("--inventory %s: \"devices\" is not an array", file);
    goto out;
  }
  size_t n = json_object_array_length(arr);
  if (n < 1 || n > PLAN_MAX_RANKS) {
    sp_log_error("--inventory %s: %zu devices, expected 1..%d", file, n, PLAN_MAX_RANKS);
    goto out;
  }
  for (size_t i = 0; i < n; i++) {
    json_object *d = json_object_array_get_idx(arr, i);
    plan_device *p = &devs[i];
    memset(p, 0, sizeof *p);
    p->speed = 1.0;
    snprintf(p->name, sizeof p->name, "gpu%zu", i);
    if (!json_object_is_type(d, json_type_object)) {
      sp_log_error("--inventory %s: device %zu is not an object", file, i);
      goto out;
    }
    int have_total = 0;
    json_object_object_foreach(d, key, v) {
      int bad = 0;
      if (!strcmp(key, "name") && json_object_is_type(v, json_type_string)) {
        snprintf(p->name, sizeof p->name, "%s", json_object_get_string(v));
      } else if (!strcmp(key, "total_bytes")) {
        if (inv_bytes(file, (int)i, key, v, &p->total_bytes)) goto out;
        have_total = 1;
      } else if (!strcmp(key, "free_bytes")) {
        if (inv_bytes(file, (int)i, key, v, &p->free_bytes)) goto out;
      } else if (!strcmp(key, "host_bytes")) {
        if (inv_bytes(file, (int)i, key, v, &p->host_bytes)) goto out;
      } else if (!strcmp(key, "sm_count") && json_object_is_type(v, json_type_int)) {
        p->sm_count = json_object_get_int(v);
        bad = p->sm_count < 0;
      } else if (!strcmp(key, "cc") && json_object_is_type(v, json_type_string)) {
        bad = sscanf(json_object_get_string(v), "%d.%d", &p->cc_major, &p->cc_minor) != 2;
      } else if (!strcmp(key, "pci_bus_id") && json_object_is_type(v, json_type_string)) {
        snprintf(p->pci_bus_id, sizeof p->pci_bus_id, "%s", json_object_get_string(v));
      } else if (!strcmp(key, "speed") &&
                 (json_object_is_type(v, json_type_double) || json_object_is_type(v, json_type_int))) {
        p->speed = json_object_get_double(v);
        bad = !(p->speed > 0 && p->speed <= 1000);
      } else {
        sp_log_error("--inventory %s: device %zu: unknown key or wrong type \"%s\" (keys: name, "
                     "total_bytes, free_bytes, sm_count, cc, pci_bus_id, host_bytes, speed)",
                     file, i, key);
        goto out;
      }
      if (bad) {
        sp_log_error("--inventory %s: device %zu: bad value of \"%s\"", file, i, key);
        goto out;
      }
    }
    if (!have_total || p->total_bytes == 0) {
      sp_log_error("--inventory %s: device %zu has no \"total_bytes\"", file, i);
      goto out;
    }
    if (p->free_bytes == 0) p->free_bytes = p->total_bytes;
    if (p->free_bytes > p->total_bytes) {
      sp_log_error("--inventory %s: device %zu has more free_bytes than total_bytes", file, i);
      goto out;
    }
  }
  *ndev = (int)n;
  rc = SP_OK;
out:
  json_object_put(root);
  return rc;
}

/* Logs a multi-line planner message one line at a time. */
static void log_lines(const char *prefix, const char *msg) {
  const char *p = msg;
  for (int first = 1; *p; first = 0) {
    const char *nl = strchr(p, '\n');
    int n = nl ? (int)(nl - p) : (int)strlen(p);
    if (first)
      sp_log_error("%s%.*s", prefix, n, p);
    else
      sp_log_error("%.*s", n, p);
    if (!nl) break;
    p = nl + 1;
  }
}

/* --t5: where run --prompt encodes and its bytes, for the prompt and, with
 * CFG, the negative prompt at their longest (TOK_CONTEXT tokens each): on
 * rank 0's GPU in a CUDA build (a run on CUDA encodes there), against its
 * free memory, else on its host, against the inventory's host_bytes when
 * given. Either way before the DiT is placed, so nothing else is there. */
static int plan_t5(const char *t5, int micro, const plan_device *dev0, int json,
                   json_object **out) {
  job_t5_cost c;
  const int64_t longest = 512; /* Wan's text_len: the tokenizer's cut */
  const int cuda = umt5_gpu_available();
  if (job_prompt_cost(t5, micro * longest, longest, cuda, &c) != SP_OK) return SP_ERR_INPUT;
  const uint64_t need = cuda ? c.device_bytes : c.host_bytes;
  const uint64_t have = cuda ? dev0->free_bytes : dev0->host_bytes;
  const char *where = cuda ? "GPU" : "host";
  if (have && need > have) {
    sp_log_error("--t5 %s: encoding needs %.2f GiB of %s memory on rank 0; it has %.2f GiB", t5,
                 need / GIB, where, have / GIB);
    return SP_ERR_INPUT;
  }
  if (json) {
    json_object *o = json_object_new_object();
    json_object_object_add(o, "rank", json_object_new_int(0));
    json_object_object_add(o, "device", json_object_new_string(c.device));
    json_object_object_add(o, "when", json_object_new_string("before the DiT is placed"));
    json_object_object_add(o, "host_bytes", json_object_new_int64((int64_t)c.host_bytes));
    json_object_object_add(o, "device_bytes", json_object_new_int64((int64_t)c.device_bytes));
    json_object_object_add(o, "layer_bytes", json_object_new_int64((int64_t)c.layer_bytes));
    json_object_object_add(o, "tokens", json_object_new_int64(c.tokens));
    *out = o;
    return SP_OK;
  }
  char fits[96] = "rank 0's host memory not given (--inventory host_bytes)";
  if (have)
    snprintf(fits, sizeof fits, "fits rank 0's %s memory of %.2f GiB", where, have / GIB);
  printf("# text encoder %s (%s, %lld layers, dim %lld): rank 0, %s (%s), before the DiT is "
         "placed; peak %.2f GiB %s (%.2f GiB per layer's weights) for %lld tokens; %s\n",
         t5, c.preset, (long long)c.layers, (long long)c.dim, c.device,
         cuda ? "bf16, every layer resident" : "fp32, one layer at a time", need / GIB, where,
         c.layer_bytes / GIB, (long long)c.tokens, fits);
  return SP_OK;
}

/* What plan's flags say: the job's options and plan's own. */
typedef struct plan_cli {
  job_opts job; /* --model, --frames, --size, --cfg, --budget, --order, ... */
  plan_options po;
  const char *gpu_mem, *inventory, *speed;
  int64_t nranks, batch;
  int json, dtype_bytes, help;
} plan_cli;

/* One of plan's own options. */
static int plan_set(plan_cli *c, int id, const char *v) {
  char err[256];
  int64_t i64;
  kern_dtype dt;
  switch (id) {
  case OPT_RANKS: return job_parse_int64("--ranks", v, 1, PLAN_MAX_RANKS, &c->nranks);
  case OPT_GPU_MEM: c->gpu_mem = v; return SP_OK;
  case OPT_INVENTORY: c->inventory = v; return SP_OK;
  case OPT_SPEED: c->speed = v; return SP_OK;
  case OPT_BATCH: return job_parse_int64("--batch", v, 1, 512, &c->batch);
  case OPT_DTYPE:
    if (cli_parse_dtype("--dtype", v, &dt)) return SP_ERR_INPUT;
    c->dtype_bytes = (int)kern_dtype_size(dt);
    return SP_OK;
  case OPT_TFLOPS: return job_parse_double("--tflops", v, 1e-3, 1e6, &c->po.gpu_tflops);
  case OPT_HOST: return job_parse_double("--host-gbs", v, 1e-3, 1e5, &c->po.host_link_gbs);
  case OPT_PEER: return job_parse_double("--peer-gbs", v, 1e-3, 1e5, &c->po.peer_link_gbs);
  case OPT_PREFETCH:
    if (job_parse_int64("--prefetch", v, 1, 16, &i64)) return SP_ERR_INPUT;
    c->po.prefetch_depth = (int)i64;
    return SP_OK;
  case OPT_RESERVE:
    if (plan_parse_bytes(v, &c->po.reserve_bytes, err, sizeof err) != PLAN_OK) {
      sp_log_error("--reserve: %s", err);
      return SP_ERR_INPUT;
    }
    return SP_OK;
  case OPT_JSON: c->json = 1; return SP_OK;
  default: c->help = 1; return SP_OK;
  }
}

static int plan_parse(int argc, char **argv, plan_cli *c) {
  cli_opts t;
  plan_defaults d;
  plan_table(&t, &d);
  memset(c, 0, sizeof *c);
  job_opts_default(&c->job);
  plan_options_default(&c->po);
  c->batch = 1;
  c->dtype_bytes = 2;
  cli_getopt_reset();
  const job_option *opt;
  int r;
  while ((r = cli_opts_next(&t, argc, argv, &opt)) == 1 && !c->help) {
    int rc = opt->id < JOB_OPT_COUNT ? job_opts_set(&c->job, opt->id, optarg)
                                     : plan_set(c, opt->id, optarg);
    if (rc != SP_OK) return rc;
  }
  if (c->help) return SP_OK;
  if (r < 0) return cli_bad_usage("plan");
  if (optind != argc) {
    sp_log_error("plan: unexpected argument '%s' (the model is given with --model)", argv[optind]);
    return cli_bad_usage("plan");
  }
  if (!c->job.model) {
    sp_log_error("plan: --model is required (a model file or synth:wan2.1-14b)");
    return cli_bad_usage("plan");
  }
  if (!c->gpu_mem == !c->inventory) {
    sp_log_error("plan: give the GPUs with exactly one of --gpu-mem or --inventory");
    return cli_bad_usage("plan");
  }
  if (job_opts_check(&c->job, 0) != SP_OK) return SP_ERR_INPUT;
  if (c->inventory && rank_path_check_input("--inventory", c->inventory, RANK_PATH_FILE) != SP_OK)
    return SP_ERR_INPUT;
  return job_model_path_check("--model", c->job.model);
}

/* The devices from --inventory or --gpu-mem, and --speed; sets c->nranks. */
static int plan_devices(plan_cli *c, plan_device *devs) {
  const char *gpu_mem = c->gpu_mem, *inventory = c->inventory, *speed = c->speed;
  int64_t nranks = c->nranks;
  char err[8192];
  int ndev = 0;
  if (inventory) {
    if (load_inventory(inventory, devs, &ndev) != SP_OK) return SP_ERR_INPUT;
    if (nranks && nranks != ndev) {
      sp_log_error("plan: --ranks %lld but --inventory %s lists %d devices", (long long)nranks,
                   inventory, ndev);
      return SP_ERR_INPUT;
    }
    nranks = ndev;
  } else {
    char buf[4096], *items[PLAN_MAX_RANKS];
    snprintf(buf, sizeof buf, "%s", gpu_mem);
    int n = split_list(buf, items, PLAN_MAX_RANKS);
    if (n < 0) {
      sp_log_error("--gpu-mem: '%s' is not a list of sizes like 24gb or 24gb,20gb (at most %d)",
                   gpu_mem, PLAN_MAX_RANKS);
      return SP_ERR_INPUT;
    }
    if (!nranks) nranks = n;
    if (n != 1 && n != nranks) {
      sp_log_error("--gpu-mem: %d sizes for --ranks %lld: give one size for all or one per rank",
                   n, (long long)nranks);
      return SP_ERR_INPUT;
    }
    for (int r = 0; r < nranks; r++) {
      const char *tok = items[n == 1 ? 0 : r];
      uint64_t bytes;
      if (plan_parse_bytes(tok, &bytes, err, sizeof err) != PLAN_OK) {
        sp_log_error("--gpu-mem: %s", err);
        return SP_ERR_INPUT;
      }
      memset(&devs[r], 0, sizeof devs[r]);
      snprintf(devs[r].name, sizeof devs[r].name, "gpu %s", tok);
      devs[r].total_bytes = devs[r].free_bytes = bytes;
      devs[r].speed = 1.0;
    }
  }
  if (speed) {
    char buf[4096], *items[PLAN_MAX_RANKS];
    snprintf(buf, sizeof buf, "%s", speed);
    int n = split_list(buf, items, PLAN_MAX_RANKS);
    if (n < 0 || (n != 1 && n != nranks)) {
      sp_log_error("--speed: '%s' needs one number for all or one per rank (%lld ranks)", speed,
                   (long long)nranks);
      return SP_ERR_INPUT;
    }
    for (int r = 0; r < nranks; r++)
      if (job_parse_double("--speed", items[n == 1 ? 0 : r], 1e-3, 1000, &devs[r].speed))
        return SP_ERR_INPUT;
  }

  c->nranks = nranks;
  return SP_OK;
}

int cmd_plan(int argc, char **argv) {
  plan_cli cl;
  int rc = plan_parse(argc, argv, &cl);
  if (cl.help) {
    usage(stdout);
    return SP_OK;
  }
  if (rc != SP_OK) return rc;
  static plan_device devs[PLAN_MAX_RANKS];
  if ((rc = plan_devices(&cl, devs)) != SP_OK) return rc;
  const char *model = cl.job.model, *budget = cl.job.budget;
  const int64_t nranks = cl.nranks, batch = cl.batch;
  const int json = cl.json, dtype_bytes = cl.dtype_bytes;
  char err[8192];
  plan_options po = cl.po;
  job_plan_options(&cl.job, &po);

  plan_budget b;
  if (plan_budget_parse(budget, (int)nranks, &b, err, sizeof err) != PLAN_OK) {
    sp_log_error("--budget: %s", err);
    return SP_ERR_INPUT;
  }

  /* ---- model sizes: metadata only ---- */
  rank_model *m = NULL;
  rc = rank_model_open(model, 0, &m);
  if (rc != SP_OK) return rc;
  const rank_model_info *info = rank_model_get_info(m);
  if ((rc = job_opts_apply_model(&cl.job, info)) != SP_OK) {
    rank_model_close(m);
    return rc;
  }
  uint64_t *bb = sp_xcalloc((size_t)info->config.layers, sizeof *bb);
  plan_model pm;
  rank_model_plan_sizes(m, dtype_bytes, bb, &pm);
  plan_workload wl = job_workload(&cl.job.job, &info->config, (int)batch);
  if (cl.job.vae) { /* run --video: the CUDA decoder on the last rank */
    vae_model *vae = NULL;
    if ((rc = vae_model_open(cl.job.vae, 0, &vae)) != SP_OK) {
      free(bb);
      rank_model_close(m);
      return rc;
    }
    po.decoder_bytes =
        job_decoder_bytes(&vae_model_get_info(vae)->config, cl.job.vae_precision, &wl);
    vae_model_close(vae);
  }
  const int micro = wl.micro_batches;
  const int64_t frames = wl.frames, height = wl.height, width = wl.width;
  static plan p;
  int prc = plan_make(&pm, devs, (int)nranks, &b, &wl, &po, &p, err, sizeof err);
  if (prc != PLAN_OK) {
    log_lines("plan: ", err);
    rc = SP_ERR_INPUT;
    goto out;
  }

  json_object *t5 = NULL;
  if (cl.job.t5 && (rc = plan_t5(cl.job.t5, micro, &devs[0], json, &t5)) != SP_OK) goto out;
  size_t need = json ? plan_format_json(&p, NULL, 0) : plan_format_table(&p, NULL, 0);
  char *text = sp_xmalloc(need + 1);
  if (json) {
    plan_format_json(&p, text, need + 1);
    if (t5) { /* the plan's JSON with "text_encoder" added */
      json_object *root = json_tokener_parse(text);
      json_object_object_add(root, "text_encoder", t5);
      free(text);
      text = strdup(json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN));
      text = realloc(text, strlen(text) + 2);
      strcat(text, "\n");
      json_object_put(root);
    }
  } else {
    uint64_t blocks = 0;
    for (int i = 0; i < pm.num_blocks; i++) blocks += bb[i];
    printf("# model %s: %d blocks, %.2f GB of blocks + %.2f GB embeddings/head (%s on the GPU)\n",
           model, pm.num_blocks, blocks / GIB, (pm.embed_bytes + pm.head_bytes) / GIB,
           dtype_bytes == 2 ? "bf16" : "fp32");
    if (info->experts.count > 1)
      printf("# 2 experts (high and low noise): every rank holds both experts' blocks of its "
             "range and the sizes count both; a streamed block is both experts' copies, copied "
             "in whole (the swap at the switch is not built)\n");
    char cfg[64];
    snprintf(cfg, sizeof cfg, info->experts.count > 1 ? "cfg %g,%g" : "cfg %g", cl.job.job.cfg,
             cl.job.job.cfg_low);
    printf("# workload %lld frames %lldx%lld = %lld tokens, %d micro-batch%s (%s, batch %lld); "
           "budget %s\n",
           (long long)frames, (long long)height, (long long)width, (long long)plan_tokens(&wl),
           micro, micro == 1 ? "" : "es", cfg, (long long)batch, budget ? budget : "auto");
    char frac[64] = "streamed blocks from the budget", rows[64] = "chunk rows from the budget";
    if (po.stream_frac >= 0)
      snprintf(frac, sizeof frac, "at least %g of each rank's blocks streamed", po.stream_frac);
    if (po.max_rows > 0)
      snprintf(rows, sizeof rows, "chunk rows at most %lld", (long long)po.max_rows);
    printf("# order %s; %s; %s\n", plan_order_name(po.order), frac, rows);
    plan_format_table(&p, text, need + 1);
  }
  fputs(text, stdout);
  free(text);
  rc = fflush(stdout) == 0 ? SP_OK : SP_ERR_RUNTIME;
out:
  free(bb);
  rank_model_close(m);
  return rc;
}
