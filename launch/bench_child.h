/* bench's children: the launcher's command line for a configuration, the
 * line printed by --dry-run, running one `run --json` child and reading its
 * JSON into a row (cmd_bench.c runs the sweep). */
#ifndef SP_BENCH_CHILD_H
#define SP_BENCH_CHILD_H

#include <stddef.h>

#include "bench_report.h"

/* The launcher's words for a run on ranks ranks into av (room for
 * nlaunch + 3 words), the rank count in the launcher's own spelling
 * written into count: srun takes --ntasks=N (it has no -np), mpirun and
 * mpiexec -np N. The file name of the first word decides. Returns the
 * words written. */
int bench_launcher_words(char *const *launch, int nlaunch, int ranks, char *count,
                         size_t count_size, char **av);

/* Runs argv (NULL-terminated) with stdout to out_path and stderr to
 * log_path; its exit status (127: not runnable, 128 + signal: killed). */
int bench_run_child(char *const *argv, const char *out_path, const char *log_path);

/* Prints argv (NULL-terminated) as one shell line: words with characters
 * the shell would read specially are single-quoted. */
void bench_print_command(char *const *argv);

/* Fills m (and r's plan figures) from the JSON `run --json` wrote to path;
 * SP_ERR_RUNTIME when there is none. */
int bench_parse_result(const char *path, bench_row *r, bench_meas *m);

#endif
