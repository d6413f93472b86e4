/* staticpipe commcheck: the transport self-check (comm/commcheck.h) under
 * mpirun or srun: every pattern at every size, every byte received checked
 * against the sender's seeded fill, bandwidth per size; exit 1 on any
 * wrong byte, with a FAIL line naming the ranks, pattern, size and byte. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "comm.h"
#include "commands.h"
#include "commcheck.h"
#include "gpu_share.h"
#include "log.h"
#include "plan.h"
#include "stage.h"
#include "transport.h"

enum {
  OPT_SIZES = JOB_OPT_COUNT,
  OPT_PATTERNS,
  OPT_DEVICE,
  OPT_TRANSPORT,
  OPT_ITERS,
  OPT_SEED,
  OPT_TIMEOUT,
  OPT_CORRUPT,
  OPT_JSON,
  OPT_HELP
};

#define CC_MAX_SIZES 64

typedef struct cc_cli {
  size_t sizes[CC_MAX_SIZES];
  int nsizes;
  unsigned patterns;
  int cuda; /* --device cuda */
  comm_transport_kind transport;
  int64_t iters, corrupt;
  uint64_t seed;
  double timeout;
  int json, help;
} cc_cli;

static void cc_table(cli_opts *t) {
  static const job_option own[] = {
      {OPT_SIZES, "sizes", 0, "LIST", "4kb,16kb,...,256mb", 0,
       "message sizes, comma-separated (units b, kb, mb, gb:\npowers of 1024); for alltoall the "
       "whole buffer of a\nrank, size / ranks per peer"},
      {OPT_PATTERNS, "patterns", 0, "LIST", "p2p,alltoall,exchange", 0,
       "p2p: a ring, each rank to the next (stage to stage);\nalltoall: every rank a block to "
       "every rank (Ulysses);\nexchange: ranks 2k and 2k+1 swap (replicas)"},
      {OPT_DEVICE, "device", 'd', "D", "cpu", 0,
       "cpu: host buffers over MPI; cuda: device buffers on\nthe rank's GPU (local rank mod "
       "GPUs) over --transport"},
      {OPT_TRANSPORT, "transport", 0, "T", "auto", 0,
       "auto, mpi or nccl (cuda only; auto: nccl when every\nrank has a GPU of its own, else "
       "mpi staged through\npinned host memory)"},
      {OPT_ITERS, "iters", 0, "N", "5", 0, "timed iterations per size, 0..10000"},
      {OPT_SEED, "seed", 0, "N", "1", 0, "seed of the fill, 0..2^64-1"},
      {OPT_TIMEOUT, "timeout", 0, "S", "60", 0,
       "seconds, 1..86400, before a silent or hung peer ends\nthe job (the watchdog's, every wait)"},
      {OPT_CORRUPT, "corrupt-rank", 0, "R", NULL, 0,
       "TEST AID: rank R flips one byte (the middle) of\nevery block it sends, so the check "
       "must FAIL and\nexit 1; proves that it detects errors"},
      {OPT_JSON, "json", 'j', NULL, NULL, 0,
       "results as JSON on stdout: {ranks, seed, iters,\nresults[{pattern, transport, memory, "
       "bytes,\nmoved_bytes, time_us, algbw_gbs, ok}], ok}"},
      {OPT_HELP, "help", 'h', NULL, NULL, 0, "this text"},
  };
  cli_opts_build(t, NULL, 0, own, (int)(sizeof own / sizeof own[0]));
}

static void usage(FILE *f) {
  cli_opts t;
  cc_table(&t);
  fprintf(f,
          "usage: mpirun -np N staticpipe commcheck [options]\n"
          "\n"
          "Checks the transports between ranks before a run, as nccl-tests does: each rank\n"
          "fills what it sends from a seed (sender, receiver, pattern and size), moves it,\n"
          "and checks every byte it received. Rank 0 prints, per pattern and size, the\n"
          "slowest rank's time and the bandwidth. A wrong byte is one line from the rank\n"
          "that received it: FAIL PATTERN SIZE bytes: rank R received from rank P: byte B\n"
          "is 0x.., expected 0x..; the exit status is then 1. Alltoall over nccl is one\n"
          "grouped call (ncclGroupStart/End, a send and a receive per rank). One rank:\n"
          "every pattern is skipped.\n"
          "\n");
  cli_opts_usage(&t, f);
}

/* "p2p,alltoall" into a bit set. */
static int parse_patterns(const char *s, unsigned *out) {
  unsigned set = 0;
  char buf[256], *items[16];
  int n = 0;
  if (job_parse_list("--patterns", s, ',', buf, sizeof buf, items, 16, &n) != SP_OK)
    return SP_ERR_INPUT;
  for (int i = 0; i < n; i++) {
    const char *tok = items[i];
    int found = 0;
    for (int p = 0; p < COMMCHECK_NPATTERNS; p++)
      if (!strcmp(tok, commcheck_pattern_name(p))) set |= 1u << p, found = 1;
    if (!found) {
      sp_log_error("--patterns: '%s' is not p2p, alltoall or exchange", tok);
      return SP_ERR_INPUT;
    }
  }
  if (!set) {
    sp_log_error("--patterns: '%s' names no pattern", s);
    return SP_ERR_INPUT;
  }
  *out = set;
  return SP_OK;
}

static int parse_sizes(const char *s, cc_cli *c) {
  char buf[1024], err[256], *items[CC_MAX_SIZES];
  int n = 0;
  if (job_parse_list("--sizes", s, ',', buf, sizeof buf, items, CC_MAX_SIZES, &n) != SP_OK)
    return SP_ERR_INPUT;
  c->nsizes = 0;
  for (int i = 0; i < n; i++) {
    const char *tok = items[i];
    uint64_t v;
    if (plan_parse_bytes(tok, &v, err, sizeof err) != PLAN_OK) {
      sp_log_error("--sizes: %s", err);
      return SP_ERR_INPUT;
    }
    if (v < 1 || v > (4ull << 30)) {
      sp_log_error("--sizes: '%s' is outside 1b..4gb", tok);
      return SP_ERR_INPUT;
    }
    c->sizes[c->nsizes++] = (size_t)v;
  }
  if (!c->nsizes) {
    sp_log_error("--sizes: '%s' names no size", s);
    return SP_ERR_INPUT;
  }
  return SP_OK;
}

static int cc_set(void *ctx, int id, const char *v) {
  cc_cli *c = ctx;
  switch (id) {
  case OPT_SIZES: return parse_sizes(v, c);
  case OPT_PATTERNS: return parse_patterns(v, &c->patterns);
  case OPT_DEVICE:
    if (strcmp(v, "cpu") && strcmp(v, "cuda")) {
      sp_log_error("--device: '%s' is not cpu or cuda", v);
      return SP_ERR_INPUT;
    }
    c->cuda = !strcmp(v, "cuda");
    return SP_OK;
  case OPT_TRANSPORT: return comm_transport_parse(v, &c->transport);
  case OPT_ITERS: return job_parse_int64("--iters", v, 0, 10000, &c->iters);
  case OPT_SEED: return job_parse_uint64("--seed", v, &c->seed);
  case OPT_TIMEOUT: return job_parse_double("--timeout", v, 1.0, 86400.0, &c->timeout);
  case OPT_CORRUPT: return job_parse_int64("--corrupt-rank", v, 0, 1 << 20, &c->corrupt);
  case OPT_JSON: c->json = 1; return SP_OK;
  default: return CLI_HELP;
  }
}

static int cc_parse(int argc, char **argv, cc_cli *c) {
  /* No usage here: rank 0 prints it once MPI is up. */
  static const cli_command cmd = {"commcheck", cc_table, cc_set, NULL, 0};
  memset(c, 0, sizeof *c);
  for (size_t s = 4096; s <= (256u << 20); s *= 4) c->sizes[c->nsizes++] = s;
  c->patterns = (1u << COMMCHECK_NPATTERNS) - 1;
  c->iters = 5;
  c->seed = 1;
  c->timeout = 60.0;
  c->corrupt = -1;
  cli_result res;
  if (cli_command_parse(&cmd, argc, argv, NULL, c, &res) != SP_OK) return SP_ERR_INPUT;
  c->help = res.help;
  if (c->help) return SP_OK;
  if (!c->cuda && c->transport == COMM_TRANSPORT_NCCL) {
    sp_log_error("--transport nccl needs --device cuda (host buffers go over MPI)");
    return SP_ERR_INPUT;
  }
  return SP_OK;
}

/* --device cuda: this rank's GPU, who shares it, the transport. */
static int open_cuda(const comm_world *w, const cc_cli *c, commcheck_mem *mem,
                     comm_transport_kind *kind, int *device) {
  int n = rank_cuda_device_count(), idx = n > 0 ? w->local_rank % n : -1;
  char id[COMM_GPU_ID_MAX] = "";
  int rc = SP_OK;
  if (n <= 0) {
    sp_log_error("commcheck --device cuda: no CUDA device is visible on host %s", w->host);
    rc = SP_ERR_INPUT;
  }
  if (rc == SP_OK) rc = rank_cuda_identity(idx, id, sizeof id);
  comm_gpu_share gpu;
  comm_gpu_share_gather(w, rc == SP_OK ? id : "", &gpu);
  if ((rc = comm_phase_end(w, rc, "choosing its GPU", "stopping")) != SP_OK) return rc;
  if ((rc = comm_transport_choose(w, c->transport, 1, &gpu, kind)) != SP_OK) return rc;
  rc = commcheck_mem_cuda(idx, mem);
  *device = idx;
  return comm_phase_end(w, rc, "opening its GPU", "stopping");
}

int cmd_commcheck(int argc, char **argv) {
  cc_cli c;
  /* --timeout also bounds MPI start-up: read before MPI starts, silently
   * (the parse below reports any error once, on rank 0) */
  sp_log_set_level(-1);
  if (cc_parse(argc, argv, &c) != SP_OK) c.timeout = 60.0;
  sp_log_set_level(1);
  comm_world w;
  comm_init(&argc, &argv, 0, c.timeout, &w);
  if (w.rank != 0) sp_log_set_level(-1);
  int rc = cc_parse(argc, argv, &c);
  sp_log_set_level(1);
  if (c.help && w.rank == 0) usage(stdout);
  if (c.help || rc != SP_OK) {
    comm_finalize(&w);
    return rc;
  }
  if ((rc = comm_watchdog_start(&w, c.timeout)) != SP_OK) {
    comm_finalize(&w);
    return rc;
  }
  commcheck_mem mem = commcheck_mem_host();
  comm_transport_kind kind = COMM_TRANSPORT_MPI;
  int device = -1;
  if (c.cuda) rc = open_cuda(&w, &c, &mem, &kind, &device);
  comm_transport *t = NULL;
  if (rc == SP_OK) {
    rc = comm_transport_open(&w, kind, device, &t);
    rc = comm_phase_end(&w, rc, "opening the transport", "stopping");
  }
  if (rc == SP_OK) {
    if (c.corrupt >= 0 && w.rank == 0)
      sp_log_info("commcheck: --corrupt-rank %lld: rank %lld flips a byte of what it sends (a "
                  "test aid: the check must fail)",
                  (long long)c.corrupt, (long long)c.corrupt);
    commcheck_opts o = {c.sizes, c.nsizes, c.patterns, (int)c.iters, c.seed, c.timeout,
                        (int)c.corrupt, c.json, stdout};
    rc = commcheck_run(&w, &t, device, &mem, &o);
  }
  comm_transport_close(t);
  if (c.cuda) commcheck_mem_cuda_close(&mem);
  comm_set_phase("finishing");
  comm_finalize(&w);
  return rc;
}
