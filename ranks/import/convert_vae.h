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

#include "kern_dtype.h"

/* Whether a checkpoint key belongs to a Wan VAE (its encoder or decoder in
 * either layout). A checkpoint holding any such key is converted as a VAE. */
int rank_convert_vae_key(const char *key);

/* Sets *is_vae when any tensor of the inputs (files, directories or an
 * index JSON, as rank_convert_run takes them) is a VAE key. Reads headers
 * only. Returns SP_OK, or the logged status of an unreadable input. */
int rank_convert_is_vae(int ninputs, char *const *inputs, int *is_vae);

/* Converts the checkpoint into out_path, stored in dtype. Tensors of the
 * encoder (encoder.*, conv1.*, quant_conv.*) are skipped, with one info
 * line counting them. Problems are logged, each naming the file and the
 * tensor, before SP_ERR_INPUT; I/O failures return SP_ERR_RUNTIME; no file
 * is left at out_path on failure. */
int rank_convert_vae_run(int ninputs, char *const *inputs, const char *out_path, kern_dtype dtype);

#endif
