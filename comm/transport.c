/* Transport selection, dispatch and the MPI transport (see transport.h). */
#include <stdlib.h>
#include <string.h>

#include "alltoall.h"
#include "log.h"
#include "transport_impl.h"

int comm_transport_parse(const char *s, comm_transport_kind *out) {
  static const char *names[] = {"auto", "mpi", "nccl"};
  for (int i = 0; i < 3; i++) {
    if (strcmp(s, names[i]) == 0) {
      *out = (comm_transport_kind)i;
      return SP_OK;
    }
  }
  sp_log_error("--transport: '%s' is not auto, mpi or nccl", s);
  return SP_ERR_INPUT;
}

const char *comm_transport_name(comm_transport_kind k) {
  return k == COMM_TRANSPORT_NCCL ? "nccl" : k == COMM_TRANSPORT_MPI ? "mpi" : "auto";
}

#ifdef STATICPIPE_HAVE_CUDA
static const int have_nccl = 1;
#else
static const int have_nccl = 0;
#endif

int comm_transport_choose(const comm_world *w, comm_transport_kind want, int gpu_buffers,
                          const comm_gpu_share *gpu, comm_transport_kind *out) {
  /* Every rank must agree, so the worst node decides. */
  int own = gpu && gpu->exclusive ? 1 : 0;
  int all_own = -comm_agree(w, -own); /* min over ranks */
  const char *why = NULL;
  if (!gpu_buffers)
    why = "the cpu backend keeps its activations in host memory (nccl needs --device cuda)";
  else if (!all_own)
    why = "two ranks of a node share a GPU, and NCCL refuses two ranks on one GPU";
  else if (!have_nccl)
    why = "this build has no NCCL (configured without CUDA)";
  if (want == COMM_TRANSPORT_NCCL && why) {
    if (w->rank == 0) sp_log_error("--transport nccl: %s; use --transport mpi", why);
    return SP_ERR_INPUT;
  }
  if (want == COMM_TRANSPORT_AUTO) want = why || w->size == 1 ? COMM_TRANSPORT_MPI : COMM_TRANSPORT_NCCL;
  *out = want;
  return SP_OK;
}

#ifdef STATICPIPE_HAVE_CUDA
/* The MPI transport's device side, made at the first device buffer (a
 * CPU-backend job never makes it). */
static comm_staged *staging(comm_transport *t) {
  if (!t->impl) t->impl = comm_staged_create(t->w);
  return t->impl;
}
#endif

/* Posts a send (send = 1; buf is then only read) or a receive: a host
 * buffer (no stream) straight over MPI, a device buffer staged through
 * pinned host memory. */
static int mpi_post(comm_transport *t, int send, void *buf, size_t bytes, int peer, int tag,
                    comm_xfer *x, void *stream) {
  memset(x, 0, sizeof *x);
  if (!stream)
    return send ? comm_isend(t->w, buf, bytes, peer, tag, &x->mpi)
                : comm_irecv(t->w, buf, bytes, peer, tag, &x->mpi);
#ifdef STATICPIPE_HAVE_CUDA
  return send ? comm_staged_isend(staging(t), buf, bytes, peer, tag, x, stream)
              : comm_staged_irecv(staging(t), buf, bytes, peer, tag, x, stream);
#else
  sp_fatal("internal: a device buffer in a build without CUDA");
#endif
}

static int mpi_isend(comm_transport *t, const void *buf, size_t bytes, int peer, int tag,
                     comm_xfer *x, void *stream) {
  return mpi_post(t, 1, (void *)buf, bytes, peer, tag, x, stream);
}

static int mpi_irecv(comm_transport *t, void *buf, size_t bytes, int peer, int tag,
                     comm_xfer *x, void *stream) {
  return mpi_post(t, 0, buf, bytes, peer, tag, x, stream);
}

static int mpi_wait(comm_transport *t, comm_xfer *x, double timeout_s, const char *what,
                    double *waited) {
#ifdef STATICPIPE_HAVE_CUDA
  if (x->staged) return comm_staged_wait(t->impl, x, timeout_s, what, waited);
#endif
  return comm_wait(t->w, &x->mpi, timeout_s, what, waited);
}

static void mpi_close(comm_transport *t) {
#ifdef STATICPIPE_HAVE_CUDA
  comm_staged_destroy(t->impl);
#endif
  t->impl = NULL;
}

static const comm_transport_ops mpi_ops = {mpi_isend, mpi_irecv, mpi_wait, mpi_close, NULL};

int comm_transport_open(const comm_world *w, comm_transport_kind kind, int cuda_device,
                        comm_transport **out) {
  comm_transport *t = sp_xcalloc(1, sizeof *t);
  t->w = w;
  t->kind = kind;
  int rc = SP_OK;
  if (kind == COMM_TRANSPORT_MPI) {
    t->ops = &mpi_ops;
  } else if (kind == COMM_TRANSPORT_NCCL) {
#ifdef STATICPIPE_HAVE_CUDA
    rc = comm_nccl_open(w, cuda_device, t);
#else
    (void)cuda_device;
    sp_log_error("--transport nccl: this build has no NCCL");
    rc = SP_ERR_INPUT;
#endif
  } else {
    sp_log_error("internal: transport 'auto' must be resolved before it is opened");
    rc = SP_ERR_RUNTIME;
  }
  if (rc != SP_OK) {
    free(t);
    return rc;
  }
  *out = t;
  return SP_OK;
}

void comm_transport_close(comm_transport *t) {
  if (!t) return;
  t->ops->close(t);
  free(t);
}

comm_transport_kind comm_transport_kind_of(const comm_transport *t) { return t->kind; }

int comm_tp_isend(comm_transport *t, const void *buf, size_t bytes, int peer, int tag,
                  comm_xfer *x, void *stream) {
  return t->ops->isend(t, buf, bytes, peer, tag, x, stream);
}

int comm_tp_irecv(comm_transport *t, void *buf, size_t bytes, int peer, int tag, comm_xfer *x,
                  void *stream) {
  return t->ops->irecv(t, buf, bytes, peer, tag, x, stream);
}

int comm_tp_wait(comm_transport *t, comm_xfer *x, double timeout_s, const char *what,
                 double *waited) {
  return t->ops->wait(t, x, timeout_s, what, waited);
}

/* Device buffers without the transport's own all-to-all: the pairwise
 * rounds of alltoall.h over isend/irecv (in round k member i sends to
 * i + k and receives from i - k, both posted before either is waited),
 * this rank's own block copied on the device. */
static int rounds_alltoallv(comm_transport *t, const comm_a2a *x, int me, int tag,
                            double timeout_s, const char *what, void *stream) {
  const int *group = x->group, n = x->n;
  const size_t *scount = x->scount, *sdispl = x->sdispl, *rcount = x->rcount, *rdispl = x->rdispl;
  const char *send = x->send;
  char *recv = x->recv;
#ifdef STATICPIPE_HAVE_CUDA
  comm_staged_copy(recv + rdispl[me], send + sdispl[me], scount[me], stream);
#else
  sp_fatal("internal: a device buffer in a build without CUDA");
#endif
  for (int k = 1; k < n; k++) {
    const int to = (me + k) % n, from = (me - k + n) % n;
    comm_xfer rx, sx;
    comm_tp_irecv(t, recv + rdispl[from], rcount[from], group[from], tag, &rx, stream);
    comm_tp_isend(t, send + sdispl[to], scount[to], group[to], tag, &sx, stream);
    comm_tp_wait(t, &rx, timeout_s, what, NULL);
    comm_tp_wait(t, &sx, timeout_s, what, NULL);
  }
  return SP_OK;
}

int comm_tp_alltoallv(comm_transport *t, const comm_a2a *x, int tag, double timeout_s,
                      const char *what, void *stream) {
  if (!stream) return comm_alltoallv(t->w, x, tag, timeout_s);
  int me = -1;
  for (int j = 0; j < x->n; j++)
    if (x->group[j] == t->w->rank) me = j;
  if (me < 0 || x->rcount[me] != x->scount[me])
    sp_fatal("internal: %s: rank %d %s", what, t->w->rank,
             me < 0 ? "is not in the group" : "sends itself another size than it expects");
  if (t->ops->alltoallv)
    return t->ops->alltoallv(t, x, timeout_s, what, stream);
  return rounds_alltoallv(t, x, me, tag, timeout_s, what, stream);
}
