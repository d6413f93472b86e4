/* The plan's forms: binary round trip over random plans, a decoder that
 * refuses every corrupted or truncated message without crashing, JSON that
 * parses back to the plan (checked with a small reader written here), and
 * the text table's rows. */
#include <math.h>

#include "plan_test.h"

static plan g_a, g_b;
static uint8_t g_wire[PLAN_WIRE_MAX], g_wire2[PLAN_WIRE_MAX];
static char g_text[1 << 20];

static int random_plan(plan *p) {
  static test_wan t;
  test_wan_make(&t, (int)(sp_rand_u64() % 2));
  int B = (int)sp_rand_int(1, 40), R = (int)sp_rand_int(1, B < 5 ? B : 5);
  t.m.num_blocks = B;
  for (int i = 0; i < B; i++) t.blocks[i] = (uint64_t)sp_rand_int(30, 800) << 20;
  if (sp_rand_u64() % 2) { /* two experts: every group counted twice */
    t.m.experts = 2;
    for (int i = 0; i < B; i++) t.blocks[i] *= 2;
    t.m.embed_bytes *= 2;
    t.m.head_bytes *= 2;
  }
  plan_workload w = {1 + 4 * sp_rand_int(0, 20), 16 * sp_rand_int(16, 52), 16 * sp_rand_int(16, 52),
                     (int)sp_rand_int(1, 3), 512, 0, 0};
  plan_device d[5];
  for (int r = 0; r < R; r++) {
    char name[PLAN_NAME_LEN];
    /* names with characters JSON must escape */
    snprintf(name, sizeof name, "GPU \"%d\" \\ %s", r, sp_rand_u64() % 2 ? "H200" : "RTX\t4090");
    test_device(&d[r], name, 3 + 40 * sp_rand_unit(), 0.5 + sp_rand_unit());
  }
  plan_budget b;
  char err[4096];
  plan_budget_parse(sp_rand_u64() % 2 ? "cpu,*" : NULL, R, &b, err, sizeof err);
  plan_options o;
  plan_options_default(&o);
  o.order = (int)(sp_rand_u64() % 3);
  o.decoder_bytes = sp_rand_u64() % 2 ? (uint64_t)(sp_rand_u64() % (1u << 30)) : 0;
  return plan_make(&(plan_inputs){&t.m, d, R, &b, &w, &o}, p, err, sizeof err);
}

static int plans_equal(const plan *a, const plan *b) {
  if (a->nranks != b->nranks || a->num_blocks != b->num_blocks || a->tokens != b->tokens ||
      a->micro_batches != b->micro_batches || a->chunked != b->chunked ||
      a->predicted_step_ms != b->predicted_step_ms ||
      memcmp(a->streamed, b->streamed, sizeof a->streamed) != 0 ||
      memcmp(&a->grid, &b->grid, sizeof a->grid) != 0)
    return 0;
  for (int r = 0; r < a->nranks; r++) {
    const plan_rank *x = &a->r[r], *y = &b->r[r];
    if (strcmp(x->device, y->device) || x->first_block != y->first_block ||
        x->last_block != y->last_block || x->num_resident != y->num_resident ||
        x->num_streamed != y->num_streamed || x->has_embed != y->has_embed ||
        x->has_head != y->has_head || x->order != y->order || x->chunk_rows != y->chunk_rows ||
        x->prefetch_depth != y->prefetch_depth ||
        x->weight_bytes != y->weight_bytes || x->stream_slot_bytes != y->stream_slot_bytes ||
        x->streamed_bytes != y->streamed_bytes || x->act_bytes != y->act_bytes ||
        x->reserve_bytes != y->reserve_bytes || x->decoder_bytes != y->decoder_bytes ||
        x->peak_bytes != y->peak_bytes ||
        x->budget_bytes != y->budget_bytes || x->predicted_step_ms != y->predicted_step_ms ||
        x->experts_mode != y->experts_mode || x->predicted_switch_ms != y->predicted_switch_ms)
      return 0;
  }
  return 1;
}

static void test_binary(void) {
  int made = 0;
  for (int it = 0; it < 200; it++) {
    if (random_plan(&g_a) != PLAN_OK) continue;
    made++;
    /* a random grid over the plan's stages (every other plan: the pipeline) */
    if (it % 2)
      g_a.grid = (plan_grid){(int)sp_rand_int(1, 3), g_a.nranks, (int)sp_rand_int(1, 3)};
    else
      g_a.grid = plan_grid_pipeline(g_a.nranks);
    size_t len = 0;
    char err[512];
    int rc = plan_encode(&g_a, g_wire, sizeof g_wire, &len, err, sizeof err);
    CHECK(rc == PLAN_OK, "encode: %s", err);
    if (rc) continue;
    memset(&g_b, 0x77, sizeof g_b);
    rc = plan_decode(g_wire, len, &g_b, err, sizeof err);
    CHECK(rc == PLAN_OK, "decode: %s", err);
    CHECK(rc || plans_equal(&g_a, &g_b), "round trip differs");
    size_t len2 = 0;
    CHECK(plan_encode(&g_b, g_wire2, sizeof g_wire2, &len2, err, sizeof err) == PLAN_OK &&
              len2 == len && memcmp(g_wire, g_wire2, len) == 0,
          "re-encoding differs");
    /* too small a buffer */
    CHECK(plan_encode(&g_a, g_wire2, len - 1, &len2, err, sizeof err) == PLAN_ENOSPACE,
          "short buffer accepted");

    /* every truncation is refused */
    for (size_t cut = 0; cut < len; cut += 1 + (size_t)(sp_rand_u64() % 7))
      CHECK(plan_decode(g_wire, cut, &g_b, err, sizeof err) == PLAN_EINVAL, "%zu of %zu bytes", cut,
            len);
    /* random corruption: refused, or (where the byte was free, like a
     * timing) decoded into a plan that passes validation; never a crash */
    for (int k = 0; k < 200; k++) {
      memcpy(g_wire2, g_wire, len);
      int flips = (int)sp_rand_int(1, 4);
      for (int f = 0; f < flips; f++) g_wire2[sp_rand_u64() % len] ^= (uint8_t)(1u << (sp_rand_u64() % 8));
      rc = plan_decode(g_wire2, len, &g_b, err, sizeof err);
      if (rc == PLAN_OK)
        CHECK(plan_validate(&g_b, err, sizeof err) == PLAN_OK, "corrupt plan accepted: %s", err);
      else
        CHECK(rc == PLAN_EINVAL && err[0], "corrupt message: rc %d", rc);
    }
    /* targeted corruption of the fields that must be checked: the grid's
     * stages (at byte 44) must equal the plan's */
    memcpy(g_wire2, g_wire, len);
    g_wire2[44] = (uint8_t)(g_a.nranks + 1);
    CHECK(plan_decode(g_wire2, len, &g_b, err, sizeof err) == PLAN_EINVAL && strstr(err, "grid"),
          "a grid of %d stages for %d accepted: %s", g_a.nranks + 1, g_a.nranks, err);
    memcpy(g_wire2, g_wire, len);
    g_wire2[0] = 'X';
    CHECK(plan_decode(g_wire2, len, &g_b, err, sizeof err) == PLAN_EINVAL && strstr(err, "magic"),
          "bad magic: %s", err);
    memcpy(g_wire2, g_wire, len);
    g_wire2[4] = 9;
    CHECK(plan_decode(g_wire2, len, &g_b, err, sizeof err) == PLAN_EINVAL && strstr(err, "version"),
          "bad version: %s", err);
    memcpy(g_wire2, g_wire, len);
    g_wire2[len - 1] = 2; /* a streamed flag must be 0 or 1 */
    CHECK(plan_decode(g_wire2, len, &g_b, err, sizeof err) == PLAN_EINVAL, "flag 2 accepted");
    /* the order of the last rank: 7 and auto (0) are not orders of a plan;
     * the other real order differs from rank 0's */
    /* after it: chunk rows, 8 sizes, the step ms, the experts mode, the switch ms */
    size_t at = len - (size_t)g_a.num_blocks - (size_t)(8 + 8 * 8 + 8 + 4 + 8 + 4);
    CHECK(g_wire[at] == (uint8_t)g_a.r[g_a.nranks - 1].order, "order not where expected");
    const uint8_t bad_orders[] = {7, PLAN_ORDER_AUTO, 0xff};
    for (size_t k = 0; k < sizeof bad_orders; k++) {
      memcpy(g_wire2, g_wire, len);
      g_wire2[at] = bad_orders[k];
      CHECK(plan_decode(g_wire2, len, &g_b, err, sizeof err) == PLAN_EINVAL && strstr(err, "order"),
            "order %u accepted: %s", bad_orders[k], err);
    }
    if (g_a.nranks > 1) {
      memcpy(g_wire2, g_wire, len);
      g_wire2[at] = g_wire[at] == PLAN_ORDER_MICRO ? PLAN_ORDER_BLOCK : PLAN_ORDER_MICRO;
      CHECK(plan_decode(g_wire2, len, &g_b, err, sizeof err) == PLAN_EINVAL && strstr(err, "-major"),
            "mixed orders accepted: %s", err);
    }
    memcpy(g_wire2, g_wire, len);
    g_wire2[4] = 1; /* version 1 had no order */
    CHECK(plan_decode(g_wire2, len, &g_b, err, sizeof err) == PLAN_EINVAL && strstr(err, "version 1"),
          "version 1 accepted: %s", err);
    memcpy(g_wire2, g_wire, len);
    g_wire2[4] = 2; /* version 2 had three chunk row counts per rank */
    CHECK(plan_decode(g_wire2, len, &g_b, err, sizeof err) == PLAN_EINVAL && strstr(err, "version 2"),
          "version 2 accepted: %s", err);
    memcpy(g_wire2, g_wire, len);
    g_wire2[8] = 0xff; /* rank count */
    CHECK(plan_decode(g_wire2, len, &g_b, err, sizeof err) == PLAN_EINVAL, "rank count accepted");
  }
  CHECK(made > 50, "only %d random plans", made);
  /* pure garbage */
  for (int k = 0; k < 2000; k++) {
    size_t len = (size_t)sp_rand_int(0, 600);
    for (size_t i = 0; i < len; i++) g_wire2[i] = (uint8_t)sp_rand_u64();
    if (len >= 4 && sp_rand_u64() % 2) memcpy(g_wire2, "SPPL\2\0\0\0", len >= 8 ? 8 : 4);
    char err[512];
    int rc = plan_decode(g_wire2, len, &g_b, err, sizeof err);
    if (rc == PLAN_OK) CHECK(plan_validate(&g_b, err, sizeof err) == PLAN_OK, "garbage accepted");
  }
}

/* ---- a minimal JSON reader for the test (independent of the writer) --- */
typedef struct jr {
  const char *s;
  int ok;
} jr;
static void ws(jr *j) {
  while (*j->s == ' ' || *j->s == '\n' || *j->s == '\t' || *j->s == '\r') j->s++;
}
static int lit(jr *j, char c) {
  ws(j);
  if (*j->s != c) return j->ok = 0;
  j->s++;
  return 1;
}
static void skip_value(jr *j);
static void read_string(jr *j, char *out, size_t cap) {
  size_t n = 0;
  if (!lit(j, '"')) return;
  while (*j->s && *j->s != '"') {
    char c = *j->s++;
    if (c == '\\') {
      char e = *j->s++;
      if (e == 'u') {
        unsigned v = 0;
        for (int i = 0; i < 4; i++) {
          char h = *j->s++;
          v = v * 16 + (unsigned)(h <= '9' ? h - '0' : (h | 32) - 'a' + 10);
        }
        c = (char)v;
      } else {
        c = e;
      }
    } else if ((unsigned char)c < 0x20) {
      j->ok = 0;
    }
    if (n + 1 < cap) out[n++] = c;
  }
  if (cap) out[n] = '\0';
  lit(j, '"');
}
static double read_number(jr *j) {
  ws(j);
  char *end;
  double v = strtod(j->s, &end);
  if (end == j->s) j->ok = 0;
  j->s = end;
  return v;
}
static void skip_value(jr *j) {
  ws(j);
  if (*j->s == '"') {
    char tmp[256];
    read_string(j, tmp, sizeof tmp);
  } else if (*j->s == '{' || *j->s == '[') {
    char close = *j->s == '{' ? '}' : ']';
    int obj = *j->s == '{';
    j->s++;
    ws(j);
    if (*j->s == close) {
      j->s++;
      return;
    }
    for (;;) {
      if (obj) {
        char k[64];
        read_string(j, k, sizeof k);
        lit(j, ':');
      }
      skip_value(j);
      ws(j);
      if (*j->s == ',') {
        j->s++;
        continue;
      }
      lit(j, close);
      return;
    }
  } else if (!strncmp(j->s, "true", 4) || !strncmp(j->s, "null", 4)) {
    j->s += 4;
  } else if (!strncmp(j->s, "false", 5)) {
    j->s += 5;
  } else {
    read_number(j);
  }
}
/* reads [i, j, ...] and sets flag[i] = val */
static int read_int_list(jr *j, int *flags, int val, int max) {
  int n = 0;
  if (!lit(j, '[')) return 0;
  ws(j);
  if (*j->s == ']') {
    j->s++;
    return 0;
  }
  for (;;) {
    int v = (int)read_number(j);
    if (v >= 0 && v < max) flags[v] = flags[v] == -1 ? val : 99;
    n++;
    ws(j);
    if (*j->s == ',') {
      j->s++;
      continue;
    }
    lit(j, ']');
    return n;
  }
}

static void test_json(void) {
  for (int it = 0; it < 100; it++) {
    if (random_plan(&g_a) != PLAN_OK) continue;
    size_t need = plan_format_json(&g_a, NULL, 0);
    size_t got = plan_format_json(&g_a, g_text, sizeof g_text);
    CHECK(need == got && got < sizeof g_text && strlen(g_text) == got, "json length %zu/%zu", need,
          got);
    /* truncation keeps the buffer terminated */
    char small[32];
    plan_format_json(&g_a, small, sizeof small);
    CHECK(strlen(small) == sizeof small - 1, "truncated json");

    jr j = {g_text, 1};
    int flags[PLAN_MAX_BLOCKS];
    for (int i = 0; i < PLAN_MAX_BLOCKS; i++) flags[i] = -1;
    int ranks = 0;
    double total_ms = -1;
    char order[16] = "";
    lit(&j, '{');
    while (j.ok) {
      char key[64];
      read_string(&j, key, sizeof key);
      lit(&j, ':');
      if (!strcmp(key, "ranks")) {
        lit(&j, '[');
        for (;;) {
          lit(&j, '{');
          int rank = -1, first = -1, last = -1;
          double ms = -1, wb = -1, pb = -1, bb = -1;
          char dev[PLAN_NAME_LEN] = "", order[16] = "";
          for (;;) {
            char k2[64];
            read_string(&j, k2, sizeof k2);
            lit(&j, ':');
            if (!strcmp(k2, "rank")) rank = (int)read_number(&j);
            else if (!strcmp(k2, "device")) read_string(&j, dev, sizeof dev);
            else if (!strcmp(k2, "order")) read_string(&j, order, sizeof order);
            else if (!strcmp(k2, "first_block")) first = (int)read_number(&j);
            else if (!strcmp(k2, "last_block")) last = (int)read_number(&j);
            else if (!strcmp(k2, "resident")) read_int_list(&j, flags, 0, PLAN_MAX_BLOCKS);
            else if (!strcmp(k2, "streamed")) read_int_list(&j, flags, 1, PLAN_MAX_BLOCKS);
            else if (!strcmp(k2, "weight_bytes")) wb = read_number(&j);
            else if (!strcmp(k2, "peak_bytes")) pb = read_number(&j);
            else if (!strcmp(k2, "budget_bytes")) bb = read_number(&j);
            else if (!strcmp(k2, "predicted_step_ms")) ms = read_number(&j);
            else skip_value(&j);
            ws(&j);
            if (*j.s == ',') { j.s++; continue; }
            lit(&j, '}');
            break;
          }
          CHECK(j.ok && rank == ranks && rank < g_a.nranks, "json rank %d", rank);
          if (rank >= 0 && rank < g_a.nranks) {
            const plan_rank *q = &g_a.r[rank];
            CHECK(first == q->first_block && last == q->last_block, "json range");
            CHECK(!strcmp(dev, q->device), "json device '%s' vs '%s'", dev, q->device);
            CHECK(!strcmp(order, q->order == PLAN_ORDER_BLOCK ? "block" : "micro"),
                  "json order '%s' for %d", order, q->order);
            CHECK(wb == (double)q->weight_bytes && pb == (double)q->peak_bytes &&
                      bb == (double)q->budget_bytes, "json bytes");
            CHECK(fabs(ms - q->predicted_step_ms) <= 1e-3, "json ms");
          }
          ranks++;
          ws(&j);
          if (*j.s == ',') { j.s++; continue; }
          lit(&j, ']');
          break;
        }
      } else if (!strcmp(key, "predicted_step_ms")) {
        total_ms = read_number(&j);
      } else if (!strcmp(key, "order")) {
        read_string(&j, order, sizeof order);
      } else {
        skip_value(&j);
      }
      ws(&j);
      if (*j.s == ',') { j.s++; continue; }
      lit(&j, '}');
      break;
    }
    ws(&j);
    CHECK(j.ok && *j.s == '\0', "json does not parse at: %.40s", j.s);
    CHECK(ranks == g_a.nranks, "json has %d ranks", ranks);
    CHECK(fabs(total_ms - g_a.predicted_step_ms) <= 1e-3, "json total ms");
    CHECK(!strcmp(order, g_a.r[0].order == PLAN_ORDER_BLOCK ? "block" : "micro"),
          "json plan order '%s'", order);
    for (int i = 0; i < g_a.num_blocks; i++)
      CHECK(flags[i] == g_a.streamed[i], "json block %d listed as %d", i, flags[i]);
  }
}

static void test_table(void) {
  for (int it = 0; it < 50; it++) {
    if (random_plan(&g_a) != PLAN_OK) continue;
    size_t n = plan_format_table(&g_a, g_text, sizeof g_text);
    CHECK(n == strlen(g_text), "table length");
    CHECK(strstr(g_text, "weight GB") && strstr(g_text, "predicted ms") && strstr(g_text, "order"),
          "table header");
    const char *ord = g_a.r[0].order == PLAN_ORDER_BLOCK ? " block " : " micro ";
    CHECK(strstr(g_text, ord) && strstr(g_text, g_a.r[0].order == PLAN_ORDER_BLOCK
                                                    ? "block-major"
                                                    : "micro-batch-major"),
          "table lacks the order");
    /* one row per rank, starting with the rank number, holding its range */
    for (int r = 0; r < g_a.nranks; r++) {
      char row[64];
      snprintf(row, sizeof row, "%d-%d", g_a.r[r].first_block, g_a.r[r].last_block);
      CHECK(strstr(g_text, row) != NULL, "table lacks range %s", row);
    }
  }
}

int main(void) {
  sp_test_begin("test_serialize");
  test_binary();
  test_json();
  test_table();
  return sp_test_end();
}
