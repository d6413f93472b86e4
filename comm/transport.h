/* The transport: asynchronous sends and receives of a buffer to or from a
 * peer rank, behind one interface with two implementations.
 *
 *   mpi   MPI_Isend/Irecv (comm_isend). Host buffers go as they are (the
 *         CPU backend); device buffers are staged through pinned host
 *         memory on copy streams of their own (comm/cuda/staged.c), which
 *         is how several ranks share one GPU (NCCL refuses that).
 *   nccl  device buffers, ncclSend/Recv on communication streams ordered
 *         against the caller's stream with events (comm/cuda/); host
 *         buffers go over MPI.
 *
 * The stream is the last argument, as a void* so that this header stays
 * free of CUDA: a cudaStream_t whose work writes (send) or reads (receive)
 * buf, which is then device memory; or NULL, and buf is host memory the
 * caller's work is done with. No call synchronises the device: transfers
 * are ordered after the stream's earlier work and before its later work by
 * events. Messages between two ranks must be posted in the same order on
 * both sides (NCCL has no tags; the tag is checked only by MPI). */
#ifndef COMM_TRANSPORT_H
#define COMM_TRANSPORT_H

#include <stddef.h>

#include "alltoall.h"
#include "comm.h"
#include "gpu_share.h"

typedef enum {
  COMM_TRANSPORT_AUTO = 0,
  COMM_TRANSPORT_MPI = 1,
  COMM_TRANSPORT_NCCL = 2,
} comm_transport_kind;

/* "auto" | "mpi" | "nccl"; logs --transport and returns SP_ERR_INPUT otherwise. */
int comm_transport_parse(const char *s, comm_transport_kind *out);
const char *comm_transport_name(comm_transport_kind k);

/* Collective. Resolves --transport for this job: auto is nccl when the
 * stages keep their buffers on GPUs (gpu_buffers), this build has NCCL and
 * every rank has a GPU of its own (gpu->exclusive on every rank, decided
 * from the GPUs' identities: gpu_share.h; NULL: no GPU), else mpi. nccl
 * where that does not hold is refused with the reason (SP_ERR_INPUT,
 * logged on rank 0). */
int comm_transport_choose(const comm_world *w, comm_transport_kind want, int gpu_buffers,
                          const comm_gpu_share *gpu, comm_transport_kind *out);

typedef struct comm_transport comm_transport;

/* One transfer in flight. */
typedef struct comm_xfer {
  comm_req mpi;  /* a host buffer's MPI requests */
  void *done;    /* nccl: cudaEvent_t recorded after the transfer, or NULL */
  void *stream;  /* nccl: the caller's stream, ordered after a receive */
  void *staged;  /* mpi with a device buffer: its staging record */
} comm_xfer;

/* Collective. cuda_device: this rank's GPU (nccl only). */
int comm_transport_open(const comm_world *w, comm_transport_kind kind, int cuda_device,
                        comm_transport **out);
void comm_transport_close(comm_transport *t);
comm_transport_kind comm_transport_kind_of(const comm_transport *t);

/* Post a send / receive of bytes at buf; stream: the caller's stream whose
 * earlier work produced (send) or will consume (receive) buf. */
int comm_tp_isend(comm_transport *t, const void *buf, size_t bytes, int peer, int tag,
                  comm_xfer *x, void *stream);
int comm_tp_irecv(comm_transport *t, void *buf, size_t bytes, int peer, int tag, comm_xfer *x,
                  void *stream);
/* Blocks until x completes (the watchdog guards the wait; timeout_s applies
 * when it cannot, see comm_wait) and, for a receive, orders the caller's
 * stream after it. Adds the seconds waited to *waited when not NULL. A
 * transfer never posted (zeroed) completes at once. */
int comm_tp_wait(comm_transport *t, comm_xfer *x, double timeout_s, const char *what,
                 double *waited);

/* All-to-all among a group of ranks (comm_a2a, alltoall.h: world ranks in
 * group order, this rank one of them, counts and offsets in bytes). Host buffers (stream NULL) go
 * over MPI (comm_alltoallv, alltoall.h). Device buffers (stream: the
 * caller's stream that wrote send and will read recv): over nccl one
 * grouped call, ncclGroupStart/End around an ncclSend and an ncclRecv per
 * member, itself included, on a communicator and stream of the
 * all-to-alls' own (so they never queue behind the pipeline's early
 * receives); over mpi the pairwise rounds of alltoall.h through the
 * staging, this rank's own block copied on the device. Returns once recv
 * is complete and the caller's stream is ordered after it; every wait is
 * the watchdog's (timeout_s when it does not run), what names it. */
int comm_tp_alltoallv(comm_transport *t, const comm_a2a *x, int tag, double timeout_s,
                      const char *what, void *stream);

#endif
