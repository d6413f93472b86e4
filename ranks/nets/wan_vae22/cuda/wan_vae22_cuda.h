/* The Wan 2.2 VAE on a CUDA device (wan_vae22_gpu.h, VAE22.md), the VAE's
 * CUDA backend: its functions, which its backend table
 * (wan_vae22_backend.h) wraps and the GPU tests call. CUDA builds only. */
#ifndef WAN_VAE22_CUDA_H
#define WAN_VAE22_CUDA_H

#include <stdint.h>

#include "vae22_layout.h"
#include "wan_vae22.h"
#include "wan_vae22_gpu.h"

typedef struct wan_vae22_gpu wan_vae22_gpu;

/* Uploads one part's weights (packed fp32, its table's layout for c) to
 * the current device in their device form (wan_vae22_gpu.h) and carves the
 * one allocation the planner lays out (wan_vae22_gpu_layout) for a decoder
 * of latents h x w or an encoder of videos of h x w pixels. SP_OK,
 * SP_ERR_INPUT (bad config or size: logged) or SP_ERR_RUNTIME (out of
 * device memory: logged with the bytes asked for). */
int wan_vae22_gpu_create(const wan_vae22_config *c, wan_vae22_part part, const float *packed,
                         int64_t h, int64_t w, wan_vae_gpu_precision p, wan_vae22_gpu **out);
void wan_vae22_gpu_free(wan_vae22_gpu *g);

/* As wan_vae22_decode_stream: latents (z_dim, F, h, w) on the host; fn
 * gets each chunk's clamped frames (3, n, 16h, 16w) on the host, fp32. 0 or
 * fn's stop code. A decoder's. */
int wan_vae22_gpu_decode(wan_vae22_gpu *g, const float *latents, int64_t F,
                         wan_vae_frames_fn fn, void *user);
/* As wan_vae22_encode: video (3, T, H, W) host fp32, T = 1 + 4k -> latents
 * (z_dim, 1 + k, H/16, W/16) host fp32. SP_OK or SP_ERR_INPUT (a T that is
 * not 1 + 4k, logged). An encoder's. */
int wan_vae22_gpu_encode(wan_vae22_gpu *g, const float *video, int64_t T, float *latents);

/* The one device allocation: its bytes as allocated, and the layout it
 * was carved from (whose total they must equal). */
int64_t wan_vae22_gpu_peak_bytes(const wan_vae22_gpu *g);
const plan_vae22_layout *wan_vae22_gpu_layout_of(const wan_vae22_gpu *g);

/* on = 1: the runs that follow time every op with CUDA events and the
 * totals restart from zero; on = 0: no timing. */
void wan_vae22_gpu_profile(wan_vae22_gpu *g, int on);
/* Milliseconds per op kind since profiling was turned on (zeros when off). */
void wan_vae22_gpu_profile_ms(const wan_vae22_gpu *g, double ms[WAN_VAE22_GPU_OPS]);

#endif
