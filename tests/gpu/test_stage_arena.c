/* The CUDA stage's arena is the planner's layout (planner/layout.h): for
 * plans of synth:wan2.1-tiny, and of synth:wan2.2-tiny (two experts:
 * resident, swapped at the switch, streamed), over several workloads, rank counts, orders,
 * streamed fractions, chunk rows, both attention kinds and Ulysses ranks
 * (2 per stage, an even and an uneven split of the tokens: each rank's
 * arena is the largest slice's, as the planner counts it), every rank's
 * stage is loaded on the GPU (as run loads it) and its arena_bytes must
 * equal the layout total for the same inputs and the plan's peak less its
 * reserve. Each rank's stage loaded for a smaller latent with room for the
 * plan's has the same arena, and is re-laid for the plan's latent and back
 * in it (rank_stage_relayout), refusing a larger one. The same for
 * quantized weights (MODEL.md "Quantized weights on the GPU"): files of
 * synth:wan2.1-tiny's weights written in fp8 and int8, run in fp8, int8
 * (W8A8: the input codes, scales and products scratch, as the planner
 * counts them for a GPU of unknown compute capability) and in bf16 (the
 * fp8 file's weights dequantised: the weight-only scratch), and the bf16
 * weights quantised at load in fp8. And for a TI2V model
 * (synth:wan2.2-ti2v-tiny: the Wan 2.2 VAE's 16x latent stride, latent
 * frame 0's second time table in every message and modulation), in bf16
 * and from an int8 file run W8A8: both sets of buffers in one arena. Exit
 * 77 with one line when there is no CUDA device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm.h"
#include "layout.h"
#include "log.h"
#include "model_file.h"
#include "model_plan.h"
#include "plan.h"
#include "synth.h"
#include "sp_test.h"
#include "stage.h"
#include "transport.h"

/* The transport a Ulysses stage is given (its all-to-alls are not run
 * here: only loads and re-layouts). */
static comm_transport *g_tp;
/* The precision every stage of the cases runs in (main sets it per model). */
static wan_precision g_precision;

/* The rows of `tokens` a stage of cfg holds. */
static int64_t held(const rank_stage_cfg *sc, int64_t tokens) {
  return sc->seq ? plan_seq_rows(tokens, sc->seq->n, sc->seq->me) : tokens;
}

/* Rank r's stage loaded for a small latent (1x4x4) with room for the
 * plan's (cfg.max_tokens): its arena is still the plan's, want bytes;
 * re-laid for the plan's latent and back it keeps that arena, and a latent
 * of more tokens than the room is refused with the stage unchanged. */
static void check_relayout(rank_model *m, rank_stage_cfg sc, uint64_t want, int idx, int r) {
  const int64_t f = sc.lat_f, h = sc.lat_h, w = sc.lat_w;
  sc.max_tokens = f * (h / 2) * (w / 2);
  sc.lat_f = 1;
  sc.lat_h = 4;
  sc.lat_w = 4;
  rank_stage *s = NULL;
  uint64_t read = 0;
  if (rank_stage_load(m, &sc, &s, &read) != SP_OK) {
    CHECK(0, "case %d rank %d: the stage did not load for a 1x4x4 latent", idx, r);
    return;
  }
  const wan_config *c = rank_stage_config(s);
  CHECK(rank_stage_get_stats(s)->arena_bytes == want && rank_stage_tokens(s) == held(&sc, 4),
        "case %d rank %d: loaded for 1x4x4 with room for %lld tokens: arena %llu, plan %llu",
        idx, r, (long long)sc.max_tokens,
        (unsigned long long)rank_stage_get_stats(s)->arena_bytes, (unsigned long long)want);
  const int64_t rows = held(&sc, sc.max_tokens);
  CHECK(rank_stage_relayout(s, f, h, w) == SP_OK && rank_stage_tokens(s) == rows &&
            rank_stage_act_bytes(s) == (size_t)rank_act_floats(c, rows) * 4,
        "case %d rank %d: re-laid for %lldx%lldx%lld", idx, r, (long long)f, (long long)h,
        (long long)w);
  CHECK(rank_stage_relayout(s, 1, 4, 4) == SP_OK && rank_stage_tokens(s) == held(&sc, 4),
        "case %d rank %d: re-laid back for 1x4x4", idx, r);
  CHECK(rank_stage_relayout(s, f + 1, h, w) == SP_ERR_RUNTIME &&
            rank_stage_tokens(s) == held(&sc, 4),
        "case %d rank %d: a latent beyond the room was not refused", idx, r);
  CHECK(rank_stage_get_stats(s)->arena_bytes == want, "case %d rank %d: the arena changed",
        idx, r);
  rank_stage_free(s);
}

typedef struct arena_case {
  int nranks, micro_batches, order;
  int64_t frames, height, width;
  double stream_frac; /* -1: none forced */
  int64_t max_rows;   /* 0: the budget decides */
  int simple_attn;
  int swap; /* two experts: plan again 1 byte short of each rank's resident peak, with a
               cpu entry, so that the ranks swap at the switch */
  int seq;  /* Ulysses ranks per stage (0: none); every one's stage is loaded */
} arena_case;

static const arena_case cases[] = {
    {.nranks = 1, .micro_batches = 2, .order = PLAN_ORDER_MICRO, .frames = 17, .height = 96,
     .width = 80, .stream_frac = -1},
    {.nranks = 1, .micro_batches = 1, .order = PLAN_ORDER_BLOCK, .frames = 5, .height = 64,
     .width = 64, .stream_frac = -1, .simple_attn = 1},
    {.nranks = 2, .micro_batches = 2, .order = PLAN_ORDER_BLOCK, .frames = 17, .height = 96,
     .width = 80, .stream_frac = 0.5},
    {.nranks = 3, .micro_batches = 2, .order = PLAN_ORDER_MICRO, .frames = 9, .height = 128,
     .width = 96, .stream_frac = 1, .max_rows = 64, .simple_attn = 1},
    {.nranks = 4, .micro_batches = 2, .order = PLAN_ORDER_MICRO, .frames = 13, .height = 80,
     .width = 112, .stream_frac = -1, .max_rows = 100},
    /* Ulysses: 150 tokens split 75 + 75; 27 split 14 + 13, chunked */
    {.nranks = 1, .micro_batches = 2, .order = PLAN_ORDER_MICRO, .frames = 17, .height = 96,
     .width = 80, .stream_frac = -1, .seq = 2},
    {.nranks = 2, .micro_batches = 2, .order = PLAN_ORDER_BLOCK, .frames = 9, .height = 48,
     .width = 48, .stream_frac = 0.5, .max_rows = 8, .simple_attn = 1, .seq = 2},
};

static const arena_case two_expert_cases[] = {
    {.nranks = 1, .micro_batches = 2, .order = PLAN_ORDER_MICRO, .frames = 17, .height = 96,
     .width = 80, .stream_frac = -1},
    {.nranks = 1, .micro_batches = 2, .order = PLAN_ORDER_MICRO, .frames = 17, .height = 96,
     .width = 80, .stream_frac = -1, .swap = 1},
    {.nranks = 2, .micro_batches = 2, .order = PLAN_ORDER_BLOCK, .frames = 9, .height = 128,
     .width = 96, .stream_frac = -1, .max_rows = 64, .swap = 1},
    {.nranks = 2, .micro_batches = 1, .order = PLAN_ORDER_MICRO, .frames = 17, .height = 96,
     .width = 80, .stream_frac = 0.5},
    {.nranks = 1, .micro_batches = 2, .order = PLAN_ORDER_MICRO, .frames = 9, .height = 48,
     .width = 48, .stream_frac = -1, .seq = 2},
};

/* TI2V: sizes of multiples of 32 (the latent's 16x stride, then the
 * patch's 2); Ulysses splits the tokens of latent frame 0 as well. */
static const arena_case ti2v_cases[] = {
    {.nranks = 1, .micro_batches = 2, .order = PLAN_ORDER_MICRO, .frames = 9, .height = 128,
     .width = 96, .stream_frac = -1},
    {.nranks = 2, .micro_batches = 2, .order = PLAN_ORDER_BLOCK, .frames = 5, .height = 96,
     .width = 64, .stream_frac = 0.5, .max_rows = 4, .simple_attn = 1},
    {.nranks = 3, .micro_batches = 1, .order = PLAN_ORDER_MICRO, .frames = 13, .height = 64,
     .width = 96, .stream_frac = 1, .max_rows = 8},
    {.nranks = 1, .micro_batches = 2, .order = PLAN_ORDER_MICRO, .frames = 9, .height = 64,
     .width = 64, .stream_frac = -1, .seq = 2},
};

/* Stage r of plan p (Ulysses rank u of it) loaded on the GPU: its arena
 * against the layout and the plan's peak, then its re-layouts. */
static void check_rank(rank_model *m, const arena_case *k, int idx, const plan_model *pm,
                       const plan_workload *w, const plan *p, int r, int u) {
  char err[4096];
  const plan_rank *q = &p->r[r];
  const int has_prev = r > 0, has_next = r < k->nranks - 1;
  /* Ulysses rank u of the stage: a group of U members (its ranks are
   * never messaged here). */
  comm_group grp = {.n = k->seq, .me = u, .tag = 1, .timeout_s = 1};
  rank_stage_cfg sc = {.first_block = q->first_block, .last_block = q->last_block,
                       .embed = q->has_embed, .head = q->has_head,
                       .prompts = k->micro_batches, .lat_f = (k->frames - 1) / 4 + 1,
                       .lat_h = k->height / w->vae_stride, .lat_w = k->width / w->vae_stride,
                       .device = RANK_DEVICE_CUDA, .cuda_device = 0,
                       .attn = k->simple_attn ? KERN_ATTN_SIMPLE : KERN_ATTN_AUTO,
                       .streamed = &p->streamed[q->first_block],
                       .prefetch_depth = q->prefetch_depth,
                       .swap_experts = q->experts_mode == PLAN_EXPERTS_SWAP,
                       .act_buffers = plan_act_buffers(q->order, k->micro_batches, has_prev,
                                                       has_next),
                       .chunk_rows = q->chunk_rows,
                       .seq = k->seq > 1 ? &grp : NULL, .tp = g_tp,
                       .precision = g_precision, .w8a8_epilogue = p->w8a8_epilogue};
  plan_stage_shape sh;
  plan_stage_shape_of(pm, w, q, &p->streamed[q->first_block], k->simple_attn, &sh);
  static plan_layout lay;
  if (plan_layout_make(&sh, &lay, err, sizeof err) != PLAN_OK) {
    CHECK(0, "case %d rank %d: %s", idx, r, err);
    return;
  }
  rank_stage *s = NULL;
  uint64_t read = 0;
  if (rank_stage_load(m, &sc, &s, &read) != SP_OK) {
    CHECK(0, "case %d rank %d: the stage did not load", idx, r);
    return;
  }
  uint64_t arena = rank_stage_get_stats(s)->arena_bytes;
  printf("case %d rank %d/%d (Ulysses %d/%d): experts %s, blocks %d-%d, %d streamed, %d slots, "
         "%lld rows, %s attention: arena %llu, layout %llu, plan %llu\n",
         idx, r, k->nranks, u, k->seq, plan_experts_mode_name(q->experts_mode), q->first_block,
         q->last_block, q->num_streamed, lay.slots,
         (long long)q->chunk_rows, k->simple_attn ? "simple" : "auto",
         (unsigned long long)arena, (unsigned long long)lay.total,
         (unsigned long long)(q->peak_bytes - q->reserve_bytes));
  CHECK(arena == lay.total, "case %d rank %d: arena %llu bytes, layout %llu", idx, r,
        (unsigned long long)arena, (unsigned long long)lay.total);
  CHECK(arena == q->peak_bytes - q->reserve_bytes,
        "case %d rank %d: arena %llu bytes, the plan counts %llu", idx, r,
        (unsigned long long)arena, (unsigned long long)(q->peak_bytes - q->reserve_bytes));
  rank_stage_free(s);
  check_relayout(m, sc, lay.total, idx, r);
}

static void run_case(rank_model *m, const arena_case *k, int idx) {
  const wan_config *cf = &rank_model_get_info(m)->config;
  uint64_t bb[PLAN_MAX_BLOCKS];
  plan_model pm;
  rank_model_plan_sizes(m, 2, g_precision, bb, &pm);
  plan_device devs[PLAN_MAX_RANKS];
  for (int r = 0; r < k->nranks; r++) {
    memset(&devs[r], 0, sizeof devs[r]);
    snprintf(devs[r].name, sizeof devs[r].name, "gpu%d", r);
    devs[r].total_bytes = devs[r].free_bytes = 64ull << 30;
    devs[r].speed = 1.0;
  }
  rank_model_plan_epilogue(&pm, devs, k->nranks);
  plan_workload w = {k->frames, k->height, k->width, k->micro_batches, cf->text_len, k->seq,
                     wan_vae_stride(cf)};
  plan_options o;
  plan_options_default(&o);
  o.order = k->order;
  o.stream_frac = k->stream_frac;
  o.max_rows = k->max_rows;
  o.simple_attn = k->simple_attn;
  plan_budget b;
  char err[4096];
  static plan p;
  if (plan_budget_parse(NULL, k->nranks, &b, err, sizeof err) != PLAN_OK ||
      plan_make(&(plan_inputs){&pm, devs, k->nranks, &b, &w, &o}, &p, err, sizeof err) != PLAN_OK) {
    CHECK(0, "case %d: no plan: %s", idx, err);
    return;
  }
  if (k->swap) {
    char bs[64 * PLAN_MAX_RANKS] = "";
    size_t n = 0;
    for (int r = 0; r < k->nranks; r++)
      n += (size_t)snprintf(bs + n, sizeof bs - n, "cuda:%d,%llub;", r,
                            (unsigned long long)(p.r[r].peak_bytes - 1));
    snprintf(bs + n, sizeof bs - n, "cpu,*");
    if (plan_budget_parse(bs, k->nranks, &b, err, sizeof err) != PLAN_OK ||
        plan_make(&(plan_inputs){&pm, devs, k->nranks, &b, &w, &o}, &p, err, sizeof err) !=
            PLAN_OK) {
      CHECK(0, "case %d: no swap plan (%s): %s", idx, bs, err);
      return;
    }
    int swaps = 0;
    for (int r = 0; r < k->nranks; r++) swaps += p.r[r].experts_mode == PLAN_EXPERTS_SWAP;
    CHECK(swaps > 0, "case %d: 1 byte short of resident, no rank swaps", idx);
  }
  for (int r = 0; r < k->nranks; r++)
    for (int u = 0; u < (k->seq > 1 ? k->seq : 1); u++) check_rank(m, k, idx, &pm, &w, &p, r, u);
}

/* The weights (bf16) of synth:PRESET (a one-expert preset) into a file of
 * dtype (an fp8 or int8 one quantises its blocks' linear weights), as init
 * writes them. */
static int write_tiny(const char *preset, const char *path, kern_dtype dtype) {
  wan_config c;
  rank_model_experts x;
  if (rank_model_preset(preset, &c, &x) != 0) return -1;
  rank_model_writer *w = NULL;
  if (rank_model_writer_open(path, &c, dtype, "", &w) != SP_OK) return -1;
  int rc = SP_OK;
  for (int g = 0; g < 3 && rc == SP_OK; g++) {
    wan_layout l;
    wan_layout_make(&c, (wan_group)g, KERN_DTYPE_BF16, &l);
    for (int b = 0; b < (g == WAN_GROUP_BLOCK ? (int)c.layers : 1) && rc == SP_OK; b++)
      for (int i = 0; i < l.count && rc == SP_OK; i++) {
        uint16_t *v = malloc(l.t[i].bytes);
        float *f = malloc((size_t)l.t[i].numel * sizeof *f);
        rank_synth_tensor(&c, 0, "", (wan_group)g, b, &l.t[i], KERN_DTYPE_BF16, v);
        kern_bf16_to_f32_n(v, f, (size_t)l.t[i].numel);
        rc = rank_model_writer_put_value(w, 0, (wan_group)g, b, l.t[i].name, f, NULL);
        free(f);
        free(v);
      }
  }
  if (rc != SP_OK) {
    rank_model_writer_abort(w);
    return -1;
  }
  return rank_model_writer_commit(w) == SP_OK ? 0 : -1;
}

/* The n cases of list on model spec at precision p. */
static void run_list(const char *spec, wan_precision p, const arena_case *list, size_t n,
                     int first_idx) {
  rank_model *m = NULL;
  if (rank_model_open(spec, 0, &m) != SP_OK) {
    CHECK(0, "cannot open %s", spec);
    return;
  }
  g_precision = p;
  printf("%s in %s\n", spec, wan_precision_name(p));
  for (size_t i = 0; i < n; i++) run_case(m, &list[i], first_idx + (int)i);
  rank_model_close(m);
  g_precision = WAN_PRECISION_BF16;
}

/* The one-expert cases on model spec at precision p. */
static void run_cases(const char *spec, wan_precision p, int first_idx) {
  run_list(spec, p, cases, sizeof cases / sizeof cases[0], first_idx);
}

/* The TI2V cases on model spec at precision p. */
static void run_ti2v(const char *spec, wan_precision p, int first_idx) {
  run_list(spec, p, ti2v_cases, sizeof ti2v_cases / sizeof ti2v_cases[0], first_idx);
}

/* The quantized files' and precisions' cases (fp8 W8A8 where the GPU has
 * fp8 tensor cores). */
static void quantized_cases(void) {
  plan_device d;
  const int fp8 = rank_cuda_describe(0, &d) == SP_OK && d.cc_major * 10 + d.cc_minor >= 89;
  char dir[] = "/tmp/sp-arena-quant.XXXXXX", f8[64], i8[64];
  if (!mkdtemp(dir)) {
    CHECK(0, "no temporary folder");
    return;
  }
  snprintf(f8, sizeof f8, "%s/fp8.h5", dir);
  snprintf(i8, sizeof i8, "%s/int8.h5", dir);
  CHECK(write_tiny("wan2.1-tiny", f8, KERN_DTYPE_E4M3) == 0 &&
            write_tiny("wan2.1-tiny", i8, KERN_DTYPE_I8) == 0,
        "the fp8 and int8 files written");
  run_cases(f8, WAN_PRECISION_BF16, 200);
  run_cases(i8, WAN_PRECISION_INT8, 300);
  if (fp8) {
    run_cases(f8, WAN_PRECISION_FP8, 400);
    run_cases("synth:wan2.1-tiny", WAN_PRECISION_FP8, 500);
  } else {
    printf("fp8 cases skipped: sm_%d%d has no fp8 tensor cores\n", d.cc_major, d.cc_minor);
  }
  unlink(f8);
  unlink(i8);
  /* TI2V from an int8 file, W8A8: the second time table beside the
   * quantised inputs' buffers */
  snprintf(i8, sizeof i8, "%s/ti2v_int8.h5", dir);
  CHECK(write_tiny("wan2.2-ti2v-tiny", i8, KERN_DTYPE_I8) == 0, "the TI2V int8 file written");
  run_ti2v(i8, WAN_PRECISION_INT8, 700);
  unlink(i8);
  rmdir(dir);
}

int main(int argc, char **argv) {
  if (!rank_cuda_available()) {
    printf("skip: no CUDA device\n");
    return 77;
  }
  sp_test_begin("test_stage_arena");
  sp_log_set_level(1);
  comm_world world;
  if (comm_init(&argc, &argv, 0, 0, &world) != SP_OK ||
      comm_transport_open(&world, COMM_TRANSPORT_MPI, 0, &g_tp) != SP_OK) {
    fprintf(stderr, "FAIL: cannot open the MPI transport\n");
    return 1;
  }
  rank_model *m = NULL;
  if (rank_model_open("synth:wan2.1-tiny", 0, &m) != SP_OK) {
    fprintf(stderr, "FAIL: cannot open synth:wan2.1-tiny\n");
    return 1;
  }
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(m, &cases[i], (int)i);
  rank_model_close(m);
  if (rank_model_open("synth:wan2.2-tiny", 0, &m) != SP_OK) {
    fprintf(stderr, "FAIL: cannot open synth:wan2.2-tiny\n");
    return 1;
  }
  for (size_t i = 0; i < sizeof two_expert_cases / sizeof two_expert_cases[0]; i++)
    run_case(m, &two_expert_cases[i], 100 + (int)i);
  rank_model_close(m);
  run_ti2v("synth:wan2.2-ti2v-tiny", WAN_PRECISION_BF16, 600);
  quantized_cases();
  comm_transport_close(g_tp);
  comm_finalize(&world);
  return sp_test_end();
}
