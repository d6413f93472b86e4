/* A bounded text appender for the planner's messages, table and JSON: it
 * never writes past cap and keeps counting the length the full text needs
 * (like snprintf), so callers can size a buffer in two passes. Internal to
 * planner/. */
#ifndef PLAN_STRBUF_H
#define PLAN_STRBUF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include "plan.h"

typedef struct plan_strbuf {
  char *buf;
  size_t cap;
  size_t len; /* length the full text needs, may exceed cap - 1 */
} plan_strbuf;

static inline void plan_sb_init(plan_strbuf *sb, char *buf, size_t cap) {
  sb->buf = buf;
  sb->cap = cap;
  sb->len = 0;
  if (buf && cap) buf[0] = '\0';
}

__attribute__((format(printf, 2, 3))) static inline void plan_sb_add(plan_strbuf *sb,
                                                                      const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *dst = NULL;
  size_t room = 0;
  if (sb->buf && sb->len < sb->cap) {
    dst = sb->buf + sb->len;
    room = sb->cap - sb->len;
  }
  int n = vsnprintf(dst, room, fmt, ap);
  va_end(ap);
  if (n > 0) sb->len += (size_t)n;
}

/* Writes one message into the caller's error buffer (when there is one)
 * and returns PLAN_EINVAL: the planner's way to fail a check. */
__attribute__((format(printf, 3, 4))) static inline int plan_fail(char *err, size_t errlen,
                                                                  const char *fmt, ...) {
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return PLAN_EINVAL;
}

#endif
