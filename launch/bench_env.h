/* The environment header of staticpipe bench's outputs: what ran the
 * sweep (GPUs, driver, library versions, the commit built), so a result
 * file says where it came from. Internal to launch/. */
#ifndef SP_BENCH_ENV_H
#define SP_BENCH_ENV_H

#include "bench_topo.h"

/* One entry of the header: a key and its value in words. */
typedef struct bench_env_item {
  const char *key;
  char value[256];
} bench_env_item;

#define BENCH_ENV_ITEMS 11

/* The header, in its order: gpu, driver, cuda_runtime, cuda_driver, cudnn,
 * nccl, mpi, commit, build, host, date. Versions are the libraries' own
 * answers at run time ("none" for the CUDA ones in a CPU build); gpu lists
 * the visible GPUs ("NVIDIA H200 x4", "none"). */
void bench_env_collect(const bench_topo *t, bench_env_item items[BENCH_ENV_ITEMS]);

#endif
