/* The process group: MPI bootstrap, the node-local rank and device choice,
 * the few collectives the run needs (agree on a status, broadcast, gather),
 * and point-to-point messages between pipeline stages.
 *
 * Started outside a launcher (no mpirun/srun environment), staticpipe runs
 * as one rank without initialising MPI at all: the same code path with
 * size 1, where no message is ever sent. */
#ifndef COMM_H
#define COMM_H

#include <stddef.h>
#include <stdint.h>

typedef struct comm_world {
  int rank, size;             /* in the job */
  int local_rank, local_size; /* on this node */
  int mpi;                    /* MPI was initialised */
  char host[64];
  char (*hosts)[64];          /* [size] every rank's host name */
  int slurm;                  /* started by srun */
} comm_world;

/* Initialises MPI when launched by mpirun/srun (or when force_mpi), fills w,
 * sets the log's rank and registers MPI_Abort as the fatal hook.
 * start_timeout_s > 0 (--timeout) arms the start-up guard before MPI_Init:
 * when this rank has not started the watchdog (comm_watchdog_start) within
 * that time, because MPI_Init or a collective after it never returns, the
 * process ends with one line naming the host and what it waited for (exit
 * 1 before MPI is up, MPI_Abort after). */
int comm_init(int *argc, char ***argv, int force_mpi, double start_timeout_s, comm_world *w);
/* Ends the start-up guard without starting the watchdog (a command that
 * stops before its job). comm_watchdog_start and comm_finalize call it. */
void comm_start_guard_disarm(void);
/* Stops the guard and the watchdog and finalises MPI (if it was initialised). */
void comm_finalize(comm_world *w);

/* Watchdog: a thread per rank sends heartbeats to every peer (own
 * communicator, MPI_THREAD_MULTIPLE) and ends the whole job (the abort
 * hooks: NCCL abort, then MPI_Abort) with one message naming the rank, host
 * and phase when a peer has been silent for timeout_s (dead, stopped,
 * wedged) or when every rank has waited for timeout_s with no progress
 * anywhere (deadlock). Work, however slow, never trips it. Every wait and
 * collective in comm/ is covered. No thread with one rank. */
int comm_watchdog_start(const comm_world *w, double timeout_s);
void comm_watchdog_stop(void);
double comm_watchdog_timeout(void); /* 0 when not started */
/* What this rank is doing, for the heartbeats and the watchdog's message
 * ("loading its weights", "sampling job 3"); also counts as progress. */
void comm_set_phase(const char *phase);

/* Ends a phase on every rank: each passes its status, all get the worst.
 * A rank that did not fail logs one line, "THEN: rank R (host H) failed
 * while WHAT: <rank R's own error line>", so every rank's log says the same
 * thing (then: "stopping", or "job failed" where the run goes on). */
int comm_phase_end(const comm_world *w, int status, const char *what, const char *then);

/* Every rank passes its status; all get the largest (0 ok, 1 runtime, 2
 * input): the way a failure on one rank ends every rank the same way. */
int comm_agree(const comm_world *w, int status);
/* The same, and *who = the lowest rank that passed the largest status. */
int comm_agree_who(const comm_world *w, int status, int *who);
int comm_bcast(const comm_world *w, void *buf, size_t bytes, int root);
/* Gathers bytes from every rank into out (size * bytes) on root. */
int comm_gather(const comm_world *w, const void *in, size_t bytes, void *out, int root);
void comm_barrier(const comm_world *w);
/* Gathers bytes from every rank of this node into out (local_size * bytes,
 * in the node communicator's order) on each of them. Collective over the
 * job: every rank calls it. */
int comm_node_allgather(const comm_world *w, const void *in, size_t bytes, void *out);

/* Non-blocking point-to-point on host memory, for messages of any size
 * (split into pieces of at most 1 GiB under MPI's int counts). */
typedef struct comm_req {
  int n;          /* pieces in flight */
  void *mpi_reqs; /* MPI_Request[n] */
} comm_req;

int comm_isend(const comm_world *w, const void *buf, size_t bytes, int peer, int tag,
               comm_req *req);
int comm_irecv(const comm_world *w, void *buf, size_t bytes, int peer, int tag, comm_req *req);
/* Waits for a request; fails (and ends the job) after timeout_s seconds
 * without completion. Adds the seconds waited to *waited when not NULL. */
int comm_wait(const comm_world *w, comm_req *req, double timeout_s, const char *what,
              double *waited);
/* A function comm_wait calls while it polls (one per process, NULL: none):
 * the host-staged transport posts the sends whose device-to-host copies
 * have finished, so a rank waiting on one peer keeps its other messages
 * moving. */
void comm_set_progress(void (*fn)(void *arg), void *arg);

double comm_now(void); /* monotonic seconds */

/* --log-dir: also writes this rank's log lines to DIR/rank-N.log (DIR is
 * created when missing; an existing file is appended to). SP_ERR_INPUT when
 * it cannot be opened (logged). */
int comm_log_open_dir(const comm_world *w, const char *dir);
void comm_log_close(void);

#endif
