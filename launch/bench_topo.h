/* staticpipe bench's view of the machine's GPUs: their names, the driver,
 * and the link between two of them (NVLink or PCIe, its generation and
 * width, the path), for the rows of a sweep over --devices. Internal to
 * launch/.
 *
 * Where it comes from: the CUDA runtime numbers the GPUs as the ranks see
 * them (CUDA_VISIBLE_DEVICES honoured) and gives each one's PCI bus id;
 * NVML, loaded with dlopen from the driver's libnvidia-ml.so.1, answers for
 * that bus id. The queries make no CUDA context and hold no device memory
 * while the sweep's runs use the GPUs. A CPU build, or a machine without
 * the library, has no GPUs (or only unknown links) here.
 *
 * Tests: SP_TEST_TOPOLOGY=FILE.json replaces both queries, so the rows a
 * sweep over GPU pairs writes can be checked on a machine without GPUs. It
 * is for tests only. The file:
 *   {"driver": "570.86.15",
 *    "gpus": ["NVIDIA H200", "NVIDIA H200", ...],
 *    "links": [{"gpus": [0, 1], "type": "nvlink", "gen": 4, "width": 18,
 *               "path": "NVSwitch"},
 *              {"gpus": [0, 2], "type": "pcie", "gen": 5, "width": 16,
 *               "path": "SYS"}, ...]}
 * a link holding for both directions; a pair not listed is unknown. */
#ifndef SP_BENCH_TOPO_H
#define SP_BENCH_TOPO_H

#include <stddef.h>

typedef enum {
  BENCH_LINK_UNKNOWN = 0,
  BENCH_LINK_SAME,   /* both ranks on one GPU */
  BENCH_LINK_NVLINK,
  BENCH_LINK_PCIE,
} bench_link_kind;

/* The link between two GPUs. */
typedef struct bench_link {
  bench_link_kind kind;
  int gen;        /* NVLink generation (1 Pascal .. 5 Blackwell) or PCIe generation; 0 unknown */
  int width;      /* NVLink links joining them, or PCIe lanes (the narrower GPU's); 0 unknown */
  char path[16];  /* NVLink: "direct" or "NVSwitch"; PCIe: the closest common ancestor as
                     nvidia-smi topo names it (PIX, PXB, PHB, NODE, SYS); "" unknown */
} bench_link;

typedef struct bench_topo bench_topo;

/* The GPUs and how to ask about their links: from SP_TEST_TOPOLOGY when it
 * is set (SP_ERR_INPUT, logged, when its file is bad), else from the CUDA
 * runtime and NVML (never an error: what cannot be known is unknown). */
int bench_topo_open(bench_topo **out);
void bench_topo_close(bench_topo *t);

/* GPUs visible (0 in a CPU build or without a GPU). */
int bench_topo_count(const bench_topo *t);
/* GPU i's name (0 <= i < count). */
const char *bench_topo_gpu_name(const bench_topo *t, int i);
/* The driver's version ("570.86.15"), "unknown" or "none". */
const char *bench_topo_driver(const bench_topo *t);

/* The link between GPUs a and b (indices as the ranks see them); unknown
 * when either is not visible or the query cannot tell. */
void bench_topo_link(const bench_topo *t, int a, int b, bench_link *out);

/* The link in words: "NVLink 4 x18 (NVSwitch)", "PCIe 5 x16 (SYS)",
 * "same GPU", "unknown". */
void bench_link_format(const bench_link *l, char *buf, size_t size);
/* "nvlink", "pcie", "same", "unknown". */
const char *bench_link_kind_name(bench_link_kind k);

#endif
