/* The DiT's model file (HDF5) and synthetic DiTs, behind one handle: the
 * model-file layer (mfile.h) with the DiT's schema (wan_schema.h), read a
 * group at a time into the packed layouts the stages use.
 *
 * File layout (MODEL.md "Model file"): root attributes format =
 * "staticpipe", format_version, arch = "wan2.1-t2v", preset (may be ""),
 * dtype ("bf16"|"fp32"|"fp8"), checksum (hex of the model checksum) and the config
 * (dim, ffn_dim, heads, layers, in_dim, out_dim, patch, text_len, text_dim,
 * freq_dim, eps); groups /embed, /blocks/NNNN (four digits), /head; in each,
 * one contiguous unfiltered dataset per tensor named after the official key
 * (wan_config.h), with attributes dtype and checksum (CRC-32C of its bytes).
 * bf16 is stored as 16-bit unsigned integers.
 *
 * A two-expert model (Wan 2.2 A14B, MODEL.md "Wan 2.2 A14B") holds two
 * whole DiTs of one config: root attribute experts = 2, the run's defaults
 * (boundary, cfg_high, cfg_low, shift, steps), and the same groups under
 * /experts/high and /experts/low; the model checksum covers both (high
 * first). A file without the experts attribute is a one-expert model,
 * exactly as before.
 *
 * A spec "synth:PRESET[:SEED]" opens a synthetic model instead: the same
 * API, metadata only, each group generated when it is read. */
#ifndef RANK_MODEL_FILE_H
#define RANK_MODEL_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "model_id.h"
#include "wan_config.h"

typedef struct rank_model rank_model;

/* Experts of a model, and the run's defaults a two-expert model carries. */
#define RANK_MODEL_MAX_EXPERTS 2
enum { RANK_EXPERT_HIGH = 0, RANK_EXPERT_LOW = 1 }; /* the order the sampler meets them */
typedef struct rank_model_experts {
  int count;       /* 1: one DiT (Wan 2.1); 2: Wan 2.2's high- and low-noise experts */
  double boundary; /* two experts: a step is high-noise when t >= boundary x 1000 */
  double cfg[2];   /* guidance of the high- and the low-noise expert */
  double shift;
  int steps;
} rank_model_experts;
/* The published Wan 2.2 A14B text-to-video defaults (MODEL.md "Wan 2.2
 * A14B"): two experts, boundary 0.875, cfg 4 and 3, shift 12, 40 steps. */
extern const rank_model_experts rank_model_a14b_defaults;
/* The expert of a step at timestep t (MODEL.md "Wan 2.2 A14B", as the
 * published loop compares): RANK_EXPERT_HIGH when t >= boundary x 1000
 * (the product in double), else RANK_EXPERT_LOW. */
int rank_model_step_expert(double boundary, double t);
/* "high", "low" for a two-expert model's expert e; "" for a one-expert one. */
const char *rank_model_expert_name(int experts, int e);
/* A preset of init and synth: (wan2.1-tiny, wan2.1-1.3b, wan2.1-14b, and
 * the two-expert wan2.2-tiny and wan2.2-a14b): its config and experts.
 * Returns 0, or -1 for an unknown name. */
int rank_model_preset(const char *name, wan_config *c, rank_model_experts *x);
/* "wan2.1-tiny, ..., wan2.2-a14b", for messages. */
const char *rank_model_preset_names(void);

typedef struct rank_model_info {
  wan_config config;
  /* id.dtype: every tensor's, but the linear weights of an fp8 file's
   * blocks. id.checksum: for a file, the one its datasets' CRCs give in
   * canonical order (embed, blocks, head; experts high first), checked
   * against the stored one when verifying. */
  model_file_id id;
  /* An fp8 file (root dtype "fp8", MODEL.md "fp8 weights"): the blocks'
   * linear weights are e4m3 with a scale per output channel, the rest bf16
   * (id.dtype). Its block groups are read as fp32 with those weights
   * dequantised (rank_model_read_group). */
  int fp8;
  rank_model_experts experts; /* count 1, or 2 with the run's defaults */
} rank_model_info;

/* Opens a model file read-only and validates its root attributes and the
 * layout of every dataset (contiguous, unfiltered, dtype, shape, storage
 * size, no external or soft links, no virtual datasets) without reading
 * weights; or parses a synth: spec. verify = 1 checks each dataset's
 * checksum when it is read. Errors are logged once, naming the file, the
 * dataset and the check; returns SP_OK, SP_ERR_INPUT or SP_ERR_RUNTIME. */
int rank_model_open(const char *spec, int verify, rank_model **out);
void rank_model_close(rank_model *m);
const rank_model_info *rank_model_get_info(const rank_model *m);

/* The packed layout of a group (same for every block) as
 * rank_model_read_group delivers it. */
const wan_layout *rank_model_layout(const rank_model *m, wan_group g);
/* Bytes of one block's datasets in the file (an fp8 file's: e4m3 weights,
 * their scales and the rest in bf16: wan_block_fp8_bytes). */
uint64_t rank_model_block_file_bytes(const rank_model *m);
/* "bf16", "fp32" or "fp8": the file's root dtype. */
const char *rank_model_dtype_name(const rank_model_info *in);

/* Reads every dataset of a file: every checksum, every scale finite and
 * positive, every weight finite (the line names the dataset and the
 * element); *bytes the bytes read. A synth: model has nothing stored:
 * SP_OK at once. */
int rank_model_verify(rank_model *m, uint64_t *bytes);

/* Reads one group (block index for WAN_GROUP_BLOCK, else ignored) into dst
 * in the packed layout (dst_bytes >= layout packed_bytes; padding zeroed),
 * in the file's dtype; an fp8 file's block in fp32, each linear weight
 * kern_fp8_dequantize_rows of its e4m3 bytes and scales (each scale
 * checked finite and positive first: SP_ERR_INPUT naming the dataset). Adds the bytes read from the file (0 for synth:) to
 * *bytes_read when it is not NULL. */
int rank_model_read_group(rank_model *m, wan_group g, int block, void *dst, size_t dst_bytes,
                          uint64_t *bytes_read);
/* The same for expert e (0 .. experts.count - 1; RANK_EXPERT_HIGH or _LOW
 * of a two-expert model). rank_model_read_group reads expert 0. */
int rank_model_read_expert_group(rank_model *m, int e, wan_group g, int block, void *dst,
                                 size_t dst_bytes, uint64_t *bytes_read);
/* A load's progress on a terminal: between begin and end, when stderr is
 * a terminal (isatty), one line "[rank N] reading weights: X MB, R MB/s"
 * redrawn in place as groups are read (by any model, from any thread), and
 * ended with a newline; nothing at all when stderr is not a terminal (logs
 * stay clean) or the log shows no info lines (-q). */
void rank_model_progress_begin(void);
void rank_model_progress_end(void);

/* Weights merged into each group as rank_model_read_group reads it (after
 * its checksums are checked): the LoRA merge (ranks/import/lora.h). The
 * function gets the expert (0 for a one-expert model), the group, its
 * packed layout, the dtype of the data and the data; it returns SP_OK or a
 * status it has logged, which read_group returns. ctx stays the caller's;
 * fn NULL removes the merge. */
typedef int (*rank_model_merge_fn)(void *ctx, int expert, wan_group g, int block,
                                   const wan_layout *l, kern_dtype dt, void *data);
void rank_model_set_merge(rank_model *m, rank_model_merge_fn fn, void *ctx);
/* Whether a merge is set: an fp8 file's merged blocks are then quantised
 * again by the stage (MODEL.md "fp8 weights", LoRAs). */
int rank_model_merging(const rank_model *m);

/* ---- writer ------------------------------------------------------------
 * Writes to a temporary file beside path and renames it into place on
 * commit; abort (or any failure, or SIGINT/SIGTERM) removes it, leaving an
 * existing file at path untouched. */
typedef struct rank_model_writer rank_model_writer;

/* dtype KERN_DTYPE_E4M3 writes an fp8 file (MODEL.md "fp8 weights"): the
 * blocks' linear weights in e4m3 with their scales (put_fp8, put_value),
 * every other tensor in bf16. */
int rank_model_writer_open(const char *path, const wan_config *c, kern_dtype dtype,
                           const char *preset, rank_model_writer **out);
/* The same for x->count experts (x NULL: one); a two-expert file gets x's
 * defaults as root attributes (checked by the schema's wan_experts_check). */
int rank_model_writer_open_experts(const char *path, const wan_config *c, kern_dtype dtype,
                                   const char *preset, const rank_model_experts *x,
                                   rank_model_writer **out);
/* Extra string attribute on the root (for example safetensors metadata). */
int rank_model_writer_attr(rank_model_writer *w, const char *key, const char *value);
/* Writes one tensor in the file's dtype (bytes must equal the table's). */
int rank_model_writer_put(rank_model_writer *w, wan_group g, int block, const char *name,
                          const void *data, size_t bytes);
/* The same for expert e; rank_model_writer_put writes expert 0. */
int rank_model_writer_put_expert(rank_model_writer *w, int e, wan_group g, int block,
                                 const char *name, const void *data, size_t bytes);
/* An fp8 file's linear weight of block block: q (out, in) e4m3 and
 * scale (out), each finite and positive (else SP_ERR_INPUT naming the
 * dataset and the channel); written as NAME and NAME.scale. */
int rank_model_writer_put_fp8(rank_model_writer *w, int e, int block, const char *name,
                              const uint8_t *q, const float *scale);
/* A tensor from its fp32 values x, stored as the file stores it: fp32,
 * bf16 (kern_f32_to_bf16_n), or an fp8 file's linear weight quantised per
 * output channel (kern_fp8_quantize_rows, the quantiser --precision fp8
 * uses at load). tmp is not used (the model-file layer narrows into a
 * buffer of its own); it stays for the callers. */
int rank_model_writer_put_value(rank_model_writer *w, int e, wan_group g, int block,
                                const char *name, const float *x, void *tmp);
/* Checks every tensor of the table was written, writes the model checksum,
 * closes and renames into place. The writer is freed either way. */
int rank_model_writer_commit(rank_model_writer *w);
void rank_model_writer_abort(rank_model_writer *w);

/* Dataset path of a tensor in a model of experts experts: "/embed/NAME",
 * "/blocks/0003/NAME", under "/experts/high" or "/experts/low" when there
 * are two. */
void rank_model_expert_path(int experts, int e, wan_group g, int block, const char *name,
                            char *buf, size_t n);

/* ---- synthetic weights (ranks/model/synth.h) --------------------------- */

/* Fills dst (t->numel values of dtype) with DiT tensor t of group g (block
 * index for blocks), as synth: reads it. prefix starts the tensor's key:
 * "" for a one-expert model, rank_synth_expert_prefix's for an expert of a
 * two-expert one. */
void rank_synth_tensor(const wan_config *c, uint64_t seed, const char *prefix, wan_group g,
                       int block, const wan_tensor *t, kern_dtype dtype, void *dst);
/* The key prefix of expert e of a model of experts experts: "" for one,
 * "high_noise_model." or "low_noise_model." for two (so the two experts'
 * weights differ, and neither equals a one-expert model's). */
const char *rank_synth_expert_prefix(int experts, int e);

#endif
