/* staticpipe plan's output: the plan or the layouts, as a table or JSON
 * (see plan_print.h). */
#include "plan_print.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grid_choice.h"
#include "job_image.h"
#include "job_prompt.h"
#include "layout.h"
#include "log.h"
#include "umt5.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

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

int plan_print_layouts(const plan_cli *cl, const rank_model_info *info, const plan_model *pm,
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

int plan_print_plan(const plan_cli *cl, const job_plan_req *r, const uint64_t *bb,
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
