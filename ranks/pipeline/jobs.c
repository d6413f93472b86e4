/* The jobs file (see jobs.h). */
#include "jobs.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

static int parse_i64(const char *where, const char *key, const char *v, int64_t lo, int64_t hi,
                     int64_t *out) {
  char *end = NULL;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  if (errno || end == v || *end || x < lo || x > hi) {
    sp_log_error("%s: %s=%s: expected an integer in [%" PRId64 ", %" PRId64 "]", where, key, v,
                 lo, hi);
    return SP_ERR_INPUT;
  }
  *out = x;
  return SP_OK;
}

static int parse_f64(const char *where, const char *key, const char *v, double lo, double hi,
                     double *out) {
  char *end = NULL;
  errno = 0;
  double x = strtod(v, &end);
  if (errno || end == v || *end || !isfinite(x) || x < lo || x > hi) {
    sp_log_error("%s: %s=%s: expected a number in [%g, %g]", where, key, v, lo, hi);
    return SP_ERR_INPUT;
  }
  *out = x;
  return SP_OK;
}

static int set_path(const char *where, const char *key, const char *v, char *dst) {
  size_t len = strlen(v);
  if (len == 0 || len >= RANK_JOBS_PATH) {
    sp_log_error("%s: %s=: the path is empty or longer than %d bytes", where, key,
                 RANK_JOBS_PATH - 1);
    return SP_ERR_INPUT;
  }
  memcpy(dst, v, len + 1);
  return SP_OK;
}

int rank_jobspec_check(const rank_jobspec *j, const char *where) {
  if (!j->cond[0]) {
    sp_log_error("%s: cond=FILE is missing", where);
    return SP_ERR_INPUT;
  }
  if (!j->out[0]) {
    sp_log_error("%s: out=FILE is missing", where);
    return SP_ERR_INPUT;
  }
  if (j->frames < 1 || (j->frames - 1) % 4 != 0) {
    sp_log_error("%s: frames=%" PRId64 " is not of the form 4k+1 (81, 41, 17, 5, 1, ...)", where,
                 j->frames);
    return SP_ERR_INPUT;
  }
  if (j->height <= 0 || j->width <= 0 || j->height % 16 || j->width % 16) {
    sp_log_error("%s: size=%" PRId64 "x%" PRId64 ": height and width must be positive multiples "
                 "of 16",
                 where, j->height, j->width);
    return SP_ERR_INPUT;
  }
  return SP_OK;
}

/* Parses one line's fields into j (which holds the defaults). */
static int parse_line(char *s, const char *where, rank_jobspec *j, int *seen_seed) {
  int64_t v = 0;
  for (char *save = NULL, *tok = strtok_r(s, " \t\r", &save); tok;
       tok = strtok_r(NULL, " \t\r", &save)) {
    char *eq = strchr(tok, '=');
    if (!eq || eq == tok) {
      sp_log_error("%s: '%s' is not key=value", where, tok);
      return SP_ERR_INPUT;
    }
    *eq = '\0';
    const char *key = tok, *val = eq + 1;
    int rc = SP_OK;
    if (strcmp(key, "cond") == 0) {
      rc = set_path(where, key, val, j->cond);
    } else if (strcmp(key, "out") == 0) {
      rc = set_path(where, key, val, j->out);
    } else if (strcmp(key, "noise") == 0) {
      rc = set_path(where, key, val, j->noise);
    } else if (strcmp(key, "seed") == 0) {
      char *end = NULL;
      errno = 0;
      unsigned long long x = strtoull(val, &end, 10);
      if (errno || end == val || *end || val[0] == '-') {
        sp_log_error("%s: seed=%s: expected an integer in [0, 2^64)", where, val);
        rc = SP_ERR_INPUT;
      }
      j->seed = x;
      *seen_seed = 1;
    } else if (strcmp(key, "frames") == 0) {
      rc = parse_i64(where, key, val, 1, 4097, &j->frames);
    } else if (strcmp(key, "size") == 0) {
      char *x = strchr(val, 'x');
      if (!x) {
        sp_log_error("%s: size=%s: expected HEIGHTxWIDTH, e.g. 480x832", where, val);
        return SP_ERR_INPUT;
      }
      *x = '\0';
      rc = parse_i64(where, "size height", val, 16, 16384, &j->height);
      if (rc == SP_OK) rc = parse_i64(where, "size width", x + 1, 16, 16384, &j->width);
    } else if (strcmp(key, "steps") == 0) {
      rc = parse_i64(where, key, val, 1, 10000, &v);
      j->steps = (int)v;
    } else if (strcmp(key, "cfg") == 0) {
      rc = parse_f64(where, key, val, 0, 100, &j->cfg);
    } else if (strcmp(key, "shift") == 0) {
      rc = parse_f64(where, key, val, 1e-3, 1e3, &j->shift);
    } else if (strcmp(key, "sampler") == 0) {
      if (strcmp(val, "unipc") == 0) {
        j->sampler = RANK_SAMPLER_UNIPC;
      } else if (strcmp(val, "euler") == 0) {
        j->sampler = RANK_SAMPLER_EULER;
      } else {
        sp_log_error("%s: sampler=%s: use unipc or euler", where, val);
        rc = SP_ERR_INPUT;
      }
    } else {
      sp_log_error("%s: unknown key '%s' (cond, out, seed, noise, frames, size, steps, cfg, "
                   "shift, sampler)",
                   where, key);
      rc = SP_ERR_INPUT;
    }
    if (rc != SP_OK) return rc;
  }
  if (*seen_seed && j->noise[0]) {
    sp_log_error("%s: seed= and noise= exclude each other", where);
    return SP_ERR_INPUT;
  }
  return rank_jobspec_check(j, where);
}

int rank_jobs_read(const char *path, const rank_jobspec *defaults, rank_jobspec **out, int *n) {
  FILE *f = fopen(path, "r");
  if (!f) {
    sp_log_error("--jobs %s: cannot open: %s", path, strerror(errno));
    return SP_ERR_INPUT;
  }
  rank_jobspec *jobs = NULL;
  int count = 0, cap = 0, lineno = 0, rc = SP_OK;
  char line[8192];
  while (fgets(line, sizeof line, f)) {
    lineno++;
    size_t len = strlen(line);
    char where[RANK_JOBS_PATH + 32];
    snprintf(where, sizeof where, "%s:%d", path, lineno);
    int too_long = len == sizeof line - 1 && line[len - 1] != '\n' && !feof(f);
    if (too_long) {
      /* Skip the rest of it: the line is refused as a whole. */
      int ch;
      while ((ch = fgetc(f)) != EOF && ch != '\n') {
      }
    }
    char *hash = strchr(line, '#');
    if (hash) *hash = '\0';
    len = strlen(line);
    while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = '\0';
    if (strspn(line, " \t") == len && !too_long) continue;
    if (count == RANK_JOBS_MAX) {
      sp_log_error("--jobs %s: more than %d jobs", path, RANK_JOBS_MAX);
      rc = SP_ERR_INPUT;
      goto done;
    }
    if (count == cap) {
      cap = cap ? 2 * cap : 16;
      rank_jobspec *grown = realloc(jobs, (size_t)cap * sizeof *jobs);
      if (!grown) sp_fatal("out of host memory for %d jobs", cap);
      jobs = grown;
    }
    rank_jobspec *j = &jobs[count++];
    *j = *defaults;
    j->cond[0] = j->noise[0] = j->out[0] = '\0';
    j->line = lineno;
    j->bad = 0;
    int seen_seed = 0;
    if (too_long) {
      sp_log_error("%s: line longer than %zu bytes", where, sizeof line - 2);
      j->bad = 1;
    } else if (parse_line(line, where, j, &seen_seed) != SP_OK) {
      j->bad = 1;
    }
    /* Two jobs writing one file would silently lose the first. */
    for (int k = 0; !j->bad && k < count - 1; k++) {
      if (!jobs[k].bad && strcmp(jobs[k].out, j->out) == 0) {
        sp_log_error("%s: out=%s is already the output of line %d", where, j->out, jobs[k].line);
        j->bad = 1;
      }
    }
  }
  if (ferror(f)) {
    sp_log_error("--jobs %s: read error: %s", path, strerror(errno));
    rc = SP_ERR_INPUT;
  } else if (count == 0) {
    sp_log_error("--jobs %s: no job in the file (one per line: cond=FILE out=FILE ...)", path);
    rc = SP_ERR_INPUT;
  }
done:
  fclose(f);
  if (rc != SP_OK) {
    free(jobs);
    return rc;
  }
  *out = jobs;
  *n = count;
  return SP_OK;
}
