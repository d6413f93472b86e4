/* staticpipe bench's results: what one configuration's runs measured (a
 * row), and the files made from all the rows. Internal to launch/:
 * cmd_bench.c fills the rows and runs the children, bench_report.c writes
 * bench.json, bench.csv, bench-env.csv and bench.md, bench_plot.c the plot
 * and its data, each with the environment (bench_env.h). */
#ifndef SP_BENCH_REPORT_H
#define SP_BENCH_REPORT_H

#include "bench_env.h"
#include "bench_topo.h"

#define BENCH_MAX_HOPS 63 /* links between the ranks of a run (ranks 1..64) */

/* What one run of a configuration measured (rank 0 sees every step). */
typedef struct bench_meas {
  double step_ms;     /* every step */
  double steady_ms;   /* without each loop's first step */
  double video_s;     /* the sampling loop's wall time: one clip at --steps steps */
  double steps_per_s; /* steps / video_s */
  double act_gbs;     /* the slowest hop's probed activation rate, GB/s; 0: one rank */
  double load_s;      /* slowest rank's load */
  double load_gbs;    /* GB loaded by all ranks / load_s */
} bench_meas;

/* One configuration of the sweep: what run was given, and what its runs
 * (--repeat of them) measured. */
typedef struct bench_row {
  const char *model;     /* --model given to run */
  const char *format;    /* its stored format (root dtype: bf16, fp8, int8, quant, ...) */
  const char *precision; /* --precision given to run, NULL when not passed */
  int ranks;
  const char *devices;   /* --devices given to run, NULL when not passed */
  const char *budget, *frames, *size;
  int nframes, height, width; /* frames and size as numbers */
  const char *frac_arg;  /* --stream-frac given to run, NULL when not passed */
  double frac;           /* its value */
  const char *order_arg; /* --order given to run, NULL when not passed */
  int base;              /* the row alike but at --stream-frac 0, or -1 */
  int on_gpus;           /* the GPUs the ranks take are known (there are GPUs) */
  int hops;              /* links between the ranks' GPUs: ranks - 1 on GPUs, else 0 */
  int hop_gpu[BENCH_MAX_HOPS + 1]; /* each rank's GPU, when on_gpus */
  bench_link link[BENCH_MAX_HOPS]; /* rank r's GPU to rank r + 1's */
  int status;            /* exit status of the first run that failed, else 0 */
  int repeat;            /* runs asked */
  int runs;              /* runs done, all successful when status is 0 */
  bench_meas *meas;      /* (repeat) */
  char order[8];         /* the order rank 0 ran, "" when unknown */
  double predicted_ms;   /* the planner's */
  double streamed;       /* share of the blocks the plan streams */
  double h2d_gb;         /* host -> device GB per step, all ranks */
  double mem_vs_plan;    /* max over ranks and runs of device peak / plan peak; 0: not reported */
  double act_mb;         /* one activation message, MB (rank 0's) */
} bench_row;

/* Writes DIR/bench.json, bench.csv, bench-env.csv and bench.md (each
 * with the environment env); prints the environment and the table to
 * stderr. */
int bench_write_outputs(const char *dir, const bench_env_item *env, const bench_row *rows, int n);

/* The mean steady step time of a row's runs (-1 with none). */
double bench_row_steady_ms(const bench_row *r);

/* DIR/bench-step.dat and bench-step.gp, and DIR/bench-step.png through
 * gnuplot (bench_plot.c): the steady step time, measured and predicted,
 * against the first of stream-frac (as the share streamed), ranks,
 * frames, size, budget and devices that varies over the successful rows,
 * one panel per value of the others that vary, one colour per order run;
 * titled with env's GPU and commit. SP_OK, or the error writing the data
 * or the script (logged); gnuplot missing or failing is said, not an
 * error. */
int bench_plot(const char *dir, const bench_env_item *env, const bench_row *rows, int n);

#endif
