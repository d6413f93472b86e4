/* The command-line interface every subcommand shares: its options as one
 * table (the job's, ranks/pipeline/job_option.h, and its own), getopt's
 * table, --help and the messages built from it.
 *
 * Conventions of every subcommand: getopt_long with GNU argument
 * permutation (options may follow operands); -o and --out are the same
 * option; a short letter means one thing in every command (the table in
 * cli.c, README "Commands"); an option given twice is refused unless it is
 * documented as repeatable; an unknown option gets the closest known one
 * ("did you mean --steps?"); --json writes only JSON to stdout, text and
 * logs go to stderr; exit 0 success, 1 runtime failure, 2 bad usage or bad
 * input. */
#ifndef SP_CLI_H
#define SP_CLI_H

#include <stdint.h>

#include <getopt.h>
#include <stdio.h>

#include "job_params.h"
#include "job_parse.h"
#include "kern_dtype.h"

/* "bf16" or "fp32" (a model file's storage dtype). */
int cli_parse_dtype(const char *flag, const char *s, kern_dtype *out);
/* A DiT file's dtype: bf16, fp32, or a quantized one: fp8
 * (KERN_DTYPE_E4M3), int8 (KERN_DTYPE_I8) or q8_0 (KERN_DTYPE_Q8_0): the
 * blocks' linear weights in that format, the rest bf16 (MODEL.md "fp8
 * weights", "int8 weights", "GGUF weights"). */
int cli_parse_dit_dtype(const char *flag, const char *s, kern_dtype *out);
/* The --dtype word of a dtype cli_parse_dit_dtype gives ("fp8" for
 * KERN_DTYPE_E4M3), for messages that name the flag's value. */
const char *cli_dit_dtype_word(kern_dtype d);
/* 1 when a dtype of cli_parse_dit_dtype is a quantized one (only a DiT
 * takes it). */
int cli_dtype_quantized(kern_dtype d);

/* Logs the standard line for bad usage and returns SP_ERR_INPUT ("run
 * 'staticpipe CMD --help'"; a hint after a more specific error line). */
int cli_bad_usage(const char *cmd);

/* A command's options as one table: the job options it takes (their flag,
 * value, default and help written once, in job_option.c), then its own
 * (job_option entries with ids from JOB_OPT_COUNT on). An own entry with a
 * job option's id (< JOB_OPT_COUNT) and name is that job option with the
 * command's own help, short letter or default (encode's --device defaults
 * to cpu): its value still goes to job_params_set. The job options' other
 * spellings (job_option_aliases) are taken too. */
enum { CLI_OPTS_MAX = 64, CLI_LONGS_MAX = CLI_OPTS_MAX + 16 };
typedef struct cli_opts {
  const job_option *opt[CLI_OPTS_MAX];
  int n;
  unsigned char repeat[CLI_OPTS_MAX]; /* may be given more than once */
  struct option longs[CLI_LONGS_MAX + 1];
  int nlongs;
  char shorts[3 * CLI_OPTS_MAX + 2];
} cli_opts;

/* Builds t; a short letter that means something else in another command,
 * or a table too large, is a programming error (sp_fatal). */
void cli_opts_build(cli_opts *t, const int *job_ids, int nids, const job_option *own, int nown);
/* Own option id may be given more than once (bench's --budget, convert's
 * --expert); the job's repeatable ones are job_option_repeatable's. */
void cli_opts_allow_repeat(cli_opts *t, int id);

/* The options given, in order (bench builds its runs' command lines from
 * them). */
enum { CLI_GIVEN_MAX = 256 };
typedef struct cli_given {
  int n;
  const job_option *opt[CLI_GIVEN_MAX];
  const char *value[CLI_GIVEN_MAX]; /* NULL for a switch */
} cli_given;

/* What a command's own-option handler returns to stop the parse at --help
 * (apart from SP_OK and the SP_ERR_* statuses). */
enum { CLI_HELP = 100 };

/* A command parsed by its table: name (for messages), the table's builder,
 * the own-option handler (own(ctx, id, value): SP_OK, a logged
 * SP_ERR_INPUT, or CLI_HELP to stop at once), its --help text printer
 * (NULL: the caller prints it, e.g. on rank 0 only), and the operands it
 * takes after the options (0 none, -1 any number, else at most that). */
typedef struct cli_command {
  const char *name;
  void (*table)(cli_opts *t);
  int (*own)(void *ctx, int id, const char *value);
  void (*usage)(const cli_opts *t, FILE *f);
  int operands;
} cli_command;

/* The outcome of a parse besides its status. */
typedef struct cli_result {
  int help;          /* --help was given (and printed when the command has a usage) */
  int first_operand; /* argv[first_operand .. argc) are the operands */
  cli_given given;   /* every option given, in order */
} cli_result;

/* Builds cmd's table, sets job to the defaults (job_params_default, then
 * the defaults of cmd's own entries for job options; job may be NULL for a
 * command that takes no job option) and parses argv into job and ctx.
 * Refused with one line and bad usage (SP_ERR_INPUT): an unknown option
 * (with the closest known one), a missing value, an option given twice
 * that is not repeatable, too many operands; a setter's refusal returns
 * its status. At --help: res->help = 1, SP_OK. */
int cli_command_parse(const cli_command *cmd, int argc, char **argv, job_params *job, void *ctx,
                      cli_result *res);
/* The same without the defaults: parses into job as it is (bench's
 * --extra words, on top of its own flags). res is reset. */
int cli_command_parse_into(const cli_command *cmd, int argc, char **argv, job_params *job,
                           void *ctx, cli_result *res);
/* A table of every job option, in job_option.h's order, then own (run's,
 * and what bench hands to run). */
void cli_opts_build_job(cli_opts *t, const job_option *own, int nown);
/* Bad usage "CMD: FLAG is required" when missing (a flag) is not NULL;
 * SP_OK when it is. */
int cli_require(const char *cmd, const char *missing);
/* The --help list: "  -m, --model MODEL     help (default D)", with the
 * other spellings of an option ("also --sample_steps"). */
void cli_opts_usage(const cli_opts *t, FILE *f);

#endif
