/* The Wan 2.1 DiT's model file as data (net_schema.h; MODEL.md "Model
 * file"): the config attributes, one expert or two (Wan 2.2 A14B: the
 * groups of each under /experts/high and /experts/low, the run's defaults
 * as root attributes), the groups /embed, /blocks/NNNN, /head and their
 * tensors (wan_weights.h), fp8, int8 or GGUF's formats for the blocks'
 * ten linear weights (root dtypes fp8, int8, quant, quant-fp32), the
 * presets and the synthetic generator's scales. */
#ifndef WAN_SCHEMA_H
#define WAN_SCHEMA_H

#include <stddef.h>
#include <stdint.h>

#include "net_schema.h"
#include "wan_config.h"

/* What a DiT model file's root attributes hold. */
typedef struct wan_file_config {
  wan_config c;
  int64_t experts;  /* 1, or 2: the high- and the low-noise expert */
  /* Two experts: the run's defaults (MODEL.md "Wan 2.2 A14B"). */
  int64_t steps;
  double boundary;  /* a step is high-noise when t >= boundary x 1000 */
  double cfg_high, cfg_low, shift;
} wan_file_config;

extern const net_schema wan_schema;

/* The published Wan 2.2 A14B text-to-video defaults (MODEL.md "Wan 2.2
 * A14B"). */
#define WAN_A14B_BOUNDARY 0.875
#define WAN_A14B_CFG_HIGH 4.0
#define WAN_A14B_CFG_LOW 3.0
#define WAN_A14B_SHIFT 12.0
#define WAN_A14B_STEPS 40

/* Checks a two-expert file's defaults (count 1: nothing to check). 0, or
 * -1 with the reason in err. */
int wan_experts_check(const wan_file_config *f, char *err, size_t n);
/* The table index of tensor i of group g (block for WAN_GROUP_BLOCK) of
 * expert e, in wan_schema's canonical order: per expert, the embeddings,
 * every block, the head. */
int wan_schema_index(const wan_file_config *f, int e, wan_group g, int block, int i);
/* The key prefix of expert e's synth: weights: "" for one expert,
 * "high_noise_model." or "low_noise_model." for two. */
const char *wan_synth_prefix(int experts, int e);
/* The synth: distribution of the tensor named name (wan_weights.h):
 * linear weights uniform with variance 1/fan_in (a quarter of that range
 * for time_projection), biases within 0.05, norm weights within 0.1 of 1,
 * modulation within 0.1 of 0. */
void wan_synth_scale(const char *name, int64_t fan_in, double *center, double *half);

#endif
