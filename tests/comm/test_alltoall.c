/* comm_alltoall and comm_alltoallv (comm/alltoall.h) on host buffers: alone
 * (one rank: the block to itself), and under mpirun -np 2, 3 and 4
 * (test_alltoall_mpi.sh). Every byte received is checked against a
 * formula of sender, receiver and position written here; the counts
 * differ per pair (0 bytes included) and a second call runs over a
 * subgroup in reversed order, so a block sent to the wrong member or at
 * the wrong offset is caught. */
#include <stdlib.h>
#include <string.h>

#include "alltoall.h"
#include "comm.h"
#include "log.h"
#include "sp_test.h"

/* Bytes rank i sends rank j, and its k-th byte. */
static size_t count_of(int i, int j) { return (size_t)(((i * 7 + j * 3) % 5) * 1000 + (i == j ? 0 : 1)); }
static uint8_t byte_of(int i, int j, size_t k) { return (uint8_t)(i * 31 + j * 17 + k * 13 + (k >> 8)); }

int main(int argc, char **argv) {
  comm_world w;
  comm_init(&argc, &argv, 0, 60.0, &w);
  sp_test_begin("comm alltoall");
  int n = w.size, me = w.rank;
  int *group = calloc((size_t)n, sizeof *group);
  size_t *c = calloc((size_t)n * 4, sizeof *c), *sc = c, *sd = c + n, *rc = c + 2 * n,
         *rd = c + 3 * n;
  size_t stot = 0, rtot = 0;
  for (int j = 0; j < n; j++) {
    group[j] = j;
    sc[j] = count_of(me, j);
    sd[j] = stot;
    stot += sc[j] + 3; /* gaps between blocks */
    rc[j] = count_of(j, me);
    rd[j] = rtot;
    rtot += rc[j] + 5;
  }
  uint8_t *send = malloc(stot + 1), *recv = malloc(rtot + 1);
  memset(send, 0xEE, stot + 1);
  memset(recv, 0xAA, rtot + 1);
  for (int j = 0; j < n; j++)
    for (size_t k = 0; k < sc[j]; k++) send[sd[j] + k] = byte_of(me, j, k);
  const comm_a2a x = {group, n, send, sc, sd, recv, rc, rd};
  comm_alltoallv(&w, &x, 7, 60.0);
  for (int j = 0; j < n; j++) {
    size_t bad = (size_t)-1;
    for (size_t k = 0; k < rc[j] && bad == (size_t)-1; k++)
      if (recv[rd[j] + k] != byte_of(j, me, k)) bad = k;
    CHECK(bad == (size_t)-1, "rank %d: byte %zu from rank %d wrong", me, bad, j);
    for (size_t k = rc[j]; k < rc[j] + 5 && rd[j] + k < rtot; k++)
      CHECK(recv[rd[j] + k] == 0xAA, "rank %d: gap after rank %d's block written", me, j);
  }

  /* Equal blocks over the even ranks in reversed order; odd ranks sit out. */
  if (me % 2 == 0) {
    int m = (n + 1) / 2, g[64];
    for (int j = 0; j < m; j++) g[j] = 2 * (m - 1 - j);
    const size_t blk = 4099;
    uint8_t *s2 = malloc((size_t)m * blk), *r2 = calloc((size_t)m * blk, 1);
    for (int j = 0; j < m; j++)
      for (size_t k = 0; k < blk; k++) s2[(size_t)j * blk + k] = byte_of(me, g[j], k);
    comm_alltoall(&w, g, m, s2, r2, blk, 9, 60.0);
    for (int j = 0; j < m; j++) {
      int ok = 1;
      for (size_t k = 0; k < blk && ok; k++) ok = r2[(size_t)j * blk + k] == byte_of(g[j], me, k);
      CHECK(ok, "rank %d: subgroup block of member %d (rank %d) wrong", me, j, g[j]);
    }
    free(s2);
    free(r2);
  }
  int status = sp_test_end();
  status = comm_agree(&w, status);
  free(send);
  free(recv);
  free(group);
  free(c);
  comm_finalize(&w);
  return status;
}
