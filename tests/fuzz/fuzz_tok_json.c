/* libFuzzer target on the tokenizer.json parser and the model checks
 * behind it (launch/fuzz.sh builds and runs it). */
#include <stdint.h>

#include "fuzz_tok_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char err[512];
  tok_spec spec;
  if (tok_hfjson_parse((const char *)data, size, &spec, err, sizeof err) != 0) {
    if (!err[0]) abort();
    return 0;
  }
  fuzz_tok_check(&spec);
  tok_spec_free(&spec);
  return 0;
}
