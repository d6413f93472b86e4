/* Logging and the one fatal-error reporter of the whole program.
 *
 * Every log line goes to stderr (and to the per-rank log file when one is
 * set), one line each, prefixed "[rank N]", lowercase, cause first
 * (STYLE.md 7). Hot-path failures go through sp_fatal(), which prints rank,
 * host, device, file:line and the failed call, runs the abort hooks (NCCL
 * abort, then MPI_Abort, registered by comm/) and never returns. Loaders and
 * parsers instead log once where they detect a problem and return a status
 * (STYLE.md 2); the status values double as process exit codes. */
#ifndef SP_LOG_H
#define SP_LOG_H

#include <stdarg.h>
#include <stdio.h>

/* Status codes returned by loaders, parsers and commands; also exit codes. */
enum {
  SP_OK = 0,
  SP_ERR_RUNTIME = 1, /* the input was fine, something failed while working */
  SP_ERR_INPUT = 2,   /* bad usage or bad input (flag, file, tensor, string) */
};

void sp_log_set_rank(int rank, int nranks);
int sp_log_rank(void);
/* Short description of this rank's device ("cpu", "cuda:0 NVIDIA H200"). */
void sp_log_set_device(const char *device);
/* Also write every line to this file (per-rank log, --log-dir), info and
 * warnings too at level 0 (a quiet run's record); NULL stops. */
void sp_log_set_file(FILE *f);
/* 0 = errors only, 1 = normal, 2 = verbose (debug lines). */
void sp_log_set_level(int level);
int sp_log_level(void);

void sp_log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void sp_log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void sp_log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void sp_log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Error lines logged so far by this process (lets a caller add a hint
 * without a second error line). */
int sp_log_error_count(void);
/* The text of the last error line (without prefix), "" when none. */
const char *sp_log_last_error(void);

/* Runs before the process dies in sp_fatal (last registered runs first).
 * comm/ registers the NCCL abort and MPI_Abort here. */
typedef void (*sp_abort_hook)(int exit_code);
void sp_abort_hook_push(sp_abort_hook hook);

/* Report a fatal error and end the whole job. Never returns. */
_Noreturn void sp_fatal_at(const char *file, int line, const char *call,
                           const char *fmt, ...) __attribute__((format(printf, 4, 5)));
#define sp_fatal(...) sp_fatal_at(__FILE__, __LINE__, NULL, __VA_ARGS__)

/* Out of memory on the host is fatal everywhere (these never return NULL). */
void *sp_xmalloc(size_t bytes);
void *sp_xcalloc(size_t n, size_t size);
char *sp_xstrdup(const char *s);

#endif
