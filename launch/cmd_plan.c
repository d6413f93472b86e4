/* staticpipe plan: the planner as a dry run, for hardware that need not be
 * here. Reads the model's metadata only (no weights), builds the device
 * inventory from flags or a JSON file, prints the plan as a table or JSON
 * (plan_print.c). This file: plan's options and help, their parsing, the
 * devices they describe and the command itself. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "grid_choice.h"
#include "job_image.h"
#include "job_plan.h"
#include "job_vae.h"
#include "log.h"
#include "model_file.h"
#include "path_check.h"
#include "plan.h"
#include "plan_inventory.h"
#include "plan_print.h"

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
                            JOB_OPT_FP8_ACCUM,   JOB_OPT_CACHE,      JOB_OPT_IMAGE,
                            JOB_OPT_MAX_AREA};
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
    rc = plan_print_layouts(&cl, info, &pm, bb, devs, &links, &r.wl, &po);
  } else {
    rc = plan_print_plan(&cl, &r, bb, &pm);
  }
out:
  free(bb);
  rank_model_close(m);
  return rc;
}
