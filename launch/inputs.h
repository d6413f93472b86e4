/* Loading and checking the user's input tensors against a model's config:
 * shared by forward and run. Each returns SP_OK or SP_ERR_INPUT after one
 * line naming the file, the dataset and what is wrong. */
#ifndef SP_INPUTS_H
#define SP_INPUTS_H

#include "tensor_io.h"
#include "wan_config.h"

/* dataset (L, text_dim) with 1 <= L <= text_len. */
int inputs_read_context(const char *path, const char *name, const wan_config *c,
                        rank_tensor *out);
/* dataset (in_dim, F, H, W), H and W even; with want_dims non-NULL the
 * shape must equal it exactly. */
int inputs_read_latent(const char *path, const char *name, const wan_config *c,
                       const int64_t *want_dims, rank_tensor *out);

#endif
