/* The shape every network has (ranks/README.md "Networks"), written down
 * once: a description as data, and a backend table per device, found at
 * run time through one lookup.
 *
 * A network is one folder, ranks/nets/<net>/:
 *   - its description (net_desc): the name, the noun messages use, its
 *     model file's schema (net_schema.h: the arch, the config attributes,
 *     the groups and tensors, the presets; <net>_schema.c), and the
 *     planner function that lays out its device memory (planner/: the
 *     planner counts that layout and the CUDA backend carves its one arena
 *     from it); the config struct and the typed weight structs come from
 *     X-macro lists in the network's headers;
 *   - its backends: the CPU one in the folder, the CUDA one in
 *     <net>/cuda/ (compiled only in CUDA builds), each filling the
 *     network's own table type (wan_dit_backend, umt5_backend,
 *     wan_vae_backend) and naming it in a net_backend, <net>_cpu and
 *     <net>_cuda;
 *   - its driver, written once over its backend table: the DiT's stage
 *     (stage.h), the text encoder's encode (umt5_encode.h), the VAE's
 *     decode (wan_vae_decode.h).
 * The build lists the net_backends it has (ranks/CMakeLists.txt generates
 * the list from the folders): a CPU-only build simply has no CUDA table,
 * and net_backend_ops says so, naming the network. */
#ifndef NET_H
#define NET_H

#include <stddef.h>
#include <stdint.h>

#include "net_schema.h"

/* The planner's inventory entry of a device (planner/plan.h). */
typedef struct plan_device plan_device;

/* The device a backend runs on (--device cpu|cuda|auto). */
typedef enum { RANK_DEVICE_CPU = 0, RANK_DEVICE_CUDA = 1, RANK_DEVICES = 2 } rank_device;

typedef struct net_desc {
  const char *name; /* its folder under ranks/nets/ ("umt5") */
  const char *noun; /* what messages call it ("text encoder") */
  /* Its model file as data (net_schema.h): the arch, the config
   * attributes and their check, the groups and the tensor table, the
   * presets. The one description of its config and tensors. */
  const net_schema *schema;
  /* The planner's layout of the CUDA backend's device memory
   * (planner/layout.h, vae_layout.h, t5_layout.h): the planner's shape
   * struct of the network in, its layout struct out; PLAN_OK, or
   * PLAN_EINVAL with a message in err. */
  int (*layout)(const void *shape, void *out, char *err, size_t errlen);
} net_desc;

/* One backend of a network: its table (the network's own table type) for
 * one device. */
typedef struct net_backend {
  const net_desc *(*net)(void);
  rank_device device;
  const void *ops;
} net_backend;

/* The table of net on dev, or NULL after one logged line naming the network
 * and what to do ("text encoder: this staticpipe was built without CUDA
 * (STATICPIPE_CUDA=OFF): use --device cpu"). */
const void *net_backend_ops(const net_desc *net, rank_device dev);
/* 1 when this build has a backend of net for dev (nothing logged). */
int net_backend_has(const net_desc *net, rank_device dev);
/* The networks this build knows (one per folder), at most max into out;
 * returns their count. */
int net_all(const net_desc **out, int max);
/* "cpu" or "cuda". */
const char *rank_device_name(rank_device dev);

/* ---- the devices ----------------------------------------------------- */

/* What a device kind offers besides the networks: the CUDA runtime's
 * inventory and pinned host memory (ranks/nets/cuda/cuda_device.c). The
 * CPU has none; a CPU-only build has no CUDA one. */
typedef struct net_runtime {
  rank_device device;
  int (*count)(void);
  void (*versions)(char *buf, size_t n);
  int (*describe)(int idx, plan_device *out);
  int (*identity)(int idx, char *out, size_t size);
  int64_t (*free_bytes)(void);
  void *(*host_alloc)(size_t bytes);
  void (*host_free)(void *p);
} net_runtime;

/* 1 when this build has the CUDA backends and a GPU is visible. */
int rank_cuda_available(void);
/* Parses "cpu" / "cuda" / "auto" (cuda when available); logs --device. */
int rank_device_parse(const char *s, rank_device *out);
/* CUDA devices this process sees (0 without the CUDA backends or a GPU). */
int rank_cuda_device_count(void);
/* The CUDA runtime's libraries as this process loads them, one line into
 * buf (n bytes): "CUDA runtime X, driver Y, cuDNN Z (built with W), NCCL V",
 * or "none (built without CUDA)". */
void rank_cuda_versions(char *buf, size_t n);
/* The inventory entry of CUDA device idx for the planner (name, memory
 * total and free, SMs, compute capability, PCI bus id). SP_OK or logged
 * SP_ERR_RUNTIME. */
int rank_cuda_describe(int idx, plan_device *out);
/* The identity of CUDA device idx, unique among a node's GPUs whatever
 * CUDA_VISIBLE_DEVICES each process was given: "GPU-" and its UUID (as
 * nvidia-smi spells it), into out[0..size). SP_OK or logged SP_ERR_RUNTIME
 * (out untouched). */
int rank_cuda_identity(int idx, char *out, size_t size);
/* Free bytes of the current CUDA device as cudaMemGetInfo reports them
 * (every process on it counts); 0 without the CUDA backends. */
int64_t rank_cuda_free_bytes(void);
/* Host memory of bytes bytes: pinned on dev CUDA (copies to and from the
 * device run at the link's rate and can be asynchronous), plain on the
 * CPU; freed by rank_host_free with the same dev. */
void *rank_host_alloc(rank_device dev, size_t bytes);
void rank_host_free(rank_device dev, void *p);

#endif
