/* The LoRAs of a session (see job_session_impl.h and lora.h): merged into the weights
 * as they are read, or bypassed (each job's pairs added after the blocks'
 * linear layers). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job_session_impl.h"
#include "log.h"

/* The LoRA mode auto resolves to: merged when every job has the same
 * LoRAs (differ: 0, else the first --jobs line that does not) and the
 * weights can hold a merge, else bypass. A merge is faithful where the
 * merged weights are quantised again in the format they run in (fp8,
 * int8 precision: MODEL.md "LoRA") or hold no quantized weight; the
 * weights of a GGUF file, or of an fp8 or int8 file run in bf16, have no
 * such form, and --lora-mode merged is refused there: every rank returns
 * SP_ERR_INPUT, rank 0 says why. */
static int lora_mode_resolve(job_session *s, int differ) {
  const rank_model_info *mi = rank_model_get_info(s->m);
  const int merge_ok = !mi->quant || job_precision(&s->params, mi) != WAN_PRECISION_BF16;
  if (s->lora_mode == RANK_LORA_AUTO)
    s->lora_mode = differ || !merge_ok ? RANK_LORA_BYPASS : RANK_LORA_MERGED;
  if (s->lora_mode != RANK_LORA_MERGED || merge_ok) return SP_OK;
  if (s->w->rank == 0)
    sp_log_error("--lora-mode merged: %s holds quantized weights (its blocks' linear weights "
                 "%s), which cannot hold a merged LoRA at --precision bf16: use --lora-mode "
                 "bypass (the LoRA's pairs added after each linear layer)%s", mi->id.source,
                 mi->precision == WAN_PRECISION_BF16 ? "in GGUF's formats"
                                                     : wan_precision_name(mi->precision),
                 mi->precision != WAN_PRECISION_BF16 ? ", or leave --precision out (the "
                                                       "merge quantised again)" : "");
  return SP_ERR_INPUT;
}

/* Merged: every rank opens the LoRAs (first, the jobs' one set) and
 * checks their headers against the model before any weight is read, then
 * merges only the groups it loads; refused when a --jobs line (differ)
 * names other LoRAs. */
static int setup_merged(job_session *s, const rank_lora_spec *first, int nfirst, int differ) {
  const comm_world *w = s->w;
  int rc = SP_OK;
  comm_set_phase("opening the LoRAs");
  if (differ) {
    if (w->rank == 0)
      sp_log_error("--lora-mode merged: %s:%d names other LoRAs than the jobs before it; "
                   "merged mode holds one set for every job: use --lora-mode bypass (or auto)",
                   s->params.jobs, differ);
    rc = SP_ERR_INPUT;
  } else {
    rc = rank_lora_open(first, nfirst, rank_model_get_info(s->m), &s->lora);
  }
  if (rc == SP_OK) {
    rank_model_set_merge(s->m, rank_lora_merge_group, s->lora);
    if (w->rank == 0) {
      char d[2048];
      rank_lora_describe(s->lora, d, sizeof d);
      sp_log_info("lora (merged): %s", d);
    }
  }
  return job_phase(w, rc, "opening the LoRAs");
}

/* Bypass: rank 0 checks each job's LoRAs (a job whose LoRAs cannot be
 * bypassed is marked bad on every rank) and sizes the stage's room for
 * their pairs; the stage takes the pairs job by job (job_use_loras). */
static int setup_bypass(job_session *s) {
  const comm_world *w = s->w;
  const job_params *o = &s->params;
  comm_set_phase("checking the LoRAs");
  uint8_t *bad = sp_xcalloc((size_t)s->njobs, 1);
  int nbad = 0, checked_n = -1, checked_bad = 0;
  rank_lora_spec checked[RANK_LORA_MAX], cur[RANK_LORA_MAX];
  for (int i = 0; w->rank == 0 && i < s->njobs; i++) {
    if (s->jobs[i].bad) continue;
    const int n = job_spec_loras(o, &s->jobs[i], cur);
    if (n == 0) continue;
    if (!job_loras_same(checked, checked_n, cur, n)) {
      rank_lora *l = NULL;
      checked_bad = rank_lora_open(cur, n, rank_model_get_info(s->m), &l) != SP_OK ||
                    rank_lora_bypass_check(l) != SP_OK;
      if (!checked_bad) {
        size_t elems;
        int64_t rank;
        rank_lora_bypass_room(l, &elems, &rank);
        if (elems > s->lora_block_elems) s->lora_block_elems = elems;
        if (rank > s->lora_rank) s->lora_rank = rank;
      }
      rank_lora_close(l);
      memcpy(checked, cur, (size_t)n * sizeof *cur);
      checked_n = n;
      if (checked_bad && !s->single)
        sp_log_error("%s:%d: its LoRAs are refused (above)", o->jobs, s->jobs[i].line);
    }
    bad[i] = (uint8_t)checked_bad;
  }
  comm_bcast(w, bad, (size_t)s->njobs, 0);
  comm_bcast(w, &s->lora_block_elems, sizeof s->lora_block_elems, 0);
  comm_bcast(w, &s->lora_rank, sizeof s->lora_rank, 0);
  for (int i = 0; i < s->njobs; i++) {
    if (bad[i]) s->jobs[i].bad = 1;
    nbad += bad[i];
  }
  free(bad);
  if (w->rank == 0 && !(s->single && nbad))
    sp_log_info("lora (bypass): the base weights stay as loaded; each job's LoRA pairs are "
                "added after the blocks' linear layers");
  return job_phase(w, s->single && nbad ? SP_ERR_INPUT : SP_OK, "checking the LoRAs");
}

/* The LoRA mode (lora_mode_resolve), then the merge (setup_merged) or the
 * bypass's checks (setup_bypass); nothing when no job has a LoRA. */
int job_setup_loras(job_session *s) {
  const job_params *o = &s->params;
  rank_lora_spec first[RANK_LORA_MAX], cur[RANK_LORA_MAX];
  int nfirst = -1, any = 0, differ = 0;
  for (int i = 0; i < s->njobs; i++) {
    if (s->jobs[i].bad) continue;
    const int n = job_spec_loras(o, &s->jobs[i], cur);
    any |= n > 0;
    if (nfirst < 0) {
      nfirst = n;
      memcpy(first, cur, (size_t)n * sizeof *cur);
    } else if (!job_loras_same(first, nfirst, cur, n) && !differ) {
      differ = s->jobs[i].line;
    }
  }
  if (!any) return SP_OK;
  if (lora_mode_resolve(s, differ) != SP_OK) return SP_ERR_INPUT;
  if (s->lora_mode == RANK_LORA_MERGED) return setup_merged(s, first, nfirst, differ);
  return setup_bypass(s);
}

/* Frees what read_pairs read. */
static void free_pairs(rank_stage_lora *p, int experts, int nblocks) {
  for (int e = 0; e < experts; e++) {
    for (int b = 0; p->block[e] && b < nblocks; b++) free(p->block[e][b].values);
    free(p->block[e]);
    p->block[e] = NULL;
  }
}

/* The pairs of l that the stage's blocks need, of each of its experts
 * (rank_lora_bypass_read: only those blocks' LoRA tensors are read), into
 * *out. SP_OK, or the reader's status (logged) with nothing left in *out. */
static int read_pairs(const rank_lora *l, const rank_stage *st, rank_stage_lora *out) {
  const rank_stage_cfg *cfg = rank_stage_get_cfg(st);
  const int experts = rank_stage_experts(st), first = cfg->first_block;
  const int nblocks = cfg->last_block - first + 1;
  memset(out, 0, sizeof *out);
  int rc = SP_OK;
  for (int e = 0; e < experts && rc == SP_OK; e++) {
    const int64_t r = rank_lora_bypass_rank(l, e, first, cfg->last_block);
    if (r > out->rank) out->rank = r;
    out->block[e] = sp_xcalloc((size_t)nblocks, sizeof *out->block[e]);
    for (int b = 0; b < nblocks && rc == SP_OK; b++) {
      rank_stage_lora_block *k = &out->block[e][b];
      k->floats = rank_lora_bypass_floats(l, e, first + b);
      k->values = sp_xmalloc(k->floats * sizeof(float) + 1);
      rc = rank_lora_bypass_read(l, e, first + b, k->values, &k->pairs);
    }
  }
  if (rc != SP_OK) free_pairs(out, experts, nblocks);
  return rc;
}

/* Bypass: the stage's pairs of l (NULL: none), read here and handed to the
 * stage as plain pairs. On a failure the stage is left with none. */
static int set_stage_loras(job_session *s, const rank_lora *l) {
  if (!l) {
    rank_stage_set_lora(s->stage, NULL);
    return SP_OK;
  }
  rank_stage_lora pairs;
  const int rc = read_pairs(l, s->stage, &pairs);
  rank_stage_set_lora(s->stage, rc == SP_OK ? &pairs : NULL);
  if (rc == SP_OK) {
    const rank_stage_cfg *cfg = rank_stage_get_cfg(s->stage);
    free_pairs(&pairs, rank_stage_experts(s->stage), cfg->last_block - cfg->first_block + 1);
  }
  return rc;
}

/* Bypass: gives the stage job j's LoRA pairs unless it holds them already.
 * A failure fails the job; the next job sets its own. */
int job_use_loras(job_session *s, const job_spec *j) {
  rank_lora_spec want[RANK_LORA_MAX];
  const int n = job_spec_loras(&s->params, j, want);
  if (s->lora_set && job_loras_same(s->lora_cur, s->nlora_cur, want, n)) return SP_OK;
  rank_lora_close(s->lora);
  s->lora = NULL;
  s->lora_set = 0;
  int rc = n ? rank_lora_open(want, n, rank_model_get_info(s->m), &s->lora) : SP_OK;
  if (rc == SP_OK) rc = set_stage_loras(s, s->lora);
  if (rc != SP_OK) return rc;
  if (s->w->rank == 0) {
    char d[2048] = "none";
    if (s->lora) rank_lora_describe(s->lora, d, sizeof d);
    if (s->single)
      sp_log_info("lora (bypass): %s", d);
    else
      sp_log_info("lora (bypass) from %s:%d on: %s", s->params.jobs, j->line, d);
  }
  memcpy(s->lora_cur, want, (size_t)n * sizeof *want);
  s->nlora_cur = n;
  s->lora_set = 1;
  return SP_OK;
}

