/* The --jobs file or stream: its lines, read one at a time (see jobs.h). */
#include "jobs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "job_prompt.h"
#include "log.h"
#include "path_check.h"

/* The next whitespace-separated field of a line from *at, unquoted in
 * place: "..." inside a field keeps its spaces (prompt="a red fox"), with
 * \" and \\ for a quote and a backslash. NULL at the end of the line, or
 * for an unclosed quote (*open_quote = 1). */
static char *next_field(char **at, int *open_quote) {
  char *r = *at, *w;
  while (*r == ' ' || *r == '\t' || *r == '\r') r++;
  if (!*r) return NULL;
  char *field = w = r;
  int quoted = 0;
  for (; *r && (quoted || (*r != ' ' && *r != '\t' && *r != '\r')); r++) {
    if (*r == '"') {
      quoted = !quoted;
    } else if (quoted && *r == '\\' && (r[1] == '"' || r[1] == '\\')) {
      *w++ = *++r;
    } else {
      *w++ = *r;
    }
  }
  *open_quote = quoted;
  *at = *r ? r + 1 : r;
  *w = '\0';
  return quoted ? NULL : field;
}

/* The '#' that starts the line's comment (outside double quotes), or NULL. */
static char *comment_start(char *line) {
  int quoted = 0;
  for (char *p = line; *p; p++) {
    if (quoted && *p == '\\' && p[1]) p++;
    else if (*p == '"') quoted = !quoted;
    else if (*p == '#' && !quoted) return p;
  }
  return NULL;
}

/* Parses one line's fields into j (which holds the defaults) with the
 * setters of the per-job options, then checks it with the validator. */
static int parse_line(const job_params *p, char *s, const char *where, job_spec *j) {
  int seen_seed = 0, open_quote = 0;
  unsigned char seen[JOB_OPT_COUNT] = {0};
  for (char *at = s, *tok = next_field(&at, &open_quote); tok;
       tok = next_field(&at, &open_quote)) {
    char *eq = strchr(tok, '=');
    if (!eq || eq == tok) {
      sp_log_error("%s: '%s' is not key=value", where, tok);
      return SP_ERR_INPUT;
    }
    *eq = '\0';
    const job_option *opt = job_option_find(tok);
    /* lora= is per job, unlike --lora's merge at load (job_spec_loras). */
    if (!opt || (!opt->per_job && opt->id != JOB_OPT_LORA)) {
      sp_log_error("%s: unknown key '%s' (cond, out, seed, noise, frames, size, steps, cfg, "
                   "shift, sampler, timesteps, sigmas, lora, prompt, negative, image, "
                   "image-latents, max-area)",
                   where, tok);
      return SP_ERR_INPUT;
    }
    /* A key given twice would let the last one win unseen; --lora alone
     * is repeatable, on a line as on the command line. */
    if (opt->id < JOB_OPT_COUNT && seen[opt->id]++ && opt->id != JOB_OPT_LORA) {
      sp_log_error("%s: key '%s' is given twice: one value per key", where, tok);
      return SP_ERR_INPUT;
    }
    if (job_spec_set(j, opt->id, eq + 1, where) != SP_OK) return SP_ERR_INPUT;
    seen_seed |= opt->id == JOB_OPT_SEED;
  }
  if (open_quote) {
    sp_log_error("%s: a double quote is not closed", where);
    return SP_ERR_INPUT;
  }
  if (seen_seed && j->noise[0]) {
    sp_log_error("%s: seed= and noise= exclude each other", where);
    return SP_ERR_INPUT;
  }
  if (job_prompt_check_line(p, j, where) != SP_OK) return SP_ERR_INPUT;
  if (!j->out[0]) {
    sp_log_error("%s: out=FILE is missing", where);
    return SP_ERR_INPUT;
  }
  if (job_spec_video_out(p, j, where) != SP_OK) return SP_ERR_INPUT;
  if (job_image_check(p, j, where) != SP_OK) return SP_ERR_INPUT;
  return job_spec_check(j, where);
}

enum { LINE_MAX_BYTES = 8190, SKIP_MAX_BYTES = 1 << 20 };

/* Reads one line of f into buf (cap > LINE_MAX_BYTES) without its end of
 * line, keeping NUL bytes in the count that *len gives. A line longer
 * than LINE_MAX_BYTES sets *too_long as soon as it is: with drop, its rest
 * is read and dropped up to its end of line (a file's); without (a
 * stream's, whose rest may never end), reading stops there. Returns 0 at
 * the end of the file, 1 when a line was read. */
static int read_line(FILE *f, int drop, char *buf, size_t *len, int *too_long) {
  size_t n = 0;
  int ch, any = 0;
  *too_long = 0;
  while ((ch = getc(f)) != EOF) {
    any = 1;
    if (ch == '\n') break;
    if (n < LINE_MAX_BYTES + 1) buf[n++] = (char)ch;
    if (n > LINE_MAX_BYTES) {
      *too_long = 1;
      if (!drop) break;
    }
  }
  while (n && buf[n - 1] == '\r') n--;
  if (n > LINE_MAX_BYTES) *too_long = 1;
  buf[n] = '\0';
  *len = n;
  return any;
}

/* ---- standard input as the process found it ---- */

enum { STDIN_USABLE = 0, STDIN_CLOSED = 1, STDIN_DEVICE = 2 };
static int g_stdin = STDIN_USABLE;

void job_stdin_record(void) {
  struct stat st;
  if (fstat(0, &st) != 0) {
    /* Closed: /dev/null holds descriptor 0, so the first file opened later
     * (a model, a log) does not land on it and get read as jobs. */
    g_stdin = STDIN_CLOSED;
    const int fd = open("/dev/null", O_RDONLY);
    if (fd > 0) close(fd); /* 0 is the one wanted; another means 0 was taken after all */
  } else if ((S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) && !isatty(0)) {
    g_stdin = STDIN_DEVICE;
  }
}

/* --jobs -: standard input must be a pipe, a file or a terminal. */
static int stdin_check(void) {
  if (g_stdin == STDIN_CLOSED)
    sp_log_error("--jobs -: standard input is closed: give the jobs on it (PRODUCER | "
                 "staticpipe run ... --jobs -) or name a file");
  else if (g_stdin == STDIN_DEVICE)
    sp_log_error("--jobs -: standard input is a device (as /dev/null or /dev/zero), not a pipe, "
                 "a file or a terminal: give the jobs on a pipe or name a file");
  return g_stdin == STDIN_USABLE ? SP_OK : SP_ERR_INPUT;
}

struct job_reader {
  FILE *f;
  int own;               /* f was opened here (not stdin) */
  int stream;            /* standard input or a named pipe: read as it arrives */
  int skipping;          /* a stream's line was too long: its rest is still to skip */
  char name[JOB_PATH];   /* how messages name the source: the path, "stdin" for "-" */
  int lineno;
};

int job_reader_open(const char *path, job_reader **out) {
  const int is_stdin = strcmp(path, "-") == 0;
  if (is_stdin && stdin_check() != SP_OK) return SP_ERR_INPUT;
  FILE *f = is_stdin ? stdin : fopen(path, "r");
  if (!f) {
    sp_log_error("--jobs %s: cannot open: %s", path, strerror(errno));
    return SP_ERR_INPUT;
  }
  job_reader *r = sp_xcalloc(1, sizeof *r);
  r->f = f;
  r->own = !is_stdin;
  r->stream = job_jobs_is_stream(path);
  snprintf(r->name, sizeof r->name, "%s", is_stdin ? "stdin" : path);
  *out = r;
  return SP_OK;
}

const char *job_reader_name(const job_reader *r) { return r->name; }

void job_reader_close(job_reader *r) {
  if (!r) return;
  if (r->own) fclose(r->f);
  free(r);
}

/* Keeps what a refused line's last logged error said, for its report. */
void job_spec_mark_bad(job_spec *j) {
  j->bad = 1;
  snprintf(j->error, sizeof j->error, "%s", sp_log_last_error());
}

/* A stream's too long line, reported already: its rest up to the end of
 * line, at most SKIP_MAX_BYTES (a stream that never ends a line, as cat
 * /dev/zero, is no jobs stream). SP_OK, or SP_ERR_INPUT (logged). */
static int skip_rest(job_reader *r) {
  int ch;
  size_t n = 0;
  while ((ch = getc(r->f)) != EOF && ch != '\n')
    if (++n > SKIP_MAX_BYTES) {
      sp_log_error("%s:%d: no end of line within %d bytes: the stream ends (a jobs stream is "
                   "lines of text)", r->name, r->lineno, SKIP_MAX_BYTES);
      return SP_ERR_INPUT;
    }
  return SP_OK;
}

int job_reader_next(job_reader *r, const job_params *p, job_spec *j) {
  char line[LINE_MAX_BYTES + 2];
  size_t len;
  int too_long;
  if (r->skipping) {
    r->skipping = 0;
    if (skip_rest(r) != SP_OK) return -1;
  }
  while (read_line(r->f, !r->stream, line, &len, &too_long)) {
    r->lineno++;
    char where[JOB_PATH + 32];
    snprintf(where, sizeof where, "%s:%d", r->name, r->lineno);
    /* The length counts every byte read, NUL bytes included: a NUL would
     * otherwise end the line early for the string functions and hide the
     * rest of it, or a second job after it. */
    int has_nul = !too_long && memchr(line, '\0', len) != NULL;
    if (!too_long && !has_nul) {
      char *hash = comment_start(line);
      if (hash) *hash = '\0';
      len = strlen(line);
      if (strspn(line, " \t") == len) continue;
    }
    *j = p->job;
    j->cond[0] = j->noise[0] = j->out[0] = j->video[0] = j->prompt[0] = j->error[0] = '\0';
    j->line = r->lineno;
    j->bad = 0;
    j->steps_given = j->sched_given = 0; /* the line's own keys decide */
    /* A stream's --frames and --size are its plan (the largest a line may
     * ask for) and its lines' defaults: a line's own keys decide whether
     * it gives them (an image's line sets its size from the image). */
    if (r->stream) j->frames_given = j->size_given = 0;
    j->lora_given = 0;
    /* A stream's line fails at once: its end may be long in coming (or
     * never come: cat /dev/zero |); its rest is skipped before the next. */
    r->skipping = too_long && r->stream;
    if (too_long) {
      sp_log_error("%s: line longer than %d bytes", where, LINE_MAX_BYTES);
      job_spec_mark_bad(j);
    } else if (has_nul) {
      sp_log_error("%s: line holds a NUL byte (a jobs file is text)", where);
      job_spec_mark_bad(j);
    } else if (parse_line(p, line, where, j) != SP_OK ||
               job_spec_check_paths(p, j, where) != SP_OK) {
      job_spec_mark_bad(j);
    }
    return 1;
  }
  if (ferror(r->f)) {
    sp_log_error("--jobs %s: read error: %s", r->name, strerror(errno));
    return -1;
  }
  return 0;
}

/* A line's outputs, named as its keys: out, its preview, video (n of them;
 * an empty path is none). */
typedef struct line_outputs {
  const char *key[3];
  char path[3][JOB_PATH + 8];
  int n;
} line_outputs;

static void outputs_of(const job_params *p, const job_spec *j, line_outputs *o) {
  o->n = 0;
  if (j->out[0]) {
    o->key[o->n] = "out";
    snprintf(o->path[o->n++], sizeof o->path[0], "%s", j->out);
    if (p->preview) {
      o->key[o->n] = "out (its preview)";
      snprintf(o->path[o->n++], sizeof o->path[0], "%s.png", j->out);
    }
  }
  if (j->video[0]) {
    o->key[o->n] = "video";
    snprintf(o->path[o->n++], sizeof o->path[0], "%s", j->video);
  }
}

/* Two lines writing one file would silently lose the first; the same file
 * may be spelled two ways (o.h5, ./o.h5), so identity decides: a line
 * whose output an earlier good line writes too is bad. */
static void check_outputs_against(const job_params *p, const char *name, const job_spec *jobs,
                                  int count, job_spec *jj) {
  line_outputs mine, theirs;
  outputs_of(p, jj, &mine);
  for (int k = 0; !jj->bad && k < count; k++) {
    if (jobs[k].bad) continue;
    outputs_of(p, &jobs[k], &theirs);
    for (int a = 0; !jj->bad && a < mine.n; a++)
      for (int b = 0; !jj->bad && b < theirs.n; b++) {
        int same = 0;
        if (rank_path_same(theirs.path[b], mine.path[a], &same) != SP_OK) {
          job_spec_mark_bad(jj);
        } else if (same) {
          sp_log_error("%s:%d: %s=%s is already the output of line %d (%s=%s)", name, jj->line,
                       mine.key[a], mine.path[a], jobs[k].line, theirs.key[b], theirs.path[b]);
          job_spec_mark_bad(jj);
        }
      }
  }
}

int job_file_read(const job_params *p, job_spec **out, int *n) {
  job_reader *r = NULL;
  if (job_reader_open(p->jobs, &r) != SP_OK) return SP_ERR_INPUT;
  job_spec *jobs = NULL;
  int count = 0, cap = 0, rc = SP_OK, got;
  job_spec j;
  while ((got = job_reader_next(r, p, &j)) == 1) {
    if (count == JOB_FILE_MAX) {
      sp_log_error("--jobs %s: more than %d jobs", r->name, JOB_FILE_MAX);
      rc = SP_ERR_INPUT;
      goto done;
    }
    if (count == cap) {
      cap = cap ? 2 * cap : 16;
      job_spec *grown = realloc(jobs, (size_t)cap * sizeof *jobs);
      if (!grown) sp_fatal("out of host memory for %d jobs", cap);
      jobs = grown;
    }
    jobs[count++] = j;
    check_outputs_against(p, r->name, jobs, count - 1, &jobs[count - 1]);
  }
  if (got < 0) {
    rc = SP_ERR_INPUT;
  } else if (count == 0) {
    sp_log_error("--jobs %s: no job in the file (one per line: cond=FILE out=FILE ...)",
                 r->name);
    rc = SP_ERR_INPUT;
  }
done:
  job_reader_close(r);
  if (rc != SP_OK) {
    free(jobs);
    return rc;
  }
  *out = jobs;
  *n = count;
  return SP_OK;
}
