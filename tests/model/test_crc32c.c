/* CRC-32C: the published check value, the table and instruction paths
 * agreeing on every length and alignment, and crc32c_combine against
 * the CRC of the joined data for random splits (the loader checksums a
 * dataset's pieces on several threads and joins them), on random bytes
 * from a printed seed. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"
#include "sp_test.h"

/* Bitwise reference, straight from the definition (reflected 0x82F63B78). */
static uint32_t crc_bitwise(const unsigned char *p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; i++) {
    c ^= p[i];
    for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
  }
  return ~c;
}

int main(void) {
  sp_test_begin("crc32c");
  /* RFC 3720 B.4 check value. */
  CHECK(crc32c(0, "123456789", 9) == 0xE3069283u, "check value %08x",
        crc32c(0, "123456789", 9));
  enum { N = 1 << 20 };
  unsigned char *buf = malloc(N + 16);
  for (size_t i = 0; i < N + 16; i++) buf[i] = (unsigned char)sp_rand_u64();
  for (size_t n = 0; n < 300; n++)
    for (int a = 0; a < 8; a++)
      CHECK(crc32c(0, buf + a, n) == crc_bitwise(buf + a, n), "length %zu offset %d", n, a);
  CHECK(crc32c(0, buf, N) == crc_bitwise(buf, N), "1 MiB");
  /* Combine: random splits, including empty pieces and several pieces. */
  const uint32_t whole = crc32c(0, buf, N);
  for (int t = 0; t < 200; t++) {
    size_t cut = (size_t)(sp_rand_u64() % (N + 1));
    uint32_t ca = crc32c(0, buf, cut), cb = crc32c(0, buf + cut, N - cut);
    CHECK(crc32c_combine(ca, cb, N - cut) == whole, "split at %zu", cut);
  }
  for (size_t piece = 1; piece <= (1u << 18); piece *= 8) {
    uint32_t c = 0;
    for (size_t off = 0; off < N; off += piece) {
      size_t n = N - off < piece ? N - off : piece;
      c = off == 0 ? crc32c(0, buf, n) : crc32c_combine(c, crc32c(0, buf + off, n), n);
    }
    CHECK(c == whole, "pieces of %zu", piece);
  }
  CHECK(crc32c_combine(0x12345678u, crc32c(0, buf, 0), 0) == 0x12345678u, "empty b");
  free(buf);
  return sp_test_end();
}
