/* What a user names a LoRA by (--lora FILE[:STRENGTH][@high|@low], a
 * --jobs line's lora=) and how LoRAs are applied (--lora-mode): plain
 * values, parsed from text, with no file opened. lora.h opens and applies
 * them; the job's parameters (ranks/pipeline/job_params.h) hold them. */
#ifndef RANK_LORA_SPEC_H
#define RANK_LORA_SPEC_H

#include <stddef.h>

#define RANK_LORA_MAX 16        /* --lora given at most this often */
#define RANK_LORA_MAX_RANK 65536 /* bound on a LoRA's rank r */

/* Which expert of a two-expert model (Wan 2.2 A14B) a LoRA applies to. */
typedef enum {
  RANK_LORA_EXPERT_ALL = 0, /* no @: every expert */
  RANK_LORA_EXPERT_HIGH = 1, /* @high: the high-noise expert */
  RANK_LORA_EXPERT_LOW = 2,  /* @low: the low-noise expert */
} rank_lora_expert;

/* How LoRAs are applied (MODEL.md "LoRA"). */
typedef enum {
  RANK_LORA_AUTO = 0,   /* merged, unless --jobs lines name different LoRAs: bypass */
  RANK_LORA_MERGED = 1, /* added into the weights at load: no cost per step */
  RANK_LORA_BYPASS = 2, /* base weights kept, B (A x) added after each linear layer */
} rank_lora_mode;

/* One --lora FILE[:STRENGTH][@high|@low]. */
typedef struct rank_lora_spec {
  char path[1024];
  double strength; /* 1 unless given */
  rank_lora_expert expert;
} rank_lora_spec;

/* Parses "FILE[:STRENGTH][@high|@low]": the tag after the last '@' when it is
 * high or low, the strength after the last ':' when what follows it is a
 * number (so a path may hold ':' and '@'). The strength is a finite number
 * with |s| <= 1000. Returns SP_OK, or SP_ERR_INPUT with the reason in err
 * (not logged: the caller names the flag). */
int rank_lora_spec_parse(const char *text, rank_lora_spec *out, char *err, size_t errlen);
/* "FILE:STRENGTH[@tag]", the form the parser reads. */
void rank_lora_spec_format(const rank_lora_spec *s, char *buf, size_t n);
/* "auto", "merged" or "bypass". SP_OK or SP_ERR_INPUT (logged, naming
 * --lora-mode). */
int rank_lora_mode_parse(const char *name, rank_lora_mode *out);
const char *rank_lora_mode_name(rank_lora_mode m);

#endif
