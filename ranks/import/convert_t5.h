/* Import of the UMT5-XXL text encoder (safetensors) into a T5 model file
 * (t5_file.h), with its tokenizer. Three key forms, told apart by the keys
 * (ranks/nets/umt5/UMT5.md "Checkpoint keys"): transformers' UMT5EncoderModel
 * (shared.weight, encoder.block.N.layer.*; the diffusers repackaging of Wan
 * and ComfyUI's umt5_xxl_fp16.safetensors use it), the same keys with fp8
 * tensors and a scale_weight per tensor (ComfyUI's scaled fp8 files:
 * dequantised), and Wan's own keys (token_embedding.weight, blocks.N.*,
 * as in models_t5_umt5-xxl-enc-bf16.pth, when stored as safetensors). The
 * config is inferred from the shapes; every missing, extra, mis-shaped,
 * badly typed or non-finite tensor is named. */
#ifndef RANK_CONVERT_T5_H
#define RANK_CONVERT_T5_H

#include "kern_dtype.h"

/* Sets *is_t5 when a tensor of the inputs (files, directories or an index
 * JSON) is a UMT5 encoder key of either style. Reads headers only. */
int rank_convert_is_t5(int ninputs, char *const *inputs, int *is_t5);

/* Converts into out_path stored in dtype, with the tokenizer read from
 * tokenizer_path (spiece.model or tokenizer.json), or, when that is NULL,
 * from a uint8 tensor spiece_model in the checkpoint (ComfyUI stores one in
 * some files). Decoder and lm_head tensors (a full UMT5) are skipped with
 * one line counting them. Problems are logged, each naming the file and
 * the tensor, before SP_ERR_INPUT; I/O failures return SP_ERR_RUNTIME; no
 * file is left at out_path on failure. */
int rank_convert_t5_run(int ninputs, char *const *inputs, const char *tokenizer_path,
                        const char *out_path, kern_dtype dtype);

#endif
