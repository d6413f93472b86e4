/* Wan's prompt cleaning (tokenizer.h, TOKENIZER.md "Prompt cleaning"):
 * whitespace_clean(basic_clean(text)) of Wan 2.1's tokenizers.py, without
 * ftfy.fix_text. That is: Python's html.unescape twice, str.strip(), every
 * run of \s (the `regex` module: Unicode White_Space) to one space, then
 * str.strip() again (str.isspace: White_Space and U+001C..U+001F). */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

typedef struct entity {
  const char *name; /* with its ';' when it has one */
  const char *text; /* UTF-8 */
} entity;

static const entity kEntities[] = {
#include "html5_entities.inc"
};
#define N_ENTITIES (sizeof kEntities / sizeof kEntities[0])

/* The entity named exactly s[0..n), or NULL. kEntities is sorted by bytes. */
static const char *entity_find(const uint8_t *s, size_t n) {
  size_t lo = 0, hi = N_ENTITIES;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    const char *k = kEntities[mid].name;
    size_t kn = strlen(k);
    int c = memcmp(k, s, kn < n ? kn : n);
    if (c == 0) c = kn < n ? -1 : kn > n ? 1 : 0;
    if (c == 0) return kEntities[mid].text;
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}

/* Decodes one character of valid UTF-8 at s; returns its length. */
static size_t utf8_next(const uint8_t *s, uint32_t *cp) {
  if (s[0] < 0x80) return *cp = s[0], 1;
  if (s[0] < 0xe0) return *cp = (uint32_t)(s[0] & 0x1f) << 6 | (s[1] & 0x3f), 2;
  if (s[0] < 0xf0)
    return *cp = (uint32_t)(s[0] & 0x0f) << 12 | (uint32_t)(s[1] & 0x3f) << 6 | (s[2] & 0x3f), 3;
  *cp = (uint32_t)(s[0] & 0x07) << 18 | (uint32_t)(s[1] & 0x3f) << 12 | (uint32_t)(s[2] & 0x3f) << 6 |
        (s[3] & 0x3f);
  return 4;
}

static void put_cp(tok_buf *b, uint32_t cp) {
  uint8_t u[4];
  size_t n;
  if (cp < 0x80) {
    u[0] = (uint8_t)cp, n = 1;
  } else if (cp < 0x800) {
    u[0] = (uint8_t)(0xc0 | cp >> 6), u[1] = (uint8_t)(0x80 | (cp & 0x3f)), n = 2;
  } else if (cp < 0x10000) {
    u[0] = (uint8_t)(0xe0 | cp >> 12), u[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3f));
    u[2] = (uint8_t)(0x80 | (cp & 0x3f)), n = 3;
  } else {
    u[0] = (uint8_t)(0xf0 | cp >> 18), u[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3f));
    u[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3f)), u[3] = (uint8_t)(0x80 | (cp & 0x3f)), n = 4;
  }
  tok_buf_put(b, u, n);
}

/* ---- html.unescape ------------------------------------------------------------- */

/* Numeric references as HTML5 (and html.unescape) read them: the
 * Windows-1252 remapping of 0x80..0x9F, U+FFFD for 0, surrogates and
 * values past U+10FFFF, nothing for the other invalid code points. */
static const uint16_t kCp1252[32] = {
    0x20ac, 0x81,   0x201a, 0x0192, 0x201e, 0x2026, 0x2020, 0x2021, 0x02c6, 0x2030, 0x0160,
    0x2039, 0x0152, 0x8d,   0x017d, 0x8f,   0x90,   0x2018, 0x2019, 0x201c, 0x201d, 0x2022,
    0x2013, 0x2014, 0x02dc, 0x2122, 0x0161, 0x203a, 0x0153, 0x9d,   0x017e, 0x0178};

static void put_numeric(tok_buf *b, uint32_t num) {
  if (num == 0) return put_cp(b, 0xfffd);
  if (num == 0x0d) return put_cp(b, 0x0d);
  if (num >= 0x80 && num <= 0x9f) return put_cp(b, kCp1252[num - 0x80]);
  if ((num >= 0xd800 && num <= 0xdfff) || num > 0x10ffff) return put_cp(b, 0xfffd);
  if ((num >= 0x1 && num <= 0x8) || (num >= 0xe && num <= 0x1f) || (num >= 0x7f && num <= 0x9f) ||
      (num >= 0xfdd0 && num <= 0xfdef) || num == 0xb || (num & 0xfffe) == 0xfffe)
    return;
  put_cp(b, num);
}

static int hex_digit(uint8_t c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* One reference at s[0] == '&' (n bytes left): appends its text and
 * returns the bytes consumed, or 0 when nothing there is a reference. */
static size_t unescape_one(const uint8_t *s, size_t n, tok_buf *b) {
  size_t i = 1;
  if (i < n && s[i] == '#') {
    int hex = i + 1 < n && (s[i + 1] == 'x' || s[i + 1] == 'X');
    size_t j = i + 1 + (size_t)hex, start = j;
    uint32_t num = 0;
    while (j < n && (hex ? hex_digit(s[j]) >= 0 : (s[j] >= '0' && s[j] <= '9'))) {
      uint32_t d = (uint32_t)(hex ? hex_digit(s[j]) : s[j] - '0');
      num = num > 0x110000 ? 0x110001 : num * (hex ? 16 : 10) + d; /* saturates past U+10FFFF */
      j++;
    }
    if (j == start) return 0;
    if (j < n && s[j] == ';') j++;
    put_numeric(b, num);
    return j;
  }
  /* A name: 1..32 characters outside "\t\n\f <&#;", then an optional ';'. */
  size_t ends[34]; /* ends[k]: byte length of the first k characters of the name */
  size_t chars = 0, j = i;
  ends[0] = 0;
  while (j < n && chars < 32 && !memchr("\t\n\f <&#;", s[j], 8)) {
    uint32_t cp;
    j += utf8_next(s + j, &cp);
    ends[++chars] = j - i;
  }
  if (chars == 0) return 0;
  if (j < n && s[j] == ';') {
    j++;
    ends[++chars] = j - i;
  }
  const uint8_t *name = s + i;
  const char *text = entity_find(name, ends[chars]);
  if (text) {
    tok_buf_put(b, text, strlen(text));
    return j;
  }
  for (size_t x = chars - 1; x >= 2; x--) { /* the longest known prefix */
    text = entity_find(name, ends[x]);
    if (text) {
      tok_buf_put(b, text, strlen(text));
      tok_buf_put(b, name + ends[x], ends[chars] - ends[x]);
      return j;
    }
  }
  tok_buf_put(b, s, j);
  return j;
}

static void html_unescape(const uint8_t *s, size_t n, tok_buf *b) {
  size_t i = 0;
  while (i < n) {
    if (s[i] == '&') {
      size_t used = unescape_one(s + i, n - i, b);
      if (used) {
        i += used;
        continue;
      }
    }
    tok_buf_put(b, s + i, 1);
    i++;
  }
}

/* ---- whitespace ------------------------------------------------------------------ */

static int is_white_space(uint32_t c) { /* Unicode White_Space: `regex`'s \s */
  return (c >= 0x9 && c <= 0xd) || c == 0x20 || c == 0x85 || c == 0xa0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f ||
         c == 0x205f || c == 0x3000;
}

static int is_py_space(uint32_t c) { /* str.isspace, what str.strip removes */
  return is_white_space(c) || (c >= 0x1c && c <= 0x1f);
}

/* s[*a..*b) without leading and trailing str.isspace characters. */
static void py_strip(const uint8_t *s, size_t *a, size_t *b) {
  uint32_t cp;
  while (*a < *b) {
    size_t l = utf8_next(s + *a, &cp);
    if (!is_py_space(cp)) break;
    *a += l;
  }
  while (*b > *a) {
    size_t k = *b - 1;
    while (k > *a && (s[k] & 0xc0) == 0x80) k--;
    utf8_next(s + k, &cp);
    if (!is_py_space(cp)) break;
    *b = k;
  }
}

int tok_clean_wan(const char *in, size_t len, char **out, size_t *out_len, char *err, size_t errlen) {
  if (tok_text_check(in, len, "", err, errlen) != 0) return -1;
  tok_buf once = {0}, twice = {0}, ws = {0};
  html_unescape((const uint8_t *)in, len, &once);
  html_unescape(once.p, once.n, &twice);
  free(once.p);
  size_t a = 0, b = twice.n;
  py_strip(twice.p, &a, &b);
  for (size_t i = a; i < b;) {
    uint32_t cp;
    size_t l = utf8_next(twice.p + i, &cp);
    if (is_white_space(cp)) {
      while (i < b && (l = utf8_next(twice.p + i, &cp), is_white_space(cp))) i += l;
      tok_buf_put(&ws, " ", 1);
    } else {
      tok_buf_put(&ws, twice.p + i, l);
      i += l;
    }
  }
  free(twice.p);
  tok_buf_put(&ws, "", 1); /* room for the NUL */
  if (once.over || twice.over || ws.over) {
    free(ws.p);
    tok_err(err, errlen, "the cleaned prompt would exceed %u bytes", TOK_MAX_NORMALIZED_BYTES);
    return -1;
  }
  a = 0, b = ws.n - 1;
  py_strip(ws.p, &a, &b);
  memmove(ws.p, ws.p + a, b - a);
  ws.p[b - a] = '\0';
  *out = (char *)ws.p;
  *out_len = b - a;
  return 0;
}
