/* MPI bootstrap, collectives and point-to-point messages (see comm.h). */
#include "comm.h"

#include <errno.h>
#include <mpi.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm_internal.h"
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
  /* MULTIPLE: the watchdog thread sends and receives heartbeats while the
   * main thread may be blocked in a collective (watchdog.c says why). */
  MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided));
  w->mpi = 1;
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &w->rank));
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &w->size));
  MPI_Comm local;
  MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, w->rank, MPI_INFO_NULL,
                                &local));
  MPI_CHECK(MPI_Comm_rank(local, &w->local_rank));
  MPI_CHECK(MPI_Comm_size(local, &w->local_size));
  MPI_Comm_free(&local);
  /* Under srun, Slurm's own numbering is the one the user's --gpus-per-task
   * and CUDA_VISIBLE_DEVICES binding follow: honour it, and say so when MPI
   * disagrees (a PMI mismatch would give two ranks one GPU). */
  const char *procid = getenv("SLURM_PROCID"), *localid = getenv("SLURM_LOCALID");
  if (getenv("SLURM_STEP_ID") && procid && localid) {
    w->slurm = 1;
    char *end = NULL;
    long pid = strtol(procid, &end, 10);
    if (*end == '\0' && pid != w->rank)
      sp_log_warn("SLURM_PROCID is %ld but the MPI rank is %d: check srun --mpi=pmix", pid,
                  w->rank);
    long lid = strtol(localid, &end, 10);
    if (*end == '\0' && lid >= 0 && lid < w->local_size) w->local_rank = (int)lid;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  w->hosts = sp_xcalloc((size_t)w->size, sizeof *w->hosts);
  MPI_CHECK(MPI_Allgather(w->host, 64, MPI_CHAR, w->hosts, 64, MPI_CHAR, MPI_COMM_WORLD));
  sp_log_set_rank(w->rank, w->size);
  sp_abort_hook_push(abort_job);
  return SP_OK;
}

void comm_finalize(comm_world *w) {
  comm_watchdog_stop();
  if (w->mpi) MPI_Finalize();
  w->mpi = 0;
  free(w->hosts);
  w->hosts = NULL;
}

int comm_agree(const comm_world *w, int status) {
  if (!w->mpi) return status;
  int out = status;
  comm_wait_begin();
  MPI_CHECK(MPI_Allreduce(&status, &out, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
  comm_wait_end();
  return out;
}

int comm_agree_who(const comm_world *w, int status, int *who) {
  *who = w->rank;
  if (!w->mpi) return status;
  struct {
    int value, rank;
  } in = {status, w->rank}, out;
  /* MAXLOC: the largest status, and among equals the lowest rank. */
  comm_wait_begin();
  MPI_CHECK(MPI_Allreduce(&in, &out, 1, MPI_2INT, MPI_MAXLOC, MPI_COMM_WORLD));
  comm_wait_end();
  *who = out.rank;
  return out.value;
}

int comm_bcast(const comm_world *w, void *buf, size_t bytes, int root) {
  if (!w->mpi) return SP_OK;
  comm_wait_begin();
  for (size_t off = 0; off < bytes; off += PIECE) {
    size_t n = bytes - off < PIECE ? bytes - off : PIECE;
    MPI_CHECK(MPI_Bcast((char *)buf + off, (int)n, MPI_BYTE, root, MPI_COMM_WORLD));
  }
  comm_wait_end();
  return SP_OK;
}

int comm_gather(const comm_world *w, const void *in, size_t bytes, void *out, int root) {
  if (!w->mpi) {
    memcpy(out, in, bytes);
    return SP_OK;
  }
  if (bytes > PIECE) sp_fatal("internal: gather of %zu bytes is too large", bytes);
  comm_wait_begin();
  MPI_CHECK(MPI_Gather(in, (int)bytes, MPI_BYTE, out, (int)bytes, MPI_BYTE, root,
                       MPI_COMM_WORLD));
  comm_wait_end();
  return SP_OK;
}

void comm_barrier(const comm_world *w) {
  if (!w->mpi) return;
  comm_wait_begin();
  MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
  comm_wait_end();
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

static void (*g_progress)(void *) = NULL;
static void *g_progress_arg = NULL;

void comm_set_progress(void (*fn)(void *arg), void *arg) {
  g_progress = fn;
  g_progress_arg = arg;
}

int comm_wait(const comm_world *w, comm_req *req, double timeout_s, const char *what,
              double *waited) {
  if (!req->mpi_reqs) return SP_OK;
  double t0 = comm_now();
  MPI_Request *r = req->mpi_reqs;
  /* With heartbeats the watchdog judges the wait: a slow peer that is still
   * working is fine however long it takes. */
  if (comm_watchdog_guards()) timeout_s = 0;
  comm_wait_begin();
  for (;;) {
    int done = 0;
    if (g_progress) g_progress(g_progress_arg);
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
  comm_wait_end();
  if (waited) *waited += comm_now() - t0;
  free(r);
  req->mpi_reqs = NULL;
  req->n = 0;
  return SP_OK;
}

int comm_phase_end(const comm_world *w, int status, const char *what, const char *then) {
  int who = 0;
  int all = comm_agree_who(w, status, &who);
  if (all == SP_OK) return SP_OK;
  /* The failed rank's own line travels to every rank: a user reading any
   * one rank's log (--log-dir) sees the cause, not just "rank 2 failed". */
  char msg[1024];
  memset(msg, 0, sizeof msg);
  if (w->rank == who) snprintf(msg, sizeof msg, "%s", sp_log_last_error());
  comm_bcast(w, msg, sizeof msg, who);
  msg[sizeof msg - 1] = '\0';
  if (w->rank != who)
    sp_log_error("%s: rank %d (host %s) failed while %s: %s", then, who, w->hosts[who], what,
                 msg[0] ? msg : "(no message)");
  return all;
}

static FILE *g_log_file = NULL;

int comm_log_open_dir(const comm_world *w, const char *dir) {
  if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
    sp_log_error("--log-dir %s: cannot create the directory: %s", dir, strerror(errno));
    return SP_ERR_INPUT;
  }
  char path[4200];
  int n = snprintf(path, sizeof path, "%s/rank-%d.log", dir, w->rank);
  if (n < 0 || (size_t)n >= sizeof path) {
    sp_log_error("--log-dir: path '%s' is too long", dir);
    return SP_ERR_INPUT;
  }
  FILE *f = fopen(path, "a");
  if (!f) {
    sp_log_error("--log-dir: cannot open %s: %s", path, strerror(errno));
    return SP_ERR_INPUT;
  }
  comm_log_close();
  g_log_file = f;
  sp_log_set_file(f);
  return SP_OK;
}

void comm_log_close(void) {
  if (!g_log_file) return;
  sp_log_set_file(NULL);
  fclose(g_log_file);
  g_log_file = NULL;
}
