/* Input tensors checked against the model (see inputs.h). */
#include "inputs.h"

#include "log.h"

int inputs_read_context(const char *path, const char *name, const wan_config *c,
                        rank_tensor *out) {
  int rc = rank_tensor_read(path, name, 2, out);
  if (rc != SP_OK) return rc;
  if (out->dims[1] != c->text_dim || out->dims[0] > c->text_len) {
    sp_log_error("%s: dataset '%s' is [%lld, %lld]; the model needs [L, %lld] with L <= %lld",
                 path, name, (long long)out->dims[0], (long long)out->dims[1],
                 (long long)c->text_dim, (long long)c->text_len);
    rank_tensor_free(out);
    return SP_ERR_INPUT;
  }
  return SP_OK;
}

int inputs_read_latent(const char *path, const char *name, const wan_config *c,
                       const int64_t *want, rank_tensor *out) {
  int rc = rank_tensor_read(path, name, 4, out);
  if (rc != SP_OK) return rc;
  const int64_t *d = out->dims;
  if (want && (d[0] != want[0] || d[1] != want[1] || d[2] != want[2] || d[3] != want[3])) {
    sp_log_error("%s: dataset '%s' is [%lld, %lld, %lld, %lld]; this run needs [%lld, %lld, "
                 "%lld, %lld]",
                 path, name, (long long)d[0], (long long)d[1], (long long)d[2], (long long)d[3],
                 (long long)want[0], (long long)want[1], (long long)want[2], (long long)want[3]);
    rank_tensor_free(out);
    return SP_ERR_INPUT;
  }
  if (d[0] != c->in_dim || d[2] % c->patch[1] || d[3] % c->patch[2] || d[1] % c->patch[0]) {
    sp_log_error("%s: dataset '%s' is [%lld, %lld, %lld, %lld]; the model needs [%lld, F, H, W] "
                 "with H and W even",
                 path, name, (long long)d[0], (long long)d[1], (long long)d[2], (long long)d[3],
                 (long long)c->in_dim);
    rank_tensor_free(out);
    return SP_ERR_INPUT;
  }
  return SP_OK;
}
