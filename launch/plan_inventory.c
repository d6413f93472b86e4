/* `plan --inventory FILE`: devices and links from JSON (plan_inventory.h). */
#include "plan_inventory.h"

#include <json-c/json.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "file_read.h"
#include "log.h"

/* A size field of a device: a number of bytes or a string with a unit. */
static int inv_bytes(const char *file, int i, const char *key, json_object *v, uint64_t *out) {
  char err[256];
  if (json_object_is_type(v, json_type_int)) {
    int64_t x = json_object_get_int64(v);
    if (x < 0) {
      sp_log_error("%s: device %d: \"%s\" is negative", file, i, key);
      return SP_ERR_INPUT;
    }
    *out = (uint64_t)x;
    return SP_OK;
  }
  if (json_object_is_type(v, json_type_string)) {
    if (plan_parse_bytes(json_object_get_string(v), out, err, sizeof err) != PLAN_OK) {
      sp_log_error("%s: device %d: \"%s\": %s", file, i, key, err);
      return SP_ERR_INPUT;
    }
    return SP_OK;
  }
  sp_log_error("%s: device %d: \"%s\" must be a number of bytes or a string like \"24gb\"", file,
               i, key);
  return SP_ERR_INPUT;
}

static int is_number(json_object *v) {
  return json_object_is_type(v, json_type_double) || json_object_is_type(v, json_type_int);
}

/* One device object into p (node into *node). */
static int inv_device(const char *file, int i, json_object *d, plan_device *p, int *node) {
  memset(p, 0, sizeof *p);
  p->speed = 1.0;
  *node = 0;
  snprintf(p->name, sizeof p->name, "gpu%d", i);
  if (!json_object_is_type(d, json_type_object)) {
    sp_log_error("--inventory %s: device %d is not an object", file, i);
    return SP_ERR_INPUT;
  }
  int have_total = 0;
  json_object_object_foreach(d, key, v) {
    int bad = 0;
    if (!strcmp(key, "name") && json_object_is_type(v, json_type_string)) {
      snprintf(p->name, sizeof p->name, "%s", json_object_get_string(v));
    } else if (!strcmp(key, "total_bytes")) {
      if (inv_bytes(file, i, key, v, &p->total_bytes)) return SP_ERR_INPUT;
      have_total = 1;
    } else if (!strcmp(key, "free_bytes")) {
      if (inv_bytes(file, i, key, v, &p->free_bytes)) return SP_ERR_INPUT;
    } else if (!strcmp(key, "host_bytes")) {
      if (inv_bytes(file, i, key, v, &p->host_bytes)) return SP_ERR_INPUT;
    } else if (!strcmp(key, "sm_count") && json_object_is_type(v, json_type_int)) {
      p->sm_count = json_object_get_int(v);
      bad = p->sm_count < 0;
    } else if (!strcmp(key, "cc") && json_object_is_type(v, json_type_string)) {
      bad = sscanf(json_object_get_string(v), "%d.%d", &p->cc_major, &p->cc_minor) != 2;
    } else if (!strcmp(key, "pci_bus_id") && json_object_is_type(v, json_type_string)) {
      snprintf(p->pci_bus_id, sizeof p->pci_bus_id, "%s", json_object_get_string(v));
    } else if (!strcmp(key, "speed") && is_number(v)) {
      p->speed = json_object_get_double(v);
      bad = !(p->speed > 0 && p->speed <= 1000);
    } else if (!strcmp(key, "node") && json_object_is_type(v, json_type_int)) {
      int64_t x = json_object_get_int64(v);
      bad = x < 0 || x >= PLAN_MAX_RANKS;
      *node = (int)x;
    } else {
      sp_log_error("--inventory %s: device %d: unknown key or wrong type \"%s\" (keys: name, "
                   "total_bytes, free_bytes, sm_count, cc, pci_bus_id, host_bytes, speed, node)",
                   file, i, key);
      return SP_ERR_INPUT;
    }
    if (bad) {
      sp_log_error("--inventory %s: device %d: bad value of \"%s\"", file, i, key);
      return SP_ERR_INPUT;
    }
  }
  if (!have_total || p->total_bytes == 0) {
    sp_log_error("--inventory %s: device %d has no \"total_bytes\"", file, i);
    return SP_ERR_INPUT;
  }
  if (p->free_bytes == 0) p->free_bytes = p->total_bytes;
  if (p->free_bytes > p->total_bytes) {
    sp_log_error("--inventory %s: device %d has more free_bytes than total_bytes", file, i);
    return SP_ERR_INPUT;
  }
  return SP_OK;
}

/* A rate of "links": a number in (0, 100000] GB/s. */
static int link_rate(const char *file, const char *key, json_object *v, double *out) {
  double x = is_number(v) ? json_object_get_double(v) : -1.0;
  if (!(x > 0.0 && x <= 1e5)) {
    sp_log_error("--inventory %s: links: \"%s\" must be a number of GB/s in (0, 100000]", file,
                 key);
    return SP_ERR_INPUT;
  }
  *out = x;
  return SP_OK;
}

/* The "links" object into inv (nodes already set); max_node: the highest
 * node a device names. */
static int inv_links(const char *file, json_object *l, int max_node, plan_inventory *inv) {
  if (!json_object_is_type(l, json_type_object)) {
    sp_log_error("--inventory %s: \"links\" is not an object", file);
    return SP_ERR_INPUT;
  }
  plan_links *k = &inv->links;
  double pcie = 0.0, peer = 0.0, nvl = 0.0, inter = 0.0;
  int gen = 0, nvlink = 0;
  json_object_object_foreach(l, key, v) {
    int rc = SP_OK;
    if (!strcmp(key, "gpu")) {
      const char *s = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
      if (!strcmp(s, "nvlink") || !strcmp(s, "pcie")) {
        nvlink = !strcmp(s, "nvlink");
      } else {
        sp_log_error("--inventory %s: links: \"gpu\" must be \"nvlink\" or \"pcie\"", file);
        rc = SP_ERR_INPUT;
      }
    } else if (!strcmp(key, "pcie_gen")) {
      gen = json_object_is_type(v, json_type_int) ? json_object_get_int(v) : 0;
      if (plan_pcie_gbs(gen) <= 0.0) {
        sp_log_error("--inventory %s: links: \"pcie_gen\" must be 3, 4, 5 or 6", file);
        rc = SP_ERR_INPUT;
      }
    } else if (!strcmp(key, "pcie_gbs")) {
      rc = link_rate(file, key, v, &pcie);
    } else if (!strcmp(key, "peer_gbs")) {
      rc = link_rate(file, key, v, &peer);
    } else if (!strcmp(key, "nvlink_gbs")) {
      rc = link_rate(file, key, v, &nvl);
    } else if (!strcmp(key, "inter_node_gbs")) {
      rc = link_rate(file, key, v, &inter);
    } else {
      sp_log_error("--inventory %s: links: unknown key \"%s\" (keys: gpu, nvlink_gbs, pcie_gen, "
                   "pcie_gbs, peer_gbs, inter_node_gbs)",
                   file, key);
      rc = SP_ERR_INPUT;
    }
    if (rc != SP_OK) return rc;
  }
  if (gen && pcie > 0.0) {
    sp_log_error("--inventory %s: links: give \"pcie_gen\" or \"pcie_gbs\", not both", file);
    return SP_ERR_INPUT;
  }
  if (nvlink && nvl <= 0.0) {
    sp_log_error("--inventory %s: links: \"gpu\": \"nvlink\" needs \"nvlink_gbs\"", file);
    return SP_ERR_INPUT;
  }
  if (!nvlink && nvl > 0.0) {
    sp_log_error("--inventory %s: links: \"nvlink_gbs\" without \"gpu\": \"nvlink\"", file);
    return SP_ERR_INPUT;
  }
  if (max_node > 0 && inter <= 0.0) {
    sp_log_error("--inventory %s: links: devices are on %d nodes but \"inter_node_gbs\" is not "
                 "given",
                 file, max_node + 1);
    return SP_ERR_INPUT;
  }
  if (gen) pcie = plan_pcie_gbs(gen);
  inv->host_link_gbs = pcie;
  k->nvlink = nvlink;
  k->nvlink_gbs = nvl;
  if (peer > 0.0) k->pcie_peer_gbs = peer;
  else if (pcie > 0.0) k->pcie_peer_gbs = pcie;
  k->inter_node_gbs = inter;
  return SP_OK;
}

int plan_inventory_load(const char *file, const plan_options *o, plan_inventory *out) {
  int rc = SP_ERR_INPUT;
  memset(out, 0, sizeof *out);
  plan_links_default(&out->links, o);
  int fd = -1;
  if (rank_file_open_read(file, &fd) != SP_OK) return SP_ERR_INPUT; /* io/file_read.h */
  json_object *root = json_object_from_fd(fd);
  close(fd);
  if (!root) {
    sp_log_error("--inventory %s: cannot read it as JSON (%s)", file, json_util_get_last_err());
    return SP_ERR_INPUT;
  }
  json_object *arr = root, *links = NULL;
  if (json_object_is_type(root, json_type_object)) {
    json_object_object_foreach(root, key, v) {
      (void)v;
      if (strcmp(key, "devices") && strcmp(key, "links")) {
        sp_log_error("--inventory %s: unknown key \"%s\" (keys: devices, links)", file, key);
        goto out;
      }
    }
    if (!json_object_object_get_ex(root, "devices", &arr)) {
      sp_log_error("--inventory %s: expected an array of devices or {\"devices\": [...]}", file);
      goto out;
    }
    json_object_object_get_ex(root, "links", &links);
  }
  if (!json_object_is_type(arr, json_type_array)) {
    sp_log_error("--inventory %s: \"devices\" is not an array", file);
    goto out;
  }
  size_t n = json_object_array_length(arr);
  if (n < 1 || n > PLAN_MAX_RANKS) {
    sp_log_error("--inventory %s: %zu devices, expected 1..%d", file, n, PLAN_MAX_RANKS);
    goto out;
  }
  int max_node = 0;
  for (size_t i = 0; i < n; i++) {
    int *node = &out->links.node[i];
    if (inv_device(file, (int)i, json_object_array_get_idx(arr, i), &out->devs[i], node))
      goto out;
    if (*node > max_node) max_node = *node;
  }
  if (links) {
    if (inv_links(file, links, max_node, out) != SP_OK) goto out;
    out->have_links = 1;
  } else if (max_node > 0) {
    sp_log_error("--inventory %s: devices are on %d nodes: give \"links\" with "
                 "\"inter_node_gbs\"",
                 file, max_node + 1);
    goto out;
  }
  out->ndev = (int)n;
  rc = SP_OK;
out:
  json_object_put(root);
  return rc;
}
