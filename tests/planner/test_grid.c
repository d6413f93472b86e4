/* The R x S x U grid: --layout parsing (accepted forms and each refusal
 * quoting its token), the checks against a run, the rank numbering
 * against the formula written out here (u fastest, then s, then r) and the
 * replicas' shares of a step's micro-batches against an enumeration. */
#include <math.h>

#include "grid.h"
#include "plan_test.h"

static void bad_parse(const char *s) {
  plan_grid g = {7, 7, 7};
  int is_auto = -1;
  char err[256] = "";
  int rc = plan_grid_parse(s, &g, &is_auto, err, sizeof err);
  CHECK(rc == PLAN_EINVAL, "'%s' accepted", s);
  CHECK(strstr(err, s) != NULL, "'%s': message does not quote it: %s", s, err);
  CHECK(g.replicas == 7 && g.stages == 7 && g.seq == 7, "'%s': output written on failure", s);
}

static void bad_check(plan_grid g, int nranks, int64_t heads, int blocks, int micro,
                      const char *needle) {
  char err[256] = "";
  int rc = plan_grid_check(&g, nranks, heads, blocks, micro, err, sizeof err);
  CHECK(rc == PLAN_EINVAL, "%dx%dx%d on %d ranks accepted", g.replicas, g.stages, g.seq, nranks);
  CHECK(strstr(err, needle) != NULL, "message lacks '%s': %s", needle, err);
}

/* The smallest largest n_r / s_r over every split of K micro-batches into
 * R shares of at least one each: the reference the owners' shares must
 * reach, by enumeration. */
static double best_makespan(int K, int R, const double *s, int r, int *n) {
  if (r == R - 1) {
    n[r] = K;
    double m = 0.0;
    for (int i = 0; i < R; i++)
      if (n[i] / s[i] > m) m = n[i] / s[i];
    return n[r] >= 1 ? m : 1e300;
  }
  double best = 1e300;
  for (int x = 1; x <= K - (R - 1 - r); x++) {
    n[r] = x;
    double m = best_makespan(K - x, R, s, r + 1, n);
    if (m < best) best = m;
  }
  return best;
}

/* plan_grid_owners: k % R with equal speeds; with two CFG branches on two
 * replicas 1:1 whatever the speeds; 1:3 for 4 micro-batches at speeds 1
 * and 3; on random speeds every replica holds at least one and the shares
 * reach the enumerated best largest n_r / s_r. */
static void test_owners(void) {
  int owner[64];
  for (int R = 1; R <= 4; R++)
    for (int K = R; K <= 12; K++) {
      plan_grid g = {R, 1, 1};
      plan_grid_owners(&g, NULL, K, owner);
      for (int k = 0; k < K; k++)
        CHECK(owner[k] == k % R, "R %d K %d: owner[%d] %d", R, K, k, owner[k]);
    }
  plan_grid g2 = {2, 1, 1};
  const double fast_slow[2] = {1.0, 3.0};
  plan_grid_owners(&g2, fast_slow, 2, owner);
  CHECK(owner[0] == 0 && owner[1] == 1, "2 branches at 1:3 -> %d %d", owner[0], owner[1]);
  plan_grid_owners(&g2, fast_slow, 4, owner);
  int n1 = 0;
  for (int k = 0; k < 4; k++) n1 += owner[k] == 1;
  CHECK(n1 == 3, "4 micro-batches at 1:3: replica 1 holds %d", n1);
  for (int t = 0; t < 300; t++) {
    int R = sp_rand_int(1, 4), K = sp_rand_int(R, 10), n[8] = {0}, tmp[8];
    double s[8];
    for (int r = 0; r < R; r++) s[r] = 0.25 * sp_rand_int(1, 16);
    plan_grid g = {R, 1, 1};
    plan_grid_owners(&g, s, K, owner);
    double m = 0.0;
    for (int k = 0; k < K; k++) n[owner[k]]++;
    for (int r = 0; r < R; r++) {
      CHECK(n[r] >= 1, "R %d K %d: replica %d idle", R, K, r);
      if (n[r] / s[r] > m) m = n[r] / s[r];
    }
    double want = best_makespan(K, R, s, 0, tmp);
    CHECK(fabs(m - want) <= 1e-12 * want, "R %d K %d: largest n/s %g, best %g", R, K, m, want);
  }
}

int main(void) {
  sp_test_begin("planner grid");
  plan_grid g;
  int is_auto = 0;
  char err[256];
  CHECK(plan_grid_parse("auto", &g, &is_auto, err, sizeof err) == PLAN_OK && is_auto == 1,
        "auto refused");
  CHECK(plan_grid_parse("pipeline", &g, &is_auto, err, sizeof err) == PLAN_OK &&
            is_auto == PLAN_GRID_PIPELINE,
        "pipeline refused");
  CHECK(plan_grid_parse("2x1x4", &g, &is_auto, err, sizeof err) == PLAN_OK &&
            is_auto == PLAN_GRID_GIVEN &&
            g.replicas == 2 && g.stages == 1 && g.seq == 4,
        "2x1x4 parsed as %dx%dx%d", g.replicas, g.stages, g.seq);
  const char *bad[] = {"", "2", "pipelines", "Auto", "2x2", "2x2x", "x2x2", "2x2x2x2", "0x1x1", "1x-1x1", "1x1x65",
                       "2X2X2", "2x2x2 ", " 2x2x2", "1.5x1x1", "99999999999x1x1", "autox"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) bad_parse(bad[i]);

  plan_grid ok = {2, 2, 2};
  CHECK(plan_grid_check(&ok, 8, 40, 40, 2, err, sizeof err) == PLAN_OK, "2x2x2: %s", err);
  bad_check((plan_grid){2, 2, 2}, 4, 40, 40, 2, "must equal");
  bad_check((plan_grid){1, 1, 3}, 3, 40, 40, 2, "divide");
  bad_check((plan_grid){1, 5, 1}, 5, 40, 4, 2, "4 blocks");
  bad_check((plan_grid){2, 1, 1}, 2, 40, 40, 1, "nothing to run");

  /* Numbering: every rank of random grids has its own position, the
   * formula's, and maps back. */
  for (int t = 0; t < 200; t++) {
    plan_grid r = {sp_rand_int(1, 4), sp_rand_int(1, 4), sp_rand_int(1, 4)};
    int n = r.replicas * r.stages * r.seq, seen[64] = {0};
    for (int rank = 0; rank < n; rank++) {
      plan_grid_pos p = plan_grid_pos_of(&r, rank);
      int want = p.replica * r.stages * r.seq + p.stage * r.seq + p.seq;
      CHECK(p.replica < r.replicas && p.stage < r.stages && p.seq < r.seq && want == rank,
            "rank %d of %dx%dx%d at (%d,%d,%d)", rank, r.replicas, r.stages, r.seq, p.replica,
            p.stage, p.seq);
      CHECK(plan_grid_rank(&r, p) == rank, "rank %d does not map back", rank);
      seen[rank]++;
    }
    for (int rank = 0; rank < n; rank++) CHECK(seen[rank] == 1, "rank %d seen %d", rank, seen[rank]);
  }
  test_owners();
  char name[32];
  plan_grid_format(&ok, name, sizeof name);
  CHECK(strcmp(name, "2x2x2") == 0, "format gave %s", name);
  return sp_test_end();
}
