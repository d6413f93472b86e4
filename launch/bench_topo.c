/* The GPUs and their links for staticpipe bench (see bench_topo.h): the
 * CUDA runtime for the GPUs as the ranks number them, NVML through dlopen
 * for the links, or the test file of SP_TEST_TOPOLOGY. */
#include "bench_topo.h"

#include <dlfcn.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

#ifdef STATICPIPE_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#define MAX_GPUS 64
#define MAX_LINKS 256 /* pairs a test file may list */

/* NVML's types, as its header declares them (the header is not needed at
 * build time: the library is opened at run time). */
typedef void *nvml_device;
typedef struct nvml_pci_info {
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
} nvml_pci_info;
enum {
  NVML_OK = 0,
  NVML_P2P_CAPS_NVLINK = 2, /* nvmlGpuP2PCapsIndex_t */
  NVML_P2P_STATUS_OK = 0,
  NVML_MAX_NVLINKS = 18,    /* links per GPU (Hopper, Blackwell) */
  NVML_NVLINK_DEVICE_SWITCH = 2,
};

typedef struct nvml_api {
  void *lib;
  int (*init)(void);
  int (*shutdown)(void);
  int (*driver_version)(char *, unsigned);
  int (*by_bus_id)(const char *, nvml_device *);
  int (*arch)(nvml_device, unsigned *);
  int (*p2p_status)(nvml_device, nvml_device, int, int *);
  int (*nvlink_state)(nvml_device, unsigned, int *);
  int (*nvlink_remote_pci)(nvml_device, unsigned, nvml_pci_info *);
  int (*nvlink_remote_type)(nvml_device, unsigned, int *);
  int (*pcie_gen)(nvml_device, unsigned *);
  int (*pcie_width)(nvml_device, unsigned *);
  int (*ancestor)(nvml_device, nvml_device, int *);
} nvml_api;

typedef struct test_link {
  int a, b;
  bench_link link;
} test_link;

struct bench_topo {
  int count;
  char names[MAX_GPUS][256]; /* as cudaDeviceProp.name holds them */
  char bus[MAX_GPUS][32]; /* PCI bus ids, "domain:bus:device.function" */
  char driver[80];
  nvml_api nvml; /* nvml.lib NULL: not loaded */
  nvml_device dev[MAX_GPUS];
  int is_test;
  test_link links[MAX_LINKS];
  int nlinks;
};

/* ---- the test file ------------------------------------------------------ */

static int test_link_parse(const char *file, size_t i, json_object *o, test_link *out) {
  json_object *g, *v;
  memset(out, 0, sizeof *out);
  if (!json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, "gpus", &g) ||
      !json_object_is_type(g, json_type_array) || json_object_array_length(g) != 2 ||
      !json_object_object_get_ex(o, "type", &v) || !json_object_is_type(v, json_type_string)) {
    sp_log_error("SP_TEST_TOPOLOGY %s: link %zu: expected {\"gpus\": [A, B], \"type\": ...}", file,
                 i);
    return SP_ERR_INPUT;
  }
  json_object *a = json_object_array_get_idx(g, 0), *b = json_object_array_get_idx(g, 1);
  if (!json_object_is_type(a, json_type_int) || !json_object_is_type(b, json_type_int)) {
    sp_log_error("SP_TEST_TOPOLOGY %s: link %zu: \"gpus\" are not two integers", file, i);
    return SP_ERR_INPUT;
  }
  out->a = json_object_get_int(a);
  out->b = json_object_get_int(b);
  const char *type = json_object_get_string(v);
  out->link.kind = strcmp(type, "nvlink") == 0 ? BENCH_LINK_NVLINK
                   : strcmp(type, "pcie") == 0 ? BENCH_LINK_PCIE
                                               : BENCH_LINK_UNKNOWN;
  if (out->link.kind == BENCH_LINK_UNKNOWN) {
    sp_log_error("SP_TEST_TOPOLOGY %s: link %zu: type '%s' (nvlink or pcie)", file, i, type);
    return SP_ERR_INPUT;
  }
  if (json_object_object_get_ex(o, "gen", &v)) out->link.gen = json_object_get_int(v);
  if (json_object_object_get_ex(o, "width", &v)) out->link.width = json_object_get_int(v);
  if (json_object_object_get_ex(o, "path", &v))
    snprintf(out->link.path, sizeof out->link.path, "%s", json_object_get_string(v));
  return SP_OK;
}

static int test_open(const char *file, bench_topo *t) {
  json_object *j = json_object_from_file(file), *v;
  int rc = SP_ERR_INPUT;
  t->is_test = 1;
  if (!j || !json_object_is_type(j, json_type_object) ||
      !json_object_object_get_ex(j, "gpus", &v) || !json_object_is_type(v, json_type_array) ||
      json_object_array_length(v) > MAX_GPUS) {
    sp_log_error("SP_TEST_TOPOLOGY %s: expected {\"gpus\": [at most %d names], \"links\": [...]}",
                 file, MAX_GPUS);
    goto done;
  }
  t->count = (int)json_object_array_length(v);
  for (int i = 0; i < t->count; i++)
    snprintf(t->names[i], sizeof t->names[i], "%s",
             json_object_get_string(json_object_array_get_idx(v, (size_t)i)));
  snprintf(t->driver, sizeof t->driver, "%s",
           json_object_object_get_ex(j, "driver", &v) ? json_object_get_string(v) : "unknown");
  if (json_object_object_get_ex(j, "links", &v)) {
    if (!json_object_is_type(v, json_type_array) || json_object_array_length(v) > MAX_LINKS) {
      sp_log_error("SP_TEST_TOPOLOGY %s: \"links\": expected an array of at most %d", file,
                   MAX_LINKS);
      goto done;
    }
    for (size_t i = 0; i < json_object_array_length(v); i++) {
      test_link *l = &t->links[t->nlinks];
      if (test_link_parse(file, i, json_object_array_get_idx(v, i), l) != SP_OK) goto done;
      if (l->a < 0 || l->b < 0 || l->a >= t->count || l->b >= t->count || l->a == l->b) {
        sp_log_error("SP_TEST_TOPOLOGY %s: link %zu: GPUs %d and %d (two of 0..%d)", file, i, l->a,
                     l->b, t->count - 1);
        goto done;
      }
      t->nlinks++;
    }
  }
  rc = SP_OK;
done:
  if (j) json_object_put(j);
  return rc;
}

/* ---- the machine -------------------------------------------------------- */

/* NVML's functions; NULL lib when the library or a function is missing. */
static void nvml_load(nvml_api *n) {
  memset(n, 0, sizeof *n);
  void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return;
  struct { void **fn; const char *name; } syms[] = {
      {(void **)&n->init, "nvmlInit_v2"},
      {(void **)&n->shutdown, "nvmlShutdown"},
      {(void **)&n->driver_version, "nvmlSystemGetDriverVersion"},
      {(void **)&n->by_bus_id, "nvmlDeviceGetHandleByPciBusId_v2"},
      {(void **)&n->arch, "nvmlDeviceGetArchitecture"},
      {(void **)&n->p2p_status, "nvmlDeviceGetP2PStatus"},
      {(void **)&n->nvlink_state, "nvmlDeviceGetNvLinkState"},
      {(void **)&n->nvlink_remote_pci, "nvmlDeviceGetNvLinkRemotePciInfo_v2"},
      {(void **)&n->nvlink_remote_type, "nvmlDeviceGetNvLinkRemoteDeviceType"},
      /* The link's maximum (device and system): the current generation
       * drops while a GPU idles, as it does before the runs. */
      {(void **)&n->pcie_gen, "nvmlDeviceGetMaxPcieLinkGeneration"},
      {(void **)&n->pcie_width, "nvmlDeviceGetMaxPcieLinkWidth"},
      {(void **)&n->ancestor, "nvmlDeviceGetTopologyCommonAncestor"},
  };
  for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
    *syms[i].fn = dlsym(lib, syms[i].name);
    if (!*syms[i].fn) {
      sp_log_warn("bench: %s lacks %s: GPU links unknown", "libnvidia-ml.so.1", syms[i].name);
      dlclose(lib);
      memset(n, 0, sizeof *n);
      return;
    }
  }
  if (n->init() != NVML_OK) {
    sp_log_warn("bench: NVML does not start (nvmlInit): GPU links unknown");
    dlclose(lib);
    memset(n, 0, sizeof *n);
    return;
  }
  n->lib = lib;
}

static void machine_open(bench_topo *t) {
  snprintf(t->driver, sizeof t->driver, "none");
#ifdef STATICPIPE_HAVE_CUDA
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
  t->count = n < MAX_GPUS ? n : MAX_GPUS;
  for (int i = 0; i < t->count; i++) {
    struct cudaDeviceProp p;
    snprintf(t->names[i], sizeof t->names[i], "%s",
             cudaGetDeviceProperties(&p, i) == cudaSuccess ? p.name : "unknown");
    if (cudaDeviceGetPCIBusId(t->bus[i], (int)sizeof t->bus[i], i) != cudaSuccess)
      t->bus[i][0] = '\0';
  }
  cudaGetLastError(); /* a failed query above is answered as unknown */
#endif
  if (t->count == 0) return;
  snprintf(t->driver, sizeof t->driver, "unknown");
  nvml_load(&t->nvml);
  if (!t->nvml.lib) return;
  char v[80];
  if (t->nvml.driver_version(v, sizeof v) == NVML_OK)
    snprintf(t->driver, sizeof t->driver, "%s", v);
  for (int i = 0; i < t->count; i++)
    if (!t->bus[i][0] || t->nvml.by_bus_id(t->bus[i], &t->dev[i]) != NVML_OK) t->dev[i] = NULL;
}

/* "0000:18:00.0" -> domain, bus, device; 0 when it does not read so. */
static int bus_parse(const char *s, unsigned *dom, unsigned *bus, unsigned *dev) {
  return sscanf(s, "%x:%x:%x", dom, bus, dev) == 3;
}

/* The NVLink generation of an architecture (nvmlDeviceArchitecture_t):
 * taken from the architecture because nvmlDeviceGetNvLinkVersion's answer
 * differs between drivers for one GPU. */
static int nvlink_gen(unsigned arch) {
  switch (arch) {
  case 4: return 1;          /* Pascal */
  case 5: case 6: return 2;  /* Volta, Turing */
  case 7: return 3;          /* Ampere */
  case 9: return 4;          /* Hopper */
  case 10: return 5;         /* Blackwell */
  default: return 0;
  }
}

static const char *ancestor_name(int level) {
  switch (level) {
  case 0: return "board";  /* NVML_TOPOLOGY_INTERNAL: both on one board */
  case 10: return "PIX";   /* one PCIe switch */
  case 20: return "PXB";   /* several PCIe switches */
  case 30: return "PHB";   /* a host bridge */
  case 40: return "NODE";  /* host bridges of one NUMA node */
  case 50: return "SYS";   /* across NUMA nodes */
  default: return "";
  }
}

static void machine_link(const bench_topo *t, int a, int b, bench_link *l) {
  const nvml_api *n = &t->nvml;
  nvml_device da = t->dev[a], db = t->dev[b];
  if (!n->lib || !da || !db) return;
  int st = -1;
  if (n->p2p_status(da, db, NVML_P2P_CAPS_NVLINK, &st) == NVML_OK && st == NVML_P2P_STATUS_OK) {
    unsigned arch = 0, dom, bus, dev;
    l->kind = BENCH_LINK_NVLINK;
    if (n->arch(da, &arch) == NVML_OK) l->gen = nvlink_gen(arch);
    int have_b = bus_parse(t->bus[b], &dom, &bus, &dev), direct = 0, switched = 0;
    for (unsigned k = 0; k < NVML_MAX_NVLINKS; k++) {
      int on = 0, type = -1;
      nvml_pci_info pci;
      if (n->nvlink_state(da, k, &on) != NVML_OK || !on) continue;
      if (n->nvlink_remote_type(da, k, &type) == NVML_OK && type == NVML_NVLINK_DEVICE_SWITCH)
        switched++;
      else if (have_b && n->nvlink_remote_pci(da, k, &pci) == NVML_OK && pci.domain == dom &&
               pci.bus == bus && pci.device == dev)
        direct++;
    }
    /* Through NVSwitches every active link of the GPU reaches the peer. */
    l->width = direct ? direct : switched;
    snprintf(l->path, sizeof l->path, "%s", direct ? "direct" : switched ? "NVSwitch" : "");
    return;
  }
  unsigned ga = 0, gb = 0, wa = 0, wb = 0;
  int level = -1;
  l->kind = BENCH_LINK_PCIE;
  if (n->pcie_gen(da, &ga) == NVML_OK && n->pcie_gen(db, &gb) == NVML_OK)
    l->gen = (int)(ga < gb ? ga : gb);
  if (n->pcie_width(da, &wa) == NVML_OK && n->pcie_width(db, &wb) == NVML_OK)
    l->width = (int)(wa < wb ? wa : wb);
  if (n->ancestor(da, db, &level) == NVML_OK)
    snprintf(l->path, sizeof l->path, "%s", ancestor_name(level));
}

/* ---- the interface ------------------------------------------------------ */

int bench_topo_open(bench_topo **out) {
  bench_topo *t = sp_xcalloc(1, sizeof *t);
  const char *file = getenv("SP_TEST_TOPOLOGY");
  if (file && *file) {
    if (test_open(file, t) != SP_OK) {
      free(t);
      return SP_ERR_INPUT;
    }
  } else {
    machine_open(t);
  }
  *out = t;
  return SP_OK;
}

void bench_topo_close(bench_topo *t) {
  if (!t) return;
  if (t->nvml.lib) {
    t->nvml.shutdown();
    dlclose(t->nvml.lib);
  }
  free(t);
}

int bench_topo_count(const bench_topo *t) { return t->count; }
const char *bench_topo_gpu_name(const bench_topo *t, int i) { return t->names[i]; }
const char *bench_topo_driver(const bench_topo *t) { return t->driver; }

void bench_topo_link(const bench_topo *t, int a, int b, bench_link *out) {
  memset(out, 0, sizeof *out);
  if (a < 0 || b < 0 || a >= t->count || b >= t->count) return;
  if (a == b) {
    out->kind = BENCH_LINK_SAME;
    return;
  }
  if (!t->is_test) {
    machine_link(t, a, b, out);
    return;
  }
  for (int i = 0; i < t->nlinks; i++)
    if ((t->links[i].a == a && t->links[i].b == b) || (t->links[i].a == b && t->links[i].b == a))
      *out = t->links[i].link;
}

const char *bench_link_kind_name(bench_link_kind k) {
  switch (k) {
  case BENCH_LINK_SAME: return "same";
  case BENCH_LINK_NVLINK: return "nvlink";
  case BENCH_LINK_PCIE: return "pcie";
  default: return "unknown";
  }
}

void bench_link_format(const bench_link *l, char *buf, size_t size) {
  if (l->kind == BENCH_LINK_SAME || l->kind == BENCH_LINK_UNKNOWN) {
    snprintf(buf, size, "%s", l->kind == BENCH_LINK_SAME ? "same GPU" : "unknown");
    return;
  }
  char gen[16] = "", width[16] = "", path[24] = "";
  if (l->gen > 0) snprintf(gen, sizeof gen, " %d", l->gen);
  if (l->width > 0) snprintf(width, sizeof width, " x%d", l->width);
  if (l->path[0]) snprintf(path, sizeof path, " (%s)", l->path);
  snprintf(buf, size, "%s%s%s%s", l->kind == BENCH_LINK_NVLINK ? "NVLink" : "PCIe", gen, width,
           path);
}
