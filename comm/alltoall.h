/* All-to-all over a group of ranks on host buffers, over MPI: each member
 * sends a block to every member (itself included) and receives one from
 * each. The group is a list of world ranks in group order (the U ranks of
 * a pipeline stage, say); this rank must be one of them. Every wait is
 * comm_wait's (the watchdog, or timeout_s when it does not run).
 *
 * Blocks go pairwise in n - 1 rounds: in round k member i sends to
 * i + k and receives from i - k (mod n), both posted before either is
 * waited for, so no round waits on a later one whatever MPI buffers. */
#ifndef COMM_ALLTOALL_H
#define COMM_ALLTOALL_H

#include <stddef.h>

#include "comm.h"

/* One all-to-all's group and buffers. Per-peer counts and offsets, in
 * bytes, indexed by group position: member j gets send[sdispl[j] ..
 * + scount[j]) and this rank's recv[rdispl[j] .. + rcount[j]) is filled
 * from member j. rcount[j] must equal member j's scount for this rank
 * (checked by MPI's truncation error). */
typedef struct comm_a2a {
  const int *group; /* n world ranks in group order, this rank among them */
  int n;
  const void *send;
  const size_t *scount, *sdispl;
  void *recv;
  const size_t *rcount, *rdispl;
} comm_a2a;

/* The all-to-all of x; tag: a message tag of the caller's (the rounds use
 * it as is). */
int comm_alltoallv(const comm_world *w, const comm_a2a *x, int tag, double timeout_s);

/* Equal blocks of `bytes` for every member, in group order: block j of
 * send goes to member j, block j of recv comes from member j. */
int comm_alltoall(const comm_world *w, const int *group, int n, const void *send, void *recv,
                  size_t bytes, int tag, double timeout_s);

#endif
