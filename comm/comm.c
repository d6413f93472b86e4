/* MPI bootstrap, collectives and point-to-point messages (see comm.h). */
#include "comm.h"

#include <errno.h>
#include <mpi.h>
#include <pthread.h>
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

/* This node's ranks (MPI_COMM_TYPE_SHARED), for comm_node_allgather. */
static MPI_Comm g_node = MPI_COMM_NULL;

/* The start-up guard. MPI_Init has no timeout of its own: a rank whose peer
 * never arrives (stopped, not started, its node wedged) waits inside it for
 * ever, and so would the collectives after it until the watchdog runs. A
 * thread armed before MPI_Init ends this process with one line when
 * start-up has not reached the watchdog within --timeout; the launcher
 * (mpirun; srun --kill-on-bad-exit) then ends the other ranks. Disarmed by
 * comm_watchdog_start and comm_finalize. */
static struct {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  pthread_t thread;
  int armed, done, mpi_up;
  double timeout_s;
} g_start = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void *start_guard_main(void *arg) {
  (void)arg;
  struct timespec until;
  clock_gettime(CLOCK_MONOTONIC, &until);
  until.tv_sec += (time_t)g_start.timeout_s;
  until.tv_nsec += (long)((g_start.timeout_s - (double)(time_t)g_start.timeout_s) * 1e9);
  if (until.tv_nsec >= 1000000000L) {
    until.tv_sec++;
    until.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&g_start.lock);
  int rc = 0;
  while (!g_start.done && rc != ETIMEDOUT)
    rc = pthread_cond_timedwait(&g_start.cond, &g_start.lock, &until);
  const int done = g_start.done, mpi_up = g_start.mpi_up;
  pthread_mutex_unlock(&g_start.lock);
  if (done) return NULL;
  if (mpi_up)
    sp_fatal("start-up: the ranks did not all reach the watchdog within %.0f s (--timeout): "
             "a peer rank stopped or hangs before its watchdog started",
             g_start.timeout_s);
  char host[64] = "";
  gethostname(host, sizeof host - 1);
  sp_log_error("start-up: MPI_Init did not return within %.0f s (--timeout) on host %s: a peer "
               "rank never started, is stopped, or the launcher cannot connect the ranks",
               g_start.timeout_s, host);
  _exit(SP_ERR_RUNTIME); /* MPI is not up: no MPI_Abort; the launcher ends the others */
}

static void start_guard_arm(double timeout_s) {
  if (!(timeout_s > 0)) return;
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&g_start.cond, &attr);
  pthread_condattr_destroy(&attr);
  g_start.timeout_s = timeout_s;
  g_start.done = g_start.mpi_up = 0;
  if (pthread_create(&g_start.thread, NULL, start_guard_main, NULL) != 0) {
    sp_log_warn("start-up: cannot start the start-up guard thread; MPI_Init runs unguarded");
    pthread_cond_destroy(&g_start.cond);
    return;
  }
  g_start.armed = 1;
}

static void start_guard_mpi_up(void) {
  pthread_mutex_lock(&g_start.lock);
  g_start.mpi_up = 1;
  pthread_mutex_unlock(&g_start.lock);
}

void comm_start_guard_disarm(void) {
  if (!g_start.armed) return;
  pthread_mutex_lock(&g_start.lock);
  g_start.done = 1;
  pthread_cond_signal(&g_start.cond);
  pthread_mutex_unlock(&g_start.lock);
  pthread_join(g_start.thread, NULL);
  pthread_cond_destroy(&g_start.cond);
  g_start.armed = 0;
}

/* The rank the launcher gave this process, for the log lines written
 * before MPI is up (0 when no launcher variable says). */
static int launcher_rank(void) {
  static const char *vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"};
  for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
    const char *v = getenv(vars[i]);
    char *end = NULL;
    long r = v ? strtol(v, &end, 10) : -1;
    if (v && *v && *end == '\0' && r >= 0 && r < (1L << 30)) return (int)r;
  }
  return 0;
}

static void abort_job(int code) {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (init && !fin) MPI_Abort(MPI_COMM_WORLD, code);
}

int comm_init(int *argc, char ***argv, int force_mpi, double start_timeout_s, comm_world *w) {
  memset(w, 0, sizeof *w);
  gethostname(w->host, sizeof w->host - 1);
  w->size = w->local_size = 1;
  if (!force_mpi && !launched_by_mpi()) {
    sp_log_set_rank(0, 1);
    w->hosts = sp_xcalloc(1, sizeof *w->hosts);
    memcpy(w->hosts[0], w->host, sizeof w->host);
    return SP_OK;
  }
  sp_log_set_rank(launcher_rank(), 1);
  start_guard_arm(start_timeout_s);
  int provided = 0;
  /* MULTIPLE: the watchdog thread sends and receives heartbeats while the
   * main thread may be blocked in a collective (watchdog.c says why). */
  MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided));
  w->mpi = 1;
  start_guard_mpi_up();
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &w->rank));
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &w->size));
  MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, w->rank, MPI_INFO_NULL,
                                &g_node));
  MPI_CHECK(MPI_Comm_rank(g_node, &w->local_rank));
  MPI_CHECK(MPI_Comm_size(g_node, &w->local_size));
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
  comm_start_guard_disarm();
  comm_watchdog_stop();
  if (g_node != MPI_COMM_NULL) MPI_Comm_free(&g_node);
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

int comm_node_allgather(const comm_world *w, const void *in, size_t bytes, void *out) {
  if (!w->mpi) {
    memcpy(out, in, bytes);
    return SP_OK;
  }
  if (bytes > PIECE) sp_fatal("internal: node allgather of %zu bytes is too large", bytes);
  comm_wait_begin();
  MPI_CHECK(MPI_Allgather(in, (int)bytes, MPI_BYTE, out, (int)bytes, MPI_BYTE, g_node));
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
  /* Every rank's file says whose it is, even when the rank logs nothing. */
  fprintf(f, "[rank %d] log of rank %d of %d on host %s (local rank %d)\n", w->rank, w->rank,
          w->size, w->host, w->local_rank);
  fflush(f);
  return SP_OK;
}

void comm_log_close(void) {
  if (!g_log_file) return;
  sp_log_set_file(NULL);
  fclose(g_log_file);
  g_log_file = NULL;
}
