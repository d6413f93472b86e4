/* Test helper: writes the weights a run would use with LoRAs merged, as a
 * model file, so that tests/lora/lora_check.py can compare them with its
 * numpy reference merge. It reads every group through rank_model_read_group
 * with the merge set, exactly as the stages load them.
 *
 *   lora_merge_dump MODEL OUT.h5 SPEC...   (SPEC as --lora takes it)
 * Exit 0, or the status of the first failure (2: bad input). */
#include <stdio.h>
#include <stdlib.h>

#include "log.h"
#include "lora.h"
#include "model_file.h"

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: lora_merge_dump MODEL OUT.h5 SPEC...\n");
    return 2;
  }
  const int n = argc - 3;
  if (n > RANK_LORA_MAX) {
    fprintf(stderr, "at most %d specs\n", RANK_LORA_MAX);
    return 2;
  }
  rank_lora_spec specs[RANK_LORA_MAX];
  for (int i = 0; i < n; i++) {
    char err[256];
    if (rank_lora_spec_parse(argv[3 + i], &specs[i], err, sizeof err) != SP_OK) {
      fprintf(stderr, "%s: %s\n", argv[3 + i], err);
      return 2;
    }
  }
  rank_model *m = NULL;
  rank_lora *l = NULL;
  rank_model_writer *w = NULL;
  int rc = rank_model_open(argv[1], 1, &m);
  if (rc != SP_OK) return rc;
  const rank_model_info *mi = rank_model_get_info(m);
  rc = rank_lora_open(specs, n, mi, &l);
  if (rc == SP_OK) {
    rank_model_set_merge(m, rank_lora_merge_group, l);
    rc = rank_model_writer_open(argv[2], &mi->config, mi->id.dtype, mi->id.preset, &w);
  }
  void *buf = NULL;
  for (int g = 0; g < 3 && rc == SP_OK; g++) {
    const wan_layout *lay = rank_model_layout(m, (wan_group)g);
    buf = realloc(buf, lay->packed_bytes);
    const int nb = g == WAN_GROUP_BLOCK ? (int)mi->config.layers : 1;
    for (int b = 0; b < nb && rc == SP_OK; b++) {
      rc = rank_model_read_group(m, (wan_group)g, b, buf, lay->packed_bytes, NULL);
      for (int t = 0; t < lay->count && rc == SP_OK; t++)
        rc = rank_model_writer_put(w, (wan_group)g, b, lay->t[t].name,
                                   (char *)buf + lay->t[t].offset, lay->t[t].bytes);
    }
  }
  free(buf);
  if (w) rc = rc == SP_OK ? rank_model_writer_commit(w) : (rank_model_writer_abort(w), rc);
  rank_lora_close(l);
  rank_model_close(m);
  return rc;
}
