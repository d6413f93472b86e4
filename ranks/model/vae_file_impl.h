/* Internals the VAE file's reader (vae_file.c) and writer (vae_writer.c)
 * share: where tensors live and how the config is stored. */
#ifndef RANK_VAE_FILE_IMPL_H
#define RANK_VAE_FILE_IMPL_H

#include <hdf5.h>

#include "vae_file.h"

#define VAE_FILE_GROUP "decoder" /* the root's only member */

/* "/decoder/NAME". */
void vae_file_dataset_path(const char *name, char *buf, size_t n);
/* The config as root attributes (vae_file.h). Returns 0 or -1 (caller logs). */
int vae_file_config_write(hid_t file, const wan_vae_config *c);
/* Reads and checks them; logs naming path and the attribute. */
int vae_file_config_read(hid_t file, const char *path, wan_vae_config *c);

#endif
