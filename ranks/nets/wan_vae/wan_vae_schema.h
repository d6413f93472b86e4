/* The Wan 2.1 VAE's model file as data (net_schema.h; VAE.md "Model file
 * and checkpoint keys"): the config as int64 root attributes (dim, z_dim,
 * n_mult, dim_mult (n_mult entries), num_res_blocks, temporal_up (n_mult -
 * 1 entries, absent for one level), encoder (1, or absent for 0)), the
 * group /decoder with one dataset per tensor of wan_vae_table named by its
 * official key, with encoder = 1 the group /encoder with one per tensor of
 * the encoder's table (wan_vae_enc.h), the presets wan2.1-vae (the
 * published config) and wan2.1-vae-tiny (dim 8), both with the encoder,
 * and the synthetic generator's scales. */
#ifndef WAN_VAE_SCHEMA_H
#define WAN_VAE_SCHEMA_H

#include "net_schema.h"
#include "wan_vae.h"

#define WAN_VAE_ARCH "wan2.1-vae"
#define WAN_VAE_GROUP "/decoder"
#define WAN_VAE_ENC_GROUP "/encoder" /* only with config attribute encoder = 1 */

extern const net_schema wan_vae_schema;

#endif
