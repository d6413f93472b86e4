/* The Hopper instructions of the sm_90a attention kernel (fa3_kernel.cuh) as
 * inline PTX: mbarriers, bulk tensor copies (TMA), shared-memory matrix
 * descriptors, wgmma fences and groups, setmaxnreg, named barriers. Each
 * wrapper cites the PTX ISA section it follows. CUDA-only header, compiled
 * for sm_90a alone (kernels/CMakeLists.txt). */
#ifndef KERN_FA3_PTX_CUH
#define KERN_FA3_PTX_CUH

#include <cuda.h> /* CUtensorMap: the type only, libcuda is not linked */
#include <stdint.h>

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "fa3 kernels need the sm_90a target (-gencode=arch=compute_90a,code=sm_90a)"
#endif

/* ---- shared memory addresses ------------------------------------------- */

__device__ __forceinline__ uint32_t fa3_smem_addr(const void *p) {
  return (uint32_t)__cvta_generic_to_shared(p);
}

/* ---- mbarrier (PTX ISA "Parallel Synchronization and Communication
 * Instructions: mbarrier") --------------------------------------------------
 * A phase completes when the pending arrival count reaches zero and the
 * transaction count (bytes announced by expect_tx, counted down by the
 * bulk copies' complete_tx) is zero. try_wait.parity P returns true once the
 * phase of parity P has completed; on a fresh barrier (phase 0 running) the
 * "previous" phase has parity 1, so waiting on parity 1 returns at once,
 * which is how a producer passes its first round of empty slots. */

__device__ __forceinline__ void fa3_mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

/* Makes the barrier initialisations visible to the async proxy (the bulk
 * copy engine) and the other threads; a __syncthreads follows it. */
__device__ __forceinline__ void fa3_mbar_init_fence(void) {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

/* One arrival that also announces `bytes` of bulk copies to come. */
__device__ __forceinline__ void fa3_mbar_arrive_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void fa3_mbar_arrive(uint32_t bar) {
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" ::"r"(bar)
               : "memory");
}

/* Spins until the phase of parity `parity` has completed (try_wait blocks
 * for a hardware-chosen time before it returns false, so the loop is not a
 * busy poll of shared memory). */
__device__ __forceinline__ void fa3_mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
  do {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 "selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(bar), "r"(parity)
                 : "memory");
  } while (!done);
}

/* ---- bulk tensor copy (PTX ISA "cp.async.bulk.tensor") ------------------
 * Copies the box at coordinates (c0 innermost, c1) of the tensor map into
 * shared memory at dst and counts its bytes down on bar. Elements outside
 * the tensor are written as zeros (the maps are encoded with
 * CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) and still count as box bytes. The map
 * is a __grid_constant__ kernel parameter, passed by its generic address. */
__device__ __forceinline__ void fa3_tma_load_2d(uint32_t dst, const CUtensorMap *map,
                                                uint32_t bar, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
               "[%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
               "l"((uint64_t)map), "r"(c0), "r"(c1), "r"(bar)
               : "memory");
}

/* The reverse (PTX ISA "cp.async.bulk.tensor", shared::cta to global):
 * the box at src goes to coordinates (c0, c1) of the tensor; elements
 * outside the tensor are not written. Completion is tracked per thread in
 * bulk groups: commit, then wait_group.read before src is written again
 * (its reads done), wait_group before the kernel ends (its writes done).
 * The writing threads' fence.proxy.async.shared::cta and a barrier come
 * before the issue (their st.shared must be seen by the async proxy). */
__device__ __forceinline__ void fa3_tma_store_2d(const CUtensorMap *map, uint32_t src, int c0,
                                                 int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(
                   (uint64_t)map),
               "r"(c0), "r"(c1), "r"(src)
               : "memory");
}
__device__ __forceinline__ void fa3_bulk_commit(void) {
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}
__device__ __forceinline__ void fa3_bulk_wait_read(void) {
  asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
}
__device__ __forceinline__ void fa3_bulk_wait(void) {
  asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
}
__device__ __forceinline__ void fa3_fence_proxy_async(void) {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
__device__ __forceinline__ void fa3_st_shared_u32(uint32_t addr, uint32_t v) {
  asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}

__device__ __forceinline__ void fa3_tma_prefetch_map(const CUtensorMap *map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"((uint64_t)map) : "memory");
}

/* ---- shared memory matrix descriptor (PTX ISA "Matrix Descriptor Format"
 * of wgmma) ------------------------------------------------------------------
 *   bits  0-13  start address >> 4
 *   bits 16-29  leading dimension byte offset (LBO) >> 4
 *   bits 32-45  stride dimension byte offset (SBO) >> 4
 *   bits 49-51  base offset (0: every swizzle atom starts 1024-byte aligned)
 *   bits 62-63  swizzle: 1 = 128-byte, 2 = 64-byte, 3 = 32-byte
 * With the 128-byte swizzle an atom is 8 rows of 128 bytes (1024 bytes);
 * the 16-byte chunk c of row r sits at chunk c ^ (r % 8), computed by the
 * hardware from address bits [4,7) ^ [7,10), which is why every atom must
 * start 1024-byte aligned, and why a K step inside a row is taken by adding
 * its byte offset (32 bytes per 16 bf16) to the start address: the logical
 * chunk moves, the XOR with the row still applies. The TMA's
 * CU_TENSOR_MAP_SWIZZLE_128B writes exactly this pattern when the box's
 * inner extent is 128 bytes.
 * Canonical layouts (PTX ISA "Shared Memory Matrix Layout", in units of
 * T = 16 bytes of elements):
 *   K-major,  128B: ((8,m),(T,2k)) : ((8T,SBO),(1,T))   LBO unused
 *   MN-major, 128B: ((T,8,m),(8,k)) : ((1,T,LBO),(8T,SBO))
 *   K-major,   64B: ((8,m),(T,2k)) : ((4T,SBO),(1,T))   rows of 64 bytes
 * so for K-major operands SBO is the distance between groups of 8 rows
 * (1024 bytes for packed 128-byte atoms, 512 for 64-byte ones), and for
 * MN-major ones LBO is the distance between 64-element column blocks and
 * SBO between groups of 8 K rows. The 64-byte swizzle XORs the 16-byte
 * chunk with bits [7,9) of the address (row / 2 % 4 for 64-byte rows); its
 * atoms (512 bytes) must be 512-byte aligned. */
__device__ __forceinline__ uint64_t fa3_desc(uint32_t saddr, uint32_t lbo, uint32_t sbo,
                                             int swizzle_bytes = 128) {
  const uint64_t mode = swizzle_bytes == 128 ? 1 : swizzle_bytes == 64 ? 2 : 3;
  return (uint64_t)((saddr & 0x3FFFFu) >> 4) | ((uint64_t)((lbo & 0x3FFFFu) >> 4) << 16) |
         ((uint64_t)((sbo & 0x3FFFFu) >> 4) << 32) | (mode << 62);
}

/* ---- wgmma synchronisation (PTX ISA "wgmma.fence", "wgmma.commit_group",
 * "wgmma.wait_group") ---------------------------------------------------------
 * fence: before the first wgmma that reads registers (accumulators, A)
 * written by other instructions since the last fence. commit: closes the
 * group of the wgmmas issued since the last commit. wait<N>: returns once at
 * most N groups of this warp are pending. */
__device__ __forceinline__ void fa3_wgmma_fence(void) {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void fa3_wgmma_commit(void) {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N> __device__ __forceinline__ void fa3_wgmma_wait(void) {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

/* Ties a register to the surrounding volatile asm: the compiler may neither
 * read it before the preceding wgmma wait nor write it after the following
 * wgmma issue (it does not know the wgmma writes the register late). */
__device__ __forceinline__ void fa3_reg_fence(float &x) { asm volatile("" : "+f"(x)::"memory"); }
__device__ __forceinline__ void fa3_reg_fence(uint32_t &x) {
  asm volatile("" : "+r"(x)::"memory");
}
__device__ __forceinline__ void fa3_reg_fence(int &x) { asm volatile("" : "+r"(x)::"memory"); }
template <int N> __device__ __forceinline__ void fa3_reg_fence(int (&x)[N]) {
#pragma unroll
  for (int i = 0; i < N; i++) fa3_reg_fence(x[i]);
}
template <int N> __device__ __forceinline__ void fa3_reg_fence(float (&x)[N]) {
#pragma unroll
  for (int i = 0; i < N; i++) fa3_reg_fence(x[i]);
}
template <int N> __device__ __forceinline__ void fa3_reg_fence(uint32_t (&x)[N]) {
#pragma unroll
  for (int i = 0; i < N; i++) fa3_reg_fence(x[i]);
}

/* ---- registers per thread of a warpgroup (PTX ISA "setmaxnreg") ----------
 * Every warp of the warpgroup executes it; it takes effect because the
 * kernel has a register cap at entry (__launch_bounds__(threads, 1)). */
template <int R> __device__ __forceinline__ void fa3_setmaxnreg_inc(void) {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R));
}
template <int R> __device__ __forceinline__ void fa3_setmaxnreg_dec(void) {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R));
}

/* ---- named barriers (PTX ISA "bar.sync", "bar.arrive") -------------------
 * bar.sync waits until `count` threads have arrived (its own warp counted);
 * bar.arrive adds its warp's threads and does not wait. Barrier 0 is
 * __syncthreads. */
__device__ __forceinline__ void fa3_bar_sync(int id, int count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
__device__ __forceinline__ void fa3_bar_arrive(int id, int count) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}

/* ---- arithmetic ------------------------------------------------------------ */

/* 2^x, ex2.approx (2 ulp, flushes denormals); 2^-inf = +0. */
__device__ __forceinline__ float fa3_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

/* Two fp32 -> one register of two bf16 (lo first, round to nearest even). */
__device__ __forceinline__ uint32_t fa3_pack_bf16(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

#endif
