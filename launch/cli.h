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

#include "kern_dtype.h"

/* Call before getopt_long in a subcommand (resets getopt's state). */
void cli_getopt_reset(void);

/* Each returns 0, or logs "--flag: ..." and returns SP_ERR_INPUT. */
int cli_parse_int64(const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out);
int cli_parse_uint64(const char *flag, const char *s, uint64_t *out);
int cli_parse_double(const char *flag, const char *s, double lo, double hi, double *out);
/* "HxW" (480x832) into h and w, each in 1..65536. */
int cli_parse_size_hw(const char *flag, const char *s, int64_t *h, int64_t *w);

/* "bf16" or "fp32" (a model file's storage dtype). */
int cli_parse_dtype(const char *flag, const char *s, kern_dtype *out);

/* Logs the standard line for an unknown option or a missing argument and
 * returns SP_ERR_INPUT ("run 'staticpipe CMD --help'"). */
int cli_bad_usage(const char *cmd);

#endif
