/* staticpipe encode: prompts to --cond files through the UMT5 text encoder. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
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

static void usage(FILE *f) {
  fprintf(f,
          "usage: staticpipe encode --t5 T5.h5 --prompt TEXT [--negative TEXT] -o COND.h5\n"
          "       staticpipe encode --t5 T5.h5 --prompts FILE [--negative TEXT] -o DIR\n"
          "       staticpipe encode --vae VAE --image FILE | --video FILE [--frames N] -o L.h5\n"
          "\n"
          "One verb, two encoders: --t5 encodes prompts (below); --vae encodes an image or\n"
          "a video into latents with the Wan 2.1 VAE encoder (staticpipe encode --vae X\n"
          "--help lists its options).\n"
          "\n"
          "Encodes prompts with Wan's UMT5-XXL text encoder (CPU fp32, or CUDA bf16) into the --cond\n"
          "files that run reads: dataset context float32 [L, dim] (L = the prompt's tokens,\n"
          "end-of-sequence included, at most %d) and context_null, the negative prompt,\n"
          "for classifier-free guidance. The prompt is cleaned as Wan does (HTML unescaped\n"
          "twice, whitespace collapsed) and tokenized with the tokenizer stored in T5.h5.\n"
          "\n"
          "  -m, --t5 T5          the text encoder: a file from convert, or synth:PRESET[:SEED]\n"
          "                       (presets %s; a synthetic encoder needs --tokenizer)\n"
          "  -p, --prompt TEXT    the prompt (UTF-8, not empty)\n"
          "  -P, --prompts FILE   many prompts, one per line (blank lines skipped), one load:\n"
          "                       -o names a directory (new or existing) that gets\n"
          "                       cond_00000.h5 for the first prompt, and so on in order\n"
          "  -n, --negative TEXT  the negative prompt (default, or when empty: Wan's own,\n"
          "                       below)\n"
          "      --no-negative    write no context_null (for run --cfg 1)\n"
          "  -t, --tokenizer PATH spiece.model or tokenizer.json to use instead of the\n"
          "                       stored one\n"
          "  -o, --out PATH       output file (--prompt) or directory (--prompts); written\n"
          "                       atomically\n"
          "      --no-verify      skip the weights' checksums (the tokenizer's are checked)\n"
          "  -d, --device DEV     cpu (default: fp32, the reference), cuda (bf16 weights and\n"
          "                       activations, fp32 accumulation, every layer kept on GPU 0,\n"
          "                       CUDA_VISIBLE_DEVICES honoured; what run --prompt uses on a\n"
          "                       CUDA run) or auto (cuda when a GPU is visible)\n"
          "  -h, --help           this text\n"
          "\n"
          "A prompt longer than %d tokens is cut (a warning says how many tokens were\n"
          "dropped), as Wan does. Invalid UTF-8 is refused with its byte offset.\n"
          "Threads: OMP_NUM_THREADS (results do not depend on it).\n"
          "Wan's negative prompt: %s\n",
          TOK_CONTEXT, t5_preset_names(), TOK_CONTEXT, t5_wan_negative_prompt);
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
  FILE *f = fopen(path, "rb");
  if (!f) {
    sp_log_error("--prompts %s: cannot open it: %s", path, strerror(errno));
    return SP_ERR_INPUT;
  }
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
    if ((rc = rank_path_check_input(in_flags[i], in_paths[i], RANK_PATH_FILE)) != SP_OK) return rc;
  }
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

/* 1 when argv names --vae (--vae X, --vae=X): the VAE encoder's command. */
static int names_vae(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], "--vae") == 0 || strncmp(argv[i], "--vae=", 6) == 0) return 1;
  return 0;
}

int cmd_encode(int argc, char **argv) {
  enum { OPT_NO_NEGATIVE = 256, OPT_NO_VERIFY };
  if (names_vae(argc, argv)) {
    for (int i = 1; i < argc; i++)
      if (strcmp(argv[i], "--t5") == 0 || strncmp(argv[i], "--t5=", 5) == 0 ||
          strcmp(argv[i], "-m") == 0) {
        sp_log_error("encode: --t5 and --vae: one encoder per call (--t5 for prompts, --vae "
                     "for images and videos)");
        return cli_bad_usage("encode");
      }
    return cmd_encode_vae(argc, argv);
  }
  static const struct option opts[] = {{"t5", required_argument, 0, 'm'},
                                       {"prompt", required_argument, 0, 'p'},
                                       {"prompts", required_argument, 0, 'P'},
                                       {"negative", required_argument, 0, 'n'},
                                       {"no-negative", no_argument, 0, OPT_NO_NEGATIVE},
                                       {"tokenizer", required_argument, 0, 't'},
                                       {"out", required_argument, 0, 'o'},
                                       {"no-verify", no_argument, 0, OPT_NO_VERIFY},
                                       {"device", required_argument, 0, 'd'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  encode_opts o = {.verify = 1, .device = "cpu"};
  cli_getopt_reset();
  int ch;
  while ((ch = getopt_long(argc, argv, "m:p:P:n:t:o:d:h", opts, NULL)) != -1) {
    switch (ch) {
    case 'm': o.t5 = optarg; break;
    case 'p': o.text = optarg; break;
    case 'P': o.prompts = optarg; break;
    case 'n': o.negative = optarg; break;
    case OPT_NO_NEGATIVE: o.no_negative = 1; break;
    case 't': o.tokenizer = optarg; break;
    case 'o': o.out = optarg; break;
    case OPT_NO_VERIFY: o.verify = 0; break;
    case 'd': o.device = optarg; break;
    case 'h': usage(stdout); return SP_OK;
    default: return cli_bad_usage("encode");
    }
  }
  const char *missing = !o.t5 ? "--t5" : !o.out ? "--out" : NULL;
  if (!missing && !o.text == !o.prompts) missing = "exactly one of --prompt and --prompts";
  if (missing || optind < argc) {
    if (missing)
      sp_log_error("encode: %s is required", missing);
    else
      sp_log_error("encode: unexpected argument '%s'", argv[optind]);
    return cli_bad_usage("encode");
  }
  if (o.no_negative && o.negative) {
    sp_log_error("encode: --negative and --no-negative contradict each other");
    return cli_bad_usage("encode");
  }
  if (rank_device_parse(o.device, &o.dev) != SP_OK) return SP_ERR_INPUT;
  return encode_run(&o);
}
