/* --jobs FILE: many samplings against one loaded model.
 *
 * One job per line, whitespace-separated key=value fields; '#' starts a
 * comment, blank lines are skipped:
 *
 *   cond=FILE out=FILE [seed=K | noise=FILE] [frames=N] [size=HxW] [steps=N]
 *   [cfg=G] [shift=S] [sampler=unipc|euler]
 *
 * Keys left out take the run command's values (its flags or defaults).
 * Values may not contain spaces. A line that breaks a rule is kept as a bad
 * job (logged once, "FILE:LINE: ..."), so the other jobs still run. */
#ifndef RANK_JOBS_H
#define RANK_JOBS_H

#include <stdint.h>

#include "sampler.h"

enum { RANK_JOBS_MAX = 4096, RANK_JOBS_PATH = 1024 };

typedef struct rank_jobspec {
  int line;                     /* line number in the jobs file (0: the command line) */
  int bad;                      /* the line was refused (already logged) */
  char cond[RANK_JOBS_PATH];    /* --cond */
  char noise[RANK_JOBS_PATH];   /* --noise, "" for the seed */
  char out[RANK_JOBS_PATH];     /* --out */
  uint64_t seed;
  int64_t frames, height, width;
  int steps;
  double cfg, shift;
  rank_sampler_kind sampler;
} rank_jobspec;

/* Reads the jobs file at path; each job starts as a copy of *defaults (its
 * cond, noise and out are ignored). On SP_OK, *out (free() it) holds *n >= 1
 * jobs, bad ones marked. SP_ERR_INPUT (logged) when the file cannot be read,
 * holds no job or more than RANK_JOBS_MAX. */
int rank_jobs_read(const char *path, const rank_jobspec *defaults, rank_jobspec **out, int *n);
/* Checks one job's values (frames 4k+1, size multiples of 16, ...); where is
 * the prefix of the message ("jobs.txt:3" or "run"). SP_OK or SP_ERR_INPUT
 * (logged). */
int rank_jobspec_check(const rank_jobspec *j, const char *where);

#endif
