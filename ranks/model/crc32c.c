/* CRC-32C, reflected polynomial 0x82F63B78 (see crc32c.h). */
#include "crc32c.h"

#include <pthread.h>
#include <string.h>

static uint32_t g_table[256];
static int g_have_sse42 = 0;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void init(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
    g_table[i] = c;
  }
#if defined(__x86_64__)
  __builtin_cpu_init();
  g_have_sse42 = __builtin_cpu_supports("sse4.2") ? 1 : 0;
#else
  g_have_sse42 = 0;
#endif
}

static uint32_t crc_table(uint32_t c, const unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++) c = g_table[(c ^ p[i]) & 0xffu] ^ (c >> 8);
  return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t c, const unsigned char *p,
                                                         size_t n) {
  uint64_t c64 = c;
  while (n >= 8) {
    uint64_t v;
    memcpy(&v, p, 8);
    c64 = __builtin_ia32_crc32di(c64, v);
    p += 8;
    n -= 8;
  }
  c = (uint32_t)c64;
  while (n--) c = __builtin_ia32_crc32qi(c, *p++);
  return c;
}
#endif

uint32_t crc32c(uint32_t crc, const void *data, size_t n) {
  pthread_once(&g_once, init);
  uint32_t c = ~crc;
#if defined(__x86_64__)
  if (g_have_sse42) return ~crc_hw(c, data, n);
#endif
  return ~crc_table(c, data, n);
}

/* Combining: appending len_b zero bytes to a is a linear map on its CRC
 * register (the data-free part of the shift register), so CRC(a b) =
 * Z^len_b (CRC(a)) xor CRC(b) with pre- and post-inversion cancelling.
 * Z for one zero bit is the matrix below; squaring gives 2, 4, 8 ... bits,
 * and the bits of len_b (in bytes) pick which powers to apply. */
static uint32_t gf2_apply(const uint32_t m[32], uint32_t v) {
  uint32_t r = 0;
  for (int i = 0; v; i++, v >>= 1)
    if (v & 1u) r ^= m[i];
  return r;
}

static void gf2_square(uint32_t out[32], const uint32_t m[32]) {
  for (int i = 0; i < 32; i++) out[i] = gf2_apply(m, m[i]);
}

uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b) {
  if (len_b == 0) return crc_a;
  uint32_t a[32], b[32];
  a[0] = 0x82F63B78u; /* one zero bit: shift right, feed back the polynomial */
  for (int i = 1; i < 32; i++) a[i] = 1u << (i - 1);
  gf2_square(b, a); /* 2 bits */
  gf2_square(a, b); /* 4 bits */
  uint32_t c = crc_a;
  for (;;) {
    gf2_square(b, a); /* 8, 32, 128 ... bits: one byte, 4, 16 ... */
    if (len_b & 1u) c = gf2_apply(b, c);
    len_b >>= 1;
    if (!len_b) break;
    gf2_square(a, b); /* 2, 8, 32 ... bytes */
    if (len_b & 1u) c = gf2_apply(a, c);
    len_b >>= 1;
    if (!len_b) break;
  }
  return c ^ crc_b;
}
