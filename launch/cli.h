/* Shared pieces of the command-line interface: value parsers that log one
 * clear line naming the flag, and the usage conventions.
 *
 * Conventions of every subcommand: getopt_long with GNU argument
 * permutation (options may follow positional arguments); -o and --out are
 * the same option; --json writes only JSON to stdout, text and logs go to
 * stderr; exit 0 success, 1 runtime failure, 2 bad usage or bad input. */
#ifndef SP_CLI_H
#define SP_CLI_H

#include <stdint.h>

#include <getopt.h>
#include <stdio.h>

#include "job.h"
#include "kern_dtype.h"

/* Call before getopt_long in a subcommand (resets getopt's state). */
void cli_getopt_reset(void);

/* Number parsers: job_parse_int64, _uint64, _double and _size_hw (job.h). */

/* "bf16" or "fp32" (a model file's storage dtype). */
int cli_parse_dtype(const char *flag, const char *s, kern_dtype *out);
/* A DiT file's dtype: bf16, fp32, or fp8 (KERN_DTYPE_E4M3: the blocks'
 * linear weights in e4m3, the rest bf16; MODEL.md "fp8 weights"). */
int cli_parse_dit_dtype(const char *flag, const char *s, kern_dtype *out);

/* Logs the standard line for an unknown option or a missing argument and
 * returns SP_ERR_INPUT ("run 'staticpipe CMD --help'"). */
int cli_bad_usage(const char *cmd);

/* A command's options as one table: the job options it takes (job.h's
 * table: flag, value, default and help written once), then its own
 * (job_option entries with ids from JOB_OPT_COUNT on). getopt_long's
 * table, its short options and the --help list all come from it. */
enum { CLI_OPTS_MAX = 64 };
typedef struct cli_opts {
  const job_option *opt[CLI_OPTS_MAX];
  int n;
  struct option longs[CLI_OPTS_MAX + 1];
  char shorts[3 * CLI_OPTS_MAX + 1];
} cli_opts;

void cli_opts_build(cli_opts *t, const int *job_ids, int nids, const job_option *own, int nown);
/* The next option of argv (getopt_long; call cli_getopt_reset first):
 * 1 with *opt set (its value in optarg), 0 at the end, -1 for an unknown
 * option or a missing value (getopt said so). */
int cli_opts_next(const cli_opts *t, int argc, char **argv, const job_option **opt);
/* What a command's own-option handler returns to stop the parse at --help
 * (apart from SP_OK and the SP_ERR_* statuses). */
enum { CLI_HELP = 100 };
/* Parses argv by table t (getopt's state reset first): a job option's value
 * goes into job (job_opts_set), an own option's (id >= JOB_OPT_COUNT) to
 * own(ctx, id, value), which returns SP_OK, a logged SP_ERR_INPUT, or
 * CLI_HELP to stop at once. Returns SP_OK, CLI_HELP, the first failing
 * setter's status, or bad usage (cli_bad_usage(cmd)) for getopt's
 * complaints and an operand left over (named). */
int cli_parse(const char *cmd, const cli_opts *t, int argc, char **argv, job_opts *job,
              int (*own)(void *ctx, int id, const char *value), void *ctx);
/* A command parsed by its table: name (for messages), the table's builder,
 * the own-option handler (cli_parse's own) and its --help text printer
 * (NULL: the caller prints it, e.g. on rank 0 only). */
typedef struct cli_command {
  const char *name;
  void (*table)(cli_opts *t);
  int (*own)(void *ctx, int id, const char *value);
  void (*usage)(const cli_opts *t, FILE *f);
} cli_command;
/* Builds cmd's table, sets job to the defaults (job_opts_default; job may
 * be NULL for a command that takes no job option) and parses argv into job
 * and ctx (cli_parse). At --help: *help = 1, cmd's usage on stdout when it
 * has one, and SP_OK. Otherwise cli_parse's status (*help left as it is). */
int cli_command_parse(const cli_command *cmd, int argc, char **argv, job_opts *job, void *ctx,
                      int *help);
/* Bad usage "CMD: FLAG is required" when missing (a flag) is not NULL;
 * SP_OK when it is. */
int cli_require(const char *cmd, const char *missing);
/* The --help list: "  -m, --model MODEL     help (default D)". */
void cli_opts_usage(const cli_opts *t, FILE *f);

#endif
