/* The VAE engine sweep's configuration bookkeeping (tests/gpu/dev/
 * vae_engine_key.h), on the host: no GPU needed.
 *
 * - two keys of one engine whose knobs cuDNN listed in different orders
 *   are the same configuration once sorted; a different value, engine or
 *   knob count, or an unknown engine (-1), is not;
 * - the text of a key lists its knobs as type=value in type order;
 * - a knob range's values are min, min + stride, ... up to max (the last
 *   one below max when the stride does not divide the range); an empty
 *   range, a stride below 1 and a range of more than VAE_ENGINE_KNOB_VALUES
 *   values give none.
 * Expectations are written from those definitions. */
#include <string.h>

#include "sp_test.h"
#include "vae_engine_key.h"

static vae_engine_key key3(int64_t engine, const int64_t *type, const int64_t *val) {
  vae_engine_key k;
  memset(&k, 0, sizeof k);
  k.engine = engine;
  k.nknobs = 3;
  for (int i = 0; i < 3; i++) k.type[i] = type[i], k.val[i] = val[i];
  vae_engine_key_sort(&k);
  return k;
}

static void check_same(void) {
  const int64_t ta[3] = {40, 2, 41}, va[3] = {128, 3, 64};
  const int64_t tb[3] = {2, 41, 40}, vb[3] = {3, 64, 128};
  const vae_engine_key a = key3(7, ta, va), b = key3(7, tb, vb);
  CHECK(a.type[0] == 2 && a.type[1] == 40 && a.type[2] == 41, "sorted types %lld %lld %lld",
        (long long)a.type[0], (long long)a.type[1], (long long)a.type[2]);
  CHECK(a.val[0] == 3 && a.val[1] == 128 && a.val[2] == 64, "values follow their types");
  CHECK(vae_engine_key_same(&a, &b), "the same knobs in another order");
  vae_engine_key c = b;
  c.val[1] = 256;
  CHECK(!vae_engine_key_same(&a, &c), "a different tile value");
  c = b;
  c.engine = 8;
  CHECK(!vae_engine_key_same(&a, &c), "a different engine");
  c = b;
  c.nknobs = 2;
  CHECK(!vae_engine_key_same(&a, &c), "one knob fewer");
  c = a;
  c.engine = -1;
  vae_engine_key d = c;
  CHECK(!vae_engine_key_same(&c, &d), "an unknown engine matches nothing");
  char text[64];
  vae_engine_key_text(&a, text, sizeof text);
  CHECK(strcmp(text, "2=3 40=128 41=64") == 0, "text '%s'", text);
  char small[6];
  vae_engine_key_text(&a, small, sizeof small);
  CHECK(strlen(small) < sizeof small, "text cut to its buffer: '%s'", small);
}

static void check_ranges(void) {
  int64_t v[VAE_ENGINE_KNOB_VALUES];
  int n = vae_engine_knob_values(1, 7, 2, v);
  CHECK(n == 4 && v[0] == 1 && v[1] == 3 && v[2] == 5 && v[3] == 7, "1..7 step 2: %d values", n);
  n = vae_engine_knob_values(0, 5, 2, v);
  CHECK(n == 3 && v[0] == 0 && v[2] == 4, "0..5 step 2: %d values, last %lld", n,
        (long long)v[n > 0 ? n - 1 : 0]);
  n = vae_engine_knob_values(4, 4, 1, v);
  CHECK(n == 1 && v[0] == 4, "a single value: %d", n);
  CHECK(vae_engine_knob_values(0, VAE_ENGINE_KNOB_VALUES - 1, 1, v) == VAE_ENGINE_KNOB_VALUES,
        "exactly the most values");
  CHECK(vae_engine_knob_values(0, VAE_ENGINE_KNOB_VALUES, 1, v) == 0, "one value too many");
  CHECK(vae_engine_knob_values(3, 1, 1, v) == 0, "max below min");
  CHECK(vae_engine_knob_values(0, 4, 0, v) == 0, "stride 0");
}

int main(void) {
  sp_test_begin("test_vae_engine_keys");
  check_same();
  check_ranges();
  return sp_test_end();
}
