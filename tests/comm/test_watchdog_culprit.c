/* The watchdog's blame (comm_internal.h: comm_watchdog_culprit): the peer
 * silent the longest beyond the timeout, never merely the lowest-numbered
 * silent one (a finder whose verdict is in flight, or a slow survivor, is
 * silent for less time than the stopped rank); no single peer when this
 * rank hears none of two or more; peers that said goodbye never. Tables of
 * cases, then random ones against a plain restatement of the rule. */
#include <stdio.h>

#include "comm_internal.h"
#include "sp_test.h"

typedef struct blame_case {
  const char *what;
  int size, me;
  double silent[6];
  unsigned char gone[6];
  int want;
} blame_case;

static const blame_case cases[] = {
    {"nobody silent", 4, 0, {0, 1, 2, 0.5}, {0}, -1},
    {"the stopped rank, not the lower-numbered survivor silent for less", 4, 3,
     {6, 9, 1, 0}, {0}, 1},
    {"the longest silence among three over the timeout", 5, 2, {5.5, 7, 0, 6, 0.2}, {0}, 1},
    {"ties: the lowest rank", 4, 0, {0, 8, 8, 1}, {0}, 1},
    {"silent exactly the timeout is not over it", 3, 0, {0, 5, 1}, {0}, -1},
    {"every peer silent: no single one", 4, 1, {6, 0, 7, 9}, {0}, COMM_WATCHDOG_NOBODY},
    {"one peer left: it is named", 2, 0, {0, 9}, {0}, 1},
    {"a peer that said goodbye is never named", 3, 0, {0, 9, 6}, {0, 1, 0}, 2},
    {"goodbyes leave one silent peer: named", 4, 3, {0, 9, 6, 0}, {1, 0, 1, 0}, 1},
    {"this rank's own entry is ignored", 3, 1, {0, 99, 0}, {0}, -1},
};

/* The rule, written out again: over-timeout peers by silence, lowest
 * rank first among equals; everyone of >= 2 remaining silent: nobody. */
static int restated(int size, int me, const double *s, const unsigned char *gone, double t) {
  int left = 0, over = 0, best = -1;
  for (int p = 0; p < size; p++)
    if (p != me && !gone[p]) {
      left++;
      if (s[p] > t) {
        over++;
        if (best < 0 || s[p] > s[best]) best = p;
      }
    }
  if (left >= 2 && over == left) return COMM_WATCHDOG_NOBODY;
  return best;
}

int main(void) {
  sp_test_begin("test_watchdog_culprit");
  const double timeout = 5;
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const blame_case *c = &cases[i];
    const int got = comm_watchdog_culprit(c->size, c->me, c->silent, c->gone, timeout);
    CHECK(got == c->want, "%s: blamed %d, want %d", c->what, got, c->want);
    printf("%-66s -> %d\n", c->what, got);
  }
  for (int k = 0; k < 2000; k++) {
    double s[16];
    unsigned char gone[16];
    const int size = (int)sp_rand_int(2, 16), me = (int)sp_rand_int(0, size - 1);
    for (int p = 0; p < size; p++) {
      s[p] = (double)sp_rand_int(0, 12) * 0.5; /* ties happen */
      gone[p] = sp_rand_int(0, 5) == 0;
    }
    const int got = comm_watchdog_culprit(size, me, s, gone, timeout);
    const int want = restated(size, me, s, gone, timeout);
    CHECK(got == want, "random case %d (%d ranks, me %d): blamed %d, want %d", k, size, me, got,
          want);
    CHECK(got < 0 || (got != me && !gone[got] && s[got] > timeout),
          "random case %d: blamed %d, which is me, gone or not silent", k, got);
  }
  return sp_test_end();
}
