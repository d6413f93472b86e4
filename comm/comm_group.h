/* A group of ranks that exchange data among themselves: the U
 * sequence-parallel ranks of one pipeline stage (DESIGN.md "Layouts").
 * Built from the world's point-to-point messages (comm_isend, comm_irecv,
 * comm_wait), so every wait is the watchdog's like any other, and nothing
 * new is created in MPI. */
#ifndef COMM_GROUP_H
#define COMM_GROUP_H

#include <stddef.h>

#include "comm.h"

#define COMM_GROUP_MAX 64

typedef struct comm_group {
  const comm_world *w;
  int n, me;                 /* members; this rank's index among them */
  int ranks[COMM_GROUP_MAX]; /* (n) the members' world ranks, in the group's order */
  int tag;                   /* the tag of the group's messages */
  double timeout_s;          /* a wait's bound when no watchdog runs (comm_wait) */
} comm_group;

/* The group of the n world ranks ranks[0..n) (distinct, this rank among
 * them), its messages tagged tag (no other message between two members may
 * use it). 1 <= n <= COMM_GROUP_MAX. Fatal on a broken call (internal). */
void comm_group_make(const comm_world *w, const int *ranks, int n, int tag, double timeout_s,
                     comm_group *out);

/* Collective over the group: every member sends sbytes[v] bytes from
 * send + soff[v] to member v and receives rbytes[v] bytes from member v at
 * recv + roff[v] (its own part is a copy, none when it is in place). The
 * receive ranges must not overlap each other or a send range of another
 * member. Blocks until all of it is done; what names the exchange in a
 * timeout's message. */
void comm_group_alltoallv(const comm_group *g, const void *send, const size_t *soff,
                          const size_t *sbytes, void *recv, const size_t *roff,
                          const size_t *rbytes, const char *what);

#endif
