/* Flow-matching schedule, Euler and UniPC samplers, CFG (see sampler.h).
 *
 * UniPC follows the published FlowUniPCMultistepScheduler with its defaults
 * (solver_order 2, bh2, predict_x0, lower_order_final, no disabled corrector
 * steps). With alpha = 1 - sigma, lambda = ln(alpha) - ln(sigma), at step i:
 *   1. m = x - sigma_i v                       (x0 prediction, float32)
 *   2. if i > 0: corrector UniC of order `this_order` (the predictor order of
 *      step i-1, hence the lag) refines x using the new m;
 *   3. the history shifts: m_{i-2} <- m_{i-1} <- m;
 *   4. this_order = min(2, N - i, lower_order_nums + 1): 1 on the first and
 *      the last step, else 2;
 *   5. last_sample <- x; predictor UniP of order this_order gives x_{i+1};
 *   6. lower_order_nums = min(lower_order_nums + 1, 2).
 * Every update is a linear combination of x (or last_sample) and the x0
 * history, so it is written once (combine()) with coefficients worked out in
 * double per step. */
#include "sampler.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

struct rank_sampler {
  rank_sampler_kind kind;
  int steps;
  size_t n;
  double *sigma; /* (steps+1) the float32 schedule widened to double */
  int next;      /* the step index the next call must have */
  /* UniPC state, as in the published scheduler. */
  int lower_order_nums;
  int this_order; /* order of the last predictor = order of the next corrector */
  float *m1;      /* (n) model_outputs[-1]: x0 prediction of the previous step */
  float *m2;      /* (n) model_outputs[-2]: x0 prediction two steps back */
  float *m_new;   /* (n) this step's x0 prediction */
  float *last;    /* (n) last_sample: the sample the previous predictor started from */
};

/* ---- schedule ----------------------------------------------------------- */

/* The shift of a point u of the training schedule, evaluated like the
 * published numpy expression shift * u / (1 + (shift - 1) * u), left to
 * right. */
static double shifted(double u, double shift) {
  double num = shift * u;
  double den = (shift - 1.0) * u;
  den = 1.0 + den;
  return num / den;
}

int rank_schedule_make(int steps, double shift, float *sigmas, int64_t *timesteps) {
  if (steps < 1 || steps > RANK_SCHEDULE_MAX_STEPS) {
    sp_log_error("--steps %d is out of range: the schedule needs 1 to %d steps", steps,
                 RANK_SCHEDULE_MAX_STEPS);
    return SP_ERR_INPUT;
  }
  if (!isfinite(shift) || !(shift > 0.0)) {
    sp_log_error("--shift %g is invalid: the schedule shift must be a finite number > 0",
                 shift);
    return SP_ERR_INPUT;
  }
  /* The published sigma_max is the float32 training schedule's first sigma,
   * 1 - 0.001 rounded to float32, read back as a Python float. */
  const double sigma_max = (double)(float)0.999;
  /* numpy.linspace(start, 0, N+1): step = (stop - start) / N, then
   * y_i = i * step + start (two roundings, no fused multiply-add). */
  const double step = (0.0 - sigma_max) / (double)steps;
  for (int i = 0; i < steps; i++) {
    double u = (double)i * step;
    u = u + sigma_max;
    const double sg = shifted(u, shift);
    /* torch .to(int64) truncates toward zero; sg > 0 here. */
    timesteps[i] = (int64_t)(sg * RANK_SCHEDULE_T_MAX);
    sigmas[i] = (float)sg;
  }
  sigmas[steps] = 0.0f;
  return SP_OK;
}

int rank_schedule_explicit(rank_schedule_kind kind, int n, const double *values, double shift,
                           float *sigmas, int64_t *timesteps, char *err, size_t errlen) {
  const int ts = kind == RANK_SCHEDULE_TIMESTEPS;
  if (kind != RANK_SCHEDULE_TIMESTEPS && kind != RANK_SCHEDULE_SIGMAS) {
    snprintf(err, errlen, "schedule kind %d is not an explicit list", (int)kind);
    return SP_ERR_INPUT;
  }
  if (n < 1 || n > RANK_SCHEDULE_MAX_LIST) {
    snprintf(err, errlen, "has %d values: an explicit schedule has 1 to %d", n,
             RANK_SCHEDULE_MAX_LIST);
    return SP_ERR_INPUT;
  }
  if (ts && (!isfinite(shift) || !(shift > 0.0))) {
    snprintf(err, errlen, "needs a finite shift > 0, not %g", shift);
    return SP_ERR_INPUT;
  }
  for (int i = 0; i < n; i++) {
    const double v = values[i];
    if (ts ? !(v >= 1.0 && v <= RANK_SCHEDULE_T_MAX && v == floor(v)) : !(v > 0.0 && v <= 1.0)) {
      if (ts)
        snprintf(err, errlen, "value %d (%.17g) is out of range: timesteps are integers 1..%d",
                 i + 1, v, RANK_SCHEDULE_T_MAX);
      else
        snprintf(err, errlen, "value %d (%.17g) is out of range: sigmas are in (0, 1]", i + 1, v);
      return SP_ERR_INPUT;
    }
    if (i > 0 && !(v < values[i - 1])) {
      snprintf(err, errlen, "is not strictly decreasing: value %d (%.17g) follows %.17g", i + 1, v,
               values[i - 1]);
      return SP_ERR_INPUT;
    }
  }
  float *sg32 = sp_xmalloc(((size_t)n + 1) * sizeof *sg32);
  int64_t *t64 = sp_xmalloc((size_t)n * sizeof *t64);
  for (int i = 0; i < n; i++) {
    const double sg = ts ? shifted(values[i] / RANK_SCHEDULE_T_MAX, shift) : values[i];
    t64[i] = (int64_t)(sg * RANK_SCHEDULE_T_MAX);
    sg32[i] = (float)sg;
    if (i > 0 && !(sg32[i] < sg32[i - 1])) {
      snprintf(err, errlen, "values %d and %d give the same float32 sigma %.9g: too close", i,
               i + 1, (double)sg32[i]);
      free(sg32);
      free(t64);
      return SP_ERR_INPUT;
    }
  }
  sg32[n] = 0.0f;
  memcpy(sigmas, sg32, ((size_t)n + 1) * sizeof *sg32);
  memcpy(timesteps, t64, (size_t)n * sizeof *t64);
  free(sg32);
  free(t64);
  return SP_OK;
}

/* ---- kinds -------------------------------------------------------------- */

int rank_sampler_kind_parse(const char *name, rank_sampler_kind *out) {
  if (name && strcmp(name, "unipc") == 0) {
    *out = RANK_SAMPLER_UNIPC;
    return SP_OK;
  }
  if (name && strcmp(name, "euler") == 0) {
    *out = RANK_SAMPLER_EULER;
    return SP_OK;
  }
  sp_log_error("--sampler '%s' is unknown: use unipc or euler", name ? name : "(null)");
  return SP_ERR_INPUT;
}

const char *rank_sampler_kind_name(rank_sampler_kind kind) {
  return kind == RANK_SAMPLER_EULER ? "euler" : "unipc";
}

/* ---- create / destroy --------------------------------------------------- */

int rank_sampler_create(rank_sampler_kind kind, int steps, const float *sigmas, size_t n,
                        rank_sampler **out) {
  if (kind != RANK_SAMPLER_UNIPC && kind != RANK_SAMPLER_EULER) {
    sp_log_error("sampler kind %d is unknown: use unipc or euler", (int)kind);
    return SP_ERR_INPUT;
  }
  if (steps < 1 || steps > RANK_SCHEDULE_MAX_STEPS) {
    sp_log_error("sampler: %d steps is out of range 1..%d", steps, RANK_SCHEDULE_MAX_STEPS);
    return SP_ERR_INPUT;
  }
  if (n == 0 || n > SIZE_MAX / sizeof(float) / 4) {
    sp_log_error("sampler: latent size %zu is empty or too large", n);
    return SP_ERR_INPUT;
  }
  /* UniPC takes log(sigma) and log(1 - sigma): every sigma but the last
   * must lie in (0, 1], strictly decreasing, and the last must be 0. */
  for (int i = 0; i < steps; i++) {
    if (!(sigmas[i] > 0.0f && sigmas[i] <= 1.0f && sigmas[i] > sigmas[i + 1])) {
      sp_log_error("sampler: sigma[%d] = %g is not in (0,1] or not above sigma[%d] = %g", i,
                   (double)sigmas[i], i + 1, (double)sigmas[i + 1]);
      return SP_ERR_INPUT;
    }
  }
  if (sigmas[steps] != 0.0f) {
    sp_log_error("sampler: the last sigma is %g, the schedule must end at 0",
                 (double)sigmas[steps]);
    return SP_ERR_INPUT;
  }
  rank_sampler *s = sp_xcalloc(1, sizeof *s);
  s->kind = kind;
  s->steps = steps;
  s->n = n;
  s->sigma = sp_xmalloc(((size_t)steps + 1) * sizeof(double));
  for (int i = 0; i <= steps; i++) s->sigma[i] = (double)sigmas[i];
  if (kind == RANK_SAMPLER_UNIPC) {
    s->m1 = sp_xmalloc(n * sizeof(float));
    s->m2 = sp_xmalloc(n * sizeof(float));
    s->m_new = sp_xmalloc(n * sizeof(float));
    s->last = sp_xmalloc(n * sizeof(float));
  }
  rank_sampler_reset(s);
  *out = s;
  return SP_OK;
}

void rank_sampler_reset(rank_sampler *s) {
  s->next = 0;
  s->lower_order_nums = 0;
  s->this_order = 0;
}

void rank_sampler_destroy(rank_sampler *s) {
  if (!s) return;
  free(s->last);
  free(s->m_new);
  free(s->m2);
  free(s->m1);
  free(s->sigma);
  free(s);
}

/* ---- element-wise kernels ----------------------------------------------- */

/* out = cx*xin + c0*m0 + ca*(ma - m0) + cb*(mb - m0), per element in double,
 * rounded to float once. ma / mb may be NULL (term absent). out may alias
 * xin. Elements are independent, so the static OpenMP split cannot change
 * any result. */
/* Flat list: the formula's four (coefficient, operand) terms, n and out; calls read as it. */
static void combine(size_t n, double cx, const float *xin, double c0, const float *m0,
                    double ca, const float *ma, double cb, const float *mb, float *out) {
  const int64_t nn = (int64_t)n;
#pragma omp parallel for schedule(static) if (nn > 65536)
  for (int64_t j = 0; j < nn; j++) {
    double base = (double)m0[j];
    double acc = cx * (double)xin[j];
    acc = acc + c0 * base;
    if (ma) acc = acc + ca * ((double)ma[j] - base);
    if (mb) acc = acc + cb * ((double)mb[j] - base);
    out[j] = (float)acc;
  }
}

/* m = x - sigma * v in float32, as the published convert_model_output does
 * (float32 tensors times a float32 sigma). */
static void x0_predict(size_t n, float sigma, const float *x, const float *v, float *m) {
  const int64_t nn = (int64_t)n;
#pragma omp parallel for schedule(static) if (nn > 65536)
  for (int64_t j = 0; j < nn; j++) {
    float sv = sigma * v[j];
    m[j] = x[j] - sv;
  }
}

/* ---- UniPC -------------------------------------------------------------- */

static double lambda_of(double sigma) { return log(1.0 - sigma) - log(sigma); }

/* The terms a UniPC predictor or corrector step from sigma_s0 to sigma_t
 * shares (B(h) variant, x0 prediction): the log-SNR step h, hh = -h,
 * h_phi_1 = expm1(hh), B(h) = expm1(hh) (bh2), and the coefficients of
 * the sample (cx) and of the newest x0 prediction (c0). */
typedef struct unipc_terms {
  double alpha_t, lambda_s0, h, hh, h_phi_1, b_h, cx, c0;
} unipc_terms;

static unipc_terms unipc_terms_of(double sig_t, double sig_s0) {
  unipc_terms u;
  u.alpha_t = 1.0 - sig_t;
  u.lambda_s0 = lambda_of(sig_s0);
  u.h = lambda_of(sig_t) - u.lambda_s0;
  u.hh = -u.h;
  u.h_phi_1 = expm1(u.hh);
  u.b_h = expm1(u.hh);
  u.cx = sig_t / sig_s0;
  u.c0 = -u.alpha_t * u.h_phi_1;
  return u;
}

/* Predictor UniP (B(h) variant, x0 prediction) from sigma[i] to sigma[i+1]
 * for order 1 or 2. m1 holds this step's x0 prediction (model_outputs[-1]),
 * m2 the previous one (model_outputs[-2], used for order 2). */
static void unipc_predict(rank_sampler *s, int i, int order, const float *x, float *out) {
  /* At sigma_t = 0: lambda_t = +inf, hh = -inf, expm1(-inf) = -1, so the
   * result is 0*x + 1*m0, the x0 prediction, as published. */
  const unipc_terms u = unipc_terms_of(s->sigma[i + 1], s->sigma[i]);
  if (order == 1) {
    combine(s->n, u.cx, x, u.c0, s->m1, 0.0, NULL, 0.0, NULL, out);
    return;
  }
  /* Order 2: rk = (lambda_{i-1} - lambda_i) / h, D1 = (m_{i-1} - m_i) / rk,
   * and the published simplified rhos_p = [0.5]. */
  const double rk = (lambda_of(s->sigma[i - 1]) - u.lambda_s0) / u.h;
  const double ca = -u.alpha_t * u.b_h * 0.5 / rk;
  combine(s->n, u.cx, x, u.c0, s->m1, ca, s->m2, 0.0, NULL, out);
}

/* Corrector UniC (B(h) variant) at step i: refines x_t (the sample at
 * sigma[i] that the predictor of step i-1 produced from last_sample) using
 * the new x0 prediction m_new. Runs before the history shifts, so m1 is
 * step i-1's prediction and m2 step i-2's. */
static void unipc_correct(rank_sampler *s, int i, int order, float *x) {
  const unipc_terms u = unipc_terms_of(s->sigma[i], s->sigma[i - 1]);
  if (order == 1) {
    /* The published simplified rhos_c = [0.5]; D1_t = m_new - m0. */
    const double ct = -u.alpha_t * u.b_h * 0.5;
    combine(s->n, u.cx, s->last, u.c0, s->m1, ct, s->m_new, 0.0, NULL, x);
    return;
  }
  /* Order 2: rks = [rk, 1], R = [[1, 1], [rk, 1]], b_k from the
   * h_phi_k recursion; rhos_c = R^-1 b. */
  const double rk = (lambda_of(s->sigma[i - 2]) - u.lambda_s0) / u.h;
  double h_phi_k = u.h_phi_1 / u.hh - 1.0;
  const double b1 = h_phi_k * 1.0 / u.b_h;
  h_phi_k = h_phi_k / u.hh - 1.0 / 2.0;
  const double b2 = h_phi_k * 2.0 / u.b_h;
  /* rho0 + rho1 = b1, rk*rho0 + rho1 = b2. */
  const double rho0 = (b1 - b2) / (1.0 - rk);
  const double rho1 = b1 - rho0;
  /* corr_res = rho0 * D1 with D1 = (m_{i-2} - m0) / rk. */
  const double ca = -u.alpha_t * u.b_h * rho0 / rk;
  const double ct = -u.alpha_t * u.b_h * rho1;
  combine(s->n, u.cx, s->last, u.c0, s->m1, ca, s->m2, ct, s->m_new, x);
}

static void unipc_step(rank_sampler *s, int i, const float *v, float *x) {
  x0_predict(s->n, (float)s->sigma[i], x, v, s->m_new);
  if (i > 0) unipc_correct(s, i, s->this_order, x);
  /* Shift the history by rotating buffers: m2 <- m1 <- m_new. */
  float *old_m2 = s->m2;
  s->m2 = s->m1;
  s->m1 = s->m_new;
  s->m_new = old_m2;
  int order = 2;                             /* solver_order */
  if (s->steps - i < order) order = s->steps - i; /* lower_order_final */
  if (s->lower_order_nums + 1 < order) order = s->lower_order_nums + 1; /* warm-up */
  s->this_order = order;
  memcpy(s->last, x, s->n * sizeof(float));
  unipc_predict(s, i, order, s->last, x);
  if (s->lower_order_nums < 2) s->lower_order_nums++;
}

/* ---- Euler -------------------------------------------------------------- */

static void euler_step(rank_sampler *s, int i, const float *v, float *x) {
  /* Both sigmas are float32 values, so their difference is exact in double. */
  const double dt = s->sigma[i + 1] - s->sigma[i];
  const int64_t nn = (int64_t)s->n;
#pragma omp parallel for schedule(static) if (nn > 65536)
  for (int64_t j = 0; j < nn; j++) {
    double d = dt * (double)v[j];
    x[j] = (float)((double)x[j] + d);
  }
}

void rank_sampler_step(rank_sampler *s, int i, const float *v, float *x) {
  if (i != s->next || i < 0 || i >= s->steps)
    sp_fatal("sampler: step %d called, expected step %d of %d (steps run in order)", i,
             s->next, s->steps);
  if (s->kind == RANK_SAMPLER_UNIPC)
    unipc_step(s, i, v, x);
  else
    euler_step(s, i, v, x);
  s->next = i + 1;
}

/* ---- CFG ---------------------------------------------------------------- */

void rank_cfg_combine(const float *vu, const float *vc, float g, float *v, size_t n) {
  const int64_t nn = (int64_t)n;
#pragma omp parallel for schedule(static) if (nn > 65536)
  for (int64_t j = 0; j < nn; j++) {
    /* Three float32 roundings, in the published order; separate statements
     * so no compiler fuses them into an FMA. */
    float d = vc[j] - vu[j];
    float gd = g * d;
    v[j] = vu[j] + gd;
  }
}
