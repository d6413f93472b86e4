/* staticpipe plan: the planner as a dry run, for hardware that need not be
 * here. Reads the model's metadata only (no weights), builds the device
 * inventory from flags or a JSON file, prints the plan as a table or JSON. */
#include <getopt.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "log.h"
#include "model_file.h"
#include "model_plan.h"
#include "plan.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

static void usage(FILE *f) {
  plan_options d;
  plan_options_default(&d);
  fprintf(f,
          "usage: staticpipe plan --model MODEL --gpu-mem SIZE[,SIZE...] [options]\n"
          "       staticpipe plan --model MODEL --inventory FILE.json [options]\n"
          "\n"
          "Plans the split of MODEL's transformer blocks over a pipeline of GPUs and prints\n"
          "it: per rank its blocks, which are resident and which are streamed from pinned\n"
          "host memory, weight, peak and budget bytes and the predicted step time. Needs no\n"
          "GPU and no MPI; reads the model's metadata only (synth:PRESET works without a\n"
          "file). Exits 2 with needed vs available bytes per rank when nothing fits.\n"
          "\n"
          "  -m, --model MODEL     model file or synth:PRESET (wan2.1-tiny, -1.3b, -14b); required\n"
          "  -f, --frames F        video frames, 4k+1 (default 81)\n"
          "  -s, --size HxW        height x width in pixels, multiples of 16 (default 480x832)\n"
          "  -n, --ranks N         pipeline ranks (default: one per --gpu-mem or inventory entry)\n"
          "  -G, --gpu-mem LIST    GPU memory, one size for every rank or one per rank\n"
          "                        (24gb or 24gb,20gb; powers of 1024: 24gb = 24 GiB, as GPU\n"
          "                        memory is reported)\n"
          "  -i, --inventory FILE  devices from JSON instead: [{\"name\", \"total_bytes\",\n"
          "                        \"free_bytes\", \"sm_count\", \"cc\" (\"9.0\"), \"pci_bus_id\",\n"
          "                        \"host_bytes\", \"speed\"}, ...] or {\"devices\": [...]};\n"
          "                        sizes as numbers of bytes or strings like \"24gb\"\n"
          "  -b, --budget STR      memory budget (default auto = free memory minus max(5%%, 256 MiB)):\n"
          "                          0.8                          fraction of each GPU's memory\n"
          "                          cuda:0,20gb;cuda:1,18gb;cpu,*  GPU memory per rank in all\n"
          "                                   (weights, activations, workspaces); cpu,* streams\n"
          "                                   what does not fit from pinned host memory\n"
          "                          cuda:0,40%%;cuda:1,60%%         shares of the block bytes;\n"
          "                                   cpu,25%% streams that share; a '*' takes the rest\n"
          "                        units b, kb, mb, gb, tb (any case, powers of 1024);\n"
          "                        cuda:K is pipeline rank K; ranks not named get auto\n"
          "  -S, --speed LIST      relative speed per rank, one for all or one per rank\n"
          "                        (default 1; the rate is --tflops x speed)\n"
          "  -g, --cfg G           guidance scale; > 1 runs 2 branches = 2 micro-batches (default 5)\n"
          "      --batch B         batch items; micro-batches = branches x B (default 1)\n"
          "      --dtype T         weight width on the GPU: bf16 or fp32 (default bf16)\n"
          "      --tflops X        dense rate of a speed-1 GPU, TFLOP/s (default %.0f)\n"
          "      --host-gbs X      pinned host -> GPU copy rate, GB/s (default %.0f)\n"
          "      --peer-gbs X      rank -> rank activation rate, GB/s (default %.0f)\n"
          "      --prefetch N      streaming slots per rank, 1..16 (default %d)\n"
          "      --reserve SIZE    runtime reserve per GPU: CUDA context, library\n"
          "                        workspaces (default %.0f MiB)\n"
          "      --order O         order of work at a stage (default auto: the faster predicted):\n"
          "                          micro  all blocks on one micro-batch, then the next; stages\n"
          "                                 pipelined, streamed blocks copied per micro-batch\n"
          "                          block  each block on every micro-batch; stages in sequence,\n"
          "                                 streamed blocks copied once per step\n"
          "      --stream-frac F   every rank streams at least ceil(F x its blocks), 0..1,\n"
          "                        the largest first; the budget still applies (default: the\n"
          "                        budget decides what streams)\n"
          "      --chunk-rows N    chunk activations to at most N rows, N >= 1 (default: the\n"
          "                        budget decides)\n"
          "  -j, --json            the plan as JSON on stdout (keys ranks[{rank, device,\n"
          "                        first_block, last_block, resident, streamed, order,\n"
          "                        weight_bytes, peak_bytes, budget_bytes, predicted_step_ms,\n"
          "                        ...}], order, predicted_step_ms); logs go to stderr\n"
          "  -h, --help            this text\n"
          "\n"
          "example: staticpipe plan --model synth:wan2.1-14b --ranks 2 --gpu-mem 12gb --budget 'cpu,*'\n",
          d.gpu_tflops, d.host_link_gbs, d.peer_link_gbs, d.prefetch_depth,
          (double)d.reserve_bytes / (1024.0 * 1024.0));
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

enum {
  OPT_BATCH = 1000,
  OPT_DTYPE,
  OPT_TFLOPS,
  OPT_HOST,
  OPT_PEER,
  OPT_PREFETCH,
  OPT_RESERVE,
  OPT_ORDER,
  OPT_STREAM_FRAC,
  OPT_CHUNK_ROWS
};

int cmd_plan(int argc, char **argv) {
  static const struct option opts[] = {
      {"model", required_argument, 0, 'm'},     {"frames", required_argument, 0, 'f'},
      {"size", required_argument, 0, 's'},      {"ranks", required_argument, 0, 'n'},
      {"gpu-mem", required_argument, 0, 'G'},   {"inventory", required_argument, 0, 'i'},
      {"budget", required_argument, 0, 'b'},    {"speed", required_argument, 0, 'S'},
      {"cfg", required_argument, 0, 'g'},       {"batch", required_argument, 0, OPT_BATCH},
      {"dtype", required_argument, 0, OPT_DTYPE}, {"tflops", required_argument, 0, OPT_TFLOPS},
      {"host-gbs", required_argument, 0, OPT_HOST}, {"peer-gbs", required_argument, 0, OPT_PEER},
      {"prefetch", required_argument, 0, OPT_PREFETCH},
      {"reserve", required_argument, 0, OPT_RESERVE}, {"order", required_argument, 0, OPT_ORDER},
      {"stream-frac", required_argument, 0, OPT_STREAM_FRAC},
      {"chunk-rows", required_argument, 0, OPT_CHUNK_ROWS}, {"json", no_argument, 0, 'j'},
      {"help", no_argument, 0, 'h'},            {0, 0, 0, 0}};
  const char *model = NULL, *gpu_mem = NULL, *inventory = NULL, *budget = NULL, *speed = NULL;
  int64_t frames = 81, height = 480, width = 832, nranks = 0, batch = 1, prefetch = 0;
  double cfg = 5.0;
  int json = 0, dtype_bytes = 2;
  char err[8192];
  plan_options po;
  plan_options_default(&po);

  cli_getopt_reset();
  int ch;
  while ((ch = getopt_long(argc, argv, "m:f:s:n:G:i:b:S:g:jh", opts, NULL)) != -1) {
    switch (ch) {
    case 'm': model = optarg; break;
    case 'f':
      if (cli_parse_int64("--frames", optarg, 1, 100001, &frames)) return SP_ERR_INPUT;
      break;
    case 's':
      if (cli_parse_size_hw("--size", optarg, &height, &width)) return SP_ERR_INPUT;
      break;
    case 'n':
      if (cli_parse_int64("--ranks", optarg, 1, PLAN_MAX_RANKS, &nranks)) return SP_ERR_INPUT;
      break;
    case 'G': gpu_mem = optarg; break;
    case 'i': inventory = optarg; break;
    case 'b': budget = optarg; break;
    case 'S': speed = optarg; break;
    case 'g':
      if (cli_parse_double("--cfg", optarg, 0, 100, &cfg)) return SP_ERR_INPUT;
      break;
    case OPT_BATCH:
      if (cli_parse_int64("--batch", optarg, 1, 512, &batch)) return SP_ERR_INPUT;
      break;
    case OPT_DTYPE:
      {
        kern_dtype dt;
        if (cli_parse_dtype("--dtype", optarg, &dt)) return SP_ERR_INPUT;
        dtype_bytes = (int)kern_dtype_size(dt);
      }
      break;
    case OPT_TFLOPS:
      if (cli_parse_double("--tflops", optarg, 1e-3, 1e6, &po.gpu_tflops)) return SP_ERR_INPUT;
      break;
    case OPT_HOST:
      if (cli_parse_double("--host-gbs", optarg, 1e-3, 1e5, &po.host_link_gbs)) return SP_ERR_INPUT;
      break;
    case OPT_PEER:
      if (cli_parse_double("--peer-gbs", optarg, 1e-3, 1e5, &po.peer_link_gbs)) return SP_ERR_INPUT;
      break;
    case OPT_PREFETCH:
      if (cli_parse_int64("--prefetch", optarg, 1, 16, &prefetch)) return SP_ERR_INPUT;
      po.prefetch_depth = (int)prefetch;
      break;
    case OPT_RESERVE:
      if (plan_parse_bytes(optarg, &po.reserve_bytes, err, sizeof err) != PLAN_OK) {
        sp_log_error("--reserve: %s", err);
        return SP_ERR_INPUT;
      }
      break;
    case OPT_ORDER:
      if (plan_parse_order(optarg, &po.order, err, sizeof err) != PLAN_OK) {
        sp_log_error("--order: %s", err);
        return SP_ERR_INPUT;
      }
      break;
    case OPT_STREAM_FRAC:
      if (cli_parse_double("--stream-frac", optarg, 0, 1, &po.stream_frac)) return SP_ERR_INPUT;
      break;
    case OPT_CHUNK_ROWS:
      if (cli_parse_int64("--chunk-rows", optarg, 1, INT64_C(1) << 31, &po.max_rows))
        return SP_ERR_INPUT;
      break;
    case 'j': json = 1; break;
    case 'h': usage(stdout); return SP_OK;
    default: return cli_bad_usage("plan");
    }
  }
  if (optind != argc) {
    sp_log_error("plan: unexpected argument '%s' (the model is given with --model)", argv[optind]);
    return cli_bad_usage("plan");
  }
  if (!model) {
    sp_log_error("plan: --model is required (a model file or synth:wan2.1-14b)");
    return cli_bad_usage("plan");
  }
  if (!gpu_mem == !inventory) {
    sp_log_error("plan: give the GPUs with exactly one of --gpu-mem or --inventory");
    return cli_bad_usage("plan");
  }

  /* ---- devices ---- */
  static plan_device devs[PLAN_MAX_RANKS];
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
      if (cli_parse_double("--speed", items[n == 1 ? 0 : r], 1e-3, 1000, &devs[r].speed))
        return SP_ERR_INPUT;
  }

  plan_budget b;
  if (plan_budget_parse(budget, (int)nranks, &b, err, sizeof err) != PLAN_OK) {
    sp_log_error("--budget: %s", err);
    return SP_ERR_INPUT;
  }

  /* ---- model sizes: metadata only ---- */
  rank_model *m = NULL;
  int rc = rank_model_open(model, 0, &m);
  if (rc != SP_OK) return rc;
  const rank_model_info *info = rank_model_get_info(m);
  uint64_t *bb = sp_xcalloc((size_t)info->config.layers, sizeof *bb);
  plan_model pm;
  rank_model_plan_sizes(m, dtype_bytes, bb, &pm);
  int micro = (cfg > 1.0 ? 2 : 1) * (int)batch;
  plan_workload wl = {frames, height, width, micro, info->config.text_len};
  static plan p;
  int prc = plan_make(&pm, devs, (int)nranks, &b, &wl, &po, &p, err, sizeof err);
  if (prc != PLAN_OK) {
    log_lines("plan: ", err);
    rc = SP_ERR_INPUT;
    goto out;
  }

  size_t need = json ? plan_format_json(&p, NULL, 0) : plan_format_table(&p, NULL, 0);
  char *text = sp_xmalloc(need + 1);
  if (json) {
    plan_format_json(&p, text, need + 1);
  } else {
    uint64_t blocks = 0;
    for (int i = 0; i < pm.num_blocks; i++) blocks += bb[i];
    printf("# model %s: %d blocks, %.2f GB of blocks + %.2f GB embeddings/head (%s on the GPU)\n",
           model, pm.num_blocks, blocks / GIB, (pm.embed_bytes + pm.head_bytes) / GIB,
           dtype_bytes == 2 ? "bf16" : "fp32");
    printf("# workload %lld frames %lldx%lld = %lld tokens, %d micro-batch%s (cfg %g, batch %lld); "
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
