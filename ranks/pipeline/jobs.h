/* The --jobs file or stream: one job per line, whitespace-separated
 * key=value fields with the keys of the per-job options (cond, out, seed,
 * noise, frames, size, steps, cfg, shift, sampler, timesteps, sigmas,
 * boundary, cache, lora, prompt, negative, video, fps); '#' starts a
 * comment, blank lines are skipped. Keys left out take the run command's
 * values. A line that breaks a rule is kept as a bad job (logged once,
 * "FILE:LINE: ..."), so the others run. Files: jobs.c (the lines),
 * job_stream.c (a stream run as it arrives, the report of each job). */
#ifndef JOBS_H
#define JOBS_H

#include "job_params.h"

/* The file p->jobs, its lines' defaults p->job; each line's paths are
 * checked (job_spec_check_paths), and a line naming an output (out, its
 * preview, video) that an earlier line writes (by identity, not spelling)
 * is bad. On SP_OK, *out (free() it) holds *n >= 1 jobs, bad ones marked.
 * SP_ERR_INPUT (logged) when the file cannot be read, holds no job or more
 * than JOB_FILE_MAX. */
int job_file_read(const job_params *p, job_spec **out, int *n);

/* The lines one at a time, as they arrive: path "-" is standard input,
 * else a regular file or a named pipe. job_reader_open: SP_OK or
 * SP_ERR_INPUT (logged; standard input closed or a device is refused).
 * job_reader_next: 1 when *j holds the next line's job (from p's
 * defaults; a refused line is marked bad, logged once, its error kept),
 * 0 at the end of the input, -1 on a read error (logged). A line longer
 * than LINE_MAX_BYTES of jobs.c is bad; in a stream it is returned as soon
 * as it is too long, without waiting for its end, whose rest is skipped
 * before the next line (the stream ends, -1, when no end of line comes
 * within SKIP_MAX_BYTES). Lines hold no NUL byte. */
typedef struct job_reader job_reader;
int job_reader_open(const char *path, job_reader **out);
int job_reader_next(job_reader *r, const job_params *p, job_spec *j);
/* How messages name the source: the path, "stdin" for "-". */
const char *job_reader_name(const job_reader *r);
void job_reader_close(job_reader *r);
/* Marks j bad and keeps the last error line logged as its cause. */
void job_spec_mark_bad(job_spec *j);
/* 1 when --jobs names a stream (standard input "-" or a named pipe):
 * its jobs are read and run as they arrive (job_stream.c). */
int job_jobs_is_stream(const char *jobs);
/* Standard input as the process found it, before anything could open a
 * file on descriptor 0: call first thing in main. A closed descriptor 0
 * is then held by /dev/null, so no file lands on it, and --jobs - is
 * refused ("standard input is closed"). */
void job_stdin_record(void);

#endif
