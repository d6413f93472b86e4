/* commcheck's seeded fill (comm/commcheck.h): the same key gives the same
 * bytes, any other sender, receiver, pattern, size or seed other bytes, and
 * commcheck_first_diff finds a single flipped byte at any position of any
 * length (the 8-byte words and their tails), reporting the byte it
 * expected and the one it found. */
#include <stdlib.h>
#include <string.h>

#include "commcheck.h"
#include "sp_test.h"

int main(void) {
  uint64_t seed = sp_test_begin("comm commcheck fill");
  enum { N = 4099 };
  uint8_t *a = malloc(N), *b = malloc(N);
  const commcheck_key ka = {seed, 1, 2, COMMCHECK_P2P, N};
  commcheck_fill(a, N, &ka);
  commcheck_fill(b, N, &ka);
  CHECK(memcmp(a, b, N) == 0, "the same key gave different bytes");
  uint8_t want, got;
  CHECK(commcheck_first_diff(a, N, &ka, &want, &got) == -1,
        "an intact block reported");
  /* each other key: most bytes differ (a byte agrees by chance 1 in 256) */
  const int keys[5][5] = {{2, 2, 0, 0, 0}, {1, 3, 0, 0, 0}, {1, 2, 1, 0, 0}, {1, 2, 0, 1, 0},
                          {1, 2, 0, 0, 1}};
  for (int k = 0; k < 5; k++) {
    const commcheck_key kb = {seed + (uint64_t)keys[k][4], keys[k][0], keys[k][1], keys[k][2],
                              N + (size_t)keys[k][3]};
    commcheck_fill(b, N, &kb);
    int same = 0;
    for (int i = 0; i < N; i++) same += a[i] == b[i];
    CHECK(same < N / 64, "key %d: %d of %d bytes as the original", k, same, N);
  }
  /* every length 1..40 and random ones: a flipped byte is found where it is */
  for (int t = 0; t < 200; t++) {
    size_t len = t < 40 ? (size_t)t + 1 : 1 + sp_rand_u64() % N;
    size_t pos = sp_rand_u64() % len;
    const commcheck_key kc = {seed, 3, 0, COMMCHECK_ALLTOALL, len};
    commcheck_fill(b, len, &kc);
    uint8_t orig = b[pos];
    b[pos] ^= (uint8_t)(1u << (sp_rand_u64() % 8));
    int64_t d = commcheck_first_diff(b, len, &kc, &want, &got);
    CHECK(d == (int64_t)pos && want == orig && got == b[pos],
          "length %zu: flip at %zu found at %lld", len, pos, (long long)d);
  }
  free(a);
  free(b);
  return sp_test_end();
}
