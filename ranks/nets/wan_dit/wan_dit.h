/* The Wan 2.1 DiT as a network (net.h): its description, whose parts are
 * the config (wan_config.h, WAN_CONFIG_FIELDS), the tensors and typed
 * weights (wan_weights.h), and the device layout of a CUDA stage
 * (planner/layout.h, plan_layout_make); its backends fill wan_dit_backend
 * (stage_impl.h): the CPU's here (stage_cpu.c), the CUDA one's in cuda/;
 * its driver is the pipeline stage (stage.h). */
#ifndef WAN_DIT_H
#define WAN_DIT_H

#include "net.h"
#include "wan_weights.h"

const net_desc *wan_dit_net(void);

#endif
