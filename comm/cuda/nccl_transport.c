/* The NCCL transport (see transport.h): device buffers between GPUs.
 *
 * Start-up as nccl-tests does it: rank 0 makes the unique id, MPI_Bcast
 * carries it, every rank calls ncclCommInitRankConfig, here with a
 * non-blocking communicator so no NCCL call can hang the host: each call
 * returns at once (ncclInProgress) and we poll ncclCommGetAsyncError. The
 * transfers run on communication streams of our own (one per communicator,
 * see nccl_tp), ordered after the caller's stream by an event (send) and
 * before it by an event (receive), so compute and communication overlap and
 * nothing syncs the device. The all-to-all is one grouped call on a third
 * communicator (nccl_alltoallv). Host buffers (stream NULL) go over MPI. A wait
 * polls the completion event and the communicator's async error; a peer that
 * died or stopped is caught by the watchdog (or by the wait's own timeout
 * without heartbeats), whose fatal path runs ncclCommAbort first. */
#include <nccl.h>
#include <stdlib.h>
#include <string.h>

#include "../comm_internal.h"
#include "../transport_impl.h"
#include "cuda_comm.h"

/* ncclInProgress is the normal answer of a non-blocking communicator. */
#define NCCL_CHECK(call)                                                        \
  do {                                                                          \
    ncclResult_t nccl_rc_ = (call);                                             \
    if (nccl_rc_ != ncclSuccess && nccl_rc_ != ncclInProgress)                  \
      sp_fatal_at(__FILE__, __LINE__, #call, "nccl error: %s",                  \
                  ncclGetErrorString(nccl_rc_));                                \
  } while (0)

/* Two communicators for messages, by the parity of the sending rank: a
 * message from rank r travels on comm[r % 2], on that communicator's own
 * stream. A pipeline stage then sends on one communicator and receives on
 * the other, so its send of micro-batch i never queues behind its receive
 * of i + 1 (NCCL runs a communicator's operations in order on its stream).
 * A third, comm[A2A], carries the all-to-alls alone: one posted behind a
 * receive of the next step's first micro-batch would wait for a message
 * that needs the all-to-all's own stage to finish. */
enum { A2A = 2, NCOMM = 3 };

typedef struct nccl_tp {
  ncclComm_t comm[NCOMM];
  cudaStream_t stream[NCOMM];
  int device;
} nccl_tp;

/* The communicators the abort hook ends (one transport per process: this
 * file owns them). */
static ncclComm_t g_abort_comm[NCOMM] = {NULL, NULL, NULL};

static void nccl_abort_hook(int code) {
  (void)code;
  for (int i = 0; i < NCOMM; i++) {
    ncclComm_t c = g_abort_comm[i];
    g_abort_comm[i] = NULL;
    if (c) ncclCommAbort(c);
  }
}

/* Waits until the communicator has no operation in progress; what names it. */
static void settle(ncclComm_t comm, double timeout_s, const char *what) {
  double t0 = comm_now();
  if (comm_watchdog_guards()) timeout_s = 0;
  comm_wait_begin();
  for (;;) {
    ncclResult_t st = ncclSuccess;
    NCCL_CHECK(ncclCommGetAsyncError(comm, &st));
    if (st == ncclSuccess) break;
    if (st != ncclInProgress)
      sp_fatal("nccl: %s failed: %s (%s)", what, ncclGetErrorString(st),
               ncclGetLastError(comm));
    if (timeout_s > 0 && comm_now() - t0 > timeout_s)
      sp_fatal("timeout: nccl %s did not complete within %.0f s", what, timeout_s);
    comm_cuda_nap();
  }
  comm_wait_end();
}

/* NCCL's stream cs starts after the work queued so far on the caller's
 * stream (a send after the work that wrote its buffer, a receive after the
 * work that still reads the old contents). The event is released once the
 * stream passes it. */
static void after_caller(void *stream, cudaStream_t cs) {
  cudaEvent_t ready;
  CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventRecord(ready, (cudaStream_t)stream));
  CUDA_CHECK(cudaStreamWaitEvent(cs, ready, 0));
  CUDA_CHECK(cudaEventDestroy(ready));
}

/* An event recorded on cs after the NCCL work queued there: the transfer's
 * completion (nccl_wait). */
static cudaEvent_t done_event(cudaStream_t cs) {
  cudaEvent_t done;
  CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventRecord(done, cs));
  return done;
}

static int post(comm_transport *t, void *buf, size_t bytes, int peer, int tag, comm_xfer *x,
                void *stream, int send) {
  nccl_tp *n = t->impl;
  memset(x, 0, sizeof *x);
  if (!stream) /* host memory */
    return send ? comm_isend(t->w, buf, bytes, peer, tag, &x->mpi)
                : comm_irecv(t->w, buf, bytes, peer, tag, &x->mpi);
  if (peer < 0 || peer >= t->w->size || peer == t->w->rank)
    sp_fatal("internal: nccl message to rank %d from rank %d of %d", peer, t->w->rank,
             t->w->size);
  const int p = (send ? t->w->rank : peer) % 2;
  ncclComm_t comm = n->comm[p];
  cudaStream_t cs = n->stream[p];
  after_caller(stream, cs);
  if (send)
    NCCL_CHECK(ncclSend(buf, bytes, ncclUint8, peer, comm, cs));
  else
    NCCL_CHECK(ncclRecv(buf, bytes, ncclUint8, peer, comm, cs));
  settle(comm, comm_watchdog_timeout(), send ? "ncclSend" : "ncclRecv");
  x->done = done_event(cs);
  x->stream = stream;
  return SP_OK;
}

static int nccl_isend(comm_transport *t, const void *buf, size_t bytes, int peer, int tag,
                      comm_xfer *x, void *stream) {
  /* (Order, not tags, matches NCCL messages; MPI checks the tag.) */
  return post(t, (void *)buf, bytes, peer, tag, x, stream, 1);
}

static int nccl_irecv(comm_transport *t, void *buf, size_t bytes, int peer, int tag,
                      comm_xfer *x, void *stream) {
  return post(t, buf, bytes, peer, tag, x, stream, 0);
}

static int nccl_wait(comm_transport *t, comm_xfer *x, double timeout_s, const char *what,
                     double *waited) {
  nccl_tp *n = t->impl;
  if (!x->done) return comm_wait(t->w, &x->mpi, timeout_s, what, waited);
  cudaEvent_t done = x->done;
  double t0 = comm_now();
  if (comm_watchdog_guards()) timeout_s = 0;
  comm_wait_begin();
  for (;;) {
    cudaError_t q = cudaEventQuery(done);
    if (q == cudaSuccess) break;
    if (q != cudaErrorNotReady) CUDA_CHECK(q);
    for (int i = 0; i < NCOMM; i++) {
      ncclResult_t st = ncclSuccess;
      NCCL_CHECK(ncclCommGetAsyncError(n->comm[i], &st));
      if (st != ncclSuccess && st != ncclInProgress)
        sp_fatal("nccl: %s failed: %s (%s)", what, ncclGetErrorString(st),
                 ncclGetLastError(n->comm[i]));
    }
    if (timeout_s > 0 && comm_now() - t0 > timeout_s)
      sp_fatal("timeout: %s did not complete within %.0f s (a peer rank died or hangs)", what,
               timeout_s);
    comm_cuda_nap();
  }
  comm_wait_end();
  /* The caller's later work on the buffer comes after the transfer. */
  CUDA_CHECK(cudaStreamWaitEvent((cudaStream_t)x->stream, done, 0));
  CUDA_CHECK(cudaEventDestroy(done));
  if (waited) *waited += comm_now() - t0;
  x->done = NULL;
  return SP_OK;
}

static void nccl_close(comm_transport *t) {
  nccl_tp *n = t->impl;
  if (!n) return;
  for (int i = 0; i < NCOMM; i++) {
    CUDA_CHECK(cudaStreamSynchronize(n->stream[i]));
    NCCL_CHECK(ncclCommFinalize(n->comm[i]));
    settle(n->comm[i], comm_watchdog_timeout(), "ncclCommFinalize");
    g_abort_comm[i] = NULL;
    NCCL_CHECK(ncclCommDestroy(n->comm[i]));
    CUDA_CHECK(cudaStreamDestroy(n->stream[i]));
  }
  free(n);
  t->impl = NULL;
}

/* The all-to-all (transport.h): one group of an ncclSend and an ncclRecv
 * per member on comm[A2A]'s stream, after the caller's stream; the host
 * waits for it as for a transfer (nccl_wait: the completion event and the
 * communicators' async errors under the watchdog), which also orders the
 * caller's stream after it. */
static int nccl_alltoallv(comm_transport *t, const comm_a2a *a, double timeout_s,
                          const char *what, void *stream) {
  nccl_tp *nt = t->impl;
  ncclComm_t comm = nt->comm[A2A];
  cudaStream_t cs = nt->stream[A2A];
  after_caller(stream, cs);
  NCCL_CHECK(ncclGroupStart());
  for (int j = 0; j < a->n; j++) {
    if (a->scount[j])
      NCCL_CHECK(ncclSend((const char *)a->send + a->sdispl[j], a->scount[j], ncclUint8,
                          a->group[j], comm, cs));
    if (a->rcount[j])
      NCCL_CHECK(ncclRecv((char *)a->recv + a->rdispl[j], a->rcount[j], ncclUint8, a->group[j],
                          comm, cs));
  }
  NCCL_CHECK(ncclGroupEnd());
  settle(comm, comm_watchdog_timeout(), "an all-to-all's ncclGroupEnd");
  comm_xfer x = {.done = done_event(cs), .stream = stream};
  return nccl_wait(t, &x, timeout_s, what, NULL);
}

static const comm_transport_ops nccl_ops = {nccl_isend, nccl_irecv, nccl_wait, nccl_close,
                                            nccl_alltoallv};

int comm_nccl_open(const comm_world *w, int cuda_device, comm_transport *t) {
  /* NVLink multicast (NVLS) stays off everywhere in this project: it needs
   * fabric-manager multicast support the machines we run on do not give. */
  const char *nvls = getenv("NCCL_NVLS_ENABLE");
  if (nvls && strcmp(nvls, "0") != 0)
    sp_log_warn("NCCL_NVLS_ENABLE=%s: overridden to 0 (NVLink multicast stays off)", nvls);
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || cuda_device < 0 || cuda_device >= ndev) {
    sp_log_error("--transport nccl: this rank's GPU %d is not visible (%d GPUs)", cuda_device,
                 ndev);
    return SP_ERR_INPUT;
  }
  CUDA_CHECK(cudaSetDevice(cuda_device));
  nccl_tp *n = sp_xcalloc(1, sizeof *n);
  n->device = cuda_device;
  sp_abort_hook_push(nccl_abort_hook);
  for (int i = 0; i < NCOMM; i++) {
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (w->rank == 0) NCCL_CHECK(ncclGetUniqueId(&id));
    comm_bcast(w, &id, sizeof id, 0);
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    NCCL_CHECK(ncclCommInitRankConfig(&n->comm[i], w->size, id, w->rank, &cfg));
    g_abort_comm[i] = n->comm[i];
    settle(n->comm[i], comm_watchdog_timeout(), "ncclCommInitRankConfig");
    CUDA_CHECK(cudaStreamCreateWithFlags(&n->stream[i], cudaStreamNonBlocking));
  }
  t->ops = &nccl_ops;
  t->impl = n;
  sp_log_debug("nccl: three communicators of %d ranks on GPU %d", w->size, cuda_device);
  return SP_OK;
}
