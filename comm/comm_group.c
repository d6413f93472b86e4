/* Groups of ranks and their all-to-all (see comm_group.h). */
#include "comm_group.h"

#include <string.h>

#include "log.h"

void comm_group_make(const comm_world *w, const int *ranks, int n, int tag, double timeout_s,
                     comm_group *out) {
  if (n < 1 || n > COMM_GROUP_MAX) sp_fatal("internal: a group of %d ranks (1..%d)", n,
                                            COMM_GROUP_MAX);
  comm_group g = {.w = w, .n = n, .me = -1, .tag = tag, .timeout_s = timeout_s};
  for (int i = 0; i < n; i++) {
    if (ranks[i] < 0 || ranks[i] >= w->size)
      sp_fatal("internal: group member %d is rank %d of %d", i, ranks[i], w->size);
    if (ranks[i] == w->rank) g.me = i;
    g.ranks[i] = ranks[i];
  }
  if (g.me < 0) sp_fatal("internal: rank %d is not in its group", w->rank);
  *out = g;
}

void comm_group_alltoallv(const comm_group *g, const void *send, const size_t *soff,
                          const size_t *sbytes, void *recv, const size_t *roff,
                          const size_t *rbytes, const char *what) {
  comm_req rq[COMM_GROUP_MAX], sq[COMM_GROUP_MAX];
  memset(rq, 0, sizeof rq);
  memset(sq, 0, sizeof sq);
  const char *src = send;
  char *dst = recv;
  for (int v = 0; v < g->n; v++) {
    if (v == g->me) continue;
    comm_irecv(g->w, dst + roff[v], rbytes[v], g->ranks[v], g->tag, &rq[v]);
    comm_isend(g->w, src + soff[v], sbytes[v], g->ranks[v], g->tag, &sq[v]);
  }
  const int me = g->me;
  if (sbytes[me] != rbytes[me])
    sp_fatal("internal: %s: %zu bytes to itself, %zu expected", what, sbytes[me], rbytes[me]);
  if (src + soff[me] != dst + roff[me]) memcpy(dst + roff[me], src + soff[me], sbytes[me]);
  for (int v = 0; v < g->n; v++) {
    if (v == me) continue;
    comm_wait(g->w, &rq[v], g->timeout_s, what, NULL);
    comm_wait(g->w, &sq[v], g->timeout_s, what, NULL);
  }
}
