/* What the key maps of every Wan VAE share (conv_vae.c, conv_vae22.c):
 * diffusers' WanResidualBlock leaves against the published
 * ResidualBlock's, and the diffusers rules of a part's middle and head,
 * whose published keys are the same in both VAEs. */
#ifndef CONV_VAE_RULES_H
#define CONV_VAE_RULES_H

#include "conv.h"

/* WanResidualBlock's leaves against ResidualBlock's (its Sequential
 * residual: 0 norm, 1 SiLU, 2 conv, 3 norm, 4 SiLU, 5 dropout, 6 conv). */
extern const conv_rule conv_vae_resblock[];

/* The middle of part ("encoder", "decoder"): resnet, attention, resnet. */
#define CONV_VAE_DIFFUSERS_MIDDLE(part)                                          \
  CONV_TREE(part ".mid_block.resnets.0.", part ".middle.0.", conv_vae_resblock), \
      CONV_RENAME(part ".mid_block.attentions.0.", part ".middle.1."),           \
      CONV_TREE(part ".mid_block.resnets.1.", part ".middle.2.", conv_vae_resblock)
/* The head of part: the RMS norm and the conv out. */
#define CONV_VAE_DIFFUSERS_HEAD(part)                           \
  CONV_RENAME(part ".norm_out.", part ".head.0."),              \
      CONV_RENAME(part ".conv_out.", part ".head.2.")

#endif
