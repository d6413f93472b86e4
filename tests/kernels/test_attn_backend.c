/* --attn names (kern_attn_backend.h): every name parses to its backend and
 * prints back as itself, cudnn-fp8, fa3 and fa3-int8 included; near misses and NULL are
 * refused with SP_ERR_INPUT and leave the output untouched. */
#include <stdio.h>
#include <string.h>

#include "kern_attn_backend.h"
#include "log.h"
#include "sp_test.h"

int main(void) {
  sp_test_begin("kernels/attn_backend");
  static const struct { const char *name; kern_attn_backend b; } known[] = {
      {"auto", KERN_ATTN_AUTO},   {"cudnn", KERN_ATTN_CUDNN},
      {"flash", KERN_ATTN_FLASH}, {"simple", KERN_ATTN_SIMPLE},
      {"cudnn-fp8", KERN_ATTN_CUDNN_FP8}, {"fa3", KERN_ATTN_FA3},
      {"fa3-int8", KERN_ATTN_FA3_INT8},
  };
  for (size_t i = 0; i < sizeof known / sizeof *known; i++) {
    kern_attn_backend b = (kern_attn_backend)-1;
    CHECK(kern_attn_backend_parse(known[i].name, &b) == SP_OK && b == known[i].b,
          "'%s' did not parse to %d", known[i].name, (int)known[i].b);
    CHECK(strcmp(kern_attn_backend_name(known[i].b), known[i].name) == 0, "name of %d is '%s'",
          (int)known[i].b, kern_attn_backend_name(known[i].b));
  }
  static const char *const bad[] = {"fp8", "cudnn_fp8", "cudnn-fp8 ", "CUDNN", "", "cudnn-fp",
                                    "FA3", "fa3 ", "fa", "fa3-fp8", "fa3_int8"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    kern_attn_backend b = KERN_ATTN_FLASH;
    CHECK(kern_attn_backend_parse(bad[i], &b) == SP_ERR_INPUT && b == KERN_ATTN_FLASH,
          "'%s' was accepted or changed the output", bad[i]);
  }
  kern_attn_backend b = KERN_ATTN_FLASH;
  CHECK(kern_attn_backend_parse(NULL, &b) == SP_ERR_INPUT && b == KERN_ATTN_FLASH, "NULL accepted");
  CHECK(strcmp(kern_attn_backend_name((kern_attn_backend)7), "?") == 0, "out of range name");
  return sp_test_end();
}
