/* Import of a Wan 2.2 VAE checkpoint (TI2V-5B's; safetensors) into a Wan
 * 2.2 VAE model file (wan_vae22_file.h): both parts. Two key layouts, told
 * apart by the keys: the published Wan2_2_VAE state dict
 * (Wan-Video/Wan2.2 wan/modules/vae2_2.py; Wan2.2_VAE.pth converted to
 * safetensors, and ComfyUI's wan2.2_vae.safetensors, which keeps those
 * keys) and diffusers' AutoencoderKLWan with is_residual
 * (Wan2.2-TI2V-5B-Diffusers/vae); ranks/nets/wan_vae22/VAE22.md
 * "Checkpoint keys" has the mapping. The config is inferred from the
 * shapes and every tensor cross-checked against the table of that config;
 * every missing, extra, mis-shaped, badly typed or non-finite tensor is
 * named. */
#ifndef RANK_CONVERT_VAE22_H
#define RANK_CONVERT_VAE22_H

#include <stddef.h>
#include <stdint.h>

#include "kern_dtype.h"

/* Whether a checkpoint key belongs to a Wan 2.2 VAE (a module only it has:
 * a residual level of its encoder or decoder, in either layout). */
int rank_convert_vae22_key(const char *key);

/* Sets *is when any tensor of the inputs (files, directories or an index
 * JSON) is a Wan 2.2 VAE key. Reads headers only. SP_OK, or the logged
 * status of an unreadable input. */
int rank_convert_is_vae22(int ninputs, char *const *inputs, int *is);

/* Converts the checkpoint into out_path, stored in dtype (bf16 or fp32).
 * Problems are logged, each naming the file and the tensor, before
 * SP_ERR_INPUT; I/O failures return SP_ERR_RUNTIME; no file is left at
 * out_path on failure. */
int rank_convert_vae22_run(int ninputs, char *const *inputs, const char *out_path,
                           kern_dtype dtype);

#endif
