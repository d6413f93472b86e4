/* MPI bootstrap, collectives and point-to-point messages (see comm.h). */
#include "comm.h"

#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

#define MPI_CHECK(call)                                                      \
  do {                                                                       \
    int mpi_rc_ = (call);                                                    \
    if (mpi_rc_ != MPI_SUCCESS) {                                            \
      char msg_[MPI_MAX_ERROR_STRING];                                       \
      int len_ = 0;                                                          \
      MPI_Error_string(mpi_rc_, msg_, &len_);                                \
      sp_fatal_at(__FILE__, __LINE__, #call, "mpi error: %s", msg_);         \
    }                                                                        \
  } while (0)

static const size_t PIECE = (size_t)1 << 30;

double comm_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int launched_by_mpi(void) {
  return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK") ||
         getenv("SLURM_STEP_ID");
}

static void abort_job(int code) {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (init && !fin) MPI_Abort(MPI_COMM_WORLD, code);
}

int comm_init(int *argc, char ***argv, int force_mpi, comm_world *w) {
  memset(w, 0, sizeof *w);
  gethostname(w->host, sizeof w->host - 1);
  w->size = w->local_size = 1;
  if (!force_mpi && !launched_by_mpi()) {
    sp_log_set_rank(0, 1);
    w->hosts = sp_xcalloc(1, sizeof *w->hosts);
    memcpy(w->hosts[0], w->host, sizeof w->host);
    return SP_OK;
  }
  int provided = 0;
  /* Threads: the watchdog thread only reads clocks and calls MPI_Abort. */
  MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
  w->mpi = 1;
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &w->rank));
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &w->size));
  MPI_Comm local;
  MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, w->rank, MPI_INFO_NULL,
                                &local));
  MPI_CHECK(MPI_Comm_rank(local, &w->local_rank));
  MPI_CHECK(MPI_Comm_size(local, &w->local_size));
  MPI_Comm_free(&local);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  w->hosts = sp_xcalloc((size_t)w->size, sizeof *w->hosts);
  MPI_CHECK(MPI_Allgather(w->host, 64, MPI_CHAR, w->hosts, 64, MPI_CHAR, MPI_COMM_WORLD));
  sp_log_set_rank(w->rank, w->size);
  sp_abort_hook_push(abort_job);
  return SP_OK;
}

void comm_finalize(comm_world *w) {
  if (w->mpi) MPI_Finalize();
  w->mpi = 0;
  free(w->hosts);
  w->hosts = NULL;
}

int comm_agree(const comm_world *w, int status) {
  if (!w->mpi) return status;
  int out = status;
  MPI_CHECK(MPI_Allreduce(&status, &out, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
  return out;
}

int comm_agree_who(const comm_world *w, int status, int *who) {
  *who = w->rank;
  if (!w->mpi) return status;
  struct {
    int value, rank;
  } in = {status, w->rank}, out;
  /* MAXLOC: the largest status, and among equals the lowest rank. */
  MPI_CHECK(MPI_Allreduce(&in, &out, 1, MPI_2INT, MPI_MAXLOC, MPI_COMM_WORLD));
  *who = out.rank;
  return out.value;
}

int comm_bcast(const comm_world *w, void *buf, size_t bytes, int root) {
  if (!w->mpi) return SP_OK;
  for (size_t off = 0; off < bytes; off += PIECE) {
    size_t n = bytes - off < PIECE ? bytes - off : PIECE;
    MPI_CHECK(MPI_Bcast((char *)buf + off, (int)n, MPI_BYTE, root, MPI_COMM_WORLD));
  }
  return SP_OK;
}

int comm_gather(const comm_world *w, const void *in, size_t bytes, void *out, int root) {
  if (!w->mpi) {
    memcpy(out, in, bytes);
    return SP_OK;
  }
  if (bytes > PIECE) sp_fatal("internal: gather of %zu bytes is too large", bytes);
  MPI_CHECK(MPI_Gather(in, (int)bytes, MPI_BYTE, out, (int)bytes, MPI_BYTE, root,
                       MPI_COMM_WORLD));
  return SP_OK;
}

void comm_barrier(const comm_world *w) {
  if (w->mpi) MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
}

static int post(const comm_world *w, void *buf, size_t bytes, int peer, int tag, comm_req *req,
                int send) {
  if (!w->mpi || peer < 0 || peer >= w->size || peer == w->rank)
    sp_fatal("internal: message to rank %d from rank %d of %d", peer, w->rank, w->size);
  int n = (int)((bytes + PIECE - 1) / PIECE);
  if (n == 0) n = 1;
  MPI_Request *r = sp_xcalloc((size_t)n, sizeof *r);
  for (int i = 0; i < n; i++) {
    size_t off = (size_t)i * PIECE;
    size_t len = bytes - off < PIECE ? bytes - off : PIECE;
    if (send)
      MPI_CHECK(MPI_Isend((char *)buf + off, (int)len, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &r[i]));
    else
      MPI_CHECK(MPI_Irecv((char *)buf + off, (int)len, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &r[i]));
  }
  req->n = n;
  req->mpi_reqs = r;
  return SP_OK;
}

int comm_isend(const comm_world *w, const void *buf, size_t bytes, int peer, int tag,
               comm_req *req) {
  return post(w, (void *)buf, bytes, peer, tag, req, 1);
}

int comm_irecv(const comm_world *w, void *buf, size_t bytes, int peer, int tag, comm_req *req) {
  return post(w, buf, bytes, peer, tag, req, 0);
}

int comm_wait(const comm_world *w, comm_req *req, double timeout_s, const char *what,
              double *waited) {
  if (!req->mpi_reqs) return SP_OK;
  double t0 = comm_now();
  MPI_Request *r = req->mpi_reqs;
  for (;;) {
    int done = 0;
    MPI_CHECK(MPI_Testall(req->n, r, &done, MPI_STATUSES_IGNORE));
    if (done) break;
    double dt = comm_now() - t0;
    if (timeout_s > 0 && dt > timeout_s)
      sp_fatal("timeout: %s did not complete within %.0f s (a peer rank died or hangs)", what,
               timeout_s);
    /* Poll gently: a stage waits for whole blocks of compute. */
    struct timespec ts = {0, dt < 0.01 ? 20000 : 500000};
    nanosleep(&ts, NULL);
  }
  if (waited) *waited += comm_now() - t0;
  free(r);
  req->mpi_reqs = NULL;
  req->n = 0;
  return SP_OK;
}
