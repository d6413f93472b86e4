/* Schedule, Euler, UniPC and CFG tests.
 *
 * Expected values come from the published facts (MODEL.md "Sampler":
 * the N=50 and N=6 timesteps and sigmas), from closed-form solutions of toy
 * flow-matching problems, and from an independent double-precision port of
 * the published FlowUniPCMultistepScheduler written here in its original
 * list-and-loop shape (general R matrix, torch.pow rows, Gaussian
 * elimination), unlike the library's closed-form coefficients. Inputs are
 * random from a printed seed (SP_SEED=n replays). */
#include <inttypes.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "sampler.h"

#include "sp_test.h"

/* ---- schedule ----------------------------------------------------------- */

static void test_schedule(void) {
  float sg[51];
  int64_t ts[50];
  CHECK(rank_schedule_make(50, 5.0, sg, ts) == SP_OK, "schedule 50");
  const int64_t want50[5] = {999, 995, 991, 987, 982};
  for (int i = 0; i < 5; i++) CHECK(ts[i] == want50[i], "N=50 t[%d] = %" PRId64, i, ts[i]);
  CHECK(sg[50] == 0.0f, "N=50 last sigma %g", (double)sg[50]);

  CHECK(rank_schedule_make(6, 5.0, sg, ts) == SP_OK, "schedule 6");
  const int64_t want6[6] = {999, 961, 908, 833, 713, 499};
  const double wants6[7] = {0.9998, 0.9613, 0.9088, 0.8331, 0.7140, 0.4997, 0.0};
  for (int i = 0; i < 6; i++) CHECK(ts[i] == want6[i], "N=6 t[%d] = %" PRId64, i, ts[i]);
  for (int i = 0; i < 7; i++)
    CHECK(fabs((double)sg[i] - wants6[i]) <= 5e-5, "N=6 sigma[%d] = %.6f", i, (double)sg[i]);
  /* sigma_0 = s*smax/(1+(s-1)*smax) with smax = float32(0.999), exactly. */
  const double smax = (double)(float)0.999;
  CHECK(sg[0] == (float)(5.0 * smax / (1.0 + 4.0 * smax)), "sigma_0 %.9g", (double)sg[0]);

  /* Shift 1 is the plain linspace: sigma_i = smax * (1 - i/N). */
  float s1[11];
  int64_t t1[10];
  CHECK(rank_schedule_make(10, 1.0, s1, t1) == SP_OK, "schedule shift 1");
  for (int i = 0; i < 10; i++)
    CHECK(fabsf(s1[i] - (float)(smax * (1.0 - i / 10.0))) <= 1e-7f, "shift1 sigma[%d]", i);
  CHECK(t1[0] == 999 && t1[5] == 499, "shift1 t0 %" PRId64 " t5 %" PRId64, t1[0], t1[5]);

  /* Bad inputs: rejected, outputs untouched. */
  float keep[3] = {7, 7, 7};
  int64_t keept[2] = {7, 7};
  CHECK(rank_schedule_make(0, 5.0, keep, keept) == SP_ERR_INPUT, "steps 0 accepted");
  CHECK(rank_schedule_make(2, 0.0, keep, keept) == SP_ERR_INPUT, "shift 0 accepted");
  CHECK(rank_schedule_make(2, NAN, keep, keept) == SP_ERR_INPUT, "shift nan accepted");
  CHECK(rank_schedule_make(2, -1.0, keep, keept) == SP_ERR_INPUT, "shift -1 accepted");
  CHECK(keep[0] == 7 && keept[0] == 7, "outputs written on error");
}

/* ---- independent UniPC reference ---------------------------------------- */

/* Solves A x = b (k x k, k <= 4) by Gaussian elimination, partial pivoting. */
static void solve(int k, double A[4][4], double *b, double *x) {
  for (int c = 0; c < k; c++) {
    int p = c;
    for (int r = c + 1; r < k; r++)
      if (fabs(A[r][c]) > fabs(A[p][c])) p = r;
    for (int j = 0; j < k; j++) {
      double t = A[c][j];
      A[c][j] = A[p][j];
      A[p][j] = t;
    }
    double t = b[c];
    b[c] = b[p];
    b[p] = t;
    for (int r = c + 1; r < k; r++) {
      double f = A[r][c] / A[c][c];
      for (int j = c; j < k; j++) A[r][j] -= f * A[c][j];
      b[r] -= f * b[c];
    }
  }
  for (int r = k - 1; r >= 0; r--) {
    double s = b[r];
    for (int j = r + 1; j < k; j++) s -= A[r][j] * x[j];
    x[r] = s / A[r][r];
  }
}

typedef struct {
  int order_cfg; /* solver_order = 2 */
  int N;
  size_t n;
  const double *sig; /* (N+1) */
  double *mo[2];     /* model_outputs list, [0] oldest, [1] newest */
  double *last;
  int has_last;
  int lower_order_nums, this_order, step_index;
} ref_unipc;

static double ref_lambda(double s) { return log(1.0 - s) - log(s); }

/* The published bh update for the predictor (is_c = 0) or corrector (1). */
static void ref_update(ref_unipc *r, int is_c, const double *model_t, const double *x,
                       int order, double *out) {
  const int si0 = is_c ? r->step_index - 1 : r->step_index;
  const int st = is_c ? r->step_index : r->step_index + 1;
  const double *m0 = r->mo[1];
  double sigma_t = r->sig[st], sigma_s0 = r->sig[si0];
  double alpha_t = 1.0 - sigma_t;
  double lambda_t = log(alpha_t) - log(sigma_t);
  double lambda_s0 = ref_lambda(sigma_s0);
  double h = lambda_t - lambda_s0;
  double rks[4];
  const double *mis[4];
  int nk = 0;
  for (int i = 1; i < order; i++) {
    int si = is_c ? r->step_index - (i + 1) : r->step_index - i;
    mis[nk] = r->mo[1 - i];
    rks[nk++] = (ref_lambda(r->sig[si]) - lambda_s0) / h;
  }
  rks[nk] = 1.0;
  double hh = -h, h_phi_1 = expm1(hh), h_phi_k = h_phi_1 / hh - 1.0;
  double fact = 1.0, B_h = expm1(hh);
  double R[4][4], b[4];
  for (int i = 1; i <= order; i++) {
    for (int j = 0; j < order; j++) R[i - 1][j] = pow(rks[j], i - 1);
    b[i - 1] = h_phi_k * fact / B_h;
    fact *= i + 1;
    h_phi_k = h_phi_k / hh - 1.0 / fact;
  }
  double rhos[4] = {0};
  if (!is_c) {
    if (order == 2) rhos[0] = 0.5;
    else if (order > 2) solve(order - 1, R, b, rhos);
  } else {
    if (order == 1) rhos[0] = 0.5;
    else solve(order, R, b, rhos);
  }
  for (size_t e = 0; e < r->n; e++) {
    double res = 0.0;
    for (int k = 0; k < nk; k++) res += rhos[k] * (mis[k][e] - m0[e]) / rks[k];
    if (is_c) res += rhos[nk] * (model_t[e] - m0[e]);
    double xt_ = sigma_t / sigma_s0 * x[e] - alpha_t * h_phi_1 * m0[e];
    out[e] = xt_ - alpha_t * B_h * res;
  }
}

static void ref_step(ref_unipc *r, const double *v, double *x) {
  const size_t n = r->n;
  double *conv = malloc(n * sizeof *conv);
  for (size_t e = 0; e < n; e++) conv[e] = x[e] - r->sig[r->step_index] * v[e];
  int use_c = r->step_index > 0 && r->has_last;
  if (use_c) ref_update(r, 1, conv, r->last, r->this_order, x);
  free(r->mo[0]);
  r->mo[0] = r->mo[1];
  r->mo[1] = conv;
  int this_order = r->order_cfg;
  if (r->N - r->step_index < this_order) this_order = r->N - r->step_index;
  r->this_order = this_order < r->lower_order_nums + 1 ? this_order : r->lower_order_nums + 1;
  memcpy(r->last, x, n * sizeof *x);
  r->has_last = 1;
  ref_update(r, 0, NULL, r->last, r->this_order, x);
  if (r->lower_order_nums < r->order_cfg) r->lower_order_nums++;
  r->step_index++;
}

/* A smooth nonlinear toy velocity field with per-element parameters. */
typedef struct {
  double a, b, d;
} toy_par;
static double toy_v(const toy_par *p, double x, double sigma) {
  return p->a * tanh(x) + p->b * (1.0 - sigma) + p->d * x;
}

static double rel_l2(const float *a, const double *b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    double d = (double)a[i] - b[i];
    num += d * d;
    den += b[i] * b[i];
  }
  return sqrt(num / den);
}

/* UniPC on the schedule sg (N+1 float32 sigmas) against the reference. */
static void unipc_vs_reference_on(int N, const float *sg, const char *what) {
  const size_t n = 4099;
  double *sigd = malloc((N + 1) * sizeof *sigd);
  for (int i = 0; i <= N; i++) sigd[i] = sg[i];
  toy_par *par = malloc(n * sizeof *par);
  float *x = malloc(n * sizeof *x), *v = malloc(n * sizeof *v);
  double *xr = malloc(n * sizeof *xr), *vr = malloc(n * sizeof *vr);
  for (size_t e = 0; e < n; e++) {
    par[e] = (toy_par){2 * sp_rand_unit() - 1, 2 * sp_rand_unit() - 1, 2 * sp_rand_unit() - 1};
    x[e] = (float)sp_rand_normal();
    xr[e] = x[e];
  }
  rank_sampler *s = NULL;
  CHECK(rank_sampler_create(RANK_SAMPLER_UNIPC, N, sg, n, &s) == SP_OK, "create");
  ref_unipc r = {.order_cfg = 2, .N = N, .n = n, .sig = sigd};
  r.last = malloc(n * sizeof *r.last);
  double worst = 0;
  for (int i = 0; i < N; i++) {
    for (size_t e = 0; e < n; e++) {
      v[e] = (float)toy_v(&par[e], x[e], sg[i]);
      vr[e] = toy_v(&par[e], xr[e], sigd[i]);
    }
    rank_sampler_step(s, i, v, x);
    ref_step(&r, vr, xr);
    double err = rel_l2(x, xr, n);
    if (err > worst) worst = err;
  }
  printf("unipc vs reference N=%d %s: worst rel L2 over steps %.3g\n", N, what, worst);
  CHECK(worst <= 1e-5, "unipc N=%d %s differs from the reference: %.3g", N, what, worst);
  rank_sampler_destroy(s);
  free(r.mo[0]);
  free(r.mo[1]);
  free(r.last);
  free(xr), free(vr), free(x), free(v), free(par), free(sigd);
}

static void test_unipc_vs_reference(int N, double shift) {
  float *sg = malloc((N + 1) * sizeof *sg);
  int64_t *ts = malloc(N * sizeof *ts);
  CHECK(rank_schedule_make(N, shift, sg, ts) == SP_OK, "schedule");
  char what[64];
  snprintf(what, sizeof what, "shift=%g", shift);
  unipc_vs_reference_on(N, sg, what);
  free(ts);
  free(sg);
}

/* ---- explicit schedules --------------------------------------------------- */

static void test_explicit_schedule(void) {
  float sg[5];
  int64_t ts[4];
  char err[256];
  /* Timesteps shifted by 5: u = t/1000, sigma = 5u / (1 + 4u): 1, 15/16,
   * 5/6, 5/8; the network's timestep is sigma * 1000 truncated. */
  const double t4[4] = {1000, 750, 500, 250};
  CHECK(rank_schedule_explicit(RANK_SCHEDULE_TIMESTEPS, 4, t4, 5.0, sg, ts, err, sizeof err) ==
            SP_OK, "timesteps 1000..250: %s", err);
  const double want4[4] = {1.0, 15.0 / 16.0, 5.0 / 6.0, 5.0 / 8.0};
  const int64_t want_t4[4] = {1000, 937, 833, 625};
  for (int i = 0; i < 4; i++) {
    CHECK(sg[i] == (float)want4[i], "shift 5 sigma[%d] = %.9g", i, (double)sg[i]);
    CHECK(ts[i] == want_t4[i], "shift 5 t[%d] = %" PRId64, i, ts[i]);
  }
  CHECK(sg[4] == 0.0f, "the schedule ends at 0");
  /* Shift 1: the given timesteps themselves, sigma = t / 1000. */
  const double t1[4] = {999, 500, 3, 1};
  CHECK(rank_schedule_explicit(RANK_SCHEDULE_TIMESTEPS, 4, t1, 1.0, sg, ts, err, sizeof err) ==
            SP_OK, "timesteps shift 1: %s", err);
  for (int i = 0; i < 4; i++) {
    CHECK(ts[i] == (int64_t)t1[i], "shift 1 t[%d] = %" PRId64, i, ts[i]);
    CHECK(sg[i] == (float)(t1[i] / 1000.0), "shift 1 sigma[%d]", i);
  }
  /* Sigmas are used as given, whatever the shift. */
  const double s3[3] = {0.9, 0.5, 0.1};
  CHECK(rank_schedule_explicit(RANK_SCHEDULE_SIGMAS, 3, s3, 7.0, sg, ts, err, sizeof err) ==
            SP_OK, "sigmas: %s", err);
  const int64_t want_t3[3] = {900, 500, 100};
  for (int i = 0; i < 3; i++)
    CHECK(sg[i] == (float)s3[i] && ts[i] == want_t3[i], "sigmas[%d] = %.9g t %" PRId64, i,
          (double)sg[i], ts[i]);
  CHECK(sg[3] == 0.0f, "sigmas end at 0");

  /* Bad lists: refused with a reason, outputs untouched. */
  static const struct {
    rank_schedule_kind kind;
    int n;
    double v[3];
    const char *why;
  } bad[] = {
      {RANK_SCHEDULE_TIMESTEPS, 3, {250, 500, 750}, "decreasing"},
      {RANK_SCHEDULE_TIMESTEPS, 2, {500, 500}, "decreasing"},
      {RANK_SCHEDULE_TIMESTEPS, 2, {1001, 500}, "out of range"},
      {RANK_SCHEDULE_TIMESTEPS, 2, {500, 0}, "out of range"},
      {RANK_SCHEDULE_TIMESTEPS, 2, {500.5, 100}, "out of range"},
      {RANK_SCHEDULE_SIGMAS, 2, {1.5, 0.5}, "out of range"},
      {RANK_SCHEDULE_SIGMAS, 2, {0.5, 0.0}, "out of range"},
      {RANK_SCHEDULE_SIGMAS, 2, {0.5, 0.49999999999}, "float32"},
      {RANK_SCHEDULE_SIGMAS, 0, {0.5}, "values"},
      {RANK_SCHEDULE_SHIFTED, 1, {0.5}, "explicit"},
  };
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    float keep[4] = {7, 7, 7, 7};
    int64_t keept[3] = {7, 7, 7};
    err[0] = 0;
    CHECK(rank_schedule_explicit(bad[k].kind, bad[k].n, bad[k].v, 5.0, keep, keept, err,
                                 sizeof err) == SP_ERR_INPUT, "bad list %zu accepted", k);
    CHECK(strstr(err, bad[k].why) != NULL, "bad list %zu: '%s' does not say %s", k, err,
          bad[k].why);
    CHECK(keep[0] == 7 && keep[3] == 7 && keept[0] == 7, "bad list %zu: outputs written", k);
  }
  double many[RANK_SCHEDULE_MAX_LIST + 1];
  for (int i = 0; i <= RANK_SCHEDULE_MAX_LIST; i++) many[i] = 1.0 - i / 1000.0;
  CHECK(rank_schedule_explicit(RANK_SCHEDULE_SIGMAS, RANK_SCHEDULE_MAX_LIST + 1, many, 1.0, sg, ts,
                               err, sizeof err) == SP_ERR_INPUT, "an over-long list accepted");

  /* UniPC against the reference on explicit schedules, one starting at
   * sigma 1 (lambda = -inf there: the first steps must stay finite). */
  CHECK(rank_schedule_explicit(RANK_SCHEDULE_TIMESTEPS, 4, t4, 5.0, sg, ts, err, sizeof err) ==
            SP_OK, "timesteps: %s", err);
  unipc_vs_reference_on(4, sg, "timesteps 1000,750,500,250 shift 5");
  const double s4[4] = {0.97, 0.8, 0.5, 0.2};
  CHECK(rank_schedule_explicit(RANK_SCHEDULE_SIGMAS, 4, s4, 1.0, sg, ts, err, sizeof err) ==
            SP_OK, "sigmas: %s", err);
  unipc_vs_reference_on(4, sg, "sigmas 0.97,0.8,0.5,0.2");
}

/* ---- closed-form toys ---------------------------------------------------- */

/* Data x0 ~ N(mu, tau^2) per element, x_s = (1-s) x0 + s n. The exact
 * velocity is E[n - x0 | x_s = x] = (s - (1-s) tau^2)/V (x - (1-s) mu) - mu
 * with V = (1-s)^2 tau^2 + s^2, and the probability-flow ODE keeps
 * z = (x - (1-s) mu) / sqrt(V) constant, so it ends at mu + tau z. Returns
 * the relative L2 error of the final latent. */
static double gauss_toy_error(rank_sampler_kind kind, int N, double shift, uint64_t prob) {
  const size_t n = 2048;
  float *sg = malloc((N + 1) * sizeof *sg);
  int64_t *ts = malloc(N * sizeof *ts);
  CHECK(rank_schedule_make(N, shift, sg, ts) == SP_OK, "schedule");
  double *mu = malloc(n * sizeof *mu), *tau = malloc(n * sizeof *tau), *z = malloc(n * sizeof *z);
  double *want = malloc(n * sizeof *want);
  float *x = malloc(n * sizeof *x), *v = malloc(n * sizeof *v);
  const uint64_t save = sp_rand_state_get();
  sp_rand_state_set(prob); /* the same random problem for every N, so errors compare */
  for (size_t e = 0; e < n; e++) {
    mu[e] = 2 * sp_rand_unit() - 1;
    tau[e] = 0.2 + 0.6 * sp_rand_unit();
    z[e] = sp_rand_normal();
    double s0 = sg[0];
    double V = (1 - s0) * (1 - s0) * tau[e] * tau[e] + s0 * s0;
    x[e] = (float)((1 - s0) * mu[e] + sqrt(V) * z[e]);
    want[e] = mu[e] + tau[e] * z[e];
  }
  sp_rand_state_set(save);
  rank_sampler *s = NULL;
  CHECK(rank_sampler_create(kind, N, sg, n, &s) == SP_OK, "create");
  for (int i = 0; i < N; i++) {
    double si = sg[i];
    for (size_t e = 0; e < n; e++) {
      double V = (1 - si) * (1 - si) * tau[e] * tau[e] + si * si;
      v[e] = (float)((si - (1 - si) * tau[e] * tau[e]) / V * ((double)x[e] - (1 - si) * mu[e]) -
                     mu[e]);
    }
    rank_sampler_step(s, i, v, x);
  }
  double err = rel_l2(x, want, n);
  rank_sampler_destroy(s);
  free(v), free(x), free(want), free(z), free(tau), free(mu), free(ts), free(sg);
  return err;
}

static void test_gauss_toy(void) {
  /* Shift 1 (uniform steps): the error is then dominated by the method's
   * order, not by the last (first-order) step into sigma = 0. */
  const uint64_t prob = (uint64_t)(sp_rand_unit() * 1e15);
  double e[4], u[4];
  const int Ns[4] = {10, 20, 40, 80};
  for (int k = 0; k < 4; k++) {
    e[k] = gauss_toy_error(RANK_SAMPLER_EULER, Ns[k], 1.0, prob);
    u[k] = gauss_toy_error(RANK_SAMPLER_UNIPC, Ns[k], 1.0, prob);
    printf("gauss toy N=%d: euler %.4g unipc %.4g\n", Ns[k], e[k], u[k]);
  }
  /* Euler is first order: doubling N halves the error. */
  for (int k = 0; k < 3; k++)
    CHECK(e[k] / e[k + 1] > 1.7 && e[k] / e[k + 1] < 2.3, "euler not first order: N=%d %.4g, "
          "N=%d %.4g", Ns[k], e[k], Ns[k + 1], e[k + 1]);
  /* UniPC is of higher order (about 2 with the first-order last step):
   * doubling N cuts the error by more than 2.8x, and 20 UniPC steps beat
   * 80 Euler steps. */
  for (int k = 1; k < 3; k++)
    CHECK(u[k] / u[k + 1] > 2.8, "unipc not higher order: N=%d %.4g, N=%d %.4g", Ns[k], u[k],
          Ns[k + 1], u[k + 1]);
  CHECK(u[1] < e[3], "unipc N=20 %.4g is not better than euler N=80 %.4g", u[1], e[3]);
}

/* Point-mass data x0 = c: v = (x - c)/sigma is exact, every x0 prediction is
 * c, and both samplers follow x_s = (1-s) c + s n exactly, ending at c. */
static void test_point_mass(rank_sampler_kind kind) {
  const int N = 7;
  const size_t n = 1000;
  float sg[8];
  int64_t ts[7];
  CHECK(rank_schedule_make(N, 3.0, sg, ts) == SP_OK, "schedule");
  float *x = malloc(n * sizeof *x), *v = malloc(n * sizeof *v);
  double *c = malloc(n * sizeof *c), *nz = malloc(n * sizeof *nz);
  for (size_t e = 0; e < n; e++) {
    c[e] = 2 * sp_rand_unit() - 1;
    nz[e] = sp_rand_normal();
    x[e] = (float)((1 - sg[0]) * c[e] + sg[0] * nz[e]);
  }
  rank_sampler *s = NULL;
  CHECK(rank_sampler_create(kind, N, sg, n, &s) == SP_OK, "create");
  for (int i = 0; i < N; i++) {
    for (size_t e = 0; e < n; e++) v[e] = (float)(((double)x[e] - c[e]) / sg[i]);
    rank_sampler_step(s, i, v, x);
    double worst = 0;
    for (size_t e = 0; e < n; e++) {
      double want = (1 - (double)sg[i + 1]) * c[e] + sg[i + 1] * nz[e];
      double d = fabs(x[e] - want);
      if (d > worst) worst = d;
    }
    CHECK(worst < 2e-5, "%s point mass step %d: max error %.3g", rank_sampler_kind_name(kind),
          i, worst);
  }
  rank_sampler_destroy(s);
  free(nz), free(c), free(v), free(x);
}

/* ---- determinism -------------------------------------------------------- */

static void run_toy(rank_sampler_kind kind, int N, const toy_par *par, const float *x0, float *x,
                    size_t n) {
  float *sg = malloc((N + 1) * sizeof *sg), *v = malloc(n * sizeof *v);
  int64_t *ts = malloc(N * sizeof *ts);
  CHECK(rank_schedule_make(N, 5.0, sg, ts) == SP_OK, "schedule");
  memcpy(x, x0, n * sizeof *x);
  rank_sampler *s = NULL;
  CHECK(rank_sampler_create(kind, N, sg, n, &s) == SP_OK, "create");
  for (int pass = 0; pass < 2; pass++) { /* the second pass checks reset */
    memcpy(x, x0, n * sizeof *x);
    rank_sampler_reset(s);
    for (int i = 0; i < N; i++) {
      for (size_t e = 0; e < n; e++) v[e] = (float)toy_v(&par[e], x[e], sg[i]);
      rank_sampler_step(s, i, v, x);
    }
  }
  rank_sampler_destroy(s);
  free(ts), free(v), free(sg);
}

static void test_determinism(void) {
  const size_t n = 300000; /* above the OpenMP threshold */
  toy_par *par = malloc(n * sizeof *par);
  float *x0 = malloc(n * sizeof *x0), *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
  for (size_t e = 0; e < n; e++) {
    par[e] = (toy_par){2 * sp_rand_unit() - 1, 2 * sp_rand_unit() - 1, 2 * sp_rand_unit() - 1};
    x0[e] = (float)sp_rand_normal();
  }
  for (int k = 0; k < 2; k++) {
    rank_sampler_kind kind = k ? RANK_SAMPLER_EULER : RANK_SAMPLER_UNIPC;
    omp_set_num_threads(1);
    run_toy(kind, 6, par, x0, a, n);
    omp_set_num_threads(4);
    run_toy(kind, 6, par, x0, b, n);
    CHECK(memcmp(a, b, n * sizeof *a) == 0, "%s: 1 and 4 threads differ",
          rank_sampler_kind_name(kind));
    run_toy(kind, 6, par, x0, b, n);
    CHECK(memcmp(a, b, n * sizeof *a) == 0, "%s: rerun differs", rank_sampler_kind_name(kind));
    /* A slice sampled alone equals the same slice of the whole. */
    const size_t off = 12345, m = 54321;
    float *c = malloc(m * sizeof *c);
    run_toy(kind, 6, par + off, x0 + off, c, m);
    CHECK(memcmp(a + off, c, m * sizeof *c) == 0, "%s: a slice differs from the whole",
          rank_sampler_kind_name(kind));
    free(c);
  }
  free(b), free(a), free(x0), free(par);
}

/* ---- CFG, kinds, bad input ---------------------------------------------- */

static void test_cfg_and_kinds(void) {
  const size_t n = 100003;
  float *vu = malloc(n * sizeof *vu), *vc = malloc(n * sizeof *vc), *v = malloc(n * sizeof *v);
  for (size_t e = 0; e < n; e++) {
    vu[e] = (float)sp_rand_normal();
    vc[e] = (float)sp_rand_normal();
  }
  const float g = 5.0f;
  rank_cfg_combine(vu, vc, g, v, n);
  size_t bad = 0;
  for (size_t e = 0; e < n; e++) {
    /* fp32 with every operation rounded: via volatile temporaries. */
    volatile float d = vc[e] - vu[e];
    volatile float gd = g * d;
    volatile float want = vu[e] + gd;
    if (v[e] != want) bad++;
    /* and close to the exact value */
    double exact = (double)vu[e] + 5.0 * ((double)vc[e] - (double)vu[e]);
    if (fabs(v[e] - exact) > 1e-5 * (1 + fabs(exact))) bad++;
  }
  CHECK(bad == 0, "cfg: %zu elements differ", bad);
  rank_cfg_combine(vu, vc, g, vu, n); /* in place over vu */
  CHECK(memcmp(vu, v, n * sizeof *v) == 0, "cfg in place differs");

  rank_sampler_kind k;
  CHECK(rank_sampler_kind_parse("unipc", &k) == SP_OK && k == RANK_SAMPLER_UNIPC, "unipc");
  CHECK(rank_sampler_kind_parse("euler", &k) == SP_OK && k == RANK_SAMPLER_EULER, "euler");
  CHECK(rank_sampler_kind_parse("dpm++", &k) == SP_ERR_INPUT, "dpm++ accepted");
  CHECK(strcmp(rank_sampler_kind_name(RANK_SAMPLER_EULER), "euler") == 0, "name");

  rank_sampler *s = NULL;
  float good[3] = {0.9f, 0.5f, 0.0f}, notend[3] = {0.9f, 0.5f, 0.1f}, up[3] = {0.5f, 0.9f, 0.0f};
  CHECK(rank_sampler_create(RANK_SAMPLER_UNIPC, 2, good, 0, &s) == SP_ERR_INPUT, "n=0");
  CHECK(rank_sampler_create(RANK_SAMPLER_UNIPC, 2, notend, 4, &s) == SP_ERR_INPUT, "end");
  CHECK(rank_sampler_create(RANK_SAMPLER_UNIPC, 2, up, 4, &s) == SP_ERR_INPUT, "increasing");
  CHECK(s == NULL, "output set on error");
  free(v), free(vc), free(vu);
}

/* "--print-schedule N SHIFT": prints "t sigma" lines for test_schedule.sh,
 * which compares them with the published numpy arithmetic. */
static int print_schedule(int N, double shift) {
  float *sg = malloc(((size_t)N + 1) * sizeof *sg);
  int64_t *ts = malloc((size_t)N * sizeof *ts);
  int rc = rank_schedule_make(N, shift, sg, ts);
  for (int i = 0; rc == SP_OK && i <= N; i++)
    printf("%" PRId64 " %.9g\n", i < N ? ts[i] : (int64_t)0, (double)sg[i]);
  free(ts);
  free(sg);
  return rc;
}

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "--print-schedule") == 0)
    return print_schedule(atoi(argv[2]), atof(argv[3]));
  sp_test_begin("test_sampler");
  sp_log_set_level(0); /* the bad-input cases log errors on purpose */

  test_schedule();
  test_explicit_schedule();
  test_unipc_vs_reference(6, 5.0);
  test_unipc_vs_reference(50, 5.0);
  test_unipc_vs_reference(1, 5.0);
  test_unipc_vs_reference(2, 5.0);
  test_unipc_vs_reference(3, 3.0);
  test_gauss_toy();
  test_point_mass(RANK_SAMPLER_EULER);
  test_point_mass(RANK_SAMPLER_UNIPC);
  test_determinism();
  test_cfg_and_kinds();

  return sp_test_end();
}
