/* Import of a Wan 2.1 video VAE checkpoint (safetensors) into a VAE model
 * file (vae_file.h): the decoder and conv2 only. Two key layouts, told
 * apart by the keys: the published WanVAE_ state dict (Wan-Video/Wan2.1
 * wan/modules/vae.py, as ComfyUI's wan_2.1_vae.safetensors stores it) and
 * diffusers' AutoencoderKLWan; ranks/nets/wan_vae/VAE.md "Model file and checkpoint
 * keys" has the mapping. The config is inferred from the shapes, every
 * tensor is cross-checked against the table of that config, and every
 * missing, extra, mis-shaped, badly typed or non-finite tensor is named. */
#ifndef RANK_CONVERT_VAE_H
#define RANK_CONVERT_VAE_H

#include <stddef.h>
#include <stdint.h>

#include "kern_dtype.h"

typedef enum {
  RANK_CONVERT_VAE_OFFICIAL = 0,  /* WanVAE_: conv2.*, decoder.upsamples.N.* */
  RANK_CONVERT_VAE_DIFFUSERS = 1, /* AutoencoderKLWan: post_quant_conv.*, decoder.up_blocks.* */
} rank_convert_vae_style;

const char *rank_convert_vae_style_name(rank_convert_vae_style s); /* "official", "diffusers" */

/* Whether a checkpoint key belongs to a Wan VAE (its encoder or decoder in
 * either layout). A checkpoint holding any such key is converted as a VAE. */
int rank_convert_vae_key(const char *key);

/* Sets *is_vae when any tensor of the inputs (files, directories or an
 * index JSON, as rank_convert_run takes them) is a VAE key. Reads headers
 * only. Returns SP_OK, or the logged status of an unreadable input. */
int rank_convert_is_vae(int ninputs, char *const *inputs, int *is_vae);

/* Maps a decoder key of a style to its official key (the table's name)
 * into buf, given num_res_blocks (diffusers numbers blocks per level, the
 * published code across levels). Returns 0, or -1 when the key is no
 * decoder tensor of that style. */
int rank_convert_vae_map_key(rank_convert_vae_style s, const char *key, int64_t num_res_blocks,
                             char *buf, size_t n);
/* The inverse: the key a checkpoint of style s uses for a table name. */
void rank_convert_vae_key_for(rank_convert_vae_style s, const char *name, int64_t num_res_blocks,
                              char *buf, size_t n);

/* Converts the checkpoint into out_path, stored in dtype. Tensors of the
 * encoder (encoder.*, conv1.*, quant_conv.*) are skipped, with one info
 * line counting them. Problems are logged, each naming the file and the
 * tensor, before SP_ERR_INPUT; I/O failures return SP_ERR_RUNTIME; no file
 * is left at out_path on failure. */
int rank_convert_vae_run(int ninputs, char *const *inputs, const char *out_path, kern_dtype dtype);

#endif
