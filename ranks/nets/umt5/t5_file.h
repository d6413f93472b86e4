/* The UMT5 text encoder's model file (HDF5) and synthetic encoders, behind
 * one handle (ranks/nets/umt5/UMT5.md "Model file").
 *
 * The same container as the DiT's and the VAE's (model_container.h): root
 * attributes format, format_version, arch = T5_MODEL_ARCH, preset (may be
 * ""), dtype ("bf16"|"fp32"), checksum and the config (int64: vocab, dim,
 * dim_attn, ffn, heads, layers, buckets, max_dist); two groups, the root's
 * only members:
 *   /encoder    one contiguous unfiltered dataset per tensor of the table
 *               (umt5.h), named by Wan's key, with attributes dtype and
 *               checksum;
 *   /tokenizer  the tokenizer's tok_spec (tokenizer.h) as datasets
 *               piece_bytes (uint8), piece_offsets (uint32, n_pieces + 1),
 *               scores (float32), types (uint8) and, when the spec has a
 *               normalisation map, charsmap (uint8), each with a checksum
 *               attribute; the ids and flags as int64 attributes of the
 *               group (unk_id, eos_id, pad_id, bos_id, add_dummy_prefix,
 *               remove_extra_whitespaces, escape_whitespaces, byte_fallback).
 * The model checksum folds the weights' CRCs in table order, then the
 * tokenizer datasets' in the order above.
 *
 * A spec "synth:PRESET[:SEED]" (presets umt5-xxl, the published config, and
 * umt5-tiny, width 4096 with 384 vocabulary rows: UMT5.md "Config") opens a
 * synthetic encoder: every tensor generated in fp32 when it is read, by the
 * DiT's generator core (synth.h) keyed by the tensor's key (embedding rows
 * uniform in [-1, 1), norm weights within 0.1 of 1, position tables within
 * 0.5, q with variance 1 / (dim * head width) as Wan initialises it, the
 * other linears 1 / fan_in). Its tokenizer is its preset's built-in one
 * (t5_preset_tokenizer: umt5-tiny's), or none (umt5-xxl). */
#ifndef RANK_T5_FILE_H
#define RANK_T5_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "kern_dtype.h"
#include "model_id.h"
#include "tokenizer.h"
#include "umt5.h"
#include "umt5_schema.h"

#define T5_MODEL_ARCH UMT5_ARCH

typedef struct t5_model t5_model;

typedef struct t5_model_info {
  umt5_config config;
  /* id.checksum over the weights' CRCs in table order, then the tokenizer
   * datasets' (above). */
  model_file_id id;
  model_file_size size; /* of the umt5.h table */
  int32_t tok_pieces;   /* the tokenizer's pieces (0: none, a synth: spec without one) */
} t5_model_info;

/* Known presets: fills out and returns 0, or -1 for an unknown name. */
int t5_preset(const char *name, umt5_config *out);
const char *t5_preset_match(const umt5_config *c);
const char *t5_preset_names(void); /* "umt5-xxl, umt5-tiny" */
/* The built-in tokenizer (tok_model_builtin's name) that a preset's synth:
 * spec carries and init stores by default: TOK_BUILTIN_TINY for
 * umt5-tiny; NULL for umt5-xxl (the published tokenizer is not built in)
 * and any other name. */
const char *t5_preset_tokenizer(const char *preset);

/* Opens a T5 file read-only and validates its root attributes, every
 * dataset's layout and the tokenizer (read and checked as hostile input,
 * its checksums always verified), without reading weights; or parses a
 * synth: spec. A staticpipe file of another arch is refused with a line
 * naming both. verify = 1 checks every weight dataset's checksum when it is
 * read (the embedding is then read whole). SP_OK, SP_ERR_INPUT or
 * SP_ERR_RUNTIME, errors logged once naming the file, dataset and check. */
int t5_model_open(const char *spec, int verify, t5_model **out);
void t5_model_close(t5_model *m);
const t5_model_info *t5_model_get_info(const t5_model *m);
/* The stored tokenizer (a synth: spec's: its preset's built-in one), or
 * NULL (a synth: spec of a preset without one). Owned by m. */
const tok_model *t5_model_tokenizer(const t5_model *m);

/* Reads every weight dataset: every checksum, every weight finite (the
 * line names the dataset and the element); *bytes the bytes read. A
 * synth: encoder has nothing stored: SP_OK at once. */
int t5_model_verify(t5_model *m, uint64_t *bytes);
/* Layer l's ten tensors as fp32 into buf (umt5_layer_floats floats, bound
 * with umt5_layer_bind; padding zeroed). SP_OK or SP_ERR_INPUT (damaged
 * file: logged). */
int t5_model_read_layer(t5_model *m, int layer, float *buf);
/* Embedding rows: out (n, dim) row i = token_embedding[ids[i]]; every id
 * must be below vocab (SP_ERR_INPUT, logged, naming the id). */
int t5_model_read_embed(t5_model *m, const int32_t *ids, int64_t n, float *out);
/* norm.weight (dim). */
int t5_model_read_norm(t5_model *m, float *out);

/* Wan's default negative prompt (sample_neg_prompt of wan/configs/
 * shared_config.py), UTF-8: what `encode` uses when no other is given. */
extern const char t5_wan_negative_prompt[];
/* The negative prompt a command uses: text, or Wan's own when text is NULL
 * or blank after Wan's cleaning (as published). */
const char *t5_negative_or_default(const char *text);

/* One prompt to tokens, as `encode` and `run --prompt` take it: Wan's
 * cleaning (HTML unescaped twice, whitespace collapsed; invalid UTF-8
 * refused with its byte offset), an empty result refused, tokenized with
 * tok and cut to TOK_CONTEXT tokens, end-of-sequence included (a warning
 * says how many were dropped). where names the prompt in messages
 * ("--prompt", "prompts.txt:3"). ids: TOK_CONTEXT slots; *n the count.
 * SP_OK or SP_ERR_INPUT (logged once). */
int t5_prompt_tokenize(const tok_model *tok, const char *text, size_t len, const char *where,
                       int32_t *ids, int64_t *n);

/* ---- writer: a temporary file beside path, renamed into place on commit;
 * abort, a failure or SIGINT/SIGTERM removes it. */
typedef struct t5_model_writer t5_model_writer;

/* Checks c (SP_ERR_INPUT, logged), starts the file and writes the
 * tokenizer tok (its spec, checked by tok_model_create); preset may be NULL. */
int t5_model_writer_open(const char *path, const umt5_config *c, kern_dtype dtype,
                         const char *preset, const tok_model *tok, t5_model_writer **out);
/* The model-file layer's hooks (mfile.h) that write tok's spec as the
 * tokenizer group of a file of config c: SP_OK, or SP_ERR_INPUT (logged,
 * naming path) when it has more pieces than c's vocabulary. tok must
 * outlive the writer. */
struct mfile_hooks;
int t5_model_tok_hooks(const char *path, const umt5_config *c, const tok_model *tok,
                       struct mfile_hooks *h);
/* Extra root attribute "meta.KEY" (model_container.h). */
int t5_model_writer_attr(t5_model_writer *w, const char *key, const char *value);
/* One tensor of the table, data fp32 (numel floats); stored in the file's
 * dtype (bf16 rounded to nearest even). A name not in the table, a wrong
 * count or a second write is SP_ERR_INPUT (logged). */
int t5_model_writer_put(t5_model_writer *w, const char *name, const float *data, int64_t numel);
/* Part of a tensor: values [first, first + count) of its flattened data,
 * parts of one tensor given in order and one tensor at a time (memory
 * stays at a part, not the 1-billion-value embedding). */
int t5_model_writer_put_part(t5_model_writer *w, const char *name, const float *data,
                             int64_t first, int64_t count);
/* Checks every tensor was written, writes the checksum, renames into place;
 * frees w either way. */
int t5_model_writer_commit(t5_model_writer *w);
void t5_model_writer_abort(t5_model_writer *w);

#endif
