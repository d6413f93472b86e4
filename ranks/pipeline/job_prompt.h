/* Prompts encoded in the run (run --t5 T5 --prompt TEXT, prompt= on --jobs
 * lines): the rules of their options, and what the encoding costs (plan
 * --t5 prints it). The encoding itself is the session's (job_prompt.c,
 * job_session_impl.h). */
#ifndef JOB_PROMPT_H
#define JOB_PROMPT_H

#include <stdint.h>

#include "job_params.h"

/* The contexts of every job's prompt, held on rank 0 from the encoding
 * (before the model is placed) until the job reads its inputs. */
typedef struct job_prompts job_prompts;
void job_prompts_free(job_prompts *p);
/* --prompt, --negative, prompt=, negative= (and encode's, one rule): the
 * text into dst (JOB_PROMPT bytes); longer than JOB_PROMPT - 1 bytes, or
 * empty unless allow_empty, is refused. SP_OK or SP_ERR_INPUT naming flag. */
int job_prompt_set(const char *flag, const char *v, char *dst, int allow_empty);
/* The rule alone, for a text of len bytes (encode's --prompts lines). */
int job_prompt_len_check(const char *flag, size_t len, int allow_empty);
/* run's rules of --t5, --prompt and --negative against --cond and --jobs
 * (called by job_params_check). SP_OK or SP_ERR_INPUT (one line). */
int job_prompt_check_run(const job_params *p);
/* A --jobs line's: cond= or prompt=, not both, and prompt= needs --t5
 * (negative=, or --negative, applies to prompt= lines). where is
 * "FILE:LINE". */
int job_prompt_check_line(const job_params *p, const job_spec *j, const char *where);

/* Where a run encodes its prompts and what that needs: rank 0, before the
 * model is placed, so nothing else is in its memory then; on the CPU (fp32,
 * umt5_encode_host_bytes) or, when the run is on CUDA, on its GPU (bf16,
 * every layer resident: umt5_gpu_bytes, the planner's layout). */
typedef struct job_t5_cost {
  const char *device;    /* "cpu" or "cuda" */
  uint64_t host_bytes;   /* peak host bytes of the encoding (the CPU encoder's) */
  uint64_t device_bytes; /* cuda: device bytes (weights, activations, workspace) */
  uint64_t layer_bytes;  /* one layer's weights (fp32 on the CPU, bf16 on the GPU) */
  int64_t tokens;        /* the tokens it was counted for */
  int64_t layers, dim;
  char preset[64];
} job_t5_cost;
/* The cost of encoding sequences of total tokens (the longest longest) with
 * the encoder t5 (a file or synth:; metadata only), on the GPU when cuda.
 * SP_OK or SP_ERR_INPUT (logged, naming --t5). */
int job_prompt_cost(const char *t5, int64_t total, int64_t longest, int cuda,
                    job_t5_cost *out);

#endif
