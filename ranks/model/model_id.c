/* The id every model file handle reports (see model_id.h). */
#include "model_id.h"

#include <stdio.h>
#include <string.h>

#include "log.h"
#include "synth.h"

int rank_model_spec_is_synth(const char *spec) { return strncmp(spec, "synth:", 6) == 0; }

int model_file_id_start(model_file_id *id, const char *spec) {
  snprintf(id->source, sizeof id->source, "%s", spec);
  return rank_model_spec_is_synth(spec);
}

int model_file_id_synth(model_file_id *id, const char *spec, const char *arch, kern_dtype dtype) {
  if (rank_synth_spec_parse(spec, id->preset, sizeof id->preset, &id->seed) != SP_OK)
    return SP_ERR_INPUT;
  id->synthetic = 1;
  id->dtype = dtype;
  snprintf(id->arch, sizeof id->arch, "%s", arch);
  rank_synth_checksum(id->preset, id->seed, id->checksum, sizeof id->checksum);
  return SP_OK;
}

int model_file_id_bad_preset(const model_file_id *id, const char *kind, const char *known) {
  sp_log_error("%s: unknown %spreset '%s' (known: %s)", id->source, kind, id->preset, known);
  return SP_ERR_INPUT;
}

void model_file_id_match(model_file_id *id, const char *match) {
  if (!id->preset[0] && match) snprintf(id->preset, sizeof id->preset, "%s", match);
}

void model_file_size_set(model_file_size *s, const model_file_id *id, int tensors,
                         int64_t params) {
  s->tensors = tensors;
  s->params = params;
  s->file_bytes = id->synthetic ? 0 : params * (int64_t)kern_dtype_size(id->dtype);
}
