/* The Wan 2.2 VAE's model file as data (net_schema.h; VAE22.md "Model
 * file"): the config as int64 root attributes (dim, dec_dim, z_dim,
 * n_mult, dim_mult (n_mult entries), num_res_blocks, temporal_down
 * (n_mult - 1 entries, absent for one level)); the groups /decoder (the
 * decoder's table: conv2.*, decoder.*) and /encoder (the encoder's:
 * encoder.*, conv1.*), one dataset per tensor named by its official key;
 * the presets wan2.2-vae (the published config) and wan2.2-vae-tiny (the
 * published structure at widths 8); and the synthetic generator's scales. */
#ifndef WAN_VAE22_SCHEMA_H
#define WAN_VAE22_SCHEMA_H

#include "net_schema.h"
#include "wan_vae22.h"

#define WAN_VAE22_DEC_GROUP "/decoder"
#define WAN_VAE22_ENC_GROUP "/encoder"

extern const net_schema wan_vae22_schema;

/* The group of part p ("/decoder", "/encoder"). */
const char *wan_vae22_group(wan_vae22_part p);

#endif
