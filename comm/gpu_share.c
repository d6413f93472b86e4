/* GPU sharing among a node's ranks, from the GPUs' identities (see
 * gpu_share.h). */
#include "gpu_share.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

void comm_gpu_share_resolve(const char (*ids)[COMM_GPU_ID_MAX], int n, const char *mine,
                            comm_gpu_share *out) {
  comm_gpu_share s;
  memset(&s, 0, sizeof s);
  snprintf(s.id, sizeof s.id, "%s", mine);
  s.exclusive = n > 0;
  for (int i = 0; i < n; i++) {
    const char *a = ids[i];
    if (a[0] == '\0') s.exclusive = 0; /* a rank without a GPU */
    if (s.id[0] && strncmp(a, s.id, COMM_GPU_ID_MAX - 1) == 0) s.sharers++;
    for (int j = 0; j < i && s.exclusive; j++)
      if (strncmp(ids[j], a, COMM_GPU_ID_MAX - 1) == 0) s.exclusive = 0;
  }
  *out = s;
}

int comm_gpu_share_gather(const comm_world *w, const char *mine, comm_gpu_share *out) {
  char me[COMM_GPU_ID_MAX];
  memset(me, 0, sizeof me);
  snprintf(me, sizeof me, "%s", mine);
  char (*ids)[COMM_GPU_ID_MAX] = sp_xcalloc((size_t)w->local_size, sizeof *ids);
  int rc = comm_node_allgather(w, me, sizeof me, ids);
  if (rc == SP_OK) {
    /* Gathered bytes come from peers: terminate each before comparing. */
    for (int i = 0; i < w->local_size; i++) ids[i][COMM_GPU_ID_MAX - 1] = '\0';
    comm_gpu_share_resolve((const char (*)[COMM_GPU_ID_MAX])ids, w->local_size, me, out);
  }
  free(ids);
  return rc;
}
