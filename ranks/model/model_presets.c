/* What names a model (see model_file.h): its presets, one expert or two
 * with the run's defaults a two-expert model carries, which expert a step
 * runs, and the path of each dataset in the file. */
#include <stdio.h>
#include <string.h>

#include "model_file_impl.h"

const rank_model_experts rank_model_a14b_defaults = {
    .count = 2, .boundary = 0.875, .cfg = {4.0, 3.0}, .shift = 12.0, .steps = 40};

int rank_model_step_expert(double boundary, double t) {
  return t >= boundary * 1000.0 ? RANK_EXPERT_HIGH : RANK_EXPERT_LOW;
}

const char *rank_model_expert_name(int experts, int e) {
  if (experts < 2) return "";
  return e == RANK_EXPERT_HIGH ? "high" : "low";
}

/* The two-expert presets: two DiTs of a Wan 2.1 preset's config. */
static const struct {
  const char *name, *base;
} two_expert_presets[] = {{"wan2.2-tiny", "wan2.1-tiny"}, {"wan2.2-a14b", "wan2.1-14b"}};
enum { N_TWO_EXPERT = sizeof two_expert_presets / sizeof two_expert_presets[0] };

int rank_model_preset(const char *name, wan_config *c, rank_model_experts *x) {
  if (wan_preset(name, c) == 0) {
    *x = (rank_model_experts){.count = 1};
    return 0;
  }
  for (int i = 0; i < N_TWO_EXPERT; i++)
    if (strcmp(name, two_expert_presets[i].name) == 0) {
      wan_preset(two_expert_presets[i].base, c);
      *x = rank_model_a14b_defaults;
      return 0;
    }
  return -1;
}

const char *rank_model_preset_names(void) {
  static char buf[256];
  if (!buf[0]) {
    for (int i = 0; wan_preset_names[i]; i++)
      snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s", i ? ", " : "",
               wan_preset_names[i]);
    for (int i = 0; i < N_TWO_EXPERT; i++)
      snprintf(buf + strlen(buf), sizeof buf - strlen(buf), ", %s", two_expert_presets[i].name);
  }
  return buf;
}

const char *rank_model_preset_match(const wan_config *c, int experts) {
  const char *p = wan_preset_match(c);
  if (!p || experts < 2) return p;
  for (int i = 0; i < N_TWO_EXPERT; i++)
    if (strcmp(p, two_expert_presets[i].base) == 0) return two_expert_presets[i].name;
  return NULL;
}

int rank_model_experts_check(const rank_model_experts *x, char *err, size_t n) {
  if (x->count == 1) return 0;
  if (x->count != 2)
    snprintf(err, n, "experts = %d: a model has one expert or two", x->count);
  else if (!(x->boundary > 0 && x->boundary < 1))
    snprintf(err, n, "boundary %g is not in (0, 1)", x->boundary);
  else if (!(x->cfg[0] >= 0 && x->cfg[0] <= 100 && x->cfg[1] >= 0 && x->cfg[1] <= 100))
    snprintf(err, n, "cfg_high %g, cfg_low %g: each must be in 0..100", x->cfg[0], x->cfg[1]);
  else if (!(x->shift > 0 && x->shift <= 1000))
    snprintf(err, n, "shift %g is not in (0, 1000]", x->shift);
  else if (!(x->steps >= 1 && x->steps <= 1000))
    snprintf(err, n, "steps %d is not in 1..1000", x->steps);
  else
    return 0;
  return -1;
}

void rank_model_expert_path(int experts, int e, wan_group g, int block, const char *name,
                            char *buf, size_t n) {
  char pre[32] = "";
  if (experts > 1) snprintf(pre, sizeof pre, "/experts/%s", rank_model_expert_name(experts, e));
  if (g == WAN_GROUP_BLOCK)
    snprintf(buf, n, "%s/blocks/%04d/%s", pre, block, name);
  else
    snprintf(buf, n, "%s/%s/%s", pre, g == WAN_GROUP_EMBED ? "embed" : "head", name);
}

void rank_model_dataset_path(wan_group g, int block, const char *name, char *buf, size_t n) {
  rank_model_expert_path(1, 0, g, block, name, buf, n);
}
