/* The backend lookup and the devices (net.h), over the build's registry
 * (net_registry.h). */
#include "net.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "net_registry.h"
#include "plan.h"

const char *rank_device_name(rank_device dev) { return dev == RANK_DEVICE_CUDA ? "cuda" : "cpu"; }

static const net_backend *find(const net_desc *net, rank_device dev) {
  for (int i = 0; net_backend_list[i]; i++)
    if (net_backend_list[i]->net() == net && net_backend_list[i]->device == dev)
      return net_backend_list[i];
  return NULL;
}

/* The one message for a device this build has no backends for. */
static void refuse_cuda(const char *who) {
  sp_log_error("%s: this staticpipe was built without CUDA (STATICPIPE_CUDA=OFF): use "
               "--device cpu", who);
}

int net_backend_has(const net_desc *net, rank_device dev) { return find(net, dev) != NULL; }

const void *net_backend_ops(const net_desc *net, rank_device dev) {
  const net_backend *b = find(net, dev);
  if (b) return b->ops;
  if (dev == RANK_DEVICE_CUDA && !net_built_with_cuda)
    refuse_cuda(net->noun);
  else
    sp_log_error("%s: no %s backend in this build: use --device %s", net->noun,
                 rank_device_name(dev), dev == RANK_DEVICE_CUDA ? "cpu" : "cuda");
  return NULL;
}

int net_all(const net_desc **out, int max) {
  /* Every network has a CPU backend (its reference): one entry each. */
  int n = 0;
  for (int i = 0; net_backend_list[i]; i++)
    if (net_backend_list[i]->device == RANK_DEVICE_CPU && n < max)
      out[n++] = net_backend_list[i]->net();
  return n;
}

/* ---- the devices ---- */

static const net_runtime *runtime(rank_device dev) {
  for (int i = 0; net_runtime_list[i]; i++)
    if (net_runtime_list[i]->device == dev) return net_runtime_list[i];
  return NULL;
}

int rank_cuda_device_count(void) {
  const net_runtime *r = runtime(RANK_DEVICE_CUDA);
  return r ? r->count() : 0;
}

int rank_cuda_available(void) { return rank_cuda_device_count() > 0; }

int rank_device_parse(const char *s, rank_device *out) {
  if (strcmp(s, "cpu") == 0) {
    *out = RANK_DEVICE_CPU;
  } else if (strcmp(s, "cuda") == 0 || strcmp(s, "auto") == 0) {
    if (!rank_cuda_available()) {
      if (strcmp(s, "auto") == 0) {
        *out = RANK_DEVICE_CPU;
        return SP_OK;
      }
      if (net_built_with_cuda)
        sp_log_error("--device cuda: no CUDA GPU is visible (check CUDA_VISIBLE_DEVICES and the "
                     "driver), or use --device cpu");
      else
        refuse_cuda("--device cuda");
      return SP_ERR_INPUT;
    }
    *out = RANK_DEVICE_CUDA;
  } else {
    sp_log_error("--device: '%s' is not cpu, cuda or auto", s);
    return SP_ERR_INPUT;
  }
  return SP_OK;
}

void rank_cuda_versions(char *buf, size_t n) {
  const net_runtime *r = runtime(RANK_DEVICE_CUDA);
  if (r)
    r->versions(buf, n);
  else
    snprintf(buf, n, "none (built without CUDA)");
}

int rank_cuda_describe(int idx, plan_device *out) {
  const net_runtime *r = runtime(RANK_DEVICE_CUDA);
  if (r) return r->describe(idx, out);
  sp_log_error("cuda:%d: this build has no CUDA backend", idx);
  return SP_ERR_RUNTIME;
}

int rank_cuda_identity(int idx, char *out, size_t size) {
  const net_runtime *r = runtime(RANK_DEVICE_CUDA);
  if (r) return r->identity(idx, out, size);
  sp_log_error("cuda:%d: this build has no CUDA backend", idx);
  return SP_ERR_RUNTIME;
}

int64_t rank_cuda_free_bytes(void) {
  const net_runtime *r = runtime(RANK_DEVICE_CUDA);
  return r ? r->free_bytes() : 0;
}

void *rank_host_alloc(rank_device dev, size_t bytes) {
  const net_runtime *r = dev == RANK_DEVICE_CPU ? NULL : runtime(dev);
  if (dev != RANK_DEVICE_CPU && !r)
    sp_fatal("internal: host memory pinned for %s in a build without it", rank_device_name(dev));
  return r ? r->host_alloc(bytes) : sp_xmalloc(bytes);
}

void rank_host_free(rank_device dev, void *p) {
  if (!p) return;
  const net_runtime *r = dev == RANK_DEVICE_CPU ? NULL : runtime(dev);
  if (r)
    r->host_free(p);
  else
    free(p);
}
