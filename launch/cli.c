/* Command-line value parsers (see cli.h). */
#include "cli.h"

#include <getopt.h>
#include <string.h>

#include "log.h"

static int g_errors_at_reset;

void cli_getopt_reset(void) {
  optind = 0; /* glibc: 0 re-initialises completely, GNU permutation stays on */
  opterr = sp_log_level() >= 0; /* getopt's own complaints obey a silenced log */
  g_errors_at_reset = sp_log_error_count();
}

int cli_parse_dtype(const char *flag, const char *s, kern_dtype *out) {
  if (strcmp(s, "bf16") == 0) {
    *out = KERN_DTYPE_BF16;
  } else if (strcmp(s, "fp32") == 0) {
    *out = KERN_DTYPE_F32;
  } else {
    sp_log_error("%s: '%s' is not bf16 or fp32", flag, s);
    return SP_ERR_INPUT;
  }
  return SP_OK;
}

int cli_parse_dit_dtype(const char *flag, const char *s, kern_dtype *out) {
  if (strcmp(s, "fp8") == 0 || strcmp(s, "int8") == 0 || strcmp(s, "q8_0") == 0) {
    *out = s[0] == 'f' ? KERN_DTYPE_E4M3 : s[0] == 'i' ? KERN_DTYPE_I8 : KERN_DTYPE_Q8_0;
    return SP_OK;
  }
  if (strcmp(s, "bf16") != 0 && strcmp(s, "fp32") != 0) {
    sp_log_error("%s: '%s' is not bf16, fp32, fp8, int8 or q8_0", flag, s);
    return SP_ERR_INPUT;
  }
  return cli_parse_dtype(flag, s, out);
}

int cli_bad_usage(const char *cmd) {
  /* One error line per failure: after a specific error the pointer to
   * --help is a hint; after getopt's own complaint it is the error. */
  if (sp_log_error_count() > g_errors_at_reset)
    sp_log_info("run 'staticpipe %s --help' for the options", cmd);
  else
    sp_log_error("bad usage: run 'staticpipe %s --help' for the options", cmd);
  return SP_ERR_INPUT;
}

void cli_opts_build(cli_opts *t, const int *job_ids, int nids, const job_option *own, int nown) {
  memset(t, 0, sizeof *t);
  if (nids + nown > CLI_OPTS_MAX) sp_fatal("a command with %d options, at most %d", nids + nown,
                                           CLI_OPTS_MAX);
  for (int i = 0; i < nids; i++) t->opt[t->n++] = job_option_get(job_ids[i]);
  for (int i = 0; i < nown; i++) t->opt[t->n++] = &own[i];
  char *sh = t->shorts;
  for (int i = 0; i < t->n; i++) {
    const job_option *o = t->opt[i];
    t->longs[i] = (struct option){o->name, o->arg ? required_argument : no_argument, NULL,
                                  1000 + i};
    if (o->short_name) {
      *sh++ = o->short_name;
      if (o->arg) *sh++ = ':';
    }
  }
  *sh = '\0';
}

int cli_opts_next(const cli_opts *t, int argc, char **argv, const job_option **opt) {
  int ch = getopt_long(argc, argv, t->shorts, t->longs, NULL);
  if (ch == -1) return 0;
  for (int i = 0; i < t->n; i++) {
    if (ch == 1000 + i || (t->opt[i]->short_name && ch == t->opt[i]->short_name)) {
      *opt = t->opt[i];
      return 1;
    }
  }
  return -1;
}

int cli_parse(const char *cmd, const cli_opts *t, int argc, char **argv, job_opts *job,
              int (*own)(void *ctx, int id, const char *value), void *ctx) {
  const job_option *opt;
  int r;
  cli_getopt_reset();
  while ((r = cli_opts_next(t, argc, argv, &opt)) == 1) {
    int rc = opt->id < JOB_OPT_COUNT ? job_opts_set(job, opt->id, optarg)
                                     : own(ctx, opt->id, optarg);
    if (rc != SP_OK) return rc;
  }
  if (r < 0) return cli_bad_usage(cmd);
  if (optind < argc) {
    sp_log_error("%s: unexpected argument '%s'", cmd, argv[optind]);
    return cli_bad_usage(cmd);
  }
  return SP_OK;
}

int cli_command_parse(const cli_command *cmd, int argc, char **argv, job_opts *job, void *ctx,
                      int *help) {
  cli_opts t;
  cmd->table(&t);
  if (job) job_opts_default(job);
  int rc = cli_parse(cmd->name, &t, argc, argv, job, cmd->own, ctx);
  if (rc != CLI_HELP) return rc;
  if (cmd->usage) cmd->usage(&t, stdout);
  *help = 1;
  return SP_OK;
}

int cli_require(const char *cmd, const char *missing) {
  if (!missing) return SP_OK;
  sp_log_error("%s: %s is required", cmd, missing);
  return cli_bad_usage(cmd);
}

void cli_opts_usage(const cli_opts *t, FILE *f) {
  enum { COL = 24 };
  for (int i = 0; i < t->n; i++) {
    const job_option *o = t->opt[i];
    char head[96];
    int len = o->short_name ? snprintf(head, sizeof head, "  -%c, --%s", o->short_name, o->name)
                            : snprintf(head, sizeof head, "      --%s", o->name);
    if (o->arg) len += snprintf(head + len, sizeof head - (size_t)len, " %s", o->arg);
    fprintf(f, "%s%*s", head, len < COL - 1 ? COL - len : 2, "");
    /* The help's lines, the later ones under the first. */
    for (const char *p = o->help;;) {
      const char *nl = strchr(p, '\n');
      int n = nl ? (int)(nl - p) : (int)strlen(p);
      fprintf(f, "%.*s", n, p);
      if (!nl) break;
      fprintf(f, "\n%*s", COL, "");
      p = nl + 1;
    }
    if (o->def) fprintf(f, " (default %s)", o->def);
    fputc('\n', f);
  }
}
