/* The transport self-check (commcheck.h). */
#include "commcheck.h"

#include <stdlib.h>
#include <string.h>

#include "log.h"

const char *commcheck_pattern_name(int p) {
  static const char *names[] = {"p2p", "alltoall", "exchange"};
  return p >= 0 && p < COMMCHECK_NPATTERNS ? names[p] : "?";
}

static uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

static uint64_t block_key(const commcheck_key *b) {
  uint64_t k = splitmix64(b->seed);
  k = splitmix64(k ^ (uint64_t)(uint32_t)b->src);
  k = splitmix64(k ^ ((uint64_t)(uint32_t)b->dst << 20));
  k = splitmix64(k ^ ((uint64_t)b->pattern << 40));
  return splitmix64(k ^ (uint64_t)b->size);
}

void commcheck_fill(uint8_t *buf, size_t bytes, const commcheck_key *k) {
  uint64_t key = block_key(k);
  size_t words = bytes / 8;
  for (size_t i = 0; i < words; i++) {
    uint64_t v = splitmix64(key + i);
    memcpy(buf + 8 * i, &v, 8);
  }
  if (bytes % 8) {
    uint64_t v = splitmix64(key + words);
    memcpy(buf + 8 * words, &v, bytes % 8);
  }
}

int64_t commcheck_first_diff(const uint8_t *buf, size_t bytes, const commcheck_key *k,
                             uint8_t *want, uint8_t *got) {
  uint64_t key = block_key(k);
  for (size_t i = 0; i * 8 < bytes; i++) {
    uint64_t v = splitmix64(key + i);
    uint8_t w8[8];
    memcpy(w8, &v, 8);
    size_t n = bytes - 8 * i < 8 ? bytes - 8 * i : 8;
    if (memcmp(buf + 8 * i, w8, n) == 0) continue;
    for (size_t j = 0; j < n; j++)
      if (buf[8 * i + j] != w8[j]) {
        *want = w8[j];
        *got = buf[8 * i + j];
        return (int64_t)(8 * i + j);
      }
  }
  return -1;
}

/* ---- host memory ---------------------------------------------------------- */

static void *host_alloc(size_t bytes) { return sp_xcalloc(bytes ? bytes : 1, 1); }
static void host_release(void *p) { free(p); }
static void host_copy(void *dst, const void *src, size_t n, void *stream) {
  (void)stream;
  memcpy(dst, src, n);
}

commcheck_mem commcheck_mem_host(void) {
  commcheck_mem m = {"host", host_alloc, host_release, host_copy, host_copy, NULL};
  return m;
}

/* ---- one pattern at one size ------------------------------------------------ */

typedef struct cc_bufs {
  uint8_t *hsend, *hrecv; /* host staging: what is sent, what came back */
  void *send, *recv;      /* in mem */
} cc_bufs;

/* The peers of this rank in a two-party pattern: to and from, -1 idle. */
static void pair_peers(const comm_world *w, int pattern, int *to, int *from) {
  *to = *from = -1;
  if (w->size < 2) return;
  if (pattern == COMMCHECK_P2P) {
    *to = (w->rank + 1) % w->size;
    *from = (w->rank - 1 + w->size) % w->size;
  } else if ((w->rank ^ 1) < w->size) {
    *to = *from = w->rank ^ 1;
  }
}

/* One move of the pattern: receives posted first, then sends, then both
 * waited for (each under the timeout). The all-to-all is the transport's
 * (comm_tp_alltoallv: host buffers over MPI, device buffers over NCCL's
 * grouped calls or the staged rounds). */
static void move_once(const comm_world *w, comm_transport *t, const commcheck_mem *mem,
                      const commcheck_opts *o, int pattern, size_t size, cc_bufs *b) {
  int tag = 100 + pattern, n = w->size;
  comm_xfer rx, sx;
  if (pattern != COMMCHECK_ALLTOALL) {
    int to, from;
    pair_peers(w, pattern, &to, &from);
    if (to < 0) return;
    comm_tp_irecv(t, b->recv, size, from, tag, &rx, mem->stream);
    comm_tp_isend(t, b->send, size, to, tag, &sx, mem->stream);
    comm_tp_wait(t, &rx, o->timeout_s, "commcheck's receive", NULL);
    comm_tp_wait(t, &sx, o->timeout_s, "commcheck's send", NULL);
    return;
  }
  int group[COMM_COMMCHECK_MAX_RANKS];
  size_t count[COMM_COMMCHECK_MAX_RANKS], displ[COMM_COMMCHECK_MAX_RANKS];
  for (int j = 0; j < n; j++) {
    group[j] = j;
    count[j] = size / (size_t)n;
    displ[j] = (size_t)j * count[j];
  }
  const comm_a2a x = {group, n, b->send, count, displ, b->recv, count, displ};
  comm_tp_alltoallv(t, &x, tag, o->timeout_s, "commcheck's all-to-all", mem->stream);
}

/* Fills the send buffer for the pattern (the corrupting rank flips a byte
 * of each block) and clears the receive buffer. */
static void prepare(const comm_world *w, const commcheck_mem *mem, const commcheck_opts *o,
                    int pattern, size_t size, cc_bufs *b) {
  int n = w->size, to, from;
  if (pattern == COMMCHECK_ALLTOALL) {
    size_t blk = size / (size_t)n;
    for (int j = 0; j < n; j++) {
      uint8_t *p = b->hsend + (size_t)j * blk;
      commcheck_fill(p, blk, &(commcheck_key){o->seed, w->rank, j, pattern, size});
      if (w->rank == o->corrupt_rank && blk) p[blk / 2] ^= 0xFF;
    }
  } else {
    pair_peers(w, pattern, &to, &from);
    commcheck_fill(b->hsend, size, &(commcheck_key){o->seed, w->rank, to, pattern, size});
    if (w->rank == o->corrupt_rank && size) b->hsend[size / 2] ^= 0xFF;
  }
  mem->put(b->send, b->hsend, size, mem->stream);
  memset(b->hrecv, 0, size);
  mem->put(b->recv, b->hrecv, size, mem->stream);
}

/* Checks what arrived; logs the first wrong byte of each peer's block.
 * SP_OK or SP_ERR_RUNTIME. */
static int check(const comm_world *w, const commcheck_mem *mem, const commcheck_opts *o,
                 int pattern, size_t size, cc_bufs *b) {
  int n = w->size, to, from, rc = SP_OK;
  mem->get(b->hrecv, b->recv, size, mem->stream);
  int first = 0, last = 0;
  size_t blk = size;
  if (pattern == COMMCHECK_ALLTOALL) {
    blk = size / (size_t)n;
    last = n - 1;
  } else {
    pair_peers(w, pattern, &to, &from);
    if (from < 0) return SP_OK;
  }
  for (int j = first; j <= last; j++) {
    int peer = pattern == COMMCHECK_ALLTOALL ? j : from;
    uint8_t want = 0, got = 0;
    size_t off = pattern == COMMCHECK_ALLTOALL ? (size_t)j * blk : 0;
    const commcheck_key k = {o->seed, peer, w->rank, pattern, size};
    int64_t d = commcheck_first_diff(b->hrecv + off, blk, &k, &want, &got);
    if (d >= 0) {
      sp_log_error("FAIL %s %zu bytes (%s): rank %d received from rank %d: byte %lld of the "
                   "block is 0x%02x, expected 0x%02x",
                   commcheck_pattern_name(pattern), size, mem->name, w->rank, peer,
                   (long long)d, got, want);
      rc = SP_ERR_RUNTIME;
    }
  }
  return rc;
}

/* One pattern at one size: its time per move (the slowest rank's) and
 * whether every rank received every byte as sent. */
typedef struct cc_result {
  int pattern;
  size_t size;
  double sec;
  int ok;
} cc_result;

/* Rank 0's row (or JSON object) of result r; *rows counts them. */
static void report(const comm_world *w, comm_transport *t, const commcheck_mem *mem,
                   const commcheck_opts *o, const cc_result *r, int *rows) {
  if (w->rank != 0) return;
  const int pattern = r->pattern, ok = r->ok;
  const size_t size = r->size;
  const double sec = r->sec;
  int n = w->size;
  size_t moved = pattern == COMMCHECK_ALLTOALL ? size / (size_t)n * (size_t)(n - 1) : size;
  double gbs = sec > 0 ? (double)moved / sec / 1e9 : 0.0;
  const char *tp = comm_transport_name(comm_transport_kind_of(t));
  if (o->json) {
    fprintf(o->out, "%s\n  {\"pattern\": \"%s\", \"transport\": \"%s\", \"memory\": \"%s\", "
                    "\"bytes\": %zu, \"moved_bytes\": %zu, \"time_us\": %.3f, "
                    "\"algbw_gbs\": %.4f, \"ok\": %s}",
            *rows ? "," : "", commcheck_pattern_name(pattern), tp, mem->name, size, moved,
            sec * 1e6, gbs, ok ? "true" : "false");
  } else {
    fprintf(o->out, "%10s %5s %7s %12zu %12zu %12.2f %10.3f  %s\n",
            commcheck_pattern_name(pattern), tp, mem->name, size, moved, sec * 1e6, gbs,
            ok ? "ok" : "FAIL");
  }
  (*rows)++;
}

/* The largest time of the ranks, on rank 0. */
static double max_over_ranks(const comm_world *w, double x) {
  double *all = sp_xcalloc((size_t)w->size, sizeof *all);
  comm_gather(w, &x, sizeof x, all, 0);
  double m = x;
  for (int r = 0; r < w->size; r++)
    if (all[r] > m) m = all[r];
  free(all);
  return m;
}

int commcheck_run(const comm_world *w, comm_transport **tp, int cuda_device,
                  const commcheck_mem *mem, const commcheck_opts *o) {
  comm_transport *t = *tp;
  const comm_transport_kind kind = comm_transport_kind_of(t);
  if (w->size > COMM_COMMCHECK_MAX_RANKS)
    sp_fatal("commcheck: %d ranks, at most %d", w->size, COMM_COMMCHECK_MAX_RANKS);
  size_t cap = 1;
  for (int i = 0; i < o->nsizes; i++)
    if (o->sizes[i] > cap) cap = o->sizes[i];
  cc_bufs b = {sp_xcalloc(cap, 1), sp_xcalloc(cap, 1), mem->alloc(cap), mem->alloc(cap)};
  int rows = 0, status = SP_OK;
  if (w->rank == 0) {
    if (o->json)
      fprintf(o->out, "{\"ranks\": %d, \"seed\": %llu, \"iters\": %d, \"results\": [", w->size,
              (unsigned long long)o->seed, o->iters);
    else
      fprintf(o->out,
              "# commcheck: %d ranks, seed %llu, %d timed iterations after a checked warm-up\n"
              "# time: the slowest rank's mean per iteration; algbw: bytes a rank sends to its "
              "peers / time\n"
              "# %8s %5s %7s %12s %12s %12s %10s  %s\n",
              w->size, (unsigned long long)o->seed, o->iters, "pattern", "tp", "memory", "bytes",
              "moved", "time_us", "algbw_GB/s", "check");
  }
  for (int p = 0; p < COMMCHECK_NPATTERNS; p++) {
    if (!(o->patterns & (1u << p))) continue;
    if (w->size < 2) {
      if (w->rank == 0 && !o->json)
        fprintf(o->out, "# %s: needs 2 ranks or more, skipped\n", commcheck_pattern_name(p));
      continue;
    }
    for (int i = 0; i < o->nsizes; i++) {
      size_t size = o->sizes[i];
      if (p == COMMCHECK_ALLTOALL) size -= size % (size_t)w->size; /* whole blocks */
      comm_set_phase("checking a pattern");
      if (mem->stream && kind == COMM_TRANSPORT_MPI) { /* fresh staging (commcheck.h) */
        comm_transport_close(t);
        *tp = t = NULL;
        comm_transport_open(w, kind, cuda_device, &t); /* the MPI kind cannot fail */
        *tp = t;
      }
      prepare(w, mem, o, p, size, &b);
      move_once(w, t, mem, o, p, size, &b);
      int ok = check(w, mem, o, p, size, &b);
      comm_barrier(w);
      double t0 = comm_now();
      for (int k = 0; k < o->iters; k++) move_once(w, t, mem, o, p, size, &b);
      double sec = o->iters > 0 ? (comm_now() - t0) / o->iters : 0.0;
      /* the last move again on a cleared buffer, checked: the timed ones
       * must not have broken what the warm-up delivered */
      prepare(w, mem, o, p, size, &b);
      move_once(w, t, mem, o, p, size, &b);
      if (ok == SP_OK) ok = check(w, mem, o, p, size, &b);
      int all = comm_agree(w, ok);
      sec = max_over_ranks(w, sec);
      report(w, t, mem, o, &(cc_result){p, size, sec, all == SP_OK}, &rows);
      if (all != SP_OK) status = SP_ERR_RUNTIME;
    }
  }
  if (w->rank == 0) {
    if (o->json) fprintf(o->out, "\n], \"ok\": %s}\n", status == SP_OK ? "true" : "false");
    else fprintf(o->out, "# %s\n", status == SP_OK ? "every byte received as sent" : "FAILED");
    fflush(o->out);
  }
  mem->release(b.send);
  mem->release(b.recv);
  free(b.hsend);
  free(b.hrecv);
  return status;
}

#ifndef STATICPIPE_HAVE_CUDA
/* Device memory needs the CUDA backend (comm/cuda/commcheck_cuda.c). */
int commcheck_mem_cuda(int idx, commcheck_mem *out) {
  (void)idx;
  (void)out;
  sp_log_error("commcheck --device cuda: this build has no CUDA (configured without it)");
  return SP_ERR_INPUT;
}

void commcheck_mem_cuda_close(commcheck_mem *m) { (void)m; }
#endif
