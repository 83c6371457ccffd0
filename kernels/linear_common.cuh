/*
 * linear_common.cuh: what the decode linear kernels (linear_gemv.cu, linear_mma.cu,
 * linear_tiled.cu) and their planner (linear.cu) share: the plan, the launch description, the
 * limits, and one entry point per kernel family.
 *
 * The planner resolves everything a launch needs (variant, kernel instantiation, grid, block,
 * shared memory, split-K) into a LinearPlan; each family's entry point either launches that plan
 * or, given an output array, describes the launches it would make (db_linear_launches), from the
 * same code, so that the static gate checks exactly what runs.
 */
#ifndef DECODEBENCH_LINEAR_COMMON_CUH
#define DECODEBENCH_LINEAR_COMMON_CUH

#include <atomic>
#include <cstdio>

#include "common.cuh"

namespace db_lin {

/* The most K splits any variant takes (the fp32 partials cost splits x batch x n x 4 bytes). */
constexpr int kMaxSplitK = DB_MAX_SPLIT_K;

/* Kernel instantiations, chosen by the planner. */
enum GemvConfig { kGemvB1 = 0, kGemvB2, kGemvB4, kGemvB8 };       /* batch tile 1, 2, 4, 8 */
enum MmaConfig { kMmaN2 = 0 };                                     /* 2 n8 tiles of W a warp */
enum TiledConfig { kTiledN32 = 0, kTiledN64, kTiledN128 };         /* batch tile 32, 64, 128 */

struct LinearPlan {
  int variant;               /* DB_LINEAR_GEMV, _MMA or _TILED (never AUTO) */
  int config;                /* the family's *Config */
  int split_k;               /* K splits (1: no workspace, no reduce launch) */
  uint64_t workspace_bytes;  /* split_k > 1: split_k x batch x n fp32 partials */
  dim3 grid;
  int threads;
  int smem;                  /* dynamic shared memory bytes */
  int static_smem;           /* static shared memory bytes (none of ours has any today) */
  int per_split;             /* GEMV: 16-byte chunks of K a split; tiled: k tiles a split */
  int groups;                /* MMA: batch groups of 16; tiled: batch tiles */
  int k_warps;               /* GEMV: warps of a block that share one row pair's K (1, 2, 4) */
  int streamk;               /* tiled: the blocks of a stream-K launch (0: split-K or none) */
  int64_t units;             /* the work units the grid's blocks share (sink_add's units) */
  double fill;               /* the launch's wave efficiency (linear.cu's wave_efficiency) */
  uint64_t reduce_outputs;   /* batch x n when split_k > 1 */
  unsigned reduce_grid;
  int64_t reduce_units;      /* blocks of outputs the reduce's grid shares */
};

/* Where a launch goes: run it (out == nullptr) or append its description to out[*count]. */
struct LaunchSink {
  db_launch_info *out;
  int32_t max;
  int32_t *count;
};

inline int sink_add(const LaunchSink &sink, const char *kernel, dim3 grid, int threads, int smem,
                    int64_t units = 0) {
  if (*sink.count >= sink.max)
    return db_fail(DB_ERR_INVALID_ARGUMENT,
                   "db_linear_launches: max=%d is too small for the launches", sink.max);
  db_launch_info &info = sink.out[*sink.count];
  std::memset(&info, 0, sizeof info);
  std::snprintf(info.kernel, sizeof info.kernel, "%s", kernel);
  info.grid_x = (int32_t)grid.x;
  info.grid_y = (int32_t)grid.y;
  info.grid_z = (int32_t)grid.z;
  info.block_threads = threads;
  info.smem_bytes = smem;
  info.work_units = (int32_t)std::min<int64_t>(units, 0x7fffffff);
  ++*sink.count;
  return DB_OK;
}

/* The demangled spelling of the element types, as cuobjdump | c++filt prints them. */
template <class T>
inline const char *dtype_cxx_name();
template <>
inline const char *dtype_cxx_name<__nv_bfloat16>() { return "__nv_bfloat16"; }
template <>
inline const char *dtype_cxx_name<__half>() { return "__half"; }

/* Raises a kernel's dynamic shared memory limit once per device (the attribute is per device). */
template <class... P>
int allow_smem(void (*kernel)(P...), std::atomic<uint64_t> &done, int device, size_t bytes,
               const char *name) {
  if (bytes <= 48 * 1024) return DB_OK;
  const uint64_t bit = device >= 0 && device < 64 ? uint64_t(1) << device : 0;
  if (bit != 0 && (done.load(std::memory_order_relaxed) & bit)) return DB_OK;
  const cudaError_t e =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
  if (e != cudaSuccess) return db_fail_cuda(e, name);
  done.fetch_or(bit, std::memory_order_relaxed);
  return DB_OK;
}

/* The block of iteration x of a stream-K launch of `blocks` blocks over `iters` iterations (k
 * tiles): block b takes [b * iters / blocks, (b + 1) * iters / blocks). */
DB_HD int64_t streamk_owner(int64_t x, int64_t iters, int64_t blocks) {
  return ((x + 1) * blocks - 1) / iters;
}

/* ptxas's sm_90 registers a thread of each linear kernel (the larger of bf16 and fp16): what the
 * emulator answers for cudaOccupancyMaxActiveBlocksPerMultiprocessor (db_occupancy), so that it
 * plans grids as the card would. The gate (cmd/kernels-check) holds them to ptxas: its blocks
 * per SM come from ptxas's own figures, so a stale entry sizes a grid off a wave and fails its
 * wave rule. */
constexpr int gemv_sm90_registers(int batch_tile) {
  return batch_tile == 1 ? 124 : batch_tile == 2 ? 123 : batch_tile == 4 ? 156 : 113;
}
constexpr int kMmaSm90Registers = 108;
constexpr int tiled_sm90_registers(int bn) { return bn == 32 ? 149 : bn == 64 ? 113 : 128; }
constexpr int kReduceSm90Registers = 32; /* the split-K reduce (grid-stride over the outputs) */

/* db_occupancy, asked once per kernel and device (the answer does not change): cache is the
 * kernel's own (a static of the caller's instantiation). */
template <class... P>
int cached_occupancy(void (*kernel)(P...), std::atomic<int> (&cache)[64], int device, int threads,
                     size_t smem, int sm90_registers, const char *name, int *blocks_per_sm) {
  if (device >= 0 && device < 64) {
    const int v = cache[device].load(std::memory_order_relaxed);
    if (v > 0) return *blocks_per_sm = v, DB_OK;
  }
  DB_CHECK(db_occupancy(kernel, threads, smem, sm90_registers, name, blocks_per_sm));
  if (device >= 0 && device < 64) cache[device].store(*blocks_per_sm, std::memory_order_relaxed);
  return DB_OK;
}

/* ---- per family: planning numbers and the entry point (launch or describe) ---------------- */

/* GEMV (linear_gemv.cu): 4 warps x 2 rows a block; grid-stride over row pairs. */
constexpr int kGemvWarps = 4;
constexpr int kGemvThreads = kGemvWarps * 32;
constexpr int kGemvRowsPerWarp = 2;
constexpr int kGemvUnroll = 4;
/* Blocks an SM holds for certain: __launch_bounds__(kGemvThreads, gemv_min_blocks(batch tile)).
 * Four (at most 128 registers) except at a batch tile of 4, whose two carried buffers need more
 * (ptxas spills at 128): three there (at most 168). */
constexpr int gemv_min_blocks(int batch_tile) { return batch_tile == 4 ? 3 : 4; }
int gemv_run(const db_context *ctx, const db_linear_params *p, const LinearPlan &plan,
             const LaunchSink *sink);
int gemv_blocks_per_sm(const db_context *ctx, int config, int *blocks_per_sm);

/* MMA (linear_mma.cu): a warp owns 8 x kMmaTilesN rows of W and one 16-row batch group. */
constexpr int kMmaTilesN = 2;
constexpr int kMmaRowsPerWarp = 8 * kMmaTilesN;
constexpr int kMmaMaxWarps = 16;
constexpr int kMmaBatchTile = 16;
int mma_run(const db_context *ctx, const db_linear_params *p, const LinearPlan &plan,
            const LaunchSink *sink);
/* Blocks of `warps` warps (1, 2, 4, 8, 16) an SM holds. */
int mma_blocks_per_sm(const db_context *ctx, int warps, int *blocks_per_sm);

/* Tiled (linear_tiled.cu): a block tile of 128 W rows x BN batch rows x 64 k. */
constexpr int kTiledBM = 128;
constexpr int kTiledBK = 64;
struct TiledShape {
  int bn, threads, stages, smem;
};
/* The three instantiations' batch tile, threads, pipeline stages and dynamic shared memory. */
TiledShape tiled_shape(int config);
/* Blocks of the config's kernel an SM holds (its shared memory, registers, threads). */
int tiled_blocks_per_sm(const db_context *ctx, int config, int *blocks_per_sm);
int tiled_run(const db_context *ctx, const db_linear_params *p, const LinearPlan &plan,
              const LaunchSink *sink);

}  // namespace db_lin

#endif /* DECODEBENCH_LINEAR_COMMON_CUH */
