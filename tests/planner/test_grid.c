/* The R x S x U grid: --layout parsing (accepted forms and each refusal
 * quoting its token), the checks against a run, and the rank numbering
 * against the formula written out here: u fastest, then s, then r. */
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
  char name[32];
  plan_grid_format(&ok, name, sizeof name);
  CHECK(strcmp(name, "2x2x2") == 0, "format gave %s", name);
  return sp_test_end();
}
