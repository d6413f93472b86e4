/* Prompts encoded in the run (run --t5 T5 --prompt TEXT, prompt= on --jobs
 * lines): the rules of the options, and rank 0's encoding of every job's
 * prompt and negative prompt with the text encoder before the model is
 * placed (the encoder's memory is freed before the blocks are loaded).
 * The encoding is staticpipe encode's own (t5_file.h: t5_prompt_tokenize,
 * t5_negative_or_default, umt5_encode), so a job's context is bit for
 * bit the one a cond file from `encode` holds, and is used as that file's
 * would be (job_read_inputs). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job_session_impl.h"
#include "log.h"
#include "t5_file.h"
#include "tokenizer.h"
#include "umt5_encode.h"
#include "umt5_gpu.h"

#define PROMPT_BATCH 64 /* texts per pass over the encoder's weights */

/* Distinct texts (a prompt or negative prompt shared by several jobs is
 * encoded once) and each job's two of them. */
struct job_prompts {
  int njobs;
  int (*of)[2];      /* (njobs): a job's prompt and negative text, -1: none */
  int ntexts, cap;
  const char **text; /* (ntexts): into the jobs or t5_wan_negative_prompt */
  int32_t **ids;     /* (ntexts): TOK_CONTEXT slots each */
  int64_t *n;        /* (ntexts): tokens */
  int *failed;       /* (ntexts): refused by the tokenizer (logged) */
  float **ctx;       /* (ntexts): (n, dim) */
  int64_t dim;
};

void job_prompts_free(job_prompts *p) {
  if (!p) return;
  for (int i = 0; i < p->ntexts; i++) {
    free(p->ids[i]);
    free(p->ctx[i]);
  }
  free(p->of);
  free(p->text);
  free(p->ids);
  free(p->n);
  free(p->failed);
  free(p->ctx);
  free(p);
}

/* ---- the options' rules ---- */

int job_prompt_len_check(const char *flag, size_t len, int allow_empty) {
  if ((allow_empty || len > 0) && len < JOB_PROMPT) return SP_OK;
  if (len)
    sp_log_error("%s: the text is %zu bytes, longer than %d", flag, len, JOB_PROMPT - 1);
  else
    sp_log_error("%s: the text is empty: there is nothing to encode", flag);
  return SP_ERR_INPUT;
}

int job_prompt_set(const char *flag, const char *v, char *dst, int allow_empty) {
  const size_t len = strlen(v);
  if (job_prompt_len_check(flag, len, allow_empty) != SP_OK) return SP_ERR_INPUT;
  memcpy(dst, v, len + 1);
  return SP_OK;
}

int job_prompt_check_run(const job_params *o) {
  const job_spec *j = &o->job;
  const char *bad = NULL;
  if (o->jobs && (j->prompt[0]))
    bad = "run: --jobs takes prompt= from each line, not --prompt";
  else if (j->prompt[0] && !o->t5)
    bad = "run: --prompt needs --t5 (the text encoder that encodes it)";
  else if (j->prompt[0] && j->cond[0])
    bad = "run: --prompt and --cond exclude each other (a cond file is a prompt already encoded)";
  else if (o->t5 && j->cond[0])
    bad = "run: --t5 and --cond exclude each other (--cond is already encoded: give --prompt, "
          "or leave --t5 out)";
  else if (o->t5 && !o->jobs && !j->prompt[0])
    bad = "run: --t5 is given but no --prompt to encode";
  else if (j->negative[0] && !o->jobs && !j->prompt[0])
    bad = "run: --negative goes with --prompt (a cond file holds its own context_null)";
  if (bad) sp_log_error("%s", bad);
  return bad ? SP_ERR_INPUT : SP_OK;
}

int job_prompt_check_line(const job_params *p, const job_spec *j, const char *where) {
  const char *bad = !j->cond[0] && !j->prompt[0] ? "cond=FILE (or prompt=\"TEXT\") is missing"
                    : j->cond[0] && j->prompt[0] ? "cond= and prompt= exclude each other"
                    : j->prompt[0] && !p->t5     ? "prompt= needs --t5 (the text encoder)"
                                                 : NULL;
  if (bad) sp_log_error("%s: %s", where, bad);
  return bad ? SP_ERR_INPUT : SP_OK;
}

/* ---- the cost ---- */

static void cost_of(const t5_model_info *in, int64_t total, int64_t longest, int cuda,
                    job_t5_cost *out) {
  memset(out, 0, sizeof *out);
  out->device = cuda ? "cuda" : "cpu";
  out->host_bytes = umt5_encode_host_bytes(in, total, longest);
  out->device_bytes = cuda ? umt5_gpu_bytes(&in->config, longest) : 0;
  out->layer_bytes = (uint64_t)umt5_layer_floats(&in->config) * (cuda ? 2 : 4);
  out->tokens = total;
  out->layers = in->config.layers;
  out->dim = in->config.dim;
  snprintf(out->preset, sizeof out->preset, "%s",
           in->id.preset[0] ? in->id.preset : "custom config");
}

int job_prompt_cost(const char *t5, int64_t total, int64_t longest, int cuda,
                    job_t5_cost *out) {
  t5_model *m = NULL;
  int rc = job_model_path_check("--t5", t5);
  if (rc == SP_OK) rc = t5_model_open(t5, 0, &m);
  if (rc != SP_OK) return rc;
  cost_of(t5_model_get_info(m), total, longest, cuda, out);
  t5_model_close(m);
  return SP_OK;
}

/* Rank 0's host must hold the encoding (nothing else is placed yet). */
static int cost_check(const t5_model_info *in, const job_prompts *p) {
  int64_t total = 0, longest = 0;
  for (int i = 0; i < p->ntexts; i++) {
    if (p->failed[i]) continue;
    total += p->n[i];
    if (p->n[i] > longest) longest = p->n[i];
  }
  job_t5_cost c;
  cost_of(in, total, longest, 0, &c);
  const uint64_t host = job_host_memory();
  if (host && c.host_bytes > host) {
    sp_log_error("--t5 %s: encoding %lld tokens needs %.2f GiB of host memory on rank 0; the "
                 "host has %.2f GiB",
                 in->id.source, (long long)total, (double)c.host_bytes / (1 << 30),
                 (double)host / (1 << 30));
    return SP_ERR_INPUT;
  }
  sp_log_info("run: the encoding holds %.2f GiB of host memory on rank 0 at its peak (%lld "
              "tokens)",
              (double)c.host_bytes / (1 << 30), (long long)total);
  return SP_OK;
}

/* ---- encoding (rank 0) ---- */

/* Index of text in p, tokenized on first sight (where names it); -1 when
 * the tokenizer refused it (logged once, at its first sight). */
static int text_index(job_prompts *p, const tok_model *tok, const char *text, const char *where) {
  for (int i = 0; i < p->ntexts; i++)
    if (strcmp(p->text[i], text) == 0) return p->failed[i] ? -1 : i;
  if (p->ntexts == p->cap) {
    p->cap = p->cap ? 2 * p->cap : 8;
    p->text = realloc(p->text, (size_t)p->cap * sizeof *p->text);
    p->ids = realloc(p->ids, (size_t)p->cap * sizeof *p->ids);
    p->n = realloc(p->n, (size_t)p->cap * sizeof *p->n);
    p->failed = realloc(p->failed, (size_t)p->cap * sizeof *p->failed);
    p->ctx = realloc(p->ctx, (size_t)p->cap * sizeof *p->ctx);
    if (!p->text || !p->ids || !p->n || !p->failed || !p->ctx)
      sp_fatal("out of memory for %d prompts", p->cap);
  }
  const int i = p->ntexts++;
  p->text[i] = text;
  p->ids[i] = sp_xmalloc(TOK_CONTEXT * sizeof **p->ids);
  p->ctx[i] = NULL;
  p->n[i] = 0;
  p->failed[i] = t5_prompt_tokenize(tok, text, strlen(text), where, p->ids[i], &p->n[i]) != SP_OK;
  return p->failed[i] ? -1 : i;
}

/* How a message names a job's text: "--prompt", "jobs.txt:3: negative". */
static void text_where(const job_session *s, const job_spec *j, int negative, char *buf,
                       size_t n) {
  const char *key = negative ? "negative" : "prompt";
  if (s->single)
    snprintf(buf, n, "--%s%s", key, negative && !j->negative[0] ? " (Wan's own)" : "");
  else
    snprintf(buf, n, "%s:%d: %s", s->params.jobs, j->line, key);
}

/* The encoder, checked against the model: its tokenizer and width. */
static int open_encoder(const job_session *s, t5_model **out) {
  const job_params *o = &s->params;
  const wan_config *c = &rank_model_get_info(s->m)->config;
  t5_model *m = NULL;
  int rc = t5_model_open(o->t5, o->verify, &m);
  if (rc != SP_OK) return rc;
  const t5_model_info *in = t5_model_get_info(m);
  if (!t5_model_tokenizer(m)) {
    sp_log_error("--t5 %s has no tokenizer (a synthetic encoder): run needs a T5 file from "
                 "convert, or make a cond file with 'staticpipe encode --tokenizer'",
                 o->t5);
    rc = SP_ERR_INPUT;
  } else if (in->config.dim != c->text_dim) {
    sp_log_error("--t5 %s: encodes to width %lld; the model %s takes text_dim %lld", o->t5,
                 (long long)in->config.dim, o->model, (long long)c->text_dim);
    rc = SP_ERR_INPUT;
  }
  if (rc != SP_OK) {
    t5_model_close(m);
    return rc;
  }
  sp_log_info("run: encoding the prompts with %s (%s, %lld layers, dim %lld, %s) on the %s, "
              "before the model is placed",
              in->id.source, in->id.preset[0] ? in->id.preset : "custom config",
              (long long)in->config.layers, (long long)in->config.dim,
              kern_dtype_name(in->id.dtype),
              s->dev == RANK_DEVICE_CUDA ? "GPU (bf16, as encode --device cuda)" : "CPU (fp32)");
  *out = m;
  return SP_OK;
}

/* Tokenizes every good job's texts (a refused one makes its job bad, or
 * ends a single run) and encodes the distinct ones. */
static int encode_all(job_session *s, job_prompts *p, uint8_t *bad) {
  for (int i = 0; i < s->njobs; i++) p->of[i][0] = p->of[i][1] = -1;
  /* A line's prompt= without --t5 was refused as the line was read
   * (job_prompt_check_line). */
  t5_model *m = NULL;
  int rc = open_encoder(s, &m);
  if (rc != SP_OK) return rc;
  const tok_model *tok = t5_model_tokenizer(m);
  p->dim = t5_model_get_info(m)->config.dim;
  for (int i = 0; i < s->njobs; i++) {
    const job_spec *j = &s->jobs[i];
    if (j->bad || !j->prompt[0]) continue;
    char where[JOB_PATH + 64];
    text_where(s, j, 0, where, sizeof where);
    p->of[i][0] = text_index(p, tok, j->prompt, where);
    if (p->of[i][0] >= 0 && job_micro_batches(j) == 2) {
      text_where(s, j, 1, where, sizeof where);
      p->of[i][1] = text_index(p, tok, t5_negative_or_default(j->negative[0] ? j->negative
                                                                               : NULL), where);
      if (p->of[i][1] < 0) p->of[i][0] = -1;
    }
    bad[i] = p->of[i][0] < 0;
    if (bad[i] && s->single) rc = SP_ERR_INPUT;
  }
  if (rc == SP_OK) rc = cost_check(t5_model_get_info(m), p); /* a GPU's: at its create */
  for (int i = 0; rc == SP_OK && i < p->ntexts; i++)
    if (!p->failed[i]) p->ctx[i] = sp_xmalloc((size_t)(p->n[i] * p->dim) * sizeof(float));
  /* The good texts, PROMPT_BATCH at a time. */
  for (int first = 0; rc == SP_OK && first < p->ntexts;) {
    int32_t *ids[PROMPT_BATCH];
    int64_t n[PROMPT_BATCH];
    float *out[PROMPT_BATCH];
    int k = 0;
    for (; first < p->ntexts && k < PROMPT_BATCH; first++) {
      if (p->failed[first]) continue;
      ids[k] = p->ids[first];
      n[k] = p->n[first];
      out[k++] = p->ctx[first];
    }
    const umt5_encode_job job = {.device = s->dev, .cuda_device = s->cuda_device,
                                 .count = k, .ids = ids, .n = n, .out = out};
    rc = umt5_encode(m, &job, NULL);
  }
  t5_model_close(m);
  return rc;
}

int job_prompts_encode(job_session *s) {
  int any = 0;
  for (int i = 0; i < s->njobs; i++) any |= !s->jobs[i].bad && s->jobs[i].prompt[0];
  if (!any) return SP_OK; /* the same list on every rank: the same verdict */
  const comm_world *w = s->w;
  comm_set_phase("encoding the prompts");
  uint8_t *bad = sp_xcalloc((size_t)s->njobs, 1);
  int rc = SP_OK;
  if (w->rank == 0) {
    job_prompts *p = sp_xcalloc(1, sizeof *p);
    p->njobs = s->njobs;
    p->of = sp_xcalloc((size_t)s->njobs, sizeof *p->of);
    rc = encode_all(s, p, bad);
    s->prompt_ctx = p;
  }
  rc = job_phase(w, rc, "encoding the prompts");
  if (rc == SP_OK) comm_bcast(w, bad, (size_t)s->njobs, 0);
  for (int i = 0; rc == SP_OK && i < s->njobs; i++)
    if (bad[i]) s->jobs[i].bad = 1;
  free(bad);
  return rc;
}

/* A context of the cache as the job's tensor, checked as a cond file's
 * dataset would be (job_io.c: [L, text_dim], L <= text_len). */
static int context_copy(const job_session *s, int t, const char *what,
                        rank_tensor *out) {
  const job_prompts *p = s->prompt_ctx;
  const wan_config *c = &rank_model_get_info(s->m)->config;
  if (p->n[t] > c->text_len) {
    sp_log_error("%s: %lld tokens; the model %s takes at most %lld", what, (long long)p->n[t],
                 s->params.model, (long long)c->text_len);
    return SP_ERR_INPUT;
  }
  memset(out, 0, sizeof *out);
  out->ndim = 2;
  out->dims[0] = p->n[t];
  out->dims[1] = p->dim;
  out->numel = p->n[t] * p->dim;
  out->data = sp_xmalloc((size_t)out->numel * sizeof(float));
  memcpy(out->data, p->ctx[t], (size_t)out->numel * sizeof(float));
  return SP_OK;
}

int job_prompt_inputs(const job_session *s, const job_spec *j, job_inputs *in) {
  const job_prompts *p = s->prompt_ctx;
  const long i = j - s->jobs;
  if (!p || i < 0 || i >= p->njobs || p->of[i][0] < 0) {
    sp_log_error("internal: job %ld's prompt was not encoded", i + 1);
    return SP_ERR_RUNTIME;
  }
  int rc = context_copy(s, p->of[i][0], "prompt", &in->ctx[0]);
  if (rc == SP_OK && job_micro_batches(j) == 2)
    rc = context_copy(s, p->of[i][1], "negative prompt", &in->ctx[1]);
  return rc;
}
