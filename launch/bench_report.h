/* staticpipe bench's results: what one configuration's run measured (a
 * row), and the files made from all the rows. Internal to launch/:
 * cmd_bench.c fills the rows and runs the children, bench_report.c writes
 * bench.json, bench.csv, bench.md, bench-step.dat and the plot. */
#ifndef SP_BENCH_REPORT_H
#define SP_BENCH_REPORT_H

/* One configuration of the sweep: what run was given, and what it measured. */
typedef struct bench_row {
  int ranks;
  const char *budget, *frames, *size;
  const char *frac_arg;  /* --stream-frac given to run, NULL when not passed */
  double frac;           /* its value */
  const char *order_arg; /* --order given to run, NULL when not passed */
  int base;              /* the row alike but at --stream-frac 0, or -1 */
  int status;            /* exit status of the run */
  char order[8];         /* the order rank 0 ran, "" when unknown */
  double step_ms;        /* measured on rank 0, every step */
  double steady_ms;      /* measured on rank 0, without each loop's first step */
  double predicted_ms;   /* the planner's */
  double streamed;       /* share of the blocks the plan streams */
  double h2d_gb;         /* host -> device GB per step, all ranks */
  double load_s;         /* slowest rank's load */
  double load_gbs;       /* GB loaded by all ranks / load_s */
  double mem_vs_plan;    /* max over ranks of device peak / plan peak; 0: not reported */
} bench_row;

/* Runs argv, stdout to out_path, stderr to log_path; its exit status (cmd_bench.c). */
int bench_run_child(char *const *argv, const char *out_path, const char *log_path);

/* Writes DIR/bench.json, bench.csv, bench.md, bench-step.dat; prints the table. */
int bench_write_outputs(const char *dir, const bench_row *rows, int n);

/* DIR/bench-step.png through gnuplot; says so when it cannot, not an error. */
void bench_plot(const char *dir, const bench_row *rows, int n);

#endif
