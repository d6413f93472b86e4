/* The per-op profile of a CUDA stage's blocks (see cuda_profile.h). */

#include "cuda_profile.h"

#include <stdlib.h>
#include <string.h>

#include "cuda_check.h"
#include "log.h"

#define PROF_MAX 32

typedef struct prof_op {
  const char *name;
  double flops, bytes, rate; /* rate: FLOP/s ceiling for this op */
  double ms;                 /* summed over the profiled blocks */
} prof_op;

struct rank_prof {
  cudaStream_t stream;
  int n, blocks, i; /* ops per block, blocks so far, next op in this block */
  prof_op op[PROF_MAX];
  cudaEvent_t ev[PROF_MAX + 1];
};

rank_prof *rank_prof_create(cudaStream_t stream) {
  rank_prof *p = sp_xcalloc(1, sizeof *p);
  p->stream = stream;
  for (int i = 0; i <= PROF_MAX; i++) CUDA_CHECK(cudaEventCreate(&p->ev[i]));
  return p;
}

void rank_prof_destroy(rank_prof *p) {
  if (!p) return;
  for (int i = 0; i <= PROF_MAX; i++) cudaEventDestroy(p->ev[i]);
  free(p);
}

void rank_prof_block_begin(rank_prof *p) {
  p->i = 0;
  CUDA_CHECK(cudaEventRecord(p->ev[0], p->stream));
}

void rank_prof_mark(rank_prof *p, const char *name, double flops, double bytes, double rate) {
  int i = p->i++;
  if (i >= PROF_MAX) return;
  if (p->blocks == 0) {
    p->op[i].name = name;
    p->op[i].flops = flops;
    p->op[i].bytes = bytes;
    p->op[i].rate = rate;
    if (i + 1 > p->n) p->n = i + 1;
  }
  CUDA_CHECK(cudaEventRecord(p->ev[i + 1], p->stream));
}

void rank_prof_block_end(rank_prof *p) {
  CUDA_CHECK(cudaEventSynchronize(p->ev[p->n]));
  for (int i = 0; i < p->n; i++) {
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, p->ev[i], p->ev[i + 1]));
    p->op[i].ms += ms;
  }
  p->blocks++;
}

void rank_prof_report(rank_prof *p) {
  if (!p->blocks) return;
  double tot = 0, tot_floor = 0;
  sp_log_info("profile: per block, mean of %d blocks", p->blocks);
  sp_log_info("profile: %-22s %9s %9s %7s %9s", "op", "ms", "floor_ms", "ratio", "TFLOP/s");
  for (int i = 0; i < p->n; i++) {
    const prof_op *o = &p->op[i];
    double ms = o->ms / p->blocks;
    double t_flops = o->flops / o->rate, t_bytes = o->bytes / RANK_CEIL_BW;
    double floor = 1e3 * (t_flops > t_bytes ? t_flops : t_bytes);
    tot += ms;
    tot_floor += floor;
    sp_log_info("profile: %-22s %9.3f %9.3f %7.2f %9.1f", o->name, ms, floor,
                floor > 0 ? ms / floor : 0.0, o->flops > 0 ? o->flops / (ms * 1e-3) / 1e12 : 0.0);
  }
  sp_log_info("profile: %-22s %9.3f %9.3f %7.2f", "block", tot, tot_floor, tot / tot_floor);
  memset(p->op, 0, sizeof p->op);
  p->blocks = 0;
  p->n = 0;
}
