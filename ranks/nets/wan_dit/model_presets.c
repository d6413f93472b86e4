/* What names a model (see model_file.h): its presets (wan_schema.h's), one
 * expert or two with the run's defaults a two-expert model carries, which
 * expert a step runs, and the path of each dataset in the file. */
#include <stdio.h>
#include <string.h>

#include "model_file_impl.h"

int rank_model_step_expert(double boundary, double t) {
  return t >= boundary * 1000.0 ? RANK_EXPERT_HIGH : RANK_EXPERT_LOW;
}

const char *rank_model_expert_name(int experts, int e) {
  if (experts < 2) return "";
  return e == RANK_EXPERT_HIGH ? "high" : "low";
}

void rank_model_file_config(const wan_config *c, const rank_model_experts *x, wan_file_config *f) {
  memset(f, 0, sizeof *f);
  f->c = *c;
  f->experts = x ? x->count : 1;
  if (f->experts < 2) return;
  f->boundary = x->boundary;
  f->cfg_high = x->cfg[0];
  f->cfg_low = x->cfg[1];
  f->shift = x->shift;
  f->steps = x->steps;
}

void rank_model_experts_of(const wan_file_config *f, rank_model_experts *x) {
  *x = (rank_model_experts){.count = (int)f->experts};
  if (f->experts < 2) return;
  *x = (rank_model_experts){(int)f->experts, f->boundary, {f->cfg_high, f->cfg_low}, f->shift,
                            (int)f->steps};
}

int rank_model_preset(const char *name, wan_config *c, rank_model_experts *x) {
  wan_file_config f;
  if (wan_schema.preset(name, &f) != 0) return -1;
  *c = f.c;
  rank_model_experts_of(&f, x);
  return 0;
}

const char *rank_model_preset_names(void) { return wan_schema.preset_names(); }

void rank_model_expert_path(int experts, int e, wan_group g, int block, const char *name,
                            char *buf, size_t n) {
  char pre[32] = "";
  if (experts > 1) snprintf(pre, sizeof pre, "/experts/%s", rank_model_expert_name(experts, e));
  if (g == WAN_GROUP_BLOCK)
    snprintf(buf, n, "%s/blocks/%04d/%s", pre, block, name);
  else
    snprintf(buf, n, "%s/%s/%s", pre, g == WAN_GROUP_EMBED ? "embed" : "head", name);
}
