/* Which ranks of a node share a GPU, decided from the GPUs' identities
 * (UUIDs), never from device counts: under srun --gpus-per-task=1 every
 * rank sees one device, cuda:0, and yet each is a different card, while
 * under mpirun on a node with fewer GPUs than ranks several ranks see the
 * same cards. Only the identities tell the two apart.
 *
 * The identity is whatever string names a physical GPU uniquely on its
 * node (ranks/nets/cuda/cuda_device.c: "GPU-" and the CUDA UUID); the empty string means
 * the rank has no GPU (the CPU backend). */
#ifndef COMM_GPU_SHARE_H
#define COMM_GPU_SHARE_H

#include "comm.h"

#define COMM_GPU_ID_MAX 64 /* bytes of an identity, its NUL included */

typedef struct comm_gpu_share {
  char id[COMM_GPU_ID_MAX]; /* this rank's GPU, "" when it has none */
  int sharers;   /* ranks of the node on this rank's GPU, itself included; 0 without a GPU */
  int exclusive; /* every rank of the node has a GPU and no two have the same one:
                    NCCL can connect them (it refuses two ranks on one GPU) */
} comm_gpu_share;

/* Pure: the share of the rank whose identity is mine, among the identities
 * ids[0..n) of every rank of its node (mine is one of them). Identities
 * longer than COMM_GPU_ID_MAX - 1 compare on their first bytes. */
void comm_gpu_share_resolve(const char (*ids)[COMM_GPU_ID_MAX], int n, const char *mine,
                            comm_gpu_share *out);

/* Collective over the job (every rank calls it; the exchange is among each
 * node's ranks): gathers every rank's identity on the node communicator
 * and resolves this rank's share. mine: this rank's GPU identity, "" for
 * none. Returns SP_OK (MPI failures are fatal). */
int comm_gpu_share_gather(const comm_world *w, const char *mine, comm_gpu_share *out);

#endif
