/* Strict UTF-8 (RFC 3629: no overlong forms, no surrogates, at most
 * U+10FFFF), for every check of text from files and for JSON out. A leaf:
 * no other header of the project. */
#ifndef IO_UTF8_H
#define IO_UTF8_H

#include <stddef.h>

/* The length (1-4) of the valid UTF-8 sequence that starts s[0..n), n >= 1,
 * or 0 when none does. */
size_t io_utf8_seq(const unsigned char *s, size_t n);
/* The offset of the first byte of s[0..n) that breaks UTF-8, n when all of
 * it is valid. */
size_t io_utf8_check(const unsigned char *s, size_t n);

#endif
