/* The environment header of staticpipe bench (see bench_env.h). */
#include "bench_env.h"

#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef STATICPIPE_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <nccl.h>

/* CUDA's version integers (1000 * major + 10 * minor) in words. */
static void cuda_version(int v, char *buf, size_t size) {
  snprintf(buf, size, "%d.%d", v / 1000, v % 1000 / 10);
}
#endif

#include "sp_build_info.h" /* SP_BUILD_COMMIT: the commit built (launch/version.cmake) */

/* The GPUs' names, alike ones counted: "NVIDIA H200 x4, NVIDIA L4". */
static void gpu_list(const bench_topo *t, char *buf, size_t size) {
  const int n = bench_topo_count(t);
  size_t len = 0;
  buf[0] = '\0';
  for (int i = 0; i < n; i++) {
    const char *name = bench_topo_gpu_name(t, i);
    int seen = 0, count = 0;
    for (int j = 0; j < i; j++) seen |= strcmp(bench_topo_gpu_name(t, j), name) == 0;
    if (seen) continue;
    for (int j = i; j < n; j++) count += strcmp(bench_topo_gpu_name(t, j), name) == 0;
    int w = snprintf(buf + len, size - len, "%s%s x%d", len ? ", " : "", name, count);
    if (w < 0 || (size_t)w >= size - len) break;
    len += (size_t)w;
  }
  if (n == 0) snprintf(buf, size, "none");
}

/* The header's entries, in the order bench_env.h lists them. */
enum { E_GPU, E_DRIVER, E_CUDA, E_CUDA_DRIVER, E_CUDNN, E_NCCL, E_MPI, E_COMMIT, E_BUILD, E_HOST,
       E_DATE, E_COUNT };
_Static_assert(E_COUNT == BENCH_ENV_ITEMS, "one key per entry");

void bench_env_collect(const bench_topo *t, bench_env_item it[BENCH_ENV_ITEMS]) {
  static const char *keys[BENCH_ENV_ITEMS] = {"gpu", "driver", "cuda_runtime", "cuda_driver",
                                              "cudnn", "nccl", "mpi", "commit", "build",
                                              "host", "date"};
  for (int i = 0; i < BENCH_ENV_ITEMS; i++) {
    it[i].key = keys[i];
    snprintf(it[i].value, sizeof it[i].value, "none");
  }
  gpu_list(t, it[E_GPU].value, sizeof it[E_GPU].value);
  snprintf(it[E_DRIVER].value, sizeof it[E_DRIVER].value, "%s", bench_topo_driver(t));
#ifdef STATICPIPE_HAVE_CUDA
  int v = 0;
  if (cudaRuntimeGetVersion(&v) == cudaSuccess)
    cuda_version(v, it[E_CUDA].value, sizeof it[E_CUDA].value);
  if (cudaDriverGetVersion(&v) == cudaSuccess && v > 0)
    cuda_version(v, it[E_CUDA_DRIVER].value, sizeof it[E_CUDA_DRIVER].value);
  /* cudnnGetVersion: 10000 * major + 100 * minor + patch from cuDNN 9 on. */
  size_t d = cudnnGetVersion();
  snprintf(it[E_CUDNN].value, sizeof it[E_CUDNN].value, "%zu.%zu.%zu", d / 10000, d % 10000 / 100,
           d % 100);
  /* ncclGetVersion: 10000 * major + 100 * minor + patch from NCCL 2.9 on. */
  int nv = 0;
  if (ncclGetVersion(&nv) == ncclSuccess)
    snprintf(it[E_NCCL].value, sizeof it[E_NCCL].value, "%d.%d.%d", nv / 10000, nv % 10000 / 100,
             nv % 100);
  cudaGetLastError();
  snprintf(it[E_BUILD].value, sizeof it[E_BUILD].value, "cuda");
#else
  snprintf(it[E_BUILD].value, sizeof it[E_BUILD].value, "cpu");
#endif
  /* The library's name and version, up to the first comma or line end
   * ("Open MPI v4.1.6, package: ..."); callable before MPI_Init. */
  char mpi[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  if (MPI_Get_library_version(mpi, &len) == MPI_SUCCESS) {
    mpi[strcspn(mpi, ",\n")] = '\0';
    snprintf(it[E_MPI].value, sizeof it[E_MPI].value, "%s", mpi);
  }
  snprintf(it[E_COMMIT].value, sizeof it[E_COMMIT].value, "%s", SP_BUILD_COMMIT);
  if (gethostname(it[E_HOST].value, sizeof it[E_HOST].value) != 0)
    snprintf(it[E_HOST].value, sizeof it[E_HOST].value, "unknown");
  it[E_HOST].value[sizeof it[E_HOST].value - 1] = '\0';
  time_t now = time(NULL);
  struct tm tm;
  if (gmtime_r(&now, &tm))
    strftime(it[E_DATE].value, sizeof it[E_DATE].value, "%Y-%m-%dT%H:%M:%SZ", &tm);
}
