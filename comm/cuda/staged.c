/* Device buffers over MPI through pinned host memory (transport_impl.h).
 *
 * Each device buffer keeps a pinned staging buffer per direction, made at
 * its first transfer (the pipeline moves a handful of activation buffers,
 * the same ones every step). A send: an event on the caller's stream, a
 * device-to-host copy on the d2h stream after it, and the MPI send once
 * that copy is done; the host never waits for the copy, the next poll of
 * any wait of this rank posts it (comm_set_progress). A receive: MPI
 * lands in the staging buffer; the wait queues the host-to-device copy on
 * the h2d stream, after the caller's readers of the old contents, and
 * orders the caller's stream after the copy. */
#include <stdlib.h>
#include <string.h>

#include "../transport_impl.h"
#include "cuda_comm.h"

enum { MAX_STAGED = 64 }; /* more than the pipeline's 2 x (2 x 8 jobs + 2) buffers */

typedef enum {
  IDLE = 0,
  SEND_COPYING, /* device-to-host copy queued, MPI send not yet posted */
  SEND_POSTED,  /* MPI send in flight */
  RECV_POSTED,  /* MPI receive in flight */
} staged_state;

typedef struct staged_buf {
  const void *dev;
  int send;
  size_t bytes;
  void *host;          /* pinned, bytes */
  cudaEvent_t ready;   /* send: the caller's work that wrote dev; receive: that read it */
  cudaEvent_t copied;  /* the staging copy done */
  staged_state state;
  int peer, tag;
  comm_req req;
} staged_buf;

struct comm_staged {
  const comm_world *w;
  int device;
  cudaStream_t d2h, h2d;
  staged_buf b[MAX_STAGED];
  int n;
};

static void progress(void *arg) {
  comm_staged *st = arg;
  for (int i = 0; i < st->n; i++) {
    staged_buf *b = &st->b[i];
    if (b->state != SEND_COPYING) continue;
    cudaError_t q = cudaEventQuery(b->copied);
    if (q == cudaErrorNotReady) continue;
    CUDA_CHECK(q);
    comm_isend(st->w, b->host, b->bytes, b->peer, b->tag, &b->req);
    b->state = SEND_POSTED;
  }
}

comm_staged *comm_staged_create(const comm_world *w) {
  comm_staged *st = sp_xcalloc(1, sizeof *st);
  st->w = w;
  CUDA_CHECK(cudaGetDevice(&st->device));
  CUDA_CHECK(cudaStreamCreateWithFlags(&st->d2h, cudaStreamNonBlocking));
  CUDA_CHECK(cudaStreamCreateWithFlags(&st->h2d, cudaStreamNonBlocking));
  comm_set_progress(progress, st);
  return st;
}

void comm_staged_destroy(comm_staged *st) {
  if (!st) return;
  comm_set_progress(NULL, NULL);
  CUDA_CHECK(cudaStreamSynchronize(st->d2h));
  CUDA_CHECK(cudaStreamSynchronize(st->h2d));
  for (int i = 0; i < st->n; i++) {
    staged_buf *b = &st->b[i];
    if (b->state != IDLE)
      sp_fatal("internal: staged transfer of %zu bytes with rank %d still in flight at close",
               b->bytes, b->peer);
    CUDA_CHECK(cudaFreeHost(b->host));
    CUDA_CHECK(cudaEventDestroy(b->ready));
    CUDA_CHECK(cudaEventDestroy(b->copied));
  }
  CUDA_CHECK(cudaStreamDestroy(st->d2h));
  CUDA_CHECK(cudaStreamDestroy(st->h2d));
  free(st);
}

/* The staging record of (dev, direction), made on first use; idle. */
static staged_buf *find(comm_staged *st, const void *dev, size_t bytes, int send) {
  for (int i = 0; i < st->n; i++) {
    staged_buf *b = &st->b[i];
    if (b->dev != dev || b->send != send) continue;
    if (b->state != IDLE)
      sp_fatal("internal: a second %s on device buffer %p before the first was waited",
               send ? "send" : "receive", dev);
    if (b->bytes != bytes) {
      /* The same device buffer at another size: a stage re-laid for a new
       * latent shape. Its staging buffer is made again once no copy of the
       * old one is queued. */
      CUDA_CHECK(cudaStreamSynchronize(st->d2h));
      CUDA_CHECK(cudaStreamSynchronize(st->h2d));
      CUDA_CHECK(cudaFreeHost(b->host));
      b->bytes = bytes;
      CUDA_CHECK(cudaHostAlloc(&b->host, bytes ? bytes : 1, cudaHostAllocDefault));
    }
    return b;
  }
  if (st->n == MAX_STAGED) sp_fatal("internal: more than %d staged device buffers", MAX_STAGED);
  staged_buf *b = &st->b[st->n++];
  memset(b, 0, sizeof *b);
  b->dev = dev;
  b->send = send;
  b->bytes = bytes;
  CUDA_CHECK(cudaHostAlloc(&b->host, bytes ? bytes : 1, cudaHostAllocDefault));
  CUDA_CHECK(cudaEventCreateWithFlags(&b->ready, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventCreateWithFlags(&b->copied, cudaEventDisableTiming));
  return b;
}

/* b's transfer with peer is under way in state; x (zeroed by the caller)
 * refers to it. */
static void begin(staged_buf *b, int peer, int tag, staged_state state, comm_xfer *x,
                  void *stream) {
  b->peer = peer;
  b->tag = tag;
  b->state = state;
  x->staged = b;
  x->stream = stream;
}

int comm_staged_isend(comm_staged *st, const void *buf, size_t bytes, int peer, int tag,
                      comm_xfer *x, void *stream) {
  staged_buf *b = find(st, buf, bytes, 1);
  CUDA_CHECK(cudaEventRecord(b->ready, (cudaStream_t)stream));
  CUDA_CHECK(cudaStreamWaitEvent(st->d2h, b->ready, 0));
  CUDA_CHECK(cudaMemcpyAsync(b->host, buf, bytes, cudaMemcpyDeviceToHost, st->d2h));
  CUDA_CHECK(cudaEventRecord(b->copied, st->d2h));
  begin(b, peer, tag, SEND_COPYING, x, stream);
  progress(st);
  return SP_OK;
}

int comm_staged_irecv(comm_staged *st, void *buf, size_t bytes, int peer, int tag,
                      comm_xfer *x, void *stream) {
  staged_buf *b = find(st, buf, bytes, 0);
  /* The staging buffer is free once the previous receive's copy out of it
   * is done (queued long ago: this seldom waits). */
  CUDA_CHECK(cudaEventSynchronize(b->copied));
  CUDA_CHECK(cudaEventRecord(b->ready, (cudaStream_t)stream));
  comm_irecv(st->w, b->host, bytes, peer, tag, &b->req);
  begin(b, peer, tag, RECV_POSTED, x, stream);
  return SP_OK;
}

int comm_staged_wait(comm_staged *st, comm_xfer *x, double timeout_s, const char *what,
                     double *waited) {
  staged_buf *b = x->staged;
  if (!b) return SP_OK;
  if (b->state == SEND_COPYING) { /* the local copy: the device, not a peer */
    double t0 = comm_now();
    while (progress(st), b->state == SEND_COPYING) comm_cuda_nap();
    if (waited) *waited += comm_now() - t0;
  }
  int rc = comm_wait(st->w, &b->req, timeout_s, what, waited);
  if (b->state == RECV_POSTED) {
    CUDA_CHECK(cudaStreamWaitEvent(st->h2d, b->ready, 0));
    CUDA_CHECK(cudaMemcpyAsync((void *)b->dev, b->host, b->bytes, cudaMemcpyHostToDevice, st->h2d));
    CUDA_CHECK(cudaEventRecord(b->copied, st->h2d));
    CUDA_CHECK(cudaStreamWaitEvent((cudaStream_t)x->stream, b->copied, 0));
  }
  b->state = IDLE;
  x->staged = NULL;
  return rc;
}

void comm_staged_copy(void *dst, const void *src, size_t bytes, void *stream) {
  if (bytes)
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, (cudaStream_t)stream));
}
