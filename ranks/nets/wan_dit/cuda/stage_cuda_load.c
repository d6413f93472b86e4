/* The CUDA stage's loading (see stage_cuda.c): the host side of the
 * streamed and swapped blocks (pinned copies, the copy stream, the slot and
 * swap events) and the reading of every expert's groups into the arena or
 * those pinned copies. CUDA builds only. */
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "cuda_check.h"
#include "kern_cpu.h"
#include "layout.h"
#include "log.h"
#include "mfile_format.h"
#include "stage_cuda_impl.h"

/* Narrows a group read in the file's dtype to bf16 in the bf16 layout. */
static void to_bf16(const wan_layout *src_l, const void *src, const wan_layout *dst_l,
                    void *dst) {
  memset(dst, 0, dst_l->packed_bytes);
  for (int i = 0; i < src_l->count; i++) {
    const char *p = (const char *)src + src_l->t[i].offset;
    uint16_t *q = (uint16_t *)((char *)dst + dst_l->t[i].offset);
    if (src_l->t[i].bytes == dst_l->t[i].bytes)
      memcpy(q, p, dst_l->t[i].bytes);
    else
      kern_f32_to_bf16_n((const float *)p, q, (size_t)src_l->t[i].numel);
  }
}

/* The loader's host side: the file's groups arrive in pinned buffers, two
 * of them, so that reading group k + 1 overlaps the host-to-device copy of
 * group k. A bf16 file whose layout is the stage's is read straight into
 * them; another dtype goes through tmp and is narrowed; a block goes
 * through tmp into its device layout (device_block). */
typedef struct loader {
  rank_model *m;
  cuda_stage *c;
  void *tmp;          /* file dtype, when it is not the stage's layout */
  void *pin[2];       /* pinned, the largest group as the device holds it */
  cudaEvent_t free_ev[2];
  size_t tmp_bytes;
  float *f32;         /* a block tensor widened (device_block) */
  int next;
  int e;              /* the expert being read */
  uint64_t *bytes_read;
} loader;

static int same_layout(const wan_layout *a, const wan_layout *b) {
  if (a->count != b->count || a->packed_bytes != b->packed_bytes) return 0;
  for (int i = 0; i < a->count; i++)
    if (a->t[i].offset != b->t[i].offset || a->t[i].bytes != b->t[i].bytes) return 0;
  return 1;
}

/* Tensor st of a group at src into tensor dt of its device layout at dst:
 * the same format copied with its scales; any other widened to fp32 (into
 * f32) and stored as the device holds it: narrowed to bf16, or quantised
 * per output channel to e4m3 or int8 at fp8 and int8 precision (the
 * quantisers of convert --dtype fp8 and int8: the CPU stage's bytes). */
static void convert_tensor(const wan_tensor *st, const char *src, const wan_tensor *dt,
                           char *dst, float *f32) {
  const mfile_format *fs = mfile_format_of(st->dtype), *fd = mfile_format_of(dt->dtype);
  const int64_t rows = st->shape[0], cols = st->numel / rows;
  if (st->dtype == dt->dtype) {
    memcpy(dst + dt->offset, src + st->offset, dt->bytes);
    if (fd->scaled)
      memcpy(dst + dt->scale_offset, src + st->scale_offset, (size_t)rows * sizeof(float));
    return;
  }
  if (!fd->narrow)
    sp_fatal("internal: a %s tensor %s stored as %s on the device", fs->name, st->name, fd->name);
  fs->widen(src + st->offset, fs->scaled ? (const float *)(src + st->scale_offset) : NULL, rows,
            cols, f32);
  fd->narrow(f32, rows, cols, dst + dt->offset,
             fd->scaled ? (float *)(dst + dt->scale_offset) : NULL);
}

/* Block blk of expert ld->e in its device layout (c->blay) at host memory
 * dst: read as stored (rank_model_read_block_stored) and converted tensor
 * by tensor, or while a LoRA is merged read merged in the file's dtype
 * (fp32 for quantized weights: rank_model_read_expert_group) and converted
 * from there (an fp8 or int8 file's merged weights quantised again, as the
 * CPU stage does). */
static int device_block(loader *ld, rank_stage *s, int blk, void *dst) {
  const cuda_stage *c = ld->c;
  const wan_layout *dl = &c->blay[ld->e * s->nblocks + (blk - s->cfg.first_block)];
  const int merging = rank_model_merging(ld->m);
  wan_layout sl;
  if (merging)
    sl = *rank_model_layout(ld->m, WAN_GROUP_BLOCK);
  else
    rank_model_stored_layout(ld->m, ld->e, blk, &sl);
  /* the file's block is already what the device holds (a bf16 file in bf16) */
  int same = same_layout(&sl, dl);
  for (int i = 0; same && i < dl->count; i++) same = sl.t[i].dtype == dl->t[i].dtype;
  void *at = same ? dst : ld->tmp;
  const size_t room = same ? c->block_bytes : ld->tmp_bytes;
  const int rc = merging ? rank_model_read_expert_group(ld->m, ld->e, WAN_GROUP_BLOCK, blk, at,
                                                        room, ld->bytes_read)
                         : rank_model_read_block_stored(ld->m, ld->e, blk, &sl, at, room,
                                                        ld->bytes_read);
  if (rc != SP_OK || same) return rc;
  memset(dst, 0, c->block_bytes);
  for (int i = 0; i < dl->count; i++)
    convert_tensor(&sl.t[i], ld->tmp, &dl->t[i], dst, ld->f32);
  return SP_OK;
}

/* Group g (block) in bf16 at host memory dst. */
static int read_bf16(loader *ld, wan_group g, int block, void *dst) {
  const wan_layout *fl = rank_model_layout(ld->m, g), *bl = &ld->c->l16[g];
  if (same_layout(fl, bl))
    return rank_model_read_expert_group(ld->m, ld->e, g, block, dst, bl->packed_bytes,
                                        ld->bytes_read);
  int rc = rank_model_read_expert_group(ld->m, ld->e, g, block, ld->tmp, ld->tmp_bytes,
                                        ld->bytes_read);
  if (rc == SP_OK) to_bf16(fl, ld->tmp, bl, dst);
  return rc;
}

/* Group g (block) as the device holds it at host memory dst. */
static int read_group(loader *ld, rank_stage *s, wan_group g, int block, void *dst) {
  return g == WAN_GROUP_BLOCK ? device_block(ld, s, block, dst) : read_bf16(ld, g, block, dst);
}

/* Reads a group into the next pinned buffer and queues its copy to dst. */
static int place_group(loader *ld, rank_stage *s, wan_group g, int block, uint16_t *dst) {
  cuda_stage *c = ld->c;
  const int k = ld->next;
  ld->next ^= 1;
  CUDA_CHECK(cudaEventSynchronize(ld->free_ev[k])); /* its previous copy is done */
  int rc = read_group(ld, s, g, block, ld->pin[k]);
  if (rc != SP_OK) return rc;
  const size_t bytes = g == WAN_GROUP_BLOCK ? c->block_bytes : c->l16[g].packed_bytes;
  CUDA_CHECK(cudaMemcpyAsync(dst, ld->pin[k], bytes, cudaMemcpyHostToDevice, c->stream));
  CUDA_CHECK(cudaEventRecord(ld->free_ev[k], c->stream));
  return SP_OK;
}

/* The streamed blocks' pinned host copies, their order, the copy stream and
 * the slot events (lay->slots slots), and the per-block weight structs. */
void rank_cuda_setup_streaming(rank_stage *s, cuda_stage *c, const plan_layout *lay) {
  const size_t wbytes = c->block_bytes, nb = (size_t)s->nblocks;
  const int swap = s->cfg.swap_experts;
  c->stream_order = sp_xcalloc(nb, sizeof *c->stream_order);
  for (int e = 0; e < s->experts; e++) {
    cuda_expert *x = &c->ex[e];
    x->block_w = sp_xcalloc(nb, sizeof *x->block_w);
    x->host_w = sp_xcalloc(nb, sizeof *x->host_w);
    x->blocks = sp_xcalloc(nb, sizeof *x->blocks);
    if (swap) x->swap_w = sp_xcalloc(nb, sizeof *x->swap_w);
    for (int b = 0; b < s->nblocks; b++) {
      if (swap) CUDA_CHECK(cudaHostAlloc((void **)&x->swap_w[b], wbytes, cudaHostAllocDefault));
      if (!s->cfg.streamed || !s->cfg.streamed[b]) continue;
      CUDA_CHECK(cudaHostAlloc((void **)&x->host_w[b], wbytes, cudaHostAllocDefault));
      if (e == 0) c->stream_order[c->nstreamed++] = b;
    }
  }
  c->x = &c->ex[0];
  if (c->nstreamed != lay->nstreamed)
    sp_fatal("internal: %d streamed blocks, the layout has %d", c->nstreamed, lay->nstreamed);
  if (c->nstreamed || swap) CUDA_CHECK(cudaStreamCreateWithFlags(&c->copy, cudaStreamNonBlocking));
  if (swap) {
    c->last_use = sp_xcalloc(nb, sizeof *c->last_use);
    c->swapped = sp_xcalloc(nb, sizeof *c->swapped);
    c->swap_pending = sp_xcalloc(nb, 1);
    for (int b = 0; b < s->nblocks; b++) {
      CUDA_CHECK(cudaEventCreateWithFlags(&c->last_use[b], cudaEventDisableTiming));
      CUDA_CHECK(cudaEventCreateWithFlags(&c->swapped[b], cudaEventDisableTiming));
    }
  }
  if (c->nstreamed) {
    c->depth = lay->slots;
    c->copied = sp_xcalloc((size_t)c->depth, sizeof *c->copied);
    c->freed = sp_xcalloc((size_t)c->depth, sizeof *c->freed);
    for (int k = 0; k < c->depth; k++) {
      CUDA_CHECK(cudaEventCreateWithFlags(&c->copied[k], cudaEventDisableTiming));
      CUDA_CHECK(cudaEventCreateWithFlags(&c->freed[k], cudaEventDisableTiming));
    }
  }
  c->slot_w = sp_xcalloc((size_t)(c->depth ? c->depth : 1), sizeof *c->slot_w);
  c->lora_w = sp_xcalloc((size_t)s->nblocks * (size_t)s->experts, sizeof *c->lora_w);
}

/* Reads the stage's groups and places them: resident ones in the arena
 * through the two pinned buffers, streamed ones in their pinned copies.
 * The time from the first read to the last byte on the device is the load
 * rate's denominator (stats.weights_s). */
/* The loader's buffers: tmp for the largest group as the file delivers it
 * (in its dtype, or a block as stored), f32 for the largest block tensor
 * widened, two pinned buffers of the largest group as the device holds it. */
static void loader_buffers(rank_model *m, rank_stage *s, cuda_stage *c, loader *ld) {
  size_t pin_bytes = c->block_bytes, f32 = 0;
  for (int g = 0; g < 3; g++) {
    const size_t b = rank_model_layout(m, (wan_group)g)->packed_bytes;
    if (b > ld->tmp_bytes) ld->tmp_bytes = b;
    if (g != WAN_GROUP_BLOCK && c->l16[g].packed_bytes > pin_bytes)
      pin_bytes = c->l16[g].packed_bytes;
  }
  for (int e = 0; e < s->experts; e++)
    for (int b = 0; b < s->nblocks; b++) {
      wan_layout sl;
      rank_model_stored_layout(m, e, s->cfg.first_block + b, &sl);
      if (sl.packed_bytes > ld->tmp_bytes) ld->tmp_bytes = sl.packed_bytes;
      for (int i = 0; i < sl.count; i++)
        if ((size_t)sl.t[i].numel * sizeof(float) > f32) f32 = (size_t)sl.t[i].numel * sizeof(float);
    }
  ld->tmp = sp_xmalloc(ld->tmp_bytes);
  ld->f32 = sp_xmalloc(f32 + 1);
  for (int k = 0; k < 2; k++) {
    CUDA_CHECK(cudaMallocHost(&ld->pin[k], pin_bytes));
    CUDA_CHECK(cudaEventCreateWithFlags(&ld->free_ev[k], cudaEventDisableTiming));
  }
}

int rank_cuda_place_weights(rank_model *m, rank_stage *s, cuda_stage *c, uint64_t *bytes_read) {
  double w0 = comm_now();
  loader ld = {.m = m, .c = c, .bytes_read = bytes_read};
  loader_buffers(m, s, c, &ld);
  int rc = SP_OK;
  const size_t wbytes = c->block_bytes;
  for (int e = 0; rc == SP_OK && e < s->experts; e++) {
    cuda_expert *x = &c->ex[e];
    ld.e = e;
    if (s->cfg.embed) rc = place_group(&ld, s, WAN_GROUP_EMBED, 0, x->embed_w);
    for (int b = 0; rc == SP_OK && b < s->nblocks; b++) {
      const int blk = s->cfg.first_block + b;
      if (x->host_w[b]) { /* streamed: straight into its pinned buffer */
        rc = device_block(&ld, s, blk, x->host_w[b]);
      } else if (x->swap_w) { /* swapped: its pinned copy; expert 0's on the device */
        rc = device_block(&ld, s, blk, x->swap_w[b]);
        if (rc == SP_OK && e == 0)
          CUDA_CHECK(cudaMemcpyAsync(x->block_w[b], x->swap_w[b], wbytes, cudaMemcpyHostToDevice,
                                     c->stream));
      } else {
        rc = place_group(&ld, s, WAN_GROUP_BLOCK, blk, x->block_w[b]);
      }
    }
    if (rc == SP_OK && s->cfg.head) rc = place_group(&ld, s, WAN_GROUP_HEAD, 0, x->head_w);
  }
  CUDA_CHECK(cudaStreamSynchronize(c->stream));
  s->stats.weights_s = comm_now() - w0;
  free(ld.tmp);
  free(ld.f32);
  for (int k = 0; k < 2; k++) {
    CUDA_CHECK(cudaFreeHost(ld.pin[k]));
    CUDA_CHECK(cudaEventDestroy(ld.free_ev[k]));
  }
  return rc;
}
