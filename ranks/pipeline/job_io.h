/* One job's inputs as rank 0 reads them: the contexts of a cond file and
 * the initial noise, each checked against the model before any work. Also
 * forward's inputs. Files: job_io.c (reading, and the session's writing of
 * a job's outputs, job_session_impl.h). */
#ifndef JOB_IO_H
#define JOB_IO_H

#include <stdint.h>

#include "tensor_io.h"
#include "wan_config.h"

/* One job's inputs on rank 0: the contexts, the initial noise and, for
 * image to video, the image's conditioning (job_image.h: I2V's y, TI2V's
 * z; numel 0 without an image). */
typedef struct job_inputs {
  rank_tensor ctx[2], noise, cond;
} job_inputs;

void job_inputs_free(job_inputs *in);
/* dataset (L, text_dim) with 1 <= L <= text_len. */
int job_read_context(const char *path, const char *name, const wan_config *c, rank_tensor *out);
/* dataset (in_dim, F, H, W), the model's input, H and W even; with want
 * non-NULL the shape must equal it exactly (a run's latent: out_dim
 * channels). A path ending in .latent is read as a ComfyUI
 * latent file instead (import/latent_file.h), whatever name says. */
int job_read_latent(const char *path, const char *name, const wan_config *c,
                    const int64_t *want, rank_tensor *out);

#endif
