/* Budget grammar: every accepted form with its meaning, random sizes
 * against integer arithmetic, and malformed strings each refused with a
 * message that quotes the bad token. */
#include <math.h>

#include "plan_test.h"

static void expect_ok(const char *s, int nranks, plan_budget *b) {
  char err[512] = "";
  int rc = plan_budget_parse(s, nranks, b, err, sizeof err);
  CHECK(rc == PLAN_OK, "'%s' refused: %s", s ? s : "(null)", err);
}

typedef struct bad_case {
  const char *s;
  int nranks;
  const char *needle1; /* quoted bad token */
  const char *needle2; /* what is wrong or allowed */
} bad_case;

static const bad_case bad[] = {
    {"", 2, "empty", "allowed"},
    {"   ", 2, "empty", "cuda:K"},
    {"cuda:0,2gb;;cpu,*", 2, "'cuda:0,2gb;;cpu,*'", "empty entry"},
    {"cuda:0,2gb;", 2, "'cuda:0,2gb;'", "empty entry"},
    {";cuda:0,2gb", 2, "';cuda:0,2gb'", "empty entry"},
    {"gpu:0,2gb", 2, "'gpu:0'", "unknown"},
    {"cuda:2,2gb", 2, "'cuda:2'", "past the last rank"},
    {"cuda:0,2gb;cuda:0,3gb", 2, "'cuda:0'", "twice"},
    {"cpu,1gb;cpu,*", 2, "'cpu,*'", "twice"},
    {"cuda:0,-2gb", 2, "'-2gb'", "negative"},
    {"cuda:0,abcgb", 2, "'abcgb'", "not a number"},
    {"cuda:0,nan", 2, "'nan'", "not a number"},
    {"cuda:0,99999999999999999999gb", 2, "'99999999999999999999gb'", "overflows"},
    {"cuda:0,20000000000tb", 2, "'20000000000tb'", "overflows"},
    {"cuda:0,2xb", 2, "'xb'", "unknown unit"},
    {"cuda:0,1e3gb", 2, "'e3gb'", "unknown unit"},
    {"cuda:0,24", 2, "'24'", "no unit"},
    {"cuda:0,0gb", 2, "'0gb'", "zero"},
    {"cuda:0,60%;cuda:1,50%;cpu,*", 2, "'cuda:0,60%;cuda:1,50%;cpu,*'", "over 100%"},
    {"cuda:0,150%", 2, "'150%'", "over 100%"},
    {"cuda:0,1.5;cpu,*", 2, "'1.5'", "(0, 1]"},
    {"cuda:0,0;cpu,*", 2, "'0'", "no unit"},
    {"cuda:0,0.5;cuda:1,40%", 2, "'cuda:1,40%'", "mixes"},
    {"cuda:0,40%;cuda:1,60%;cpu,*", 2, "'cpu,*'", "no share"},
    {"cuda:0,5gb**", 2, "'5gb*'", "unknown unit"},
    {"cuda:0,2gb;cpu", 2, "'cpu'", "no ',VALUE'"},
    {"cuda:0,40%;cuda:1,2gb", 2, "'cuda:1,2gb'", "mixes"},
    {"cuda:0,40%;cpu,*", 2, "cuda:1", "every rank"},
    {"cuda:0,100%;cuda:1,*", 2, "'cuda:1,*'", "no share"},
    {"1.5", 2, "'1.5'", "(0, 1]"},
    {"0", 2, "'0'", "(0, 1]"},
    {"-0.5", 2, "'-0.5'", "negative"},
    {"abc", 2, "'abc'", "allowed"},
    {"cuda:x,2gb", 2, "'x'", "bad index"},
    {"cuda:,2gb", 2, "'cuda:'", "no index"},
    {"cuda:0,2gb,3gb", 2, "'cuda:0,2gb,3gb'", "more than one ','"},
    {"cuda:0,", 2, "'cuda:0,'", "empty value"},
    {"cuda:0,2.5.1gb", 2, "'.1gb'", "unknown unit"},
};

static void test_bad(void) {
  int n = (int)(sizeof bad / sizeof bad[0]);
  CHECK(n >= 15, "only %d malformed cases", n);
  for (int i = 0; i < n; i++) {
    plan_budget b;
    memset(&b, 0x5a, sizeof b);
    plan_budget before = b;
    char err[512] = "";
    int rc = plan_budget_parse(bad[i].s, bad[i].nranks, &b, err, sizeof err);
    CHECK(rc == PLAN_EINVAL, "'%s' accepted (rc %d)", bad[i].s, rc);
    CHECK(strstr(err, bad[i].needle1) != NULL, "'%s': message lacks [%s]: %s", bad[i].s,
          bad[i].needle1, err);
    CHECK(strstr(err, bad[i].needle2) != NULL, "'%s': message lacks [%s]: %s", bad[i].s,
          bad[i].needle2, err);
    CHECK(memcmp(&b, &before, sizeof b) == 0, "'%s': output written on failure", bad[i].s);
    /* a tiny buffer is truncated, never overrun */
    char tiny[8];
    memset(tiny, 'x', sizeof tiny);
    plan_budget_parse(bad[i].s, bad[i].nranks, &b, tiny, 5);
    CHECK(tiny[4] == '\0' && tiny[5] == 'x', "'%s': small error buffer overrun", bad[i].s);
  }
  printf("  %d malformed budget strings refused with their messages\n", n);
}

static void test_good(void) {
  plan_budget b;
  const uint64_t G = 1ull << 30;
  expect_ok(NULL, 2, &b);
  CHECK(b.mode == PLAN_BUDGET_AUTO && !b.allow_stream, "NULL is not auto");
  expect_ok("auto", 3, &b);
  CHECK(b.mode == PLAN_BUDGET_AUTO && b.nranks == 3, "auto");
  expect_ok("AUTO", 1, &b);
  CHECK(b.mode == PLAN_BUDGET_AUTO, "AUTO");

  expect_ok("0.8", 2, &b);
  CHECK(b.mode == PLAN_BUDGET_FRACTION && fabs(b.fraction - 0.8) < 1e-12, "0.8 -> %g", b.fraction);
  expect_ok("1", 2, &b);
  CHECK(b.mode == PLAN_BUDGET_FRACTION && b.fraction == 1.0, "1");
  expect_ok(" .5 ", 2, &b);
  CHECK(b.mode == PLAN_BUDGET_FRACTION && b.fraction == 0.5, ".5");

  expect_ok("cuda:0,2.5gb;cuda:1,3g;cpu,*", 2, &b);
  CHECK(b.mode == PLAN_BUDGET_BYTES && b.bytes[0] == 5 * G / 2 && b.bytes[1] == 3 * G &&
            b.allow_stream && b.cpu_bytes == 0,
        "bytes form: %llu %llu", (unsigned long long)b.bytes[0], (unsigned long long)b.bytes[1]);
  expect_ok("cuda:0,500mb;cuda:1,3.0g;cpu,*", 3, &b);
  CHECK(b.bytes[0] == 500ull << 20 && b.bytes[1] == 3 * G && b.bytes[2] == 0 && b.named[1] &&
            !b.named[2],
        "unnamed rank gets auto (0)");
  expect_ok(" cuda:1 , 1024MB ; CPU , * ", 2, &b);
  CHECK(b.bytes[1] == G && b.bytes[0] == 0 && b.allow_stream, "blanks and case");
  expect_ok("cuda:0,20gb;cpu,64gb", 2, &b);
  CHECK(b.bytes[0] == 20 * G && b.cpu_bytes == 64 * G && b.allow_stream, "cpu cap");
  expect_ok("cpu,*", 2, &b);
  CHECK(b.mode == PLAN_BUDGET_BYTES && b.allow_stream && b.bytes[0] == 0 && b.bytes[1] == 0,
        "cpu,* alone");
  expect_ok("cuda:0,100b;cuda:1,1k;cuda:2,1KB;cuda:3,1.5M;cuda:4,2T;cuda:5,0.5kb", 6, &b);
  CHECK(b.bytes[0] == 100 && b.bytes[1] == 1024 && b.bytes[2] == 1024 &&
            b.bytes[3] == 1572864 && b.bytes[4] == 2ull << 40 && b.bytes[5] == 512,
        "units");
  expect_ok("cuda:0,007gb", 1, &b);
  CHECK(b.bytes[0] == 7 * G, "leading zeros");

  expect_ok("cuda:0,40%;cuda:1,60%", 2, &b);
  CHECK(b.mode == PLAN_BUDGET_RATIO && fabs(b.share[0] - 0.4) < 1e-12 &&
            fabs(b.share[1] - 0.6) < 1e-12 && !b.allow_stream && b.cpu_share == 0,
        "ratio");
  expect_ok("cuda:0,25%;cpu,*", 1, &b);
  CHECK(b.mode == PLAN_BUDGET_RATIO && b.allow_stream && fabs(b.cpu_share - 0.75) < 1e-12,
        "cpu,* takes the rest: %g", b.cpu_share);
  expect_ok("cuda:0,40%;cuda:1,*", 2, &b);
  CHECK(fabs(b.share[1] - 0.6) < 1e-12 && !b.allow_stream, "cuda:1,* takes the rest");
  expect_ok("cuda:0,10%;cuda:1,10%;cpu,80%", 2, &b);
  CHECK(fabs(b.cpu_share - 0.8) < 1e-12 && b.allow_stream, "cpu share");
  expect_ok("cuda:0,12.5%;cuda:1,87.5%", 2, &b);
  CHECK(fabs(b.share[0] - 0.125) < 1e-12, "decimal share");
}

/* Every example of ComfyUI-MultiGPU's expert allocation strings (its
 * README's bytes, ratio and fraction modes), with the meaning here. */
static void test_multigpu_forms(void) {
  plan_budget b;
  const uint64_t G = 1ull << 30;
  expect_ok("cuda:0,2.5gb;cpu,*", 1, &b);
  CHECK(b.mode == PLAN_BUDGET_BYTES && b.bytes[0] == 5 * G / 2 && b.allow_stream &&
            b.cpu_bytes == 0,
        "cuda:0,2.5gb;cpu,*");
  expect_ok("cuda:0,500mb;cuda:1,3.0g;cpu,5gb*", 2, &b);
  CHECK(b.mode == PLAN_BUDGET_BYTES && b.bytes[0] == 500ull << 20 && b.bytes[1] == 3 * G &&
            b.allow_stream && b.cpu_bytes == 5 * G,
        "SIZE* on cpu: %llu", (unsigned long long)b.cpu_bytes);
  expect_ok("cuda:0,5gb*", 2, &b);
  CHECK(b.mode == PLAN_BUDGET_BYTES && b.bytes[0] == 5 * G && !b.allow_stream, "SIZE* on a GPU");
  expect_ok("cuda:0,25%;cpu,75%", 1, &b);
  CHECK(b.mode == PLAN_BUDGET_RATIO && fabs(b.share[0] - 0.25) < 1e-12 &&
            fabs(b.cpu_share - 0.75) < 1e-12 && b.allow_stream,
        "25%%;75%%");
  expect_ok("cuda:0,8%;cuda:1,8%;cpu,4%", 2, &b);
  CHECK(b.mode == PLAN_BUDGET_RATIO && fabs(b.share[0] - 0.4) < 1e-12 &&
            fabs(b.share[1] - 0.4) < 1e-12 && fabs(b.cpu_share - 0.2) < 1e-12,
        "8:8:4 normalised: %g %g %g", b.share[0], b.share[1], b.cpu_share);
  expect_ok("cuda:0,60%;cuda:1,90%", 2, &b);
  CHECK(fabs(b.share[0] - 0.4) < 1e-12 && fabs(b.share[1] - 0.6) < 1e-12 && !b.allow_stream,
        "60:90 normalised: %g %g", b.share[0], b.share[1]);
  expect_ok("cuda:0,0.1;cpu,0.5", 1, &b);
  CHECK(b.mode == PLAN_BUDGET_BYTES && b.frac[0] == 0.1 && b.bytes[0] == 0 &&
            b.cpu_frac == 0.5 && b.allow_stream && b.cpu_bytes == 0,
        "fractions per device: %g %g", b.frac[0], b.cpu_frac);
  expect_ok("cuda:0,0.0207;cuda:1,0.1273;cpu,0.0808", 2, &b);
  CHECK(b.frac[0] == 0.0207 && b.frac[1] == 0.1273 && b.cpu_frac == 0.0808, "small fractions");
  expect_ok("cuda:0,0.2", 2, &b);
  CHECK(b.mode == PLAN_BUDGET_BYTES && b.frac[0] == 0.2 && !b.allow_stream && b.frac[1] == 0,
        "a bare fraction for one GPU");
  expect_ok("cuda:0,0.5;cuda:1,12gb;cpu,*", 2, &b);
  CHECK(b.frac[0] == 0.5 && b.bytes[1] == 12 * G, "fractions and sizes mixed");
  /* several `*` */
  expect_ok("cuda:0,*;cuda:1,*;cpu,*", 2, &b);
  CHECK(b.mode == PLAN_BUDGET_BYTES && b.bytes[0] == 0 && b.bytes[1] == 0 && b.allow_stream,
        "several * in bytes mode: every GPU auto");
  expect_ok("cpu,*;cuda:0,2gb", 2, &b);
  CHECK(b.bytes[0] == 2 * G && b.allow_stream, "* before other entries");
  expect_ok("cuda:0,20%;cuda:1,*;cpu,*", 2, &b);
  CHECK(fabs(b.share[1] - 0.4) < 1e-12 && fabs(b.cpu_share - 0.4) < 1e-12,
        "two * share the rest: %g %g", b.share[1], b.cpu_share);
}

/* Random sizes: "N.DD<unit>" must equal round((100 N + DD) 2^shift / 100). */
static void test_random_sizes(void) {
  static const char *const names[] = {"b", "k", "kb", "m", "mb", "g", "gb", "t", "tb",
                                      "B", "K", "KB", "M", "MB", "G", "GB", "T", "TB", "Gb", "mB"};
  static const int shifts[] = {0, 10, 10, 20, 20, 30, 30, 40, 40, 0, 10, 10, 20, 20, 30, 30, 40, 40, 30, 20};
  for (int it = 0; it < 2000; it++) {
    int u = (int)sp_rand_int(0, 19);
    uint64_t n = (uint64_t)sp_rand_int(0, 1 << 14), d = (uint64_t)sp_rand_int(0, 99);
    int dec = (int)sp_rand_int(0, 1);
    char s[64];
    uint64_t want;
    if (dec) {
      snprintf(s, sizeof s, "%" PRIu64 ".%02" PRIu64 "%s", n, d, names[u]);
      uint64_t num = (n * 100 + d) << shifts[u]; /* < 2^14 * 100 * 2^40 < 2^61 */
      want = num / 100 + ((num % 100) * 2 >= 100 ? 1 : 0);
    } else {
      snprintf(s, sizeof s, "%" PRIu64 "%s", n, names[u]);
      want = n << shifts[u];
    }
    uint64_t got = 0;
    char err[256] = "";
    int rc = plan_parse_bytes(s, &got, err, sizeof err);
    if (want == 0) {
      CHECK(rc == PLAN_EINVAL && strstr(err, "zero"), "'%s' is zero but accepted", s);
    } else {
      CHECK(rc == PLAN_OK && got == want, "'%s' -> %" PRIu64 ", want %" PRIu64 " (%s)", s, got,
            want, err);
    }
  }
  /* the largest sizes still fit: 16777215tb */
  uint64_t got;
  char err[256];
  CHECK(plan_parse_bytes("16777215tb", &got, err, sizeof err) == PLAN_OK &&
            got == 16777215ull << 40,
        "16777215tb");
  CHECK(plan_parse_bytes("16777216tb", &got, err, sizeof err) == PLAN_EINVAL, "2^64 accepted");
}

/* Random well-formed byte budgets round-trip through the parser. */
static void test_random_budgets(void) {
  for (int it = 0; it < 500; it++) {
    int nranks = (int)sp_rand_int(1, 8);
    char s[1024] = "";
    size_t len = 0;
    uint64_t want[8] = {0};
    int named = 0;
    for (int r = 0; r < nranks; r++) {
      if (sp_rand_u64() % 3 == 0) continue;
      uint64_t mb = (uint64_t)sp_rand_int(1, 100000);
      want[r] = mb << 20;
      len += (size_t)snprintf(s + len, sizeof s - len, "%scuda:%d,%" PRIu64 "mb", named ? ";" : "",
                              r, mb);
      named++;
    }
    int cpu = (int)(sp_rand_u64() % 2) || !named;
    if (cpu) snprintf(s + len, sizeof s - len, "%scpu,*", named ? ";" : "");
    plan_budget b;
    expect_ok(s, nranks, &b);
    for (int r = 0; r < nranks; r++)
      CHECK(b.bytes[r] == want[r], "'%s' rank %d: %llu", s, r, (unsigned long long)b.bytes[r]);
    CHECK(b.allow_stream == cpu, "'%s' stream flag", s);
  }
}

int main(void) {
  sp_test_begin("test_budget");
  test_good();
  test_multigpu_forms();
  test_bad();
  test_random_sizes();
  test_random_budgets();
  return sp_test_end();
}
