/* The DiT's model file (HDF5) and synthetic DiTs, behind one handle: the
 * model-file layer (mfile.h) with the DiT's schema (wan_schema.h), read a
 * group at a time into the packed layouts the stages use.
 *
 * File layout (MODEL.md "Model file"): root attributes format =
 * "staticpipe", format_version, arch = "wan2.1-t2v", preset (may be ""),
 * dtype ("bf16"|"fp32"|"fp8"|"int8"|"quant"|"quant-fp32"), checksum (hex of
 * the model checksum) and the config
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
#include "wan_weights.h"

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
/* The expert of a step at timestep t (MODEL.md "Wan 2.2 A14B", as the
 * published loop compares): RANK_EXPERT_HIGH when t >= boundary x 1000
 * (the product in double), else RANK_EXPERT_LOW. */
int rank_model_step_expert(double boundary, double t);
/* "high", "low" for a two-expert model's expert e; "" for a one-expert one. */
const char *rank_model_expert_name(int experts, int e);
/* A preset of init and synth: (wan2.1-tiny, wan2.1-1.3b, wan2.1-14b, the
 * TI2V wan2.2-ti2v-tiny and wan2.2-ti2v-5b, and the two-expert wan2.2-tiny,
 * wan2.2-a14b, wan2.2-i2v-tiny and wan2.2-i2v-a14b): its config and experts.
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
  /* The root dtype ("bf16", "fp32", "fp8", "int8", "quant", "quant-fp32"). */
  char root[16];
  /* The precision the blocks run in when --precision is not given: FP8
   * for an fp8 file (root "fp8", MODEL.md "fp8 weights": the blocks'
   * linear weights e4m3 with a scale per output channel, the rest bf16),
   * INT8 for an int8 file (the same with int8 codes, "int8 weights"),
   * BF16 for any other: a quant file's GGUF formats are dequantised for a
   * bf16 computation ("GGUF weights"). fp8 is precision == FP8. */
  wan_precision precision;
  int fp8;
  /* Some block linear weight is stored in a format other than the rest's
   * (e4m3, int8, GGUF's): its block groups are read as fp32 with those
   * weights dequantised (rank_model_read_group), or as stored
   * (rank_model_read_block_stored). */
  int quant;
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
 * their scales and the rest in bf16); the largest
 * block's when they differ. */
uint64_t rank_model_block_file_bytes(const rank_model *m);
/* The file's root dtype: "bf16", "fp32", "fp8", "int8", "quant" or
 * "quant-fp32". */
const char *rank_model_dtype_name(const rank_model_info *in);
/* The stored format of each tensor of block `block` of expert e, in the
 * block's layout order, into fmt (WAN_BLOCK_T_COUNT). */
void rank_model_block_formats(const rank_model *m, int e, int block, kern_dtype *fmt);
/* A block as a CUDA stage holds it at precision p (MODEL.md "Quantized
 * weights on the GPU"): each linear weight stored in e4m3, int8 or a GGUF
 * block format kept as it is at bf16 precision (dequantised right before
 * its GEMM), one stored in fp32, fp16 or bf16 narrowed to bf16; at fp8 or
 * int8 precision every linear weight e4m3 or int8 (a file's of that
 * format as it is, any other quantised at load); every other tensor bf16.
 * The formats of block `block` of expert e into fmt (WAN_BLOCK_T_COUNT);
 * its layout (wan_layout_make_formats); the largest such block of the
 * model, any expert: the size of every device block buffer, and the block
 * bytes the planner counts. */
void rank_model_device_formats(const rank_model *m, int e, int block, wan_precision p,
                               kern_dtype *fmt);
void rank_model_device_layout(const rank_model *m, int e, int block, wan_precision p,
                              wan_layout *out);
uint64_t rank_model_device_block_bytes(const rank_model *m, wan_precision p);
/* The weight-only path's scratch at precision p: bf16 bytes of the largest
 * linear weight a block keeps in a format other than bf16 (dequantised
 * into it right before its GEMM); 0 when none is. */
uint64_t rank_model_dequant_bytes(const rank_model *m, wan_precision p);
/* Block `block` of expert e with every tensor as stored, laid out as
 * wan_layout_make_formats of its stored formats (*l, rank_model_stored_
 * layout), into dst (dst_bytes >= l->packed_bytes; padding zeroed),
 * checksums checked when verifying; a merge set by rank_model_set_merge is
 * not applied (its caller reads widened groups). Adds the bytes read to
 * *bytes_read (may be NULL). SP_OK or the reader's status. */
void rank_model_stored_layout(const rank_model *m, int e, int block, wan_layout *l);
int rank_model_read_block_stored(rank_model *m, int e, int block, const wan_layout *l,
                                 void *dst, size_t dst_bytes, uint64_t *bytes_read);
/* Bytes of block `block` of expert e in the file (scales included), and of
 * every dataset of the file. */
uint64_t rank_model_block_bytes(const rank_model *m, int e, int block);
uint64_t rank_model_total_bytes(const rank_model *m);
/* The file's tensors by stored format, for inspect: each format present
 * once, in kern_dtype order, with its tensors and their bytes (scales
 * included). Returns how many formats (at most KERN_DTYPE_COUNT). */
typedef struct rank_model_format_count {
  kern_dtype dtype;
  int tensors;
  uint64_t bytes;
} rank_model_format_count;
int rank_model_format_counts(const rank_model *m, rank_model_format_count *out);

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

/* dtype KERN_DTYPE_E4M3 writes an fp8 file (MODEL.md "fp8 weights"), I8 an
 * int8 file ("int8 weights"): the blocks' linear weights in e4m3 or int8
 * with their scales (put_value quantises them), every other tensor in
 * bf16; Q8_0 a quant file of Q8_0 linear weights ("GGUF weights", ggml's
 * quantiser). */
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
/* A tensor from its fp32 values x, stored as the file stores it: fp32,
 * bf16 (kern_f32_to_bf16_n), or an fp8 or int8 file's linear weight
 * quantised per output channel (kern_fp8_quantize_rows,
 * kern_i8_quantize_rows: the quantisers --precision fp8 and int8 use at
 * load). tmp is not used (the model-file layer narrows into a
 * buffer of its own); it stays for the callers. */
int rank_model_writer_put_value(rank_model_writer *w, int e, wan_group g, int block,
                                const char *name, const float *x, void *tmp);
/* The root dtype of a file written in dtype (rank_model_writer_open):
 * "fp8" for E4M3, "int8" for I8, "quant" for a block format (Q8_0: the
 * blocks' linear weights in it, the rest bf16), else the dtype's name. */
const char *rank_model_root_of(kern_dtype dtype);

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
