/* Internals of the converter shared by convert.c (mapping, cross-check,
 * copy) and convert_inputs.c (files, directories, index JSON). */
#ifndef RANK_CONVERT_IMPL_H
#define RANK_CONVERT_IMPL_H

#include "safetensors.h"

/* Every problem is logged (up to a cap that keeps a hostile file from
 * flooding the terminal) and counted; the conversion stops only after the
 * whole cross-check so the user sees all of them at once. */
#define PROBLEM_LOG_CAP 200

typedef struct problems {
  long count;
} problems;

void rank_convert_problem(problems *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The inputs: a list of files, directories (every *.safetensors in it,
 * sorted) or a *.safetensors.index.json (its weight_map's shards, beside
 * it). */
typedef struct weight_entry {
  char *tensor;
  char *shard; /* basename */
} weight_entry;

typedef struct inputs {
  char **paths;
  int npaths, cap;
  weight_entry *wm; /* from index files; cross-checked against the shards */
  int nwm, wmcap;
} inputs;

/* SP_OK, or a logged SP_ERR_INPUT naming the argument and the check. */
int rank_convert_inputs_resolve(int n, char *const *args, inputs *in);
void rank_convert_inputs_free(inputs *in);
/* The index files' weight maps against what the shards hold, both ways. */
void rank_convert_check_index(const inputs *in, rank_st_file *const *f, int nf, problems *p);

#endif
