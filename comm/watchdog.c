/* The watchdog (see comm.h, "Watchdog").
 *
 * One thread per rank, on its own duplicate of MPI_COMM_WORLD so its small
 * messages can never match the pipeline's. Every period it sends each peer a
 * heartbeat saying what this rank is doing (phase, waiting or working, a
 * progress counter) and drains the heartbeats that arrived. It ends the job
 * when
 *   - a peer has been silent for more than the timeout: dead, stopped
 *     (SIGSTOP stops its watchdog thread too) or wedged in the kernel; or
 *   - every rank, this one included, has been waiting on messages for more
 *     than the timeout with no progress anywhere: a deadlock.
 * A long load or a slow step keeps the heartbeats coming and some rank
 * working, so neither trips it.
 *
 * Threads: MPI_THREAD_MULTIPLE (Open MPI 4.1 has it), because the main
 * thread may sit in a blocking collective (MPI_Allreduce of a phase
 * agreement) exactly when the watchdog must keep talking; SERIALIZED would
 * need the main thread to release a lock around every blocking call, which
 * a blocking collective cannot do. Without MULTIPLE the watchdog runs no
 * thread and comm_wait's own per-wait timeout is the only guard. */
#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm.h"
#include "comm_internal.h"
#include "log.h"

enum { HB_BEAT = 1, HB_BYE = 2, HB_TAG = 7 };

typedef struct hb_msg {
  int32_t kind;     /* HB_BEAT or HB_BYE */
  int32_t waiting;  /* the sender is waiting on a message or a collective */
  int64_t progress; /* the sender's progress counter */
  char phase[48];   /* the sender's phase */
} hb_msg;

typedef struct hb_peer {
  double heard;       /* local time of the last message from it */
  double changed;     /* local time it last worked or made progress */
  int64_t progress;
  int waiting, bye;
  char phase[48];
  hb_msg out;         /* the message in flight to it */
  MPI_Request send;
} hb_peer;

static struct {
  int running, threaded;
  double timeout, period;
  const comm_world *w;
  MPI_Comm comm;
  pthread_t thread;
  hb_peer *peers; /* [size] */
  atomic_int stop;
  /* Main-thread state, read by the watchdog thread. */
  pthread_mutex_t lock;
  char phase[48];
  atomic_int waiting;
  atomic_llong progress;
  _Atomic double wait_since;
  double last_judged; /* when this thread last judged (its own liveness) */
} g = {.lock = PTHREAD_MUTEX_INITIALIZER, .phase = "starting"};

static void sleep_s(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  nanosleep(&ts, NULL);
}

void comm_set_phase(const char *phase) {
  pthread_mutex_lock(&g.lock);
  snprintf(g.phase, sizeof g.phase, "%s", phase);
  pthread_mutex_unlock(&g.lock);
  atomic_fetch_add(&g.progress, 1);
}

static void get_phase(char *out, size_t n) {
  pthread_mutex_lock(&g.lock);
  snprintf(out, n, "%s", g.phase);
  pthread_mutex_unlock(&g.lock);
}

void comm_wait_begin(void) {
  atomic_store(&g.wait_since, comm_now());
  atomic_store(&g.waiting, 1);
}

void comm_wait_end(void) {
  atomic_store(&g.waiting, 0);
  atomic_fetch_add(&g.progress, 1);
}

int comm_watchdog_guards(void) { return g.running && g.threaded; }

/* Sends msg to every peer whose previous message has gone. */
static void send_all(int kind) {
  const comm_world *w = g.w;
  char phase[48];
  get_phase(phase, sizeof phase);
  for (int p = 0; p < w->size; p++) {
    if (p == w->rank) continue;
    hb_peer *q = &g.peers[p];
    int done = 1;
    if (q->send != MPI_REQUEST_NULL) MPI_Test(&q->send, &done, MPI_STATUS_IGNORE);
    /* A stopped peer does not drain its queue; skip it rather than block. */
    if (!done) continue;
    q->out = (hb_msg){.kind = kind, .waiting = atomic_load(&g.waiting),
                      .progress = atomic_load(&g.progress)};
    memcpy(q->out.phase, phase, sizeof phase);
    MPI_Isend(&q->out, (int)sizeof q->out, MPI_BYTE, p, HB_TAG, g.comm, &q->send);
  }
}

static void drain(MPI_Request *recv, hb_msg *in) {
  for (;;) {
    int done = 0;
    MPI_Status stt;
    MPI_Test(recv, &done, &stt);
    if (!done) return;
    int src = stt.MPI_SOURCE;
    if (src >= 0 && src < g.w->size && src != g.w->rank) {
      hb_peer *q = &g.peers[src];
      double now = comm_now();
      q->heard = now;
      if (!in->waiting || in->progress != q->progress) q->changed = now;
      q->progress = in->progress;
      q->waiting = in->waiting;
      in->phase[sizeof in->phase - 1] = '\0';
      memcpy(q->phase, in->phase, sizeof q->phase);
      if (in->kind == HB_BYE) q->bye = 1;
    }
    MPI_Irecv(in, (int)sizeof *in, MPI_BYTE, MPI_ANY_SOURCE, HB_TAG, g.comm, recv);
  }
}

/* Ends the job when a peer went silent or everything waits. Blame is
 * decided one way only: a rank that was itself stopped or starved (its own
 * thread did not run for half a timeout) judges no peer on that gap, since
 * the silence it sees is its own; the ranks that kept running name it. */
static void judge(void) {
  const comm_world *w = g.w;
  double now = comm_now();
  char mine[48];
  get_phase(mine, sizeof mine);
  if (g.last_judged > 0 && now - g.last_judged > 0.5 * g.timeout) {
    sp_log_warn("watchdog: this rank did not run for %.0f s (stopped or starved); its peers "
                "are not judged on that gap",
                now - g.last_judged);
    for (int p = 0; p < w->size; p++) g.peers[p].heard = g.peers[p].changed = now;
    atomic_store(&g.wait_since, now);
  }
  g.last_judged = now;
  for (int p = 0; p < w->size; p++) {
    if (p == w->rank || g.peers[p].bye) continue;
    const hb_peer *q = &g.peers[p];
    if (now - q->heard > g.timeout)
      sp_fatal("watchdog: no word from rank %d (host %s) for %.0f s (--timeout %.0f), its last "
               "phase '%s': it died, was stopped or hangs; this rank was %s",
               p, w->hosts[p], now - q->heard, g.timeout, q->phase, mine);
  }
  if (!atomic_load(&g.waiting) || now - atomic_load(&g.wait_since) <= g.timeout) return;
  for (int p = 0; p < w->size; p++) {
    if (p == w->rank) continue;
    const hb_peer *q = &g.peers[p];
    if (q->bye || !q->waiting || now - q->changed <= g.timeout) return;
  }
  sp_fatal("watchdog: deadlock: every rank has waited on messages for more than %.0f s "
           "(--timeout) with no progress; this rank was %s",
           g.timeout, mine);
}

static void *watchdog_main(void *arg) {
  (void)arg;
  hb_msg in;
  MPI_Request recv;
  MPI_Irecv(&in, (int)sizeof in, MPI_BYTE, MPI_ANY_SOURCE, HB_TAG, g.comm, &recv);
  double next = 0;
  while (!atomic_load(&g.stop)) {
    drain(&recv, &in);
    if (comm_now() >= next) {
      send_all(HB_BEAT);
      next = comm_now() + g.period;
    }
    judge();
    sleep_s(0.05);
  }
  /* Goodbye: after it, a peer expects nothing more from this rank. Every
   * rank stops only at the end of the job, so each peer's goodbye arrives;
   * the silence check still guards the wait for it. Messages from one rank
   * arrive in order, so a peer's goodbye comes after all its heartbeats and
   * nothing is left unreceived at MPI_Finalize. */
  for (;;) {
    int pending = 0;
    for (int p = 0; p < g.w->size; p++) {
      if (p == g.w->rank) continue;
      int done = 1;
      if (g.peers[p].send != MPI_REQUEST_NULL)
        MPI_Test(&g.peers[p].send, &done, MPI_STATUS_IGNORE);
      pending += !done;
    }
    if (!pending) break;
    drain(&recv, &in);
    judge();
    sleep_s(0.01);
  }
  send_all(HB_BYE);
  for (;;) {
    drain(&recv, &in);
    int all = 1;
    for (int p = 0; p < g.w->size; p++) all &= p == g.w->rank || g.peers[p].bye;
    int sent = 1;
    for (int p = 0; p < g.w->size; p++) {
      if (p == g.w->rank || g.peers[p].send == MPI_REQUEST_NULL) continue;
      int done = 0;
      MPI_Test(&g.peers[p].send, &done, MPI_STATUS_IGNORE);
      sent &= done;
    }
    if (all && sent) break;
    judge();
    sleep_s(0.01);
  }
  MPI_Cancel(&recv);
  MPI_Wait(&recv, MPI_STATUS_IGNORE);
  return NULL;
}

static int watchdog_start(const comm_world *w, double timeout_s) {
  if (g.running) return SP_OK;
  g.w = w;
  g.timeout = timeout_s;
  /* Several heartbeats per timeout, so one late beat never trips it. */
  g.period = timeout_s / 8 < 2.0 ? timeout_s / 8 : 2.0;
  if (g.period < 0.1) g.period = 0.1;
  g.running = 1;
  if (!w->mpi || w->size == 1) return SP_OK; /* nobody to wait on */
  int provided = 0;
  MPI_Query_thread(&provided);
  if (provided < MPI_THREAD_MULTIPLE) {
    sp_log_warn("watchdog: this MPI gives no MPI_THREAD_MULTIPLE, so there are no heartbeats; "
                "a wait on a peer fails after --timeout %.0f s instead",
                timeout_s);
    return SP_OK;
  }
  if (MPI_Comm_dup(MPI_COMM_WORLD, &g.comm) != MPI_SUCCESS) {
    sp_log_error("watchdog: MPI_Comm_dup failed");
    return SP_ERR_RUNTIME;
  }
  g.peers = sp_xcalloc((size_t)w->size, sizeof *g.peers);
  double now = comm_now();
  for (int p = 0; p < w->size; p++) {
    g.peers[p].heard = g.peers[p].changed = now;
    g.peers[p].send = MPI_REQUEST_NULL;
    snprintf(g.peers[p].phase, sizeof g.peers[p].phase, "starting");
  }
  atomic_store(&g.stop, 0);
  if (pthread_create(&g.thread, NULL, watchdog_main, NULL) != 0) {
    sp_log_error("watchdog: cannot start its thread");
    MPI_Comm_free(&g.comm);
    free(g.peers);
    g.peers = NULL;
    return SP_ERR_RUNTIME;
  }
  g.threaded = 1;
  return SP_OK;
}

int comm_watchdog_start(const comm_world *w, double timeout_s) {
  int rc = watchdog_start(w, timeout_s);
  /* The watchdog guards this rank from here on (its MPI_Comm_dup, a
   * collective, was still under the start-up guard: comm.c). */
  comm_start_guard_disarm();
  return rc;
}

void comm_watchdog_stop(void) {
  if (!g.running) return;
  if (g.threaded) {
    atomic_store(&g.stop, 1);
    pthread_join(g.thread, NULL);
    MPI_Comm_free(&g.comm);
    free(g.peers);
    g.peers = NULL;
    g.threaded = 0;
  }
  g.running = 0;
}

double comm_watchdog_timeout(void) { return g.running ? g.timeout : 0; }
