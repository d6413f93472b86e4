/* LoRA files (safetensors) merged into a model's weights as its groups are
 * read, or kept apart and bypassed (the end of this file) (MODEL.md "LoRA":
 * key styles, scale, merge arithmetic, bypass).
 *
 * A LoRA is opened and checked against the model on every rank before any
 * weight is loaded: keys, shapes, ranks, dtypes, from the header alone.
 * Values are read later, group by group, by rank_lora_merge_group, which
 * rank_model_read_group calls for every group it reads (rank_model_set_merge):
 * a rank reads only the LoRA tensors of the groups it loads, and streamed
 * and resident blocks, the CPU and the CUDA stage all see merged weights.
 *
 * Key styles, told apart per key (any mix in one file):
 *   prefix: none, "diffusion_model.", "model.diffusion_model.",
 *           "transformer.", "base_model.model.", or kohya's "lora_unet_"
 *           followed by the official name with '.' spelled '_';
 *   name:   the official Wan key or its diffusers spelling (convert.h's
 *           table, MODEL.md "Parameter names"), without .weight/.bias;
 *   suffix: .lora_down.weight / .lora_A.weight (A, [r, in...]),
 *           .lora_up.weight / .lora_B.weight (B, [out, r, 1...]),
 *           .alpha (scalar; default r), .diff (a full difference of a weight
 *           or of a tensor without suffix such as modulation), .diff_b (a
 *           full difference of a bias). */
#ifndef RANK_LORA_H
#define RANK_LORA_H

#include <stddef.h>

#include "kern_dtype.h"
#include "lora_spec.h"
#include "model_file.h"
#include "wan_config.h"
#include "wan_weights.h"

typedef struct rank_lora rank_lora;

/* Opens specs[0..n) in order and checks each against the model described by
 * mi (on a one-expert model a spec with an expert tag is refused):
 * every key maps to a tensor of the model, A and B come in pairs with one
 * rank r, shapes fit the tensor they name, alpha is a scalar, dtypes are
 * F32, F16 or BF16. Reads no values. Each refused LoRA gets one line: the
 * file and the check (unmatched keys: the first few and their count; a
 * LoRA made for another architecture: says so). Returns SP_OK and *out, or
 * SP_ERR_INPUT / SP_ERR_RUNTIME with nothing left open. */
int rank_lora_open(const rank_lora_spec *specs, int n, const rank_model_info *mi,
                   rank_lora **out);
void rank_lora_close(rank_lora *l);
/* One line for the log: per file, its pairs, diffs, ranks and strength. */
void rank_lora_describe(const rank_lora *l, char *buf, size_t n);

/* The merge (a rank_model_merge_fn; ctx is the rank_lora): adds every LoRA
 * term that names a tensor of group g (block) of expert expert into data
 * (a LoRA tagged @high only into expert 0, @low only into expert 1), the
 * group packed in layout l in dtype dt. Per element, in double: acc = w, then for each
 * LoRA in order, acc += c * sum_k B[o,k] A[k,i] (k ascending, c = strength *
 * (alpha / r)) for a pair, acc += strength * d for a diff; stored as
 * float(acc), narrowed to bf16 (nearest even) for a bf16 model. Reads only
 * this group's LoRA tensors. SP_ERR_INPUT (logged, naming the file and the
 * key) for a non-finite LoRA value or merged weight; data is then partly
 * merged and must not be used. */
int rank_lora_merge_group(void *ctx, int expert, wan_group g, int block, const wan_layout *l,
                          kern_dtype dt, void *data);

/* ---- bypass (MODEL.md "LoRA", bypass) --------------------------------
 * The pairs of a block's linear layers (WAN_BLOCK_LINEARS) are kept apart
 * from its weights and added after each layer, y += B (A x): per layer the
 * pairs of every LoRA that names it, stacked in the order given along the
 * rank (R = the sum of their ranks), each file's scale c folded into its
 * columns of B (float(c * B), the product in double). Each expert x of a
 * two-expert model has pairs of its own: those of the LoRAs that apply to
 * it (untagged ones and those tagged for x, as in the merge); a one-expert
 * model has expert 0 only. */

/* Whether every term of l can be bypassed: pairs on the blocks' linear
 * layers only. A full difference (diff, diff_b) or a pair on an embedding
 * or the head is refused: one line naming the file, the first such key and
 * --lora-mode merged. SP_OK or SP_ERR_INPUT. */
int rank_lora_bypass_check(const rank_lora *l);
/* The largest summed rank R of a linear layer of blocks first..last of
 * expert x. */
int64_t rank_lora_bypass_rank(const rank_lora *l, int x, int first, int last);
/* The most any block of any expert of the model needs: *elems, the largest
 * rank_lora_bypass_floats, and *rank, the largest summed rank R. */
void rank_lora_bypass_room(const rank_lora *l, size_t *elems, int64_t *rank);
/* Floats of block's pairs of expert x: the sum over its linear layers of
 * R (in + out). */
size_t rank_lora_bypass_floats(const rank_lora *l, int x, int block);
/* Reads block's pairs of expert x (only this block's LoRA tensors) into data
 * (rank_lora_bypass_floats of it), per linear layer in WAN_BLOCK_LINEARS
 * order A (R, in) then B (out, R), and points out's fields into it (r = 0
 * for a layer without pairs). SP_OK, or SP_ERR_INPUT / SP_ERR_RUNTIME
 * (logged, naming the file and the key) with out untouched. */
int rank_lora_bypass_read(const rank_lora *l, int x, int block, float *data,
                          wan_block_lora_f32 *out);

#endif
