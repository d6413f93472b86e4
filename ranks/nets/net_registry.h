/* The backends this build has (net.h): ranks/CMakeLists.txt generates
 * their list (net_registry.c in the build folder) from the network
 * folders, ranks/nets/<net>/ giving <net>_cpu and, in a CUDA build,
 * ranks/nets/<net>/cuda/ giving <net>_cuda. Only net.c reads it. */
#ifndef NET_REGISTRY_H
#define NET_REGISTRY_H

#include "net.h"

/* Every backend table, NULL-terminated. */
extern const net_backend *const net_backend_list[];
/* The device runtimes (the CUDA one in a CUDA build), NULL-terminated. */
extern const net_runtime *const net_runtime_list[];
/* 1 in a build with the CUDA backends (STATICPIPE_CUDA=ON). */
extern const int net_built_with_cuda;

#endif
