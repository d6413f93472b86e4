/* `plan --inventory FILE`: the devices of a run that need not be here, and
 * the links between them, from a JSON file:
 *
 *   [ {device}, ... ]  or  {"devices": [{device}, ...], "links": {links}}
 *
 * device: name, total_bytes (required), free_bytes, sm_count, cc ("9.0"),
 *   pci_bus_id, host_bytes, speed (relative dense rate, 1 = --tflops),
 *   node (0-based node index; default 0). Sizes as numbers of bytes or
 *   strings like "24gb".
 * links (every key optional; GB/s per direction per GPU):
 *   "gpu": "nvlink" | "pcie"  how the GPUs of one node talk (default pcie)
 *   "nvlink_gbs": X           NVLink rate (required with "gpu": "nvlink")
 *   "pcie_gen": 3..6          the host link of every GPU, x16: 80% of the raw
 *                             rate (Gen4 25.2, Gen5 50.4); or
 *   "pcie_gbs": X             that rate directly (not both)
 *   "peer_gbs": X             GPU <-> GPU over PCIe (default: the PCIe rate)
 *   "inter_node_gbs": X       between nodes (required when devices name more
 *                             than one node)
 * Every error is one line naming the file, the device or key, and what is
 * accepted. */
#ifndef SP_PLAN_INVENTORY_H
#define SP_PLAN_INVENTORY_H

#include "grid_choice.h"
#include "plan.h"

typedef struct plan_inventory {
  int ndev;
  plan_device devs[PLAN_MAX_RANKS];
  int have_links;       /* the file has a "links" object */
  plan_links links;     /* from it (node per device), defaults filled in */
  double host_link_gbs; /* from pcie_gen / pcie_gbs; 0 when not given */
} plan_inventory;

/* Reads and checks FILE; o gives the defaults of rates the file leaves out
 * (peer_link_gbs). SP_OK or SP_ERR_INPUT (logged). */
int plan_inventory_load(const char *file, const plan_options *o, plan_inventory *out);

#endif
