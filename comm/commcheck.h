/* The transport self-check behind `staticpipe commcheck`, in the manner of
 * nccl-tests: every rank fills what it sends from a seed (a pattern of the
 * seed, sender, receiver, pattern and size, so a block from the wrong
 * peer, of the wrong size or left over from an earlier size is caught
 * too), moves it, and checks every byte it received; rank 0 prints the
 * time and bandwidth of each pattern at each size.
 *
 * Patterns: p2p (each rank sends to the next and receives from the one
 * before, a ring: the pipeline's stage-to-stage messages), alltoall (every
 * rank a block to every rank: the Ulysses exchange of heads; a size is the
 * whole buffer of a rank, size / n per peer, as nccl-tests counts it) and
 * exchange (ranks 2k and 2k + 1 swap buffers: the replicas' exchange of
 * predictions; an odd last rank idles). */
#ifndef COMM_COMMCHECK_H
#define COMM_COMMCHECK_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "comm.h"
#include "transport.h"

/* Ranks of one check at most. */
#define COMM_COMMCHECK_MAX_RANKS 1024

enum {
  COMMCHECK_P2P = 0,
  COMMCHECK_ALLTOALL = 1,
  COMMCHECK_EXCHANGE = 2,
  COMMCHECK_NPATTERNS = 3,
};

/* "p2p", "alltoall", "exchange". */
const char *commcheck_pattern_name(int p);

/* Where the buffers live and how the check moves data in and out of them.
 * put and get are complete when they return. stream: NULL for host
 * memory, else the CUDA stream the transport orders its transfers
 * against. */
typedef struct commcheck_mem {
  const char *name; /* "host" or "cuda:N" */
  void *(*alloc)(size_t bytes);
  void (*release)(void *p);
  void (*put)(void *dst, const void *src, size_t n, void *stream); /* host -> buffer */
  void (*get)(void *dst, const void *src, size_t n, void *stream); /* buffer -> host */
  void *stream;
} commcheck_mem;

/* Host memory (malloc, memcpy). */
commcheck_mem commcheck_mem_host(void);
/* Device memory of CUDA device idx and a stream of its own: SP_OK, or
 * SP_ERR_INPUT (logged) in a build without CUDA. */
int commcheck_mem_cuda(int idx, commcheck_mem *out);
void commcheck_mem_cuda_close(commcheck_mem *m);

typedef struct commcheck_opts {
  const size_t *sizes; /* bytes, ascending or not */
  int nsizes;
  unsigned patterns;   /* bit (1 << COMMCHECK_*) per pattern to run */
  int iters;           /* timed iterations per size (after one checked warm-up) */
  uint64_t seed;
  double timeout_s;    /* each wait (comm_tp_wait: the watchdog when it runs) */
  int corrupt_rank;    /* test aid: this rank flips byte size/2 of every block it sends; -1 none */
  int json;            /* rank 0 prints JSON instead of the table */
  FILE *out;           /* rank 0's table or JSON */
} commcheck_opts;

/* What a block's bytes are made from: the run's seed, its sender and
 * receiver, the pattern (COMMCHECK_*) and the message size it is part of. */
typedef struct commcheck_key {
  uint64_t seed;
  int src, dst, pattern;
  size_t size;
} commcheck_key;

/* The fill of a block (bytes) of key k: 64-bit words of splitmix64 over
 * (seed, src, dst, pattern, size, word index); the tail bytes of the last
 * word. Pure, so a receiver can regenerate what its peer sent. */
void commcheck_fill(uint8_t *buf, size_t bytes, const commcheck_key *k);
/* The first byte of buf that differs from commcheck_fill's, or -1; *want
 * and *got: the byte expected there and the one found. */
int64_t commcheck_first_diff(const uint8_t *buf, size_t bytes, const commcheck_key *k,
                             uint8_t *want, uint8_t *got);

/* Collective: every pattern of o at every size over *t with buffers in
 * mem. Device buffers over the staged MPI transport get a fresh transport
 * (comm_transport_open on cuda_device, into *t) for each pattern and size:
 * that transport keeps one pinned staging buffer per device buffer, of a
 * fixed size (comm/transport_impl.h), and the check moves the same
 * buffers at many sizes.
 * A wrong byte is logged by the rank that received it as one line, "FAIL
 * PATTERN SIZE bytes: rank R received from rank P: byte B is 0x.., expected
 * 0x..", and its row is marked FAIL. SP_OK when every byte was right,
 * SP_ERR_RUNTIME otherwise. */
int commcheck_run(const comm_world *w, comm_transport **t, int cuda_device,
                  const commcheck_mem *mem, const commcheck_opts *o);

#endif
