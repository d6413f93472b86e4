/* Synthetic weights (see synth.h). */
#include "synth.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kern_dtype.h"
#include "log.h"

static uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t rank_synth_key(uint64_t seed, const char *name) {
  uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a over the full tensor key */
  for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
    h ^= *p;
    h *= 0x100000001b3ull;
  }
  return splitmix64(splitmix64(seed) ^ h);
}

double rank_synth_uniform(uint64_t key, uint64_t index) {
  uint64_t u = splitmix64(key ^ splitmix64(index));
  /* 53 random bits -> [0, 1) -> [-1, 1) */
  return (double)(u >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0;
}

int rank_synth_spec_parse(const char *spec, char *preset, size_t n, uint64_t *seed) {
  const char *p = spec + strlen("synth:");
  const char *colon = strchr(p, ':');
  size_t len = colon ? (size_t)(colon - p) : strlen(p);
  *seed = 0;
  if (len == 0 || len >= n) goto bad;
  memcpy(preset, p, len);
  preset[len] = '\0';
  if (colon) {
    char *end = NULL;
    errno = 0;
    if (!colon[1] || colon[1] == '-') goto bad;
    *seed = strtoull(colon + 1, &end, 10);
    if (*end || errno) goto bad;
  }
  return SP_OK;
bad:
  sp_log_error("%s: not a synthetic model spec: expected synth:PRESET[:SEED] with SEED a "
               "non-negative integer",
               spec);
  return SP_ERR_INPUT;
}

void rank_synth_checksum(const char *preset, uint64_t seed, char *buf, size_t n) {
  snprintf(buf, n, "synth:%s:%" PRIu64 ":v%d", preset, seed, RANK_SYNTH_VERSION);
}
