/* Strict UTF-8 (see utf8.h). */
#include "utf8.h"

#include <stdint.h>

/* The length of the valid UTF-8 sequence at s[0..n), or 0 when it is not
 * one. */
size_t io_utf8_seq(const unsigned char *s, size_t n) {
  const unsigned char c = s[0];
  if (c < 0x80) return 1;
  size_t len;
  uint32_t cp, min;
  if ((c & 0xe0) == 0xc0) {
    len = 2, cp = c & 0x1f, min = 0x80;
  } else if ((c & 0xf0) == 0xe0) {
    len = 3, cp = c & 0x0f, min = 0x800;
  } else if ((c & 0xf8) == 0xf0) {
    len = 4, cp = c & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (n < len) return 0;
  for (size_t k = 1; k < len; k++) {
    if ((s[k] & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (s[k] & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return len;
}

size_t io_utf8_check(const unsigned char *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    const size_t len = io_utf8_seq(s + i, n - i);
    if (len == 0) return i;
    i += len;
  }
  return n;
}
