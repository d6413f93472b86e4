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
} comm_transport_ops;

struct comm_transport {
  const comm_transport_ops *ops;
  comm_transport_kind kind;
  const comm_world *w;
  void *impl;
};

/* comm/cuda/nccl_transport.c (CUDA builds only). */
int comm_nccl_open(const comm_world *w, int cuda_device, comm_transport *t);

#endif
