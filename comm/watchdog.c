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
 * Blame is one verdict for the whole job: the rank that first finds a peer
 * silent names the peer silent the longest (comm_watchdog_culprit) and
 * sends that verdict to every peer; it and every rank the verdict reaches
 * wait a short settling time (VERDICT_GRACE_S) in which the verdict of the
 * lowest-numbered finder wins, then each prints that one culprit and, a
 * grace later (so the others' lines are out), ends the job. So two ranks
 * never blame each other, and every surviving rank's line names the same
 * rank.
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

enum { HB_BEAT = 1, HB_BYE = 2, HB_VERDICT = 3, HB_TAG = 7 };

/* The settling time of a verdict (a finder's; the ranks it reaches wait
 * half of it, so their lines are out before the finder ends the job), at
 * most a quarter of the timeout. */
#define VERDICT_GRACE_S 0.5

typedef struct hb_msg {
  int32_t kind;     /* HB_BEAT, HB_BYE or HB_VERDICT */
  int32_t waiting;  /* the sender is waiting on a message or a collective */
  int64_t progress; /* the sender's progress counter */
  char phase[48];   /* the sender's phase */
  /* HB_VERDICT: the rank the sender found silent, for how long, and that
   * rank's last phase as the sender heard it */
  int32_t culprit, pad;
  double silent_s;
  char culprit_phase[48];
} hb_msg;

/* The verdict this rank holds: the culprit, who found it (the lowest
 * finder heard of), and when this rank reports it. by < 0: none yet. */
typedef struct verdict {
  int culprit, by;
  double silent_s, report_at;
  char phase[48];
} verdict;

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
  verdict v;             /* the watchdog thread's own */
  _Atomic double linger_until; /* when a held verdict lets the job end; < 0: none */
  hb_msg *vout;          /* [size] the verdict in flight to each peer */
  MPI_Request *vsend;    /* [size] */
  double *silent;        /* [size] judge's: seconds since each peer's last message */
  unsigned char *gone;   /* [size] judge's: the peer said goodbye */
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

static double grace_s(void) {
  return VERDICT_GRACE_S < g.timeout / 4 ? VERDICT_GRACE_S : g.timeout / 4;
}

/* A verdict from rank by (this rank's own, or received): kept when it is
 * the first or comes from a lower-numbered finder than the one held. The
 * first one sets when this rank reports: a finder after the whole grace,
 * the others after half of it. */
static void verdict_hold(int by, int culprit, double silent_s, const char *phase, double now) {
  if (g.v.by >= 0 && by >= g.v.by) return;
  if (g.v.by < 0) {
    g.v.report_at = now + (by == g.w->rank ? 1.0 : 0.5) * grace_s();
    atomic_store(&g.linger_until, g.v.report_at + grace_s());
  }
  g.v.by = by;
  g.v.culprit = culprit;
  g.v.silent_s = silent_s;
  snprintf(g.v.phase, sizeof g.v.phase, "%s", phase);
}

static void verdict_take(int src, hb_msg *in, double now) {
  in->culprit_phase[sizeof in->culprit_phase - 1] = '\0';
  if (in->culprit >= 0 && in->culprit < g.w->size)
    verdict_hold(src, in->culprit, in->silent_s, in->culprit_phase, now);
}

/* This rank found p silent: holds the verdict and sends it to every peer
 * (p too: should it be alive, it learns why the job ends). */
static void verdict_send(int p, double silent_s, double now) {
  verdict_hold(g.w->rank, p, silent_s, g.peers[p].phase, now);
  for (int r = 0; r < g.w->size; r++) {
    if (r == g.w->rank) continue;
    hb_msg *m = &g.vout[r];
    *m = (hb_msg){.kind = HB_VERDICT, .culprit = p, .silent_s = silent_s};
    memcpy(m->culprit_phase, g.peers[p].phase, sizeof m->culprit_phase);
    MPI_Isend(m, (int)sizeof *m, MPI_BYTE, r, HB_TAG, g.comm, &g.vsend[r]);
  }
}

/* Prints the verdict held and ends the job. */
_Noreturn static void verdict_report(const char *mine) {
  const comm_world *w = g.w;
  const verdict *v = &g.v;
  char found[64] = "";
  if (v->by != w->rank) snprintf(found, sizeof found, " (as rank %d found)", v->by);
  if (v->culprit == w->rank)
    sp_fatal("watchdog: rank %d had no word from this rank for %.0f s (--timeout %.0f): this "
             "rank was stopped, starved or cut off; this rank was %s",
             v->by, v->silent_s, g.timeout, mine);
  sp_fatal("watchdog: no word from rank %d (host %s) for %.0f s (--timeout %.0f)%s, its last "
           "phase '%s': it died, was stopped or hangs; this rank was %s",
           v->culprit, w->hosts[v->culprit], v->silent_s, g.timeout, found, v->phase, mine);
}

/* An abort hook (sp_abort_hook_push): with a verdict held, the job ends
 * one grace after this rank reported it, so the lines of the ranks that
 * report after it (the finder reports last) are out before the launcher
 * ends them. */
static void verdict_linger(int code) {
  (void)code;
  /* Any thread may end the job: read the one value the watchdog thread
   * publishes for it, not its verdict. */
  const double until = atomic_load(&g.linger_until), now = comm_now();
  if (until < 0) return;
  if (until > now) sleep_s(until - now);
}

int comm_watchdog_culprit(int size, int me, const double *silent_s, const unsigned char *gone,
                          double timeout_s) {
  int culprit = -1, left = 0, silent = 0;
  for (int p = 0; p < size; p++) {
    if (p == me || gone[p]) continue;
    left++;
    if (!(silent_s[p] > timeout_s)) continue;
    silent++;
    if (culprit < 0 || silent_s[p] > silent_s[culprit]) culprit = p;
  }
  return left >= 2 && silent == left ? COMM_WATCHDOG_NOBODY : culprit;
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
      if (in->kind == HB_VERDICT) verdict_take(src, in, now);
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
  if (g.v.by >= 0) {
    if (now >= g.v.report_at) verdict_report(mine);
    return;
  }
  for (int p = 0; p < w->size; p++) {
    g.silent[p] = now - g.peers[p].heard;
    g.gone[p] = (unsigned char)g.peers[p].bye;
  }
  const int p = comm_watchdog_culprit(w->size, w->rank, g.silent, g.gone, g.timeout);
  if (p == COMM_WATCHDOG_NOBODY)
    sp_fatal("watchdog: no word from any of this rank's %d peers for more than %.0f s "
             "(--timeout): its own messages stalled, or every peer stopped; this rank was %s",
             w->size - 1, g.timeout, mine);
  if (p >= 0) {
    verdict_send(p, g.silent[p], now);
    return;
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

/* Frees what watchdog_start made for the thread (its communicator and the
 * per-peer arrays), once the thread is gone or never started. */
static void watchdog_release(void) {
  MPI_Comm_free(&g.comm);
  free(g.peers);
  free(g.vout);
  free(g.vsend);
  free(g.silent);
  free(g.gone);
  g.peers = NULL;
  g.vout = NULL;
  g.vsend = NULL;
  g.silent = NULL;
  g.gone = NULL;
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
  g.vout = sp_xcalloc((size_t)w->size, sizeof *g.vout);
  g.vsend = sp_xcalloc((size_t)w->size, sizeof *g.vsend);
  g.silent = sp_xcalloc((size_t)w->size, sizeof *g.silent);
  g.gone = sp_xcalloc((size_t)w->size, sizeof *g.gone);
  g.v = (verdict){.culprit = -1, .by = -1};
  atomic_store(&g.linger_until, -1.0);
  double now = comm_now();
  for (int p = 0; p < w->size; p++) {
    g.peers[p].heard = g.peers[p].changed = now;
    g.peers[p].send = MPI_REQUEST_NULL;
    g.vsend[p] = MPI_REQUEST_NULL;
    snprintf(g.peers[p].phase, sizeof g.peers[p].phase, "starting");
  }
  atomic_store(&g.stop, 0);
  if (pthread_create(&g.thread, NULL, watchdog_main, NULL) != 0) {
    sp_log_error("watchdog: cannot start its thread");
    watchdog_release();
    return SP_ERR_RUNTIME;
  }
  g.threaded = 1;
  static int hooked = 0;
  if (!hooked) sp_abort_hook_push(verdict_linger);
  hooked = 1;
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
    watchdog_release();
    g.threaded = 0;
  }
  g.running = 0;
}

double comm_watchdog_timeout(void) { return g.running ? g.timeout : 0; }
