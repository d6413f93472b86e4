/* The command-line interface every subcommand shares (see cli.h). */
#include "cli.h"

#include <getopt.h>
#include <string.h>

#include "log.h"

/* The short letters of every command, each with the one long option it
 * means (README "Commands"). */
static const struct {
  char c;
  const char *name;
} letters[] = {
    {'m', "model"},   {'c', "cond"},    {'f', "frames"},    {'s', "size"},   {'n', "steps"},
    {'g', "cfg"},     {'b', "budget"},  {'d', "device"},    {'o', "out"},    {'q', "quiet"},
    {'j', "json"},    {'h', "help"},    {'v', "verify"},    {'r', "repeat"}, {'l', "latent"},
    {'t', "timestep"}, {'L', "latents"}, {'a', "arch"},     {'p', "prompt"}, {'P', "prompts"},
    {'G', "gpu-mem"}, {'S', "speed"},   {'i', "inventory"}, {'e', "expert"},
};

static int g_errors_at_reset;

/* Resets getopt for a new parse (glibc: optind 0 re-initialises
 * completely, GNU permutation stays on); the messages are cli_parse's. */
static void getopt_reset(void) {
  optind = 0;
  opterr = 0;
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

/* A DiT file's --dtype words and what each stores (cli_parse_dit_dtype,
 * cli_dit_dtype_word). */
static const struct {
  const char *word;
  kern_dtype dtype;
} dit_dtypes[] = {{"bf16", KERN_DTYPE_BF16}, {"fp32", KERN_DTYPE_F32}, {"fp8", KERN_DTYPE_E4M3},
                  {"int8", KERN_DTYPE_I8},   {"q8_0", KERN_DTYPE_Q8_0}};
enum { DIT_DTYPES = (int)(sizeof dit_dtypes / sizeof dit_dtypes[0]) };

int cli_parse_dit_dtype(const char *flag, const char *s, kern_dtype *out) {
  for (int i = 0; i < DIT_DTYPES; i++)
    if (strcmp(s, dit_dtypes[i].word) == 0) {
      *out = dit_dtypes[i].dtype;
      return SP_OK;
    }
  sp_log_error("%s: '%s' is not bf16, fp32, fp8, int8 or q8_0", flag, s);
  return SP_ERR_INPUT;
}

const char *cli_dit_dtype_word(kern_dtype d) {
  for (int i = 0; i < DIT_DTYPES; i++)
    if (dit_dtypes[i].dtype == d) return dit_dtypes[i].word;
  return kern_dtype_name(d);
}

int cli_dtype_quantized(kern_dtype d) { return d != KERN_DTYPE_BF16 && d != KERN_DTYPE_F32; }

int cli_bad_usage(const char *cmd) {
  /* One error line per failure: after a specific error the pointer to
   * --help is a hint, otherwise it is the error. */
  if (sp_log_error_count() > g_errors_at_reset)
    sp_log_info("run 'staticpipe %s --help' for the options", cmd);
  else
    sp_log_error("bad usage: run 'staticpipe %s --help' for the options", cmd);
  return SP_ERR_INPUT;
}

/* ---- the table ---- */

static void check_letter(const job_option *o) {
  if (!o->short_name) return;
  for (size_t i = 0; i < sizeof letters / sizeof letters[0]; i++)
    if (letters[i].c == o->short_name) {
      if (strcmp(letters[i].name, o->name) != 0)
        sp_fatal("-%c is --%s in every command, not --%s", o->short_name, letters[i].name,
                 o->name);
      return;
    }
  sp_fatal("-%c (--%s) is not in the table of short letters (launch/cli.c)", o->short_name,
           o->name);
}

static void add_long(cli_opts *t, const char *name, int has_arg, int idx) {
  if (t->nlongs == CLI_LONGS_MAX)
    sp_fatal("a command with more than %d long options", CLI_LONGS_MAX);
  t->longs[t->nlongs++] = (struct option){name, has_arg, NULL, 1000 + idx};
}

void cli_opts_build(cli_opts *t, const int *job_ids, int nids, const job_option *own, int nown) {
  memset(t, 0, sizeof *t);
  if (nids + nown > CLI_OPTS_MAX)
    sp_fatal("a command with %d options, at most %d", nids + nown, CLI_OPTS_MAX);
  for (int i = 0; i < nids; i++) t->opt[t->n++] = job_option_get(job_ids[i]);
  for (int i = 0; i < nown; i++) t->opt[t->n++] = &own[i];
  char *sh = t->shorts;
  *sh++ = ':'; /* a missing value is told apart from an unknown option */
  for (int i = 0; i < t->n; i++) {
    const job_option *o = t->opt[i];
    check_letter(o);
    add_long(t, o->name, o->arg ? required_argument : no_argument, i);
    if (o->id < JOB_OPT_COUNT) t->repeat[i] = (unsigned char)job_option_repeatable(o->id);
    if (o->short_name) {
      *sh++ = o->short_name;
      if (o->arg) *sh++ = ':';
    }
  }
  *sh = '\0';
  int na = 0;
  const job_option_alias *al = job_option_aliases(&na);
  for (int a = 0; a < na; a++)
    for (int i = 0; i < t->n; i++)
      if (t->opt[i]->id == al[a].id)
        add_long(t, al[a].name, t->opt[i]->arg ? required_argument : no_argument, i);
}

void cli_opts_allow_repeat(cli_opts *t, int id) {
  for (int i = 0; i < t->n; i++)
    if (t->opt[i]->id == id) t->repeat[i] = 1;
}

/* ---- messages ---- */

/* Edit distance of a and b (Levenshtein), for names up to 63 bytes. */
static int distance(const char *a, const char *b) {
  int la = (int)strlen(a), lb = (int)strlen(b), row[64];
  if (la > 63 || lb > 63) return 99;
  for (int j = 0; j <= lb; j++) row[j] = j;
  for (int i = 1; i <= la; i++) {
    int diag = row[0];
    row[0] = i;
    for (int j = 1; j <= lb; j++) {
      const int up = row[j];
      const int sub = diag + (a[i - 1] != b[j - 1]);
      row[j] = sub < up + 1 ? sub : up + 1;
      if (row[j - 1] + 1 < row[j]) row[j] = row[j - 1] + 1;
      diag = up;
    }
  }
  return row[lb];
}

/* An unknown (or ambiguous) option word: one line, with the known option
 * closest to it, or those it abbreviates. */
static void unknown_option(const char *cmd, const cli_opts *t, const char *word, int optchar) {
  if (optchar) {
    sp_log_error("%s: unknown option '-%c'", cmd, optchar);
    return;
  }
  char name[64];
  const char *w = word ? word : "?";
  snprintf(name, sizeof name, "%s", w + strspn(w, "-"));
  name[strcspn(name, "=")] = '\0';
  char prefixed[512] = "";
  int best = -1, bestd = 99, nprefixed = 0;
  for (int i = 0; i < t->nlongs; i++) {
    const char *known = t->longs[i].name;
    if (name[0] && strncmp(known, name, strlen(name)) == 0 && nprefixed < 6) {
      size_t at = strlen(prefixed);
      snprintf(prefixed + at, sizeof prefixed - at, "%s--%s", nprefixed++ ? ", " : "", known);
    }
    const int d = distance(name, known);
    if (d < bestd) bestd = d, best = i;
  }
  if (nprefixed > 1) {
    sp_log_error("%s: option '%s' is ambiguous: %s", cmd, w, prefixed);
    return;
  }
  const int near = (int)strlen(name) / 3 > 2 ? (int)strlen(name) / 3 : 2;
  if (best >= 0 && bestd <= near)
    sp_log_error("%s: unknown option '%s'; did you mean --%s?", cmd, w, t->longs[best].name);
  else
    sp_log_error("%s: unknown option '%s'", cmd, w);
}

/* The index in t of getopt's value ch, -1 when none. */
static int option_index(const cli_opts *t, int ch) {
  if (ch >= 1000 && ch < 1000 + t->n) return ch - 1000;
  for (int i = 0; i < t->n; i++)
    if (t->opt[i]->short_name && ch == t->opt[i]->short_name) return i;
  return -1;
}

/* ---- parsing ---- */

/* Parses argv by table t into job and ctx (see cli_command_parse). */
static int parse(const cli_command *cmd, const cli_opts *t, int argc, char **argv,
                 job_params *job, void *ctx, cli_result *res) {
  const char *first[CLI_OPTS_MAX] = {0};
  unsigned char seen[CLI_OPTS_MAX] = {0};
  getopt_reset();
  for (;;) {
    const int ch = getopt_long(argc, argv, t->shorts, t->longs, NULL);
    if (ch == -1) break;
    const int i = option_index(t, ch == ':' ? optopt : ch);
    if (ch == '?' || i < 0) {
      const int letter = optopt > 0 && optopt < 256 ? optopt : 0;
      unknown_option(cmd->name, t, letter ? NULL : argv[optind - 1], letter);
      return cli_bad_usage(cmd->name);
    }
    const job_option *o = t->opt[i];
    if (ch == ':') {
      sp_log_error("%s: --%s needs a value (%s)", cmd->name, o->name, o->arg);
      return cli_bad_usage(cmd->name);
    }
    if (seen[i]++ && !t->repeat[i]) {
      sp_log_error("%s: --%s is given twice ('%s', then '%s'): give it once", cmd->name,
                   o->name, first[i] ? first[i] : "", optarg ? optarg : "");
      return cli_bad_usage(cmd->name);
    }
    if (!first[i]) first[i] = optarg;
    if (res->given.n < CLI_GIVEN_MAX) {
      res->given.opt[res->given.n] = o;
      res->given.value[res->given.n++] = o->arg ? optarg : NULL;
    }
    const int rc = o->id < JOB_OPT_COUNT ? job_params_set(job, o->id, optarg)
                                         : cmd->own(ctx, o->id, optarg);
    if (rc != SP_OK) return rc;
  }
  res->first_operand = optind;
  const int operands = argc - optind;
  if (cmd->operands >= 0 && operands > cmd->operands) {
    sp_log_error("%s: unexpected argument '%s'", cmd->name, argv[optind + cmd->operands]);
    return cli_bad_usage(cmd->name);
  }
  return SP_OK;
}

int cli_command_parse(const cli_command *cmd, int argc, char **argv, job_params *job, void *ctx,
                      cli_result *res) {
  cli_opts t;
  cmd->table(&t);
  memset(res, 0, sizeof *res);
  if (job) {
    job_params_default(job);
    /* A command's own default of a job option (encode's --device cpu). */
    for (int i = 0; i < t.n; i++)
      if (t.opt[i]->id < JOB_OPT_COUNT && t.opt[i]->def &&
          t.opt[i] != job_option_get(t.opt[i]->id) &&
          job_params_set(job, t.opt[i]->id, t.opt[i]->def) != SP_OK)
        sp_fatal("%s: the default of --%s does not parse", cmd->name, t.opt[i]->name);
    job->job.steps_given = job->job.cfg_given = job->job.shift_given = 0; /* defaults */
  }
  int rc = parse(cmd, &t, argc, argv, job, ctx, res);
  if (rc != CLI_HELP) return rc;
  if (cmd->usage) cmd->usage(&t, stdout);
  res->help = 1;
  return SP_OK;
}

int cli_command_parse_into(const cli_command *cmd, int argc, char **argv, job_params *job,
                           void *ctx, cli_result *res) {
  cli_opts t;
  cmd->table(&t);
  memset(res, 0, sizeof *res);
  const int rc = parse(cmd, &t, argc, argv, job, ctx, res);
  res->help = rc == CLI_HELP;
  return rc == CLI_HELP ? SP_OK : rc;
}

void cli_opts_build_job(cli_opts *t, const job_option *own, int nown) {
  int ids[JOB_OPT_COUNT];
  for (int i = 0; i < JOB_OPT_COUNT; i++) ids[i] = i;
  cli_opts_build(t, ids, JOB_OPT_COUNT, own, nown);
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
    /* Its other spellings (the long table holds them after the names). */
    int first = 1;
    for (int k = t->n; k < t->nlongs; k++)
      if (t->longs[k].val == 1000 + i) {
        if (first) fprintf(f, "\n%*salso", COL, "");
        fprintf(f, "%s --%s", first ? "" : ",", t->longs[k].name);
        first = 0;
      }
    fputc('\n', f);
  }
}
