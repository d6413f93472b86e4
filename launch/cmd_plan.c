/* staticpipe plan: the planner as a dry run, for hardware that need not be
 * here. Reads the model's metadata only (no weights), builds the device
 * inventory from flags or a JSON file, prints the plan as a table or JSON. */
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "grid_choice.h"
#include "job_plan.h"
#include "job_image.h"
#include "job_prompt.h"
#include "job_vae.h"
#include "layout.h"
#include "log.h"
#include "model_file.h"
#include "path_check.h"
#include "plan.h"
#include "plan_inventory.h"
#include "umt5.h"

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
  OPT_LAYOUT,
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
                            JOB_OPT_VAE_PRECISION, JOB_OPT_T5, JOB_OPT_PRECISION,
                            JOB_OPT_CACHE,       JOB_OPT_IMAGE,      JOB_OPT_MAX_AREA};
  plan_options po;
  plan_options_default(&po);
  snprintf(d->tflops, sizeof d->tflops, "%.0f", po.gpu_tflops);
  snprintf(d->host, sizeof d->host, "%.0f", po.host_link_gbs);
  snprintf(d->peer, sizeof d->peer, "%.0f", po.peer_link_gbs);
  snprintf(d->prefetch, sizeof d->prefetch, "%d", po.prefetch_depth);
  snprintf(d->reserve, sizeof d->reserve, "%.0f MiB", (double)po.reserve_bytes / (1024.0 * 1024.0));
  static job_option own[] = {
      {OPT_RANKS, "ranks", 0, "N", NULL, 0,
       "pipeline ranks, 1..64 (default: one per --gpu-mem or\n"
       "inventory entry)"},
      {OPT_GPU_MEM, "gpu-mem", 'G', "LIST", NULL, 0,
       "GPU memory, one size for every rank or one per rank\n"
       "(24gb or 24gb,20gb; powers of 1024: 24gb = 24 GiB, as GPU\n"
       "memory is reported)"},
      {OPT_INVENTORY, "inventory", 'i', "FILE", NULL, 0,
       "devices from JSON instead: [{\"name\", \"total_bytes\",\n"
       "\"free_bytes\", \"sm_count\", \"cc\" (\"9.0\"), \"pci_bus_id\",\n"
       "\"host_bytes\", \"speed\", \"node\"}, ...] or {\"devices\": [...],\n"
       "\"links\": {...}}; sizes as numbers of bytes or strings like\n"
       "\"24gb\"; links below"},
      {OPT_SPEED, "speed", 'S', "LIST", "1", 0,
       "relative speed per rank in (0, 1000], one for all or\n"
       "one per rank (the rate is --tflops x speed)"},
      {OPT_BATCH, "batch", 0, "B", "1", 0, "batch items, 1..512; micro-batches = branches x B"},
      {OPT_DTYPE, "dtype", 0, "T", "bf16", 0, "weight width on the GPU: bf16 or fp32"},
      {OPT_TFLOPS, "tflops", 0, "X", NULL, 0, "dense rate of a speed-1 GPU, TFLOP/s, 0.001..1e6"},
      {OPT_HOST, "host-gbs", 0, "X", NULL, 0, "pinned host -> GPU copy rate, GB/s, 0.001..1e5"},
      {OPT_PEER, "peer-gbs", 0, "X", NULL, 0, "rank -> rank activation rate, GB/s, 0.001..1e5"},
      {OPT_PREFETCH, "prefetch", 0, "N", NULL, 0, "streaming slots per rank, 1..16"},
      {OPT_RESERVE, "reserve", 0, "SIZE", NULL, 0,
       "runtime reserve per GPU: CUDA context, library\nworkspaces"},
      {OPT_LAYOUT, "layout", 0, "L", NULL, 0,
       "auto, pipeline (1 x ranks x 1) or RxSxU (replicas x\n"
       "pipeline stages x sequence-parallel ranks per stage):\n"
       "prints every layout of the ranks considered (or only the\n"
       "one given) with its peak\n"
       "memory and PREDICTED step, the refused ones with why,\n"
       "and the chosen one (auto: fits, then fastest); with\n"
       "--json as {chosen, layouts[]}. Without it: the plain\n"
       "pipeline's plan"},
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
          "A two-expert model (Wan 2.2 A14B): per rank how it holds the experts' blocks:\n"
          "resident (both on the GPU), swap (when only one expert's share fits and the\n"
          "budget has a cpu entry: one GPU copy, both in pinned host memory, swapped at\n"
          "the switch; with the predicted switch cost) or stream.\n"
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
          "Inventory links (--inventory {\"devices\": [...], \"links\": {...}}; GB/s per\n"
          "direction per GPU; every key optional):\n"
          "  \"gpu\": \"nvlink\" | \"pcie\"  how the GPUs of a node talk (default pcie)\n"
          "  \"nvlink_gbs\": 450         NVLink rate (required with nvlink)\n"
          "  \"pcie_gen\": 5             host link, x16 at 80%% of raw (Gen4 25.2, Gen5 50.4);\n"
          "                             or \"pcie_gbs\": X (not both); sets --host-gbs\n"
          "  \"peer_gbs\": X             GPU <-> GPU without NVLink (default the PCIe rate)\n"
          "  \"inter_node_gbs\": X       between nodes; required when a device's \"node\"\n"
          "                             is not 0\n"
          "The links time activations between stages (--peer-gbs without an inventory),\n"
          "the Ulysses all-to-alls and the replicas' exchange of predictions; --host-gbs\n"
          "and --peer-gbs given on the command line win over the file.\n"
          "\n"
          "Layouts (--layout): R replicas each run ceil(M/R) of the M micro-batches over S\n"
          "stages; the U ranks of a stage hold 1/U of the tokens (U divides the heads;\n"
          "each counted with the largest slice, ceil(L/U), and the all-to-all's buffers).\n"
          "With a grid, cuda:K in --budget names stage K (all its ranks). The times are\n"
          "PREDICTIONS of the model in planner/grid_choice.c, not measurements.\n"
          "\n"
          "example: staticpipe plan --model synth:wan2.1-14b --ranks 2 --gpu-mem 12gb --budget 'cpu,*'\n"
          "example: staticpipe plan --model synth:wan2.1-14b --cfg 5 --gpu-mem 141gb --ranks 8 --layout auto\n");
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
  const int cuda = net_backend_has(umt5_net(), RANK_DEVICE_CUDA);
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
  job_params job; /* --model, --frames, --size, --cfg, --budget, --order, ... */
  plan_options po;
  const char *gpu_mem, *inventory, *speed;
  const char *layout; /* --layout as given; NULL: the plain pipeline */
  plan_grid grid;     /* --layout RxSxU */
  int layout_mode;    /* PLAN_GRID_AUTO, _PIPELINE or _GIVEN (grid) */
  int host_set, peer_set; /* --host-gbs, --peer-gbs given (they win over the inventory) */
  int64_t nranks, batch;
  int json, dtype_bytes, help;
} plan_cli;

/* One of plan's own options. */
static int plan_set(void *ctx, int id, const char *v) {
  plan_cli *c = ctx;
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
  case OPT_HOST:
    c->host_set = 1;
    return job_parse_double("--host-gbs", v, 1e-3, 1e5, &c->po.host_link_gbs);
  case OPT_PEER:
    c->peer_set = 1;
    return job_parse_double("--peer-gbs", v, 1e-3, 1e5, &c->po.peer_link_gbs);
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
  case OPT_LAYOUT:
    c->layout = v;
    if (plan_grid_parse(v, &c->grid, &c->layout_mode, err, sizeof err) != PLAN_OK) {
      sp_log_error("%s", err);
      return SP_ERR_INPUT;
    }
    return SP_OK;
  case OPT_JSON: c->json = 1; return SP_OK;
  default: return CLI_HELP;
  }
}

static void plan_table_of(cli_opts *t) {
  plan_defaults d;
  plan_table(t, &d);
}

static int plan_parse(int argc, char **argv, plan_cli *c) {
  static const cli_command cmd = {"plan", plan_table_of, plan_set, NULL, 0};
  memset(c, 0, sizeof *c);
  plan_options_default(&c->po);
  c->batch = 1;
  c->dtype_bytes = 2;
  cli_result res;
  int rc = cli_command_parse(&cmd, argc, argv, &c->job, c, &res);
  c->help = res.help;
  if (rc != SP_OK || c->help) return rc;
  if (!c->job.model) {
    sp_log_error("plan: --model is required (a model file or synth:wan2.1-14b)");
    return cli_bad_usage("plan");
  }
  if (!c->gpu_mem == !c->inventory) {
    sp_log_error("plan: give the GPUs with exactly one of --gpu-mem or --inventory");
    return cli_bad_usage("plan");
  }
  if (job_params_check(&c->job, 0) != SP_OK) return SP_ERR_INPUT;
  if (c->inventory && rank_path_check_input("--inventory", c->inventory, RANK_PATH_FILE) != SP_OK)
    return SP_ERR_INPUT;
  if (c->job.vae && job_model_path_check("--vae", c->job.vae) != SP_OK) return SP_ERR_INPUT;
  if (c->job.job.image[0] &&
      rank_path_check_input("--image", c->job.job.image, RANK_PATH_FILE) != SP_OK)
    return SP_ERR_INPUT;
  return job_model_path_check("--model", c->job.model);
}

/* The devices from --inventory or --gpu-mem, and --speed; sets c->nranks,
 * the links between the ranks and the link rates of c->po the inventory
 * gives (unless the flags did). */
static int plan_devices(plan_cli *c, plan_device *devs, plan_links *links) {
  const char *gpu_mem = c->gpu_mem, *inventory = c->inventory, *speed = c->speed;
  int64_t nranks = c->nranks;
  char err[8192];
  int ndev = 0;
  plan_links_default(links, &c->po);
  if (inventory) {
    static plan_inventory inv;
    if (plan_inventory_load(inventory, &c->po, &inv) != SP_OK) return SP_ERR_INPUT;
    ndev = inv.ndev;
    memcpy(devs, inv.devs, (size_t)ndev * sizeof *devs);
    *links = inv.links;
    if (c->peer_set) links->nvlink_gbs = links->pcie_peer_gbs = c->po.peer_link_gbs;
    if (inv.host_link_gbs > 0.0 && !c->host_set) c->po.host_link_gbs = inv.host_link_gbs;
    if (inv.have_links && !c->peer_set) {
      /* the plain pipeline's activations: the slowest link between neighbours */
      double peer = 0.0;
      for (int r = 0; r + 1 < ndev; r++) {
        double x = plan_links_gbs(links, r, r + 1);
        if (peer == 0.0 || x < peer) peer = x;
      }
      if (peer > 0.0) c->po.peer_link_gbs = peer;
    }
    if (nranks && nranks != ndev) {
      sp_log_error("plan: --ranks %lld but --inventory %s lists %d devices", (long long)nranks,
                   inventory, ndev);
      return SP_ERR_INPUT;
    }
    nranks = ndev;
  } else {
    char buf[4096], *items[PLAN_MAX_RANKS];
    int n = 0;
    if (job_parse_list("--gpu-mem", gpu_mem, ',', buf, sizeof buf, items, PLAN_MAX_RANKS, &n) !=
        SP_OK)
      return SP_ERR_INPUT;
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
    int n = 0;
    if (job_parse_list("--speed", speed, ',', buf, sizeof buf, items, PLAN_MAX_RANKS, &n) !=
        SP_OK)
      return SP_ERR_INPUT;
    if (n != 1 && n != nranks) {
      sp_log_error("--speed: '%s' needs one number for all or one per rank (%lld ranks)", speed,
                   (long long)nranks);
      return SP_ERR_INPUT;
    }
    for (int r = 0; r < nranks; r++)
      if (job_parse_double("--speed", items[n == 1 ? 0 : r], 1e-3, PLAN_SPEED_MAX,
                           &devs[r].speed))
        return SP_ERR_INPUT;
  }

  c->nranks = nranks;
  return SP_OK;
}

/* The table's # lines: the model, the workload, the options. */
static void print_header(const plan_cli *cl, const rank_model_info *info, const plan_model *pm,
                         const uint64_t *bb, const plan_workload *wl, const plan_options *po) {
  const char *model = cl->job.model, *budget = cl->job.budget;
  const int dtype_bytes = cl->dtype_bytes, micro = wl->micro_batches;
  const long long frames = wl->frames, height = wl->height, width = wl->width, batch = cl->batch;
  uint64_t blocks = 0;
  for (int i = 0; i < pm->num_blocks; i++) blocks += bb[i];
  const wan_precision prec = job_precision(&cl->job, info);
  const char *how = dtype_bytes != 2                 ? "fp32"
                    : prec == WAN_PRECISION_FP8      ? "blocks' linear weights fp8 e4m3 with "
                                                       "their scales (W8A8), the rest bf16"
                    : prec == WAN_PRECISION_INT8     ? "blocks' linear weights int8 with their "
                                                       "scales (W8A8), the rest bf16"
                    : info->quant ? "blocks' linear weights as stored (dequantised for each "
                                    "GEMM), the rest bf16"
                                  : "bf16";
  printf("# model %s: %d blocks, %.2f GB of blocks + %.2f GB embeddings/head (%s on the GPU)\n",
         model, pm->num_blocks, blocks / GIB, (pm->embed_bytes + pm->head_bytes) / GIB, how);
  if (dtype_bytes == 2 && pm->dequant_bytes)
    printf("# weight-only: one %.3f GB bf16 scratch each weight is dequantised into before its "
           "GEMM\n", pm->dequant_bytes / GIB);
  if (dtype_bytes == 2 && pm->w8a8)
    printf("# W8A8: inputs quantised per token into code and scale buffers%s\n",
           pm->w8a8_epilogue ? ", products through an fp32 scratch (int8, or fp8 on a GPU other "
                               "than sm_90)" : "; cuBLASLt applies the scales (every GPU sm_90)");
  if (info->experts.count > 1)
    printf("# 2 experts (high and low noise): the sizes count both; each rank holds both "
           "experts' blocks of its range (resident), or one device copy swapped at the switch "
           "(swap), or streams blocks, the current expert's copy each step (stream)\n");
  char cfg[64];
  snprintf(cfg, sizeof cfg, info->experts.count > 1 ? "cfg %g,%g" : "cfg %g", cl->job.job.cfg,
           cl->job.job.cfg_low);
  printf("# workload %lld frames %lldx%lld = %lld tokens, %d micro-batch%s (%s, batch %lld); "
         "budget %s\n",
         (long long)frames, (long long)height, (long long)width, (long long)plan_tokens(wl),
         micro, micro == 1 ? "" : "es", cfg, (long long)batch, budget ? budget : "auto");
  char frac[64] = "streamed blocks from the budget", rows[64] = "chunk rows from the budget";
  if (po->stream_frac >= 0)
    snprintf(frac, sizeof frac, "at least %g of each rank's blocks streamed", po->stream_frac);
  if (po->max_rows > 0)
    snprintf(rows, sizeof rows, "chunk rows at most %lld", (long long)po->max_rows);
  printf("# order %s; %s; %s\n", plan_order_name(po->order), frac, rows);
  if (pm->cache) {
    const double c = (double)plan_layout_cache_bytes(micro, plan_tokens(wl), pm->dim) / GIB;
    printf("# step cache %s: the last stage keeps %.3f GB of residuals, the first stage (when "
           "not also the last) %.3f GB of inputs on their way; both counted in the ranks' "
           "activations below\n",
           cl->job.job.cache.method == RANK_CACHE_TEACACHE ? "teacache" : "magcache", c, c);
  }
}

/* --layout: every layout considered (or the one given), the chosen one and
 * its prediction. 0, or SP_ERR_INPUT when none fits (the table printed). */
static int print_layouts(const plan_cli *cl, const rank_model_info *info, const plan_model *pm,
                         const uint64_t *bb, const plan_device *devs, const plan_links *links,
                         const plan_workload *wl, const plan_options *po) {
  static plan_grid_choice ch;
  char err[1024];
  const plan_grid only = cl->layout_mode == PLAN_GRID_PIPELINE
                             ? plan_grid_pipeline((int)cl->nranks) : cl->grid;
  const plan_grid_inputs in = {.m = pm, .devs = devs, .nranks = (int)cl->nranks,
                               .budget = cl->job.budget, .w = wl, .o = po, .links = links};
  int prc = plan_grid_choose(&in, cl->layout_mode == PLAN_GRID_AUTO ? NULL : &only, &ch, err,
                             sizeof err);
  if (prc == PLAN_EINVAL) {
    sp_log_error("plan: %s", err);
    return SP_ERR_INPUT;
  }
  size_t need =
      cl->json ? plan_grid_format_json(&ch, NULL, 0) : plan_grid_format_table(&ch, NULL, 0);
  char *text = sp_xmalloc(need + 1);
  if (cl->json) {
    plan_grid_format_json(&ch, text, need + 1);
  } else {
    print_header(cl, info, pm, bb, wl, po);
    printf("# links: GPU <-> GPU %s %.1f GB/s, between nodes %.1f GB/s, host %.1f GB/s\n",
           links->nvlink ? "NVLink" : "PCIe",
           links->nvlink ? links->nvlink_gbs : links->pcie_peer_gbs, links->inter_node_gbs,
           po->host_link_gbs);
    plan_grid_format_table(&ch, text, need + 1);
  }
  fputs(text, stdout);
  free(text);
  if (!cl->json && ch.chosen >= 0) {
    const plan_grid_eval *e = &ch.e[ch.chosen];
    char name[48];
    plan_grid_format(&e->g, name, sizeof name);
    printf("layout %s: predicted step %.1f ms (PREDICTION), peak %.2f GiB per rank\n", name,
           e->step_ms, (double)e->peak_bytes / GIB);
  }
  if (prc != PLAN_OK) {
    sp_log_error("plan: %s", err);
    return SP_ERR_INPUT;
  }
  return fflush(stdout) == 0 ? SP_OK : SP_ERR_RUNTIME;
}

/* --image with --vae: where the image is encoded and what it needs
 * (job_image_cost_of), as a # line or, with json, an object into *out;
 * refused when rank 0's GPU (its free memory) cannot hold the encoder. */
static int plan_image(const plan_cli *cl, const wan_config *c, const plan_device *dev0,
                      json_object **out) {
  job_image_cost k;
  if (job_image_cost_of(cl->job.vae, c, cl->job.model, &cl->job.job, cl->job.vae_precision,
                        &k) != SP_OK)
    return SP_ERR_INPUT;
  if (k.can_encode && dev0->free_bytes && k.device_bytes > dev0->free_bytes) {
    sp_log_error("--image %s: the %s's encoder needs %.2f GiB of GPU memory on rank 0 for a "
                 "%lldx%lld video; it has %.2f GiB free",
                 cl->job.job.image, k.vae, k.device_bytes / GIB, (long long)k.height,
                 (long long)k.width, dev0->free_bytes / GIB);
    return SP_ERR_INPUT;
  }
  if (cl->json) {
    json_object *o = json_object_new_object();
    json_object_object_add(o, "rank", json_object_new_int(0));
    json_object_object_add(o, "vae", json_object_new_string(k.vae));
    json_object_object_add(o, "when", json_object_new_string("before the DiT is placed"));
    json_object_object_add(o, "can_encode", json_object_new_boolean(k.can_encode));
    json_object_object_add(o, "device_bytes", json_object_new_int64((int64_t)k.device_bytes));
    json_object_object_add(o, "host_bytes", json_object_new_int64((int64_t)k.host_bytes));
    json_object_object_add(o, "frames", json_object_new_int64(k.frames));
    json_object_object_add(o, "height", json_object_new_int64(k.height));
    json_object_object_add(o, "width", json_object_new_int64(k.width));
    *out = o;
    return SP_OK;
  }
  if (k.can_encode)
    printf("# image encoder %s (%s, %s): rank 0's GPU, before the DiT is placed; %.2f GiB "
           "(weights and workspace) for a %lldx%lld video of %lld frame%s, %.2f GiB of rank 0's "
           "host memory for it and its latents\n",
           cl->job.vae, k.vae, wan_vae_gpu_precision_name(cl->job.vae_precision),
           k.device_bytes / GIB, (long long)k.height, (long long)k.width, (long long)k.frames,
           k.frames == 1 ? "" : "s", k.host_bytes / GIB);
  else
    printf("# image encoder %s (%s): its file holds no encoder (run refuses --image with it; "
           "give --image-latents); the video of %lldx%lld x %lld frames and its latents "
           "take %.2f GiB of rank 0's host memory\n",
           cl->job.vae, k.vae, (long long)k.height, (long long)k.width, (long long)k.frames,
           k.host_bytes / GIB);
  return SP_OK;
}

/* The plan's JSON with o added under key (o taken). */
static char *json_with(const char *text, const char *key, json_object *o) {
  json_object *root = json_tokener_parse(text);
  json_object_object_add(root, key, o);
  const char *s = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN);
  char *out = sp_xmalloc(strlen(s) + 2);
  sprintf(out, "%s\n", s);
  json_object_put(root);
  return out;
}

/* The plan of r (job_plan_make, the function run's rank 0 calls) as a
 * table or JSON on stdout, with --t5's line. */
static int print_plan(const plan_cli *cl, const job_plan_req *r, const uint64_t *bb,
                      const plan_model *pm) {
  static plan p;
  if (job_plan_make(r, &p) != SP_OK) return SP_ERR_INPUT;
  json_object *t5 = NULL, *img = NULL;
  if (cl->job.t5 &&
      plan_t5(cl->job.t5, r->wl.micro_batches, &r->devs[0], cl->json, &t5) != SP_OK)
    return SP_ERR_INPUT;
  if (cl->job.job.image[0] && cl->job.vae &&
      plan_image(cl, &rank_model_get_info(r->m)->config, &r->devs[0], &img) != SP_OK) {
    json_object_put(t5);
    return SP_ERR_INPUT;
  }
  const size_t need = cl->json ? plan_format_json(&p, NULL, 0) : plan_format_table(&p, NULL, 0);
  char *text = sp_xmalloc(need + 1);
  if (cl->json) {
    plan_format_json(&p, text, need + 1);
    for (int k = 0; k < 2; k++) {
      json_object *o = k ? img : t5;
      if (!o) continue;
      char *with = json_with(text, k ? "image_encoder" : "text_encoder", o);
      free(text);
      text = with;
    }
  } else {
    plan_options po = r->po;
    job_plan_options(&cl->job, 0, &po);
    print_header(cl, rank_model_get_info(r->m), pm, bb, &r->wl, &po);
    plan_format_table(&p, text, need + 1);
  }
  fputs(text, stdout);
  free(text);
  return fflush(stdout) == 0 ? SP_OK : SP_ERR_RUNTIME;
}

/* run --video: the CUDA decoder's bytes on the last rank into po. */
static int decoder_bytes(const plan_cli *cl, const wan_config *c, const plan_workload *wl,
                         plan_options *po) {
  if (!cl->job.vae) return SP_OK;
  job_vae *vae = NULL;
  if (job_vae_open("--vae", cl->job.vae, 0, c, cl->job.model, &vae) != SP_OK)
    return SP_ERR_INPUT;
  po->decoder_bytes = job_vae_decoder_bytes(vae, cl->job.vae_precision, wl);
  job_vae_close(vae);
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
  static plan_links links;
  if ((rc = plan_devices(&cl, devs, &links)) != SP_OK) return rc;

  /* ---- model sizes: metadata only ---- */
  rank_model *m = NULL;
  if ((rc = rank_model_open(cl.job.model, 0, &m)) != SP_OK) return rc;
  const rank_model_info *info = rank_model_get_info(m);
  uint64_t *bb = sp_xcalloc((size_t)info->config.layers, sizeof *bb);
  job_plan_req r = {.p = &cl.job, .m = m, .weight_bytes = cl.dtype_bytes, .devs = devs,
                    .nranks = (int)cl.nranks, .po = cl.po,
                    .cache = cl.job.job.cache.method != RANK_CACHE_OFF};
  if ((rc = job_params_apply_model(&cl.job, info)) != SP_OK) goto out;
  if (cl.job.job.image[0]) { /* the size is the image's, as run prepares it */
    char what[JOB_PATH + 16];
    snprintf(what, sizeof what, "--image %s", cl.job.job.image);
    if ((rc = job_image_size(&info->config, what, &cl.job.job)) != SP_OK) goto out;
  }
  r.wl = job_workload(&cl.job.job, &info->config, (int)cl.batch);
  if ((rc = decoder_bytes(&cl, &info->config, &r.wl, &r.po)) != SP_OK) goto out;
  plan_model pm;
  job_plan_model(&r, bb, &pm);
  if (cl.layout) {
    plan_options po = r.po;
    job_plan_options(&cl.job, 0, &po);
    rc = print_layouts(&cl, info, &pm, bb, devs, &links, &r.wl, &po);
  } else {
    rc = print_plan(&cl, &r, bb, &pm);
  }
out:
  free(bb);
  rank_model_close(m);
  return rc;
}
