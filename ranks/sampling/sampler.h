/* Flow-matching schedule, the two samplers (Euler, UniPC) and the CFG combine.
 *
 * Facts (MODEL.md "Sampler"; the published wan/utils/fm_solvers_unipc.py,
 * FlowUniPCMultistepScheduler constructed with shift=1 and set_timesteps(N,
 * shift=s)):
 *   sigma_max = (double)(float)0.999, the float32 training schedule's top;
 *   u_i = numpy.linspace(sigma_max, 0, N+1)[i] for i < N, in float64, which
 *         numpy evaluates as i * ((0 - sigma_max) / N) + sigma_max;
 *   sigma_i = s*u_i / (1 + (s-1)*u_i) in float64, sigma_N = 0;
 *   timestep t_i = int64(sigma_i * 1000) (truncation of the float64 value);
 *   the sigmas the solver uses are the float64 ones rounded to float32.
 *
 * The samplers are element-wise: a latent of n floats (any slice of the
 * whole latent, e.g. one rank's share) is advanced independently of every
 * other element, so the result does not depend on how the latent is split
 * or on the number of OpenMP threads. Coefficients are computed in double
 * from the float32 sigmas; each element's update is evaluated in double and
 * rounded to float once. Build without -ffast-math and without FP
 * contraction (the project's -std=c11 implies -ffp-contract=off on GCC). */
#ifndef RANK_SAMPLER_H
#define RANK_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

/* Upper bound on --steps; far above any useful value, it only keeps the
 * schedule arrays and the int arithmetic small. */
#define RANK_SCHEDULE_MAX_STEPS 100000

/* Fills sigmas (steps+1 floats, last = 0) and timesteps (steps int64) with the
 * published schedule for `steps` steps and shift `shift`. Returns SP_OK, or
 * SP_ERR_INPUT (logged, naming --steps / --shift) when steps is outside
 * [1, RANK_SCHEDULE_MAX_STEPS] or shift is not a finite number > 0; the
 * outputs are untouched on error. */
int rank_schedule_make(int steps, double shift, float *sigmas, int64_t *timesteps);

/* Explicit schedules (--timesteps, --sigmas; MODEL.md "Sampler"), for
 * distilled few-step models:
 *   RANK_SCHEDULE_TIMESTEPS: values are integer points t of the training
 *     schedule, 1..RANK_SCHEDULE_T_MAX, strictly decreasing; each is shifted
 *     like the default schedule, whose linspace it replaces:
 *     u = t / T_MAX, sigma = s u / (1 + (s - 1) u) in double;
 *   RANK_SCHEDULE_SIGMAS: values are the noise levels themselves, in (0, 1],
 *     strictly decreasing; the shift does not apply.
 * Then, as for the default schedule, the network's timestep is
 * int64(sigma * T_MAX) (truncated; with shift 1, --timesteps t gives t), the
 * samplers use the sigmas rounded to float32 (which must stay strictly
 * decreasing) and sigma_n = 0 ends the schedule.
 * values: (n) with 1 <= n <= RANK_SCHEDULE_MAX_LIST; sigmas: n+1 floats;
 * timesteps: n int64. Returns SP_OK, or SP_ERR_INPUT with the reason in err
 * (not logged: the caller names the flag or the --jobs line); the outputs
 * are untouched on error. */
#define RANK_SCHEDULE_T_MAX 1000
#define RANK_SCHEDULE_MAX_LIST 256
typedef enum {
  RANK_SCHEDULE_SHIFTED = 0,   /* rank_schedule_make: --steps and --shift */
  RANK_SCHEDULE_TIMESTEPS = 1, /* --timesteps LIST, shifted by --shift */
  RANK_SCHEDULE_SIGMAS = 2,    /* --sigmas LIST, used as given */
} rank_schedule_kind;
int rank_schedule_explicit(rank_schedule_kind kind, int n, const double *values, double shift,
                           float *sigmas, int64_t *timesteps, char *err, size_t errlen);

typedef enum {
  RANK_SAMPLER_UNIPC = 0, /* published default: UniPC order 2, bh2, x0 prediction */
  RANK_SAMPLER_EULER = 1, /* x <- x + (sigma_{i+1} - sigma_i) v */
} rank_sampler_kind;

/* "unipc" / "euler" -> kind. Returns SP_OK or SP_ERR_INPUT (logged, naming
 * --sampler and the accepted values). */
int rank_sampler_kind_parse(const char *name, rank_sampler_kind *out);
/* kind -> "unipc" / "euler" (the spelling --sampler accepts). */
const char *rank_sampler_kind_name(rank_sampler_kind kind);

typedef struct rank_sampler rank_sampler;

/* Creates a sampler for `steps` steps over a latent slice of n floats.
 * sigmas: steps+1 floats from rank_schedule_make (copied). UniPC allocates
 * its history once here: 4 buffers of n floats (two previous x0
 * predictions, the previous sample, this step's x0 prediction); Euler none.
 * Returns SP_OK and sets *out, or SP_ERR_INPUT (logged) for n == 0, a bad
 * step count or sigmas that are not a decreasing sequence in (0,1] ending
 * in 0. Host memory exhaustion is fatal (sp_xmalloc). */
int rank_sampler_create(rank_sampler_kind kind, int steps, const float *sigmas, size_t n,
                        rank_sampler **out);
void rank_sampler_destroy(rank_sampler *s);
/* Forgets the history so the same sampler can run the schedule again. */
void rank_sampler_reset(rank_sampler *s);

/* One step of the schedule: the model was evaluated at sigmas[i] (timestep
 * timesteps[i]) on x and gave velocity v (after CFG). Updates x in place to
 * the sample at sigmas[i+1]; after the last step (i = steps-1, sigma 0) x is
 * the final latent (UniPC: the x0 prediction x - sigma v). Steps must be
 * called in order 0, 1, ..., steps-1 (after create or reset); calling out of
 * order is a program bug and ends the job through sp_fatal.
 *   v: (n) float32 velocity; x: (n) float32 latent, in/out. */
void rank_sampler_step(rank_sampler *s, int i, const float *v, float *x);

/* Classifier-free guidance in float32 exactly as published:
 * v = vu + g * (vc - vu), each operation rounded to float.
 *   vu, vc, v: (n) float32; v may alias vu or vc. */
void rank_cfg_combine(const float *vu, const float *vc, float g, float *v, size_t n);

#endif
