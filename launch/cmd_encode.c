/* staticpipe encode: prompts to --cond files through the UMT5 text encoder.
 * Its shared options are the job's (job_params.h: --t5, --prompt,
 * --negative, --device, with run's rules for a prompt's text). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "file_read.h"
#include "job_prompt.h"
#include "job_session.h"
#include "log.h"
#include "path_check.h"
#include "stage.h"
#include "t5_file.h"
#include "tensor_io.h"
#include "tokenizer.h"
#include "umt5_encode.h"

#define ENCODE_BATCH 64            /* prompts per pass over the weights (bounds the outputs' memory) */
#define PROMPTS_MAX_BYTES (64u << 20) /* a --prompts file */
#define COND_NAME "cond_%05d.h5"     /* --prompts: DIR/cond_00000.h5 for the first prompt */

enum { OPT_PROMPTS = JOB_OPT_COUNT, OPT_NO_NEGATIVE, OPT_TOKENIZER, OPT_OUT, OPT_HELP,
       OPT_T5 = JOB_OPT_T5, OPT_PROMPT = JOB_OPT_PROMPT, OPT_NEGATIVE = JOB_OPT_NEGATIVE,
       OPT_DEVICE = JOB_OPT_DEVICE, OPT_NO_VERIFY = JOB_OPT_NO_VERIFY };

/* encode takes the job's --t5, --prompt, --negative, --device and
 * --no-verify with its own help (and --device's default, cpu), and its own
 * options. */
static void encode_table(cli_opts *t) {
  static const int ids[] = {JOB_OPT_QUIET};
  static const job_option own[] = {
      {OPT_T5, "t5", 0, "T5", NULL, 0,
       "the text encoder: a file from convert, or\n"
       "synth:PRESET[:SEED] (a synthetic encoder needs\n"
       "--tokenizer) (required)"},
      {OPT_PROMPT, "prompt", 'p', "TEXT", NULL, 0,
       "the prompt (UTF-8, not empty, at most 4095 bytes)"},
      {OPT_PROMPTS, "prompts", 'P', "FILE", NULL, 0,
       "many prompts, one per line (blank lines skipped; each\n"
       "at most 4095 bytes, no NUL byte), one load: -o names a\n"
       "directory (new or existing) that gets cond_00000.h5 for\n"
       "the first prompt, and so on in order"},
      {OPT_NEGATIVE, "negative", 0, "TEXT", NULL, 0,
       "the negative prompt (default, or when empty: Wan's own,\n"
       "below)"},
      {OPT_NO_NEGATIVE, "no-negative", 0, NULL, NULL, 0, "write no context_null (for run --cfg 1)"},
      {OPT_TOKENIZER, "tokenizer", 0, "PATH", NULL, 0,
       "spiece.model or tokenizer.json to use instead of the\n"
       "stored one (its pieces must fit the encoder's vocabulary)"},
      {OPT_OUT, "out", 'o', "PATH", NULL, 0,
       "output file (--prompt) or directory (--prompts); written\n"
       "atomically"},
      {OPT_NO_VERIFY, "no-verify", 0, NULL, NULL, 0,
       "skip the weights' checksums (the tokenizer's are checked)"},
      {OPT_DEVICE, "device", 'd', "DEV", "cpu", 0,
       "cpu (fp32, the reference), cuda (bf16 weights and\n"
       "activations, fp32 accumulation, every layer kept on GPU\n"
       "0, CUDA_VISIBLE_DEVICES honoured; what run --prompt uses\n"
       "on a CUDA run) or auto (cuda when a GPU is visible)"},
      {OPT_HELP, "help", 'h', NULL, NULL, 0, "this text"},
  };
  cli_opts_build(t, ids, (int)(sizeof ids / sizeof ids[0]), own,
                 (int)(sizeof own / sizeof own[0]));
}

static void usage(const cli_opts *t, FILE *f) {
  fprintf(f,
          "usage: staticpipe encode --t5 T5.h5 --prompt TEXT [--negative TEXT] -o COND.h5\n"
          "       staticpipe encode --t5 T5.h5 --prompts FILE [--negative TEXT] -o DIR\n"
          "       staticpipe encode --vae VAE --image FILE | --video FILE [--frames N] -o L.h5\n"
          "       staticpipe encode --vae VAE --model M --image FILE [--max-area A | --size HxW]\n"
          "                         -o L.h5\n"
          "\n"
          "One verb, two encoders: --t5 encodes prompts (below); --vae encodes an image or\n"
          "a video into latents with the Wan 2.1 VAE encoder, or with --model an image as\n"
          "run --image prepares and encodes it for an I2V or TI2V model (staticpipe encode\n"
          "--vae X --help lists its options).\n"
          "\n"
          "Encodes prompts with Wan's UMT5-XXL text encoder (CPU fp32, or CUDA bf16) into the --cond\n"
          "files that run reads: dataset context float32 [L, dim] (L = the prompt's tokens,\n"
          "end-of-sequence included, at most %d) and context_null, the negative prompt,\n"
          "for classifier-free guidance. The prompt is cleaned as Wan does (HTML unescaped\n"
          "twice, whitespace collapsed) and tokenized with the tokenizer stored in T5.h5.\n"
          "\n",
          TOK_CONTEXT);
  cli_opts_usage(t, f);
  fprintf(f,
          "\n"
          "A prompt longer than %d tokens is cut (a warning says how many tokens were\n"
          "dropped), as Wan does. Invalid UTF-8 is refused with its byte offset.\n"
          "Threads: OMP_NUM_THREADS (results do not depend on it).\n"
          "Synthetic presets: %s.\n"
          "Wan's negative prompt: %s\n",
          TOK_CONTEXT, t5_preset_names(), t5_wan_negative_prompt);
}

/* One prompt to encode, and where it came from. */
typedef struct prompt {
  const char *text;
  size_t len;
  int line;     /* in --prompts, else 0 */
  int32_t *ids; /* (TOK_CONTEXT) */
  int64_t n;
} prompt;

typedef struct encode_opts {
  const char *t5, *text, *prompts, *negative, *tokenizer, *out, *device;
  int no_negative, verify;
  rank_device dev; /* from device */
} encode_opts;

/* "--prompt", "prompts.txt:3", or "--negative", for messages. */
static void prompt_where(const encode_opts *o, const prompt *p, int negative, char *buf, size_t n) {
  if (negative)
    snprintf(buf, n, "--negative");
  else if (p->line)
    snprintf(buf, n, "%s:%d", o->prompts, p->line);
  else
    snprintf(buf, n, "--prompt");
}

/* Cleans, checks and tokenizes p (SP_OK or SP_ERR_INPUT, logged). */
static int prompt_tokenize(const encode_opts *o, const tok_model *tok, prompt *p, int negative) {
  char where[4200];
  prompt_where(o, p, negative, where, sizeof where);
  p->ids = sp_xmalloc(TOK_CONTEXT * sizeof *p->ids);
  return t5_prompt_tokenize(tok, p->text, p->len, where, p->ids, &p->n);
}

/* The lines of a --prompts file: *buf owns the text, p[i] point into it. */
static int prompts_read(const char *path, char **buf, prompt **p, int *count) {
  FILE *f = NULL;
  if (rank_file_fopen_read(path, &f) != SP_OK) return SP_ERR_INPUT;
  char *b = sp_xmalloc(PROMPTS_MAX_BYTES + 1);
  size_t n = fread(b, 1, PROMPTS_MAX_BYTES + 1, f);
  int bad = ferror(f);
  fclose(f);
  if (bad || n > PROMPTS_MAX_BYTES) {
    sp_log_error("--prompts %s: %s", path, bad ? "read error" : "larger than 64 MiB");
    free(b);
    return SP_ERR_INPUT;
  }
  b[n] = 0;
  int cap = 16, k = 0, line = 0;
  prompt *out = sp_xcalloc((size_t)cap, sizeof *out);
  for (size_t at = 0; at < n;) {
    size_t end = at;
    while (end < n && b[end] != '\n') end++;
    line++;
    size_t len = end - at;
    if (len && b[at + len - 1] == '\r') len--;
    int blank = 1;
    for (size_t i = 0; i < len && blank; i++)
      blank = b[at + i] == ' ' || b[at + i] == '\t' || b[at + i] == '\r';
    char where[JOB_PATH + 32];
    snprintf(where, sizeof where, "%s:%d", path, line);
    if (memchr(b + at, '\0', len)) {
      /* it would end the text early, unseen */
      sp_log_error("%s: the line holds a NUL byte (a prompts file is text)", where);
      blank = -1;
    } else if (!blank && job_prompt_len_check(where, len, 0) != SP_OK) {
      blank = -1; /* the rule of run's --prompt: the same text fits both */
    }
    if (blank < 0) {
      free(out);
      free(b);
      return SP_ERR_INPUT;
    }
    if (!blank) {
      if (k == cap) {
        cap *= 2;
        out = realloc(out, (size_t)cap * sizeof *out);
        if (!out) sp_fatal("out of memory reading %s", path);
      }
      out[k++] = (prompt){.text = b + at, .len = len, .line = line};
    }
    at = end + 1;
  }
  if (k == 0) {
    sp_log_error("--prompts %s: holds no prompt (every line is blank)", path);
    free(out);
    free(b);
    return SP_ERR_INPUT;
  }
  *buf = b;
  *p = out;
  *count = k;
  return SP_OK;
}

/* Each output path, checked before any work: the file, or in a directory
 * (created when new) one file per prompt. */
static int outputs_check(const encode_opts *o, int count, char ***paths, int *made_dir) {
  rank_path_arg in[3] = {{"--t5", o->t5}, {"--prompts", o->prompts}, {"--tokenizer", o->tokenizer}};
  char **out = sp_xcalloc((size_t)count, sizeof *out);
  *paths = out;
  if (!o->prompts) {
    out[0] = strdup(o->out);
    return rank_path_check_output("--out", o->out, in, 3);
  }
  struct stat st;
  if (stat(o->out, &st) == 0 && !S_ISDIR(st.st_mode)) {
    sp_log_error("--out %s: with --prompts, -o names a directory (this is a file)", o->out);
    return SP_ERR_INPUT;
  }
  if (stat(o->out, &st) != 0) {
    if (mkdir(o->out, 0777) != 0) {
      sp_log_error("--out %s: cannot create the directory: %s", o->out, strerror(errno));
      return SP_ERR_INPUT;
    }
    *made_dir = 1;
  }
  for (int i = 0; i < count; i++) {
    size_t n = strlen(o->out) + 32;
    out[i] = sp_xmalloc(n);
    snprintf(out[i], n, "%s/" COND_NAME, o->out, i);
    if (rank_path_check_output("--out", out[i], in, 3) != SP_OK) return SP_ERR_INPUT;
  }
  return SP_OK;
}

static int write_cond(const t5_model *m, rank_device dev, const char *path, const prompt *p,
                      const float *ctx, const prompt *neg, const float *ctx_null) {
  const t5_model_info *in = t5_model_get_info(m);
  rank_outfile *f = NULL;
  int rc = rank_outfile_open(path, &f);
  if (rc != SP_OK) return rc;
  int64_t d[2] = {p->n, in->config.dim};
  char *text = strndup(p->text, p->len);
  rc = rank_outfile_put(f, "context", 2, d, ctx);
  if (rc == SP_OK && neg) {
    int64_t dn[2] = {neg->n, in->config.dim};
    rc = rank_outfile_put(f, "context_null", 2, dn, ctx_null);
  }
  char *neg_text = neg ? strndup(neg->text, neg->len) : NULL;
  if (rc == SP_OK) rc = rank_outfile_attr_str(f, "prompt", text);
  if (rc == SP_OK) rc = rank_outfile_attr_str(f, "negative_prompt", neg_text ? neg_text : "");
  if (rc == SP_OK) rc = rank_outfile_attr_i64(f, "tokens", p->n);
  if (rc == SP_OK) rc = rank_outfile_attr_i64(f, "tokens_null", neg ? neg->n : 0);
  if (rc == SP_OK) rc = rank_outfile_attr_str(f, "encoder", in->id.source);
  if (rc == SP_OK) rc = rank_outfile_attr_str(f, "encoder_checksum", in->id.checksum);
  if (rc == SP_OK)
    rc = rank_outfile_attr_str(f, "encoder_dtype", dev == RANK_DEVICE_CUDA ? "bf16 (cuda)" : "fp32");
  if (rc == SP_OK) rc = rank_outfile_attr_str(f, "generator", "staticpipe encode");
  if (rc == SP_OK && p->line) rc = rank_outfile_attr_i64(f, "prompts_line", p->line);
  free(text);
  free(neg_text);
  if (rc != SP_OK) {
    rank_outfile_abort(f);
    return rc;
  }
  return rank_outfile_commit(f);
}

/* Encodes prompts [first, first + k) together with the negative (encoded
 * in the first pass only) and writes their files. */
static int encode_batch(const encode_opts *o, t5_model *m, prompt *p, int first, int k,
                        prompt *neg, float **ctx_null, char **paths) {
  const int64_t D = t5_model_get_info(m)->config.dim;
  int32_t *ids[ENCODE_BATCH + 1];
  int64_t n[ENCODE_BATCH + 1];
  float *out[ENCODE_BATCH + 1];
  int c = 0;
  for (int i = 0; i < k; i++, c++) {
    ids[c] = p[first + i].ids;
    n[c] = p[first + i].n;
    out[c] = sp_xmalloc((size_t)(n[c] * D) * sizeof(float));
  }
  int with_neg = neg && !*ctx_null;
  if (with_neg) {
    ids[c] = neg->ids;
    n[c] = neg->n;
    out[c] = sp_xmalloc((size_t)(n[c] * D) * sizeof(float));
    c++;
  }
  umt5_encode_times tm;
  const umt5_encode_job job = {.device = o->dev, .count = c, .ids = ids, .n = n, .out = out};
  int rc = umt5_encode(m, &job, &tm);
  if (rc == SP_OK && o->dev == RANK_DEVICE_CUDA)
    sp_log_info("encode: cuda: weights read and placed in %.3f s; %d sequence(s) encoded in "
                "%.4f s: the first %.4f s, the others %.4f s each",
                tm.load_s, c, tm.encode_s, tm.first_s,
                c > 1 ? (tm.encode_s - tm.first_s) / (c - 1) : 0.0);
  if (with_neg) *ctx_null = out[c - 1];
  for (int i = 0; rc == SP_OK && i < k; i++) {
    rc = write_cond(m, o->dev, paths[first + i], &p[first + i], out[i], neg, neg ? *ctx_null : NULL);
    if (rc == SP_OK)
      sp_log_info("encode: wrote %s (%lld tokens%s)", paths[first + i], (long long)n[i],
                  neg ? ", and the negative prompt" : "");
  }
  for (int i = 0; i < k; i++) free(out[i]);
  return rc;
}

static int encode_run(encode_opts *o) {
  int rc, count = 1, made_dir = 0;
  char *file_text = NULL, **paths = NULL;
  prompt *p = NULL, neg = {0};
  t5_model *m = NULL;
  tok_model *own_tok = NULL;
  float *ctx_null = NULL;
  const char *in_paths[3] = {o->t5, o->prompts, o->tokenizer};
  const char *in_flags[3] = {"--t5", "--prompts", "--tokenizer"};
  for (int i = 0; i < 3; i++) {
    if (!in_paths[i] || (i == 0 && strncmp(o->t5, "synth:", 6) == 0)) continue;
    if ((rc = rank_path_check_input(in_flags[i], in_paths[i], RANK_PATH_FILE)) != SP_OK)
      return rc;
  }
  if (!o->prompts && job_output_not_video("--out", o->out, "a cond file (HDF5)") != SP_OK)
    return SP_ERR_INPUT;
  if (o->prompts) {
    if ((rc = prompts_read(o->prompts, &file_text, &p, &count)) != SP_OK) return rc;
  } else {
    p = sp_xcalloc(1, sizeof *p);
    p[0] = (prompt){.text = o->text, .len = strlen(o->text)};
  }
  if ((rc = outputs_check(o, count, &paths, &made_dir)) != SP_OK) goto out;
  if ((rc = t5_model_open(o->t5, o->verify, &m)) != SP_OK) goto out;
  const tok_model *tok = t5_model_tokenizer(m);
  if (o->tokenizer) {
    if ((rc = tok_model_load(o->tokenizer, &own_tok)) != SP_OK) goto out;
    tok = own_tok;
    /* init's and convert's rule: an id past the vocabulary has no row */
    const int pieces = tok_model_spec(own_tok)->n_pieces;
    const int64_t vocab = t5_model_get_info(m)->config.vocab;
    if (pieces > vocab) {
      sp_log_error("--tokenizer %s: the tokenizer has %d pieces, more than the encoder's "
                   "vocabulary of %lld (--t5 %s)",
                   o->tokenizer, pieces, (long long)vocab, o->t5);
      rc = SP_ERR_INPUT;
      goto out;
    }
  }
  if (!tok) {
    sp_log_error("--t5 %s has no tokenizer (a synthetic encoder): pass --tokenizer PATH", o->t5);
    rc = SP_ERR_INPUT;
    goto out;
  }
  for (int i = 0; i < count; i++)
    if ((rc = prompt_tokenize(o, tok, &p[i], 0)) != SP_OK) goto out;
  if (!o->no_negative) {
    neg.text = t5_negative_or_default(o->negative);
    neg.len = strlen(neg.text);
    if ((rc = prompt_tokenize(o, tok, &neg, 1)) != SP_OK) goto out;
  }
  const t5_model_info *in = t5_model_get_info(m);
  sp_log_info("encode: %s (%s, %lld layers, dim %lld, %s) on the %s, %d prompt(s)%s",
              in->id.source,
              in->id.preset[0] ? in->id.preset : "custom config", (long long)in->config.layers,
              (long long)in->config.dim, kern_dtype_name(in->id.dtype),
              o->dev == RANK_DEVICE_CUDA ? "GPU (bf16)" : "CPU (fp32)", count,
              o->no_negative ? "" : " and the negative prompt");
  for (int first = 0; first < count && rc == SP_OK; first += ENCODE_BATCH) {
    int k = count - first < ENCODE_BATCH ? count - first : ENCODE_BATCH;
    rc = encode_batch(o, m, p, first, k, o->no_negative ? NULL : &neg, &ctx_null, paths);
  }
out:
  /* A directory this run made and filled with nothing goes again (rmdir
   * leaves one that holds files). */
  if (rc != SP_OK && made_dir) rmdir(o->out);
  for (int i = 0; p && i < count; i++) free(p[i].ids);
  for (int i = 0; paths && i < count; i++) free(paths[i]);
  free(paths);
  free(neg.ids);
  free(ctx_null);
  free(p);
  free(file_text);
  tok_model_free(own_tok);
  t5_model_close(m);
  return rc;
}

/* What encode's own flags say (the job's are in job). */
typedef struct encode_cli {
  job_params job; /* --t5, --prompt, --negative, --device, --no-verify */
  const char *prompts, *tokenizer, *out;
  int no_negative;
} encode_cli;

static int encode_opt(void *ctx, int id, const char *v) {
  encode_cli *c = ctx;
  switch (id) {
  case OPT_PROMPTS: c->prompts = v; return SP_OK;
  case OPT_NO_NEGATIVE: c->no_negative = 1; return SP_OK;
  case OPT_TOKENIZER: c->tokenizer = v; return SP_OK;
  case OPT_OUT: c->out = v; return SP_OK;
  default: return CLI_HELP;
  }
}

/* 1 when option id was given. */
static int given(const cli_result *r, int id) {
  for (int i = 0; i < r->given.n; i++)
    if (r->given.opt[i]->id == id) return 1;
  return 0;
}

/* 1 when argv names option name (--NAME X, --NAME=X). */
static int names_option(int argc, char **argv, const char *name) {
  const size_t n = strlen(name);
  for (int i = 1; i < argc; i++)
    if (strncmp(argv[i], "--", 2) == 0 && strncmp(argv[i] + 2, name, n) == 0 &&
        (argv[i][2 + n] == '\0' || argv[i][2 + n] == '='))
      return 1;
  return 0;
}

int cmd_encode(int argc, char **argv) {
  /* --vae: the VAE encoder's command (cmd_encode_vae.c), one encoder per
   * call */
  if (names_option(argc, argv, "vae")) {
    if (names_option(argc, argv, "t5")) {
      sp_log_error("encode: --t5 and --vae: one encoder per call (--t5 for prompts, --vae for "
                   "images and videos)");
      return cli_bad_usage("encode");
    }
    return cmd_encode_vae(argc, argv);
  }
  static const cli_command cmd = {"encode", encode_table, encode_opt, usage, 0};
  encode_cli c = {0};
  cli_result res;
  int rc = cli_command_parse(&cmd, argc, argv, &c.job, &c, &res);
  if (rc != SP_OK || res.help) return rc;
  const int has_prompt = given(&res, JOB_OPT_PROMPT), has_negative = given(&res, JOB_OPT_NEGATIVE);
  const char *missing = !c.job.t5 ? "--t5" : !c.out ? "--out" : NULL;
  if (!missing && !has_prompt == !c.prompts) missing = "exactly one of --prompt and --prompts";
  if ((rc = cli_require("encode", missing)) != SP_OK) return rc;
  if (c.no_negative && has_negative) {
    sp_log_error("encode: --negative and --no-negative contradict each other");
    return cli_bad_usage("encode");
  }
  if (c.job.quiet) sp_log_set_level(0);
  encode_opts o = {.t5 = c.job.t5, .text = has_prompt ? c.job.job.prompt : NULL,
                   .prompts = c.prompts, .negative = has_negative ? c.job.job.negative : NULL,
                   .tokenizer = c.tokenizer, .out = c.out, .device = c.job.device,
                   .no_negative = c.no_negative, .verify = c.job.verify};
  if (job_device_resolve(&c.job, &o.dev) != SP_OK) return SP_ERR_INPUT;
  return encode_run(&o);
}
