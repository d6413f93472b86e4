/* Internals of the LoRA files shared by lora.c (parsing, the check against
 * the model) and lora_merge.c (the merge). */
#ifndef RANK_LORA_IMPL_H
#define RANK_LORA_IMPL_H

#include <stdio.h>
#include <stdlib.h>

#include "lora.h"
#include "safetensors.h"

/* The parts of a term, by key suffix (lora.h). */
typedef enum { PART_DOWN, PART_UP, PART_ALPHA, PART_DIFF, PART_DIFF_B, PART_COUNT } part;

/* The terms of one file for one tensor of the model. */
typedef struct entry {
  wan_group g;
  int block, tensor;                  /* tensor: index in the model's layout */
  const rank_st_tensor *p[PART_COUNT]; /* NULL when absent */
  int64_t rank;                        /* r of the pair */
} entry;

typedef struct lora_file {
  rank_lora_spec spec;
  rank_st_file *f;
  entry *e;
  int ne;
  int pairs, diffs;
  int64_t rank_min, rank_max;
} lora_file;

struct rank_lora {
  wan_config config;
  int experts;          /* the model's experts (1, or 2: Wan 2.2 A14B) */
  wan_layout layout[3]; /* the model's layouts (shapes, names) */
  lora_file *files;
  int n;
};

/* "blocks.N.name", or the name itself for an embedding or head tensor. */
static inline void lora_tensor_key(wan_group g, int block, const char *name, char *buf, size_t n) {
  if (g == WAN_GROUP_BLOCK)
    snprintf(buf, n, "blocks.%d.%s", block, name);
  else
    snprintf(buf, n, "%s", name);
}

/* Entries in (group, block, tensor) order: a file's are sorted so. */
static inline int lora_entry_cmp(const void *a, const void *b) {
  const entry *x = a, *y = b;
  if (x->g != y->g) return (int)x->g - (int)y->g;
  if (x->block != y->block) return x->block - y->block;
  return x->tensor - y->tensor;
}

/* A tensor of a LoRA file as float32 (numel values), checked finite.
 * SP_OK and *out (the caller frees it), or the reader's status / a logged
 * SP_ERR_INPUT naming the file and the key (lora_merge.c). */
int lora_read_f32(const lora_file *lf, const rank_st_tensor *t, float **out);
/* The scale of an entry's pair, c = strength * (alpha / r) in double
 * (alpha read from the file, r when absent). SP_OK or lora_read_f32's
 * status (lora_merge.c). */
int lora_entry_scale(const lora_file *lf, const entry *e, double *out);

/* Whether a LoRA applies to expert e: untagged ones to every expert, @high
 * to expert 0 (RANK_EXPERT_HIGH) and @low to expert 1 of a two-expert
 * model. */
static inline int lora_applies_to(const lora_file *lf, int e) {
  const rank_lora_expert x = lf->spec.expert;
  return x == RANK_LORA_EXPERT_ALL || (x == RANK_LORA_EXPERT_HIGH) == (e == RANK_EXPERT_HIGH);
}

/* The entry of lf for tensor ti of a group's block, or NULL. */
static inline const entry *lora_entry_find(const lora_file *lf, wan_group g, int block, int ti) {
  const entry key = {.g = g, .block = g == WAN_GROUP_BLOCK ? block : 0, .tensor = ti};
  return bsearch(&key, lf->e, (size_t)lf->ne, sizeof *lf->e, lora_entry_cmp);
}

#endif
