/* GPU sharing from the GPUs' identities (comm/gpu_share.h), with the
 * device query replaced by identities the test chooses: the pure
 * resolution on tables and on random nodes, and, under mpirun -np N
 * (test_gpu_share_mpi.sh), the exchange on the node communicator and the
 * transport it leads to: every rank on a GPU of its own (what srun
 * --gpus-per-task=1 gives: each rank sees "one" GPU, a different one),
 * every rank on the same GPU, and two ranks per GPU. */
#include <stdio.h>
#include <string.h>

#include "comm.h"
#include "gpu_share.h"
#include "log.h"
#include "sp_test.h"
#include "transport.h"

typedef struct share_case {
  const char *what;
  int n;
  const char *ids[8];
  int me;
  int sharers, exclusive; /* expected */
} share_case;

static const share_case cases[] = {
    {.what = "four ranks, one GPU each", .n = 4, .ids = {"GPU-a", "GPU-b", "GPU-c", "GPU-d"},
     .me = 2, .sharers = 1, .exclusive = 1},
    {.what = "four ranks on one GPU", .n = 4, .ids = {"GPU-a", "GPU-a", "GPU-a", "GPU-a"},
     .me = 0, .sharers = 4, .exclusive = 0},
    {.what = "two and two", .n = 4, .ids = {"GPU-a", "GPU-a", "GPU-b", "GPU-b"}, .me = 3,
     .sharers = 2, .exclusive = 0},
    {.what = "three on one, one alone (the alone one)", .n = 4,
     .ids = {"GPU-a", "GPU-b", "GPU-a", "GPU-a"}, .me = 1, .sharers = 1, .exclusive = 0},
    {.what = "one rank", .n = 1, .ids = {"GPU-a"}, .me = 0, .sharers = 1, .exclusive = 1},
    {.what = "cpu ranks: no GPU", .n = 3, .ids = {"", "", ""}, .me = 1, .sharers = 0,
     .exclusive = 0},
    {.what = "one rank without a GPU", .n = 2, .ids = {"GPU-a", ""}, .me = 0, .sharers = 1,
     .exclusive = 0},
    {.what = "same prefix, different GPUs", .n = 2, .ids = {"GPU-ab", "GPU-a"}, .me = 1,
     .sharers = 1, .exclusive = 1},
};

static void check_tables(void) {
  char ids[8][COMM_GPU_ID_MAX];
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    const share_case *t = &cases[c];
    memset(ids, 0, sizeof ids);
    for (int i = 0; i < t->n; i++) snprintf(ids[i], sizeof ids[i], "%s", t->ids[i]);
    comm_gpu_share s;
    comm_gpu_share_resolve((const char (*)[COMM_GPU_ID_MAX])ids, t->n, ids[t->me], &s);
    CHECK(s.sharers == t->sharers, "%s: %d sharers, expected %d", t->what, s.sharers, t->sharers);
    CHECK(s.exclusive == t->exclusive, "%s: exclusive %d, expected %d", t->what, s.exclusive,
          t->exclusive);
    CHECK(strcmp(s.id, ids[t->me]) == 0, "%s: id '%s'", t->what, s.id);
  }
}

/* Random nodes: rank i on GPU gpu[i] (-1: none), named by random UUIDs;
 * the expectation counts GPU numbers, not strings. */
static void check_random(void) {
  for (int trial = 0; trial < 200; trial++) {
    const int n = (int)sp_rand_int(1, 16), ngpu = (int)sp_rand_int(1, 8);
    char names[8][COMM_GPU_ID_MAX], ids[16][COMM_GPU_ID_MAX];
    for (int g = 0; g < ngpu; g++)
      snprintf(names[g], sizeof names[g], "GPU-%08llx-%04llx",
               (unsigned long long)(sp_rand_u64() & 0xffffffffu),
               (unsigned long long)g);
    int gpu[16];
    for (int i = 0; i < n; i++) {
      gpu[i] = sp_rand_unit() < 0.1 ? -1 : (int)sp_rand_int(0, ngpu - 1);
      snprintf(ids[i], sizeof ids[i], "%s", gpu[i] < 0 ? "" : names[gpu[i]]);
    }
    int me = (int)sp_rand_int(0, n - 1), want_sharers = 0, want_exclusive = 1;
    for (int i = 0; i < n; i++) {
      if (gpu[me] >= 0 && gpu[i] == gpu[me]) want_sharers++;
      if (gpu[i] < 0) want_exclusive = 0;
      for (int j = 0; j < i; j++)
        if (gpu[i] >= 0 && gpu[j] == gpu[i]) want_exclusive = 0;
    }
    comm_gpu_share s;
    comm_gpu_share_resolve((const char (*)[COMM_GPU_ID_MAX])ids, n, ids[me], &s);
    CHECK(s.sharers == want_sharers && s.exclusive == want_exclusive,
          "random node %d (%d ranks, %d GPUs): sharers %d exclusive %d, expected %d %d", trial, n,
          ngpu, s.sharers, s.exclusive, want_sharers, want_exclusive);
  }
}

/* Under MPI: each scenario gives every rank a made-up identity, exchanges
 * them and checks what this rank learns, then what transport nccl would
 * meet (refused on rank 0 with the reason). */
static void check_node(const comm_world *w) {
  static const char *scenarios[] = {"own", "same", "pairs"};
  for (int k = 0; k < 3; k++) {
    char mine[COMM_GPU_ID_MAX];
    int want_sharers, want_exclusive;
    if (k == 0) {
      snprintf(mine, sizeof mine, "GPU-own-%d", w->local_rank);
      want_sharers = 1;
      want_exclusive = 1;
    } else if (k == 1) {
      snprintf(mine, sizeof mine, "GPU-same");
      want_sharers = w->local_size;
      want_exclusive = w->local_size == 1;
    } else {
      snprintf(mine, sizeof mine, "GPU-pair-%d", w->local_rank / 2);
      /* The last rank of an odd node is alone on its GPU. */
      want_sharers = w->local_rank / 2 * 2 + 1 < w->local_size ? 2 : 1;
      want_exclusive = w->local_size == 1;
    }
    comm_gpu_share s;
    CHECK(comm_gpu_share_gather(w, mine, &s) == SP_OK, "%s: gather", scenarios[k]);
    CHECK(strcmp(s.id, mine) == 0, "%s: id '%s', expected '%s'", scenarios[k], s.id, mine);
    CHECK(s.sharers == want_sharers, "%s: rank %d: %d sharers, expected %d", scenarios[k],
          w->rank, s.sharers, want_sharers);
    CHECK(s.exclusive == want_exclusive, "%s: rank %d: exclusive %d, expected %d", scenarios[k],
          w->rank, s.exclusive, want_exclusive);
    /* nccl with device buffers: refused on every rank; the reason (rank 0
     * logs it) is the sharing when there is any, else this build. */
    comm_transport_kind tk = COMM_TRANSPORT_AUTO;
    const int errors = sp_log_error_count();
    int rc = comm_transport_choose(w, COMM_TRANSPORT_NCCL, 1, &s, &tk);
#ifdef STATICPIPE_HAVE_CUDA
    CHECK((rc == SP_OK) == (want_exclusive == 1), "%s: nccl rc %d", scenarios[k], rc);
#else
    CHECK(rc == SP_ERR_INPUT, "%s: nccl in a build without NCCL: rc %d", scenarios[k], rc);
#endif
    if (rc != SP_OK && w->rank == 0) {
      const int shared = strstr(sp_log_last_error(), "share a GPU") != NULL;
      CHECK(sp_log_error_count() == errors + 1 && shared == !want_exclusive,
            "%s: the reason is '%s'", scenarios[k], sp_log_last_error());
    }
    /* auto never picks nccl where a GPU is shared. */
    rc = comm_transport_choose(w, COMM_TRANSPORT_AUTO, 1, &s, &tk);
    CHECK(rc == SP_OK && (want_exclusive || tk == COMM_TRANSPORT_MPI), "%s: auto gives %s",
          scenarios[k], comm_transport_name(tk));
  }
}

int main(int argc, char **argv) {
  comm_world w;
  comm_init(&argc, &argv, 0, 0, &w);
  sp_test_begin("gpu_share");
  check_tables();
  check_random();
  check_node(&w);
  if (w.mpi) printf("rank %d of %d, local %d of %d\n", w.rank, w.size, w.local_rank, w.local_size);
  int rc = sp_test_end();
  /* Every rank's verdict: one rank's failure fails the run. */
  rc = comm_agree(&w, rc);
  comm_finalize(&w);
  return rc;
}
