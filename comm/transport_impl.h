/* The implementation side of a transport (see transport.h). */
#ifndef COMM_TRANSPORT_IMPL_H
#define COMM_TRANSPORT_IMPL_H

#include "transport.h"

typedef struct comm_transport_ops {
  int (*isend)(comm_transport *t, const void *buf, size_t bytes, int peer, int tag,
               comm_xfer *x, void *stream);
  int (*irecv)(comm_transport *t, void *buf, size_t bytes, int peer, int tag, comm_xfer *x,
               void *stream);
  int (*wait)(comm_transport *t, comm_xfer *x, double timeout_s, const char *what,
              double *waited);
  void (*close)(comm_transport *t);
  /* comm_tp_alltoallv on device buffers (stream not NULL); NULL: the
   * pairwise rounds over isend/irecv/wait (comm/transport.c). */
  int (*alltoallv)(comm_transport *t, const comm_a2a *x, double timeout_s, const char *what,
                   void *stream);
} comm_transport_ops;

struct comm_transport {
  const comm_transport_ops *ops;
  comm_transport_kind kind;
  const comm_world *w;
  void *impl;
};

/* comm/cuda/nccl_transport.c (CUDA builds only). */
int comm_nccl_open(const comm_world *w, int cuda_device, comm_transport *t);

/* comm/cuda/staged.c (CUDA builds only): device buffers over MPI through
 * pinned host staging, one staging buffer per device buffer and
 * direction. A send's device-to-host copy is queued after the caller's
 * stream; its MPI send is posted once the copy is done, by whichever wait
 * of this rank polls first (comm_set_progress). A receive lands in the
 * staging buffer; its wait queues the host-to-device copy and orders the
 * caller's stream after it. The caller zeroes x before a send or receive. */
typedef struct comm_staged comm_staged;
comm_staged *comm_staged_create(const comm_world *w);
void comm_staged_destroy(comm_staged *st);
int comm_staged_isend(comm_staged *st, const void *buf, size_t bytes, int peer, int tag,
                      comm_xfer *x, void *stream);
int comm_staged_irecv(comm_staged *st, void *buf, size_t bytes, int peer, int tag,
                      comm_xfer *x, void *stream);
int comm_staged_wait(comm_staged *st, comm_xfer *x, double timeout_s, const char *what,
                     double *waited);
/* bytes from device src to device dst, queued on stream (an all-to-all's
 * own block). */
void comm_staged_copy(void *dst, const void *src, size_t bytes, void *stream);

#endif
