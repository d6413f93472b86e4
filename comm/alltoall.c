/* All-to-all over a group of ranks on host buffers (alltoall.h). */
#include "alltoall.h"

#include <stdlib.h>
#include <string.h>

#include "log.h"

int comm_alltoallv(const comm_world *w, const comm_a2a *x, int tag, double timeout_s) {
  const int *group = x->group, n = x->n;
  const size_t *scount = x->scount, *sdispl = x->sdispl, *rcount = x->rcount, *rdispl = x->rdispl;
  const void *send = x->send;
  void *recv = x->recv;
  int me = -1;
  for (int j = 0; j < n; j++)
    if (group[j] == w->rank) me = j;
  if (me < 0) sp_fatal("internal: all-to-all over a group without rank %d", w->rank);
  if (rcount[me] != scount[me])
    sp_fatal("internal: all-to-all: rank %d sends itself %zu bytes but expects %zu", w->rank,
             scount[me], rcount[me]);
  memcpy((char *)recv + rdispl[me], (const char *)send + sdispl[me], scount[me]);
  for (int k = 1; k < n; k++) {
    int to = (me + k) % n, from = (me - k + n) % n;
    comm_req rq = {0}, sq = {0};
    comm_irecv(w, (char *)recv + rdispl[from], rcount[from], group[from], tag, &rq);
    comm_isend(w, (const char *)send + sdispl[to], scount[to], group[to], tag, &sq);
    comm_wait(w, &rq, timeout_s, "an all-to-all's receive", NULL);
    comm_wait(w, &sq, timeout_s, "an all-to-all's send", NULL);
  }
  return SP_OK;
}

int comm_alltoall(const comm_world *w, const int *group, int n, const void *send, void *recv,
                  size_t bytes, int tag, double timeout_s) {
  size_t *c = sp_xcalloc((size_t)n * 2, sizeof *c);
  for (int j = 0; j < n; j++) {
    c[j] = bytes;
    c[n + j] = (size_t)j * bytes;
  }
  const comm_a2a x = {group, n, send, c, c + n, recv, c, c + n};
  int rc = comm_alltoallv(w, &x, tag, timeout_s);
  free(c);
  return rc;
}
