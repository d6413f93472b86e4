/* The per-op profile of a CUDA stage's blocks (--profile): an event after
 * every op of every block; after each call of the blocks, one line per op
 * with its mean time per block against its floor, the larger of FLOPs over
 * the op's compute ceiling and bytes over the copy ceiling, both measured on
 * the H200 (DESIGN.md "Running on a GPU machine": 764 TFLOP/s bf16 GEMM, 4157 GB/s device
 * copy; attention against cuDNN's measured 574 TFLOP/s). CUDA builds only. */
#ifndef RANK_CUDA_PROFILE_H
#define RANK_CUDA_PROFILE_H

#include <cuda_runtime_api.h>

#define RANK_CEIL_GEMM 764e12
#define RANK_CEIL_ATTN 574e12
#define RANK_CEIL_BW 4157e9

typedef struct rank_prof rank_prof;

rank_prof *rank_prof_create(cudaStream_t stream);
void rank_prof_destroy(rank_prof *p);
void rank_prof_block_begin(rank_prof *p);
/* After an op: its name (a literal), FLOPs, bytes and compute ceiling. */
void rank_prof_mark(rank_prof *p, const char *name, double flops, double bytes, double rate);
/* Waits for the block's last event and adds its ops' times. */
void rank_prof_block_end(rank_prof *p);
/* Logs the table for the blocks since the last report and starts over. */
void rank_prof_report(rank_prof *p);

#endif
