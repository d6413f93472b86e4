/* The DiT's description (wan_dit.h). */
#include "wan_dit.h"

#include <stdio.h>

#include "layout.h"
#include "wan_schema.h"

static int layout(const void *shape, void *out, char *err, size_t errlen) {
  return plan_layout_make(shape, out, err, errlen);
}

static const net_desc desc = {
    .name = "wan_dit",
    .noun = "DiT",
    .schema = &wan_schema,
    .layout = layout,
};

const net_desc *wan_dit_net(void) { return &desc; }
